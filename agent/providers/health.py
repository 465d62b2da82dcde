"""Is the provider answering at all? Consecutive failed calls across a run, the outage wait, the stop.

Contract: `ProviderHealth(max_consecutive_failures, outage_wait_s=..., probe_interval_s=...,
probe=..., on_stop=..., on_wait=...)` is shared by every worker of a run (thread-safe).
- `epoch()` is read before a call; `succeeded()` after a call that got an answer (the count of
  failures in a row goes back to 0); `failed(reason, retryable, epoch)` after a call that got none
  (the provider already retried it with backoff).
- `allow_call(cancel)` is asked before every call. Below `max_consecutive_failures` failures in a
  row it answers True. At the limit, when the last failure looked like an outage (`retryable`:
  refused connection, timeout, 5xx, 429) and the provider can be probed (`probe()` is True when
  the server answers a cheap request), one thread waits up to `outage_wait_s` (saying so once
  through `on_wait(line)`), probing every `probe_interval_s` (the first probe after one interval),
  while the others wait for its answer. A server that answers
  lets calls go on once more: the next call that fails before one succeeds stops the run. A
  failure that is not an outage (400, 401, a model the server does not know), an unprobeable
  provider, or a server still down at the end of the wait stops the run: `allow_call` answers
  False for good, `stop_reason` says why in one line and `on_stop(reason)` runs once.
- A failure of a call that started before the server came back (an older `epoch`) does not stop
  the run: it says nothing about the server now.
- `in_outage()` is True while the failures in a row are at the limit (a worker whose own calls
  keep failing while the run is healthy gives up on its own; in an outage it leaves it to this).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

Probe = Callable[[], bool]


class ProviderHealth:
    def __init__(
        self,
        max_consecutive_failures: int = 3,
        *,
        outage_wait_s: float = 0.0,
        probe_interval_s: float = 5.0,
        probe: Probe | None = None,
        on_stop: Callable[[str], None] | None = None,
        on_wait: Callable[[str], None] | None = None,
    ) -> None:
        self.max_consecutive_failures = max(1, max_consecutive_failures)
        self.outage_wait_s = max(0.0, outage_wait_s)
        self.probe_interval_s = max(0.01, probe_interval_s)
        self.probe = probe
        self.on_stop = on_stop
        self.on_wait = on_wait
        self._cond = threading.Condition()
        self._failures = 0  # calls in a row that got no answer
        self._last_reason = ""
        self._last_retryable = False
        self._epoch = 0  # goes up each time a probe finds the server back
        self._waited = False  # the outage wait of this run of failures was used
        self._probing = False
        self._stop_reason: str | None = None

    # ------------------------------------------------------------------ recording calls

    def epoch(self) -> int:
        with self._cond:
            return self._epoch

    def succeeded(self) -> None:
        with self._cond:
            self._failures = 0
            self._waited = False
            self._cond.notify_all()

    def failed(self, reason: str, retryable: bool, epoch: int | None = None) -> None:
        with self._cond:
            if epoch is not None and epoch < self._epoch:
                return  # started before the server came back
            self._failures += 1
            self._last_reason = reason
            self._last_retryable = retryable

    @property
    def consecutive_failures(self) -> int:
        with self._cond:
            return self._failures

    @property
    def stop_reason(self) -> str | None:
        with self._cond:
            return self._stop_reason

    def in_outage(self) -> bool:
        with self._cond:
            return self._failures >= self.max_consecutive_failures or self._stop_reason is not None

    # ------------------------------------------------------------------ deciding

    def allow_call(self, cancel: threading.Event | None = None) -> bool:
        """True while calls may go on; may wait (probing) for a server that went away."""
        with self._cond:
            while True:
                if self._stop_reason is not None:
                    return False
                if cancel is not None and cancel.is_set():
                    return False
                if self._failures < self.max_consecutive_failures:
                    return True
                if not self._probing:
                    break
                self._cond.wait(0.05)  # another thread is probing: wait for its answer
            if self._waited or not self._last_retryable or self.probe is None:
                announce = self._stop_locked()
            else:
                announce = None
                self._probing = True
        if announce is not None:
            self._announce(announce)
            return False
        back = self._wait_for_server(cancel)
        with self._cond:
            self._probing = False
            self._cond.notify_all()
            if back:
                self._waited = True
                self._epoch += 1
                self._failures = self.max_consecutive_failures - 1  # one more try
                return True
            if cancel is not None and cancel.is_set():
                return False
            announce = self._stop_locked()
        self._announce(announce)
        return False

    def _announce(self, reason: str) -> None:
        # Outside the lock: the callback writes an event and a console line.
        if self.on_stop is not None:
            self.on_stop(reason)

    def _stop_locked(self) -> str:
        """Stop for good; the reason, to announce once the lock is released."""
        n = self._failures
        why = self._last_reason or "no answer"
        if self._waited:
            what = f"{n} provider calls in a row failed (the server answered a probe, then failed again)"
        elif self._last_retryable and self.probe is not None and self.outage_wait_s > 0:
            what = f"{n} provider calls in a row failed and the server did not come back within {self.outage_wait_s:g} s (outage_wait_s)"
        else:
            what = f"{n} provider calls in a row failed"
        self._stop_reason = f"{what}; the last: {why}"
        self._cond.notify_all()
        return self._stop_reason

    def _wait_for_server(self, cancel: threading.Event | None) -> bool:
        """Probe until the server answers or `outage_wait_s` is over; True when it answered."""
        assert self.probe is not None
        if self.on_wait is not None:
            self.on_wait(
                f"provider: {self._failures} calls in a row failed ({self._last_reason}); "
                f"waiting up to {self.outage_wait_s:g} s for the server to come back"
            )
        deadline = time.monotonic() + self.outage_wait_s
        while True:
            # Pause first: a server that is rate limiting answers probes at once, and its limit
            # needs the time; a server that is down loses nothing by it.
            pause = max(0.0, min(self.probe_interval_s, deadline - time.monotonic()))
            if cancel is not None:
                if cancel.wait(pause):
                    return False
            else:
                time.sleep(pause)
            try:
                if self.probe():
                    return True
            except Exception:  # a probe that breaks tells us nothing: keep waiting
                pass
            if time.monotonic() >= deadline:
                return False
