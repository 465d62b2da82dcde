"""The parent's reader of a sandbox child's results file: what it has written so far.

`JobState.read` takes the complete lines appended since the last read. With the job's key, each
line must carry a valid HMAC and the next sequence number (`evaluator.judge.results_file` writes
them in the verifier); a line that does not verify counts as forged, except an unsigned
containment violation, which can only make the verdict worse. The events' stamps give the
phases and the per-test times the time limits are enforced against.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import re
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

_MAC_TAIL = re.compile(rb', "mac": "([0-9a-f]{64})"\}$')


@dataclass
class JobState:
    """What the parent has read of a child's results file so far."""

    events: list[dict[str, Any]] = field(default_factory=list)
    offset: int = 0
    current_test: int | None = None
    test_started_at: float | None = None
    prepared_at: float | None = None
    loaded_at: float | None = None
    done: bool = False
    begun_at: float | None = None  # the child exists (forked or spawned)
    done_at: float | None = None
    test_s: list[float] = field(default_factory=list)  # seconds per finished test
    key: bytes | None = None  # lines must carry this key's HMAC and the next sequence number
    seq: int = 0
    forged: int = 0  # lines that did not verify: written by someone without the key

    def phases(self) -> dict[str, float]:
        """Seconds per phase as seen by the parent: spawn, prepare (inputs + eager
        references, CUDA init), import (kernel module), tests (calls, checks, timing)."""
        marks = [("prepare", self.prepared_at), ("import", self.loaded_at), ("tests", self.done_at)]
        out: dict[str, float] = {}
        last = self.begun_at
        for name, mark in marks:
            if last is None or mark is None:
                break
            out[name] = round(mark - last, 4)
            last = mark
        if self.test_s:
            # The first test pays one-time costs (CUDA context, first Triton launches).
            out["first_test"] = round(self.test_s[0], 4)
            out["later_tests_median"] = round(statistics.median(self.test_s[1:] or [0.0]), 4)
        return out

    def read(self, path: Path) -> None:
        try:
            with path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return
        if not data:
            return
        complete, _, _ = data.rpartition(b"\n")
        if not complete and not data.endswith(b"\n"):
            return
        self.offset += len(complete) + 1
        read_at = time.monotonic()
        for line in complete.split(b"\n"):
            if not line.strip():
                continue
            if self.key is not None:
                signed = self._verified(line)
                if signed is None:
                    evidence = _unsigned_violation(line)
                    if evidence is not None:
                        self.events.append(evidence)
                    else:
                        self.forged += 1
                    continue
                line = signed
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if self.key is not None:
                if event.get("seq") != self.seq:
                    self.forged += 1
                    continue
                self.seq += 1
            self.events.append(event)
            kind = event.get("event")
            stamp = event.get("t")
            now = stamp if isinstance(stamp, float) and stamp <= read_at else read_at
            if kind == "prepared":
                self.prepared_at = now
            elif kind in ("loaded", "load_error"):
                self.loaded_at = self.loaded_at or now
            elif kind == "test_start":
                self.current_test = event["index"]
                self.test_started_at = now
            elif kind == "test_result":
                if self.test_started_at is not None and self.current_test is not None:
                    self.test_s.append(now - self.test_started_at)
                self.current_test = None
                self.test_started_at = now
            elif kind == "done":
                self.done = True
                self.done_at = now

    def _verified(self, line: bytes) -> bytes | None:
        """The line without its MAC when the MAC verifies, else None."""
        assert self.key is not None
        m = _MAC_TAIL.search(line.rstrip())
        if m is None:
            return None
        body = line[: m.start()] + b"}"
        want = hmac.new(self.key, body, hashlib.sha256).hexdigest().encode()
        return body if hmac.compare_digest(want, m.group(1)) else None


def _unsigned_violation(line: bytes) -> dict[str, Any] | None:
    """A containment violation reported by a process that holds no results key (the candidate's
    process-tree keeper, which reports leftover processes after the verifier is gone). Accepted
    unsigned because it can only make the verdict worse; anything else unsigned is a forgery."""
    try:
        event = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if (
        isinstance(event, dict)
        and event.get("event") == "violation"
        and set(event) <= {"event", "kind", "detail"}
        and isinstance(event.get("kind"), str)
        and len(event["kind"]) <= 32
    ):
        return {
            "event": "violation",
            "kind": event["kind"],
            "detail": str(event.get("detail"))[:300],
        }
    return None
