"""Keep GPU timing alone on the GPU while other sandboxes check correctness in parallel.

A readers-writer lock across processes, from two `flock` files in the sandbox's scratch folder:
every sandbox child that uses the GPU holds the *shared* lock while it works; a child about to
time takes the *exclusive* lock, so no other sandbox's kernels run while it measures. A turnstile
lock gives the timer priority: once it waits, new children queue behind it instead of starving it.
Locks are released by the kernel when a process exits, crash or kill included.
"""

from __future__ import annotations

import fcntl
from pathlib import Path
from typing import IO


class GpuLock:
    def __init__(self, base: str | Path) -> None:
        base = Path(base)
        self._turnstile: IO[str] = open(base.with_suffix(".turnstile"), "a")  # noqa: SIM115
        self._rw: IO[str] = open(base.with_suffix(".rw"), "a")  # noqa: SIM115

    def share(self) -> None:
        """Join the GPU as one of many correctness workers (waits while a timer is queued)."""
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._rw, fcntl.LOCK_SH)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)

    def exclusive(self) -> None:
        """Have the GPU alone. Drops a shared hold first (two upgraders would deadlock)."""
        fcntl.flock(self._rw, fcntl.LOCK_UN)
        fcntl.flock(self._turnstile, fcntl.LOCK_EX)
        try:
            fcntl.flock(self._rw, fcntl.LOCK_EX)
        finally:
            fcntl.flock(self._turnstile, fcntl.LOCK_UN)

    def release(self) -> None:
        fcntl.flock(self._rw, fcntl.LOCK_UN)
