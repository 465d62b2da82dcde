"""The verifier's results file: signed JSON lines, appended one `os.write` at a time.

`read_key` takes the per-job key out of its file (then deletes it) in the verifier only; the
runner is forked before and never holds it. `ResultWriter` stamps each line with a monotonic
time, a sequence number and an HMAC that `evaluator.judging.job_log.JobState` checks. The runner
never imports this module.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import time
from pathlib import Path
from typing import Any


class ResultWriter:
    """Append-only JSON lines; each write is one `os.write` on an O_APPEND descriptor.

    With a key, every line carries a sequence number and ends with `, "mac": HEX}`, an HMAC-SHA256
    of the line up to that point: the kernel's process can reach the file by its path but holds
    no key, so a line it writes, replays or reorders does not verify (`job_log.JobState`)."""

    def __init__(self, path: str, key: bytes | None = None) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.key = key
        self.seq = 0

    def write(self, event: dict[str, Any]) -> None:
        # CLOCK_MONOTONIC is system-wide on Linux: the parent can subtract these stamps.
        event.setdefault("t", time.monotonic())
        if self.key is not None:
            event["seq"] = self.seq
            self.seq += 1
        body = json.dumps(event, default=str)
        if self.key is not None:
            mac = hmac.new(self.key, body.encode(), hashlib.sha256).hexdigest()
            body = f'{body[:-1]}, "mac": "{mac}"}}'
        os.write(self.fd, (body + "\n").encode())


def read_key(spec: dict[str, Any]) -> None:
    """Take the results key out of its file (read once, then deleted): only this process holds
    it, and the runner, forked before, never saw it."""
    key_file = spec.get("key_file")
    if key_file:
        spec["_key"] = bytes.fromhex(Path(key_file).read_text().strip())
        Path(key_file).unlink()
