"""A pool of judges: one sandbox (one fork server) per device, candidates to the least loaded.

Contract:
- `JudgePool.judge(kernel_file, op, cases, *, measure_performance, cancel, keep_job_dir)` has
  `Sandbox.judge`'s signature and returns the same `OperatorResult`, with `judged_on` naming the
  judge that gave the verdict (`cuda:1`, `cpu:0`, `ray:10.0.0.5/cuda:0`).
- Local judges (`eval.executor = "local"`): `eval.devices` picks them. On a GPU: `all` = every
  visible GPU, `N` = the first N, `0,1,3` = those indices (one index: `3,`); each judge's fork
  server sees only its GPU (CUDA_VISIBLE_DEVICES) and has its own scratch folder, so the timing
  lock is per GPU. On the CPU: `N` interpreter judges (`all` = one per CPU core, a list = one per
  entry).
- Ray judges (`eval.executor = "ray"`, evaluator.judging.ray_judges): the same judges as Ray actors.
- A candidate goes to the judge with the fewest candidates in flight per slot
  (`eval.sandbox.num_parallel` slots each); ties go to the judge that judged fewer.
- Faults: a judge whose fork server (or actor) died while judging a candidate gives no verdict on
  it: the candidate is judged once more on another judge, and a second loss is an `error` verdict
  that says so. A judge that cannot be restarted leaves the pool; the run goes on with the rest.
  Every candidate in flight on a judge that dies is retried, not only the one that killed it, and
  the retry runs alone on its judge (reserved, no other candidate beside it): a kernel that kills
  its judge is judged twice and then is an `error`, never a pass, and cannot cost a candidate
  that shared its judge more than the first attempt.
"""

from __future__ import annotations

import logging
import os
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from evaluator.cases.testcase import TestCase
from evaluator.config import EvalConfig
from evaluator.errors import UsageError
from evaluator.judging.sandbox import Sandbox
from evaluator.results import Flag, OperatorResult, Status, verdict_without_run

log = logging.getLogger(__name__)
POLL_S = 0.05  # how often a candidate waiting for a judge looks at its cancel event
SERVER_EXIT_WAIT_S = 1.0  # how long a crashed verdict waits to see whether its fork server died


class JudgeLost(Exception):
    """The judge (its fork server or its actor) died or cannot start: the verdict is not the
    candidate's. `gone` says whether the judge cannot be used again."""

    def __init__(self, reason: str, *, gone: bool = False) -> None:
        super().__init__(reason)
        self.reason = reason
        self.gone = gone


class Judge(Protocol):
    label: str
    slots: int

    def judge(
        self,
        kernel_file: Path,
        op: str,
        cases: list[TestCase],
        *,
        measure_performance: bool,
        cancel: threading.Event | None,
        keep_job_dir: bool,
    ) -> OperatorResult: ...

    def close(self) -> None: ...


# ---------------------------------------------------------------------------------- devices


def parse_devices(spec: str, device: str, num_visible: int | None = None) -> list[int]:
    """`eval.devices` -> judge indices (GPU indices on cuda, judge numbers on the CPU)."""
    spec = str(spec).strip().replace(" ", "")
    if device == "cuda":
        if num_visible is None:
            import torch

            num_visible = torch.cuda.device_count()
        if spec == "all":
            return list(range(num_visible))
        if "," in spec:
            picked = [int(s) for s in spec.split(",") if s]
            bad = [i for i in picked if i >= num_visible]
            if bad:
                raise UsageError(
                    f"--devices {spec}: GPU {bad[0]} is not visible ({num_visible} visible): "
                    f"pick indices below {num_visible}."
                )
            return list(dict.fromkeys(picked))
        count = int(spec)
        if count > num_visible:
            raise UsageError(
                f"--devices {count}: only {num_visible} GPU(s) are visible: pass at most "
                f"{num_visible}, or all."
            )
        return list(range(count))
    if spec == "all":
        return list(range(os.cpu_count() or 1))
    if "," in spec:
        return list(range(len([s for s in spec.split(",") if s])))
    return list(range(int(spec)))


def gpu_env_value(index: int) -> str:
    """What CUDA_VISIBLE_DEVICES should hold for visible GPU `index` (the caller's own mask kept)."""
    mask = os.environ.get("CUDA_VISIBLE_DEVICES")
    if mask:
        entries = [e.strip() for e in mask.split(",") if e.strip()]
        if index < len(entries):
            return entries[index]
    return str(index)


# ---------------------------------------------------------------------------------- local judges


class LocalJudge:
    """One Sandbox (one fork server) pinned to one GPU, or one interpreter judge on the CPU."""

    def __init__(self, config: EvalConfig, device: str, index: int, *, pin: bool) -> None:
        self.label = f"{device}:{index}"
        self.slots = config.sandbox.num_parallel
        self.box = Sandbox(config, device)
        if device == "cuda" and pin:
            # Set before the fork server starts (lazily, on the first candidate).
            self.box.env["CUDA_VISIBLE_DEVICES"] = gpu_env_value(index)
        self.restarts = 0

    def server_pid(self) -> int | None:
        server = self._server()
        return server.proc.pid if server is not None and server.alive() else None

    def _server(self) -> Any:
        return getattr(self.box, "_server", None)

    def _server_died(self, before: Any, result: OperatorResult) -> bool:
        # The fork server only exits when closed: found dead (or already replaced by a candidate
        # that started after its death), it died while this candidate was in it.
        after = self._server()
        if before is not None and after is not before:
            return True
        crashed = any(str(f).startswith(Flag.CRASHED) for f in result.flags)
        for server in {id(s): s for s in (before, after) if s is not None}.values():
            if not server.alive():
                return True
            if crashed:
                # Its pipe closes a moment before the process can be reaped: a verdict that says
                # "killed" waits that moment before believing the server is alive.
                try:
                    server.proc.wait(timeout=SERVER_EXIT_WAIT_S)
                    return True
                except subprocess.TimeoutExpired:
                    pass
        return False

    def judge(
        self,
        kernel_file: Path,
        op: str,
        cases: list[TestCase],
        *,
        measure_performance: bool = False,
        cancel: threading.Event | None = None,
        keep_job_dir: bool = False,
    ) -> OperatorResult:
        before = self._server()
        if before is not None and not before.alive():
            before = None  # died under an earlier candidate: Sandbox starts a new one now
        try:
            result = self.box.judge(
                kernel_file,
                op,
                cases,
                measure_performance=measure_performance,
                cancel=cancel,
                keep_job_dir=keep_job_dir,
            )
        except RuntimeError as exc:  # the fork server would not start
            raise JudgeLost(f"{self.label}: {exc}", gone=True) from exc
        except Exception as exc:  # a fork server that stopped answering
            raise JudgeLost(f"{self.label}: {type(exc).__name__}: {exc}") from exc
        if self._server_died(before, result):
            self.restarts += 1  # Sandbox starts a new fork server for the next candidate
            raise JudgeLost(f"the fork server of judge {self.label} died while judging")
        return result

    def close(self) -> None:
        self.box.close()


# ---------------------------------------------------------------------------------- the pool


@dataclass
class JudgeSlot:
    """A judge and what the pool knows of it."""

    judge: Any
    busy: int = 0
    verdicts: int = 0
    busy_s: float = 0.0  # sum over candidates of seconds in this judge
    lost: str | None = None
    reserved: bool = False  # held for a retry that runs alone: no new candidate goes here
    starts: list[float] = field(default_factory=list)  # when each candidate in flight began

    def load(self) -> float:
        return self.busy / max(1, self.judge.slots)

    def in_flight_s(self, now: float) -> float:
        return sum(now - t for t in self.starts)


class JudgePool:
    """Several judges behind `Sandbox.judge`'s signature."""

    def __init__(self, judges: list[Any], *, device: str, executor: str = "local") -> None:
        if not judges:
            raise UsageError("no judge could be started: check --devices and --executor.")
        self.device = device
        self.executor = executor
        self.slots = [JudgeSlot(j) for j in judges]
        self._lock = threading.Lock()
        self._free = threading.Condition(self._lock)
        self.started_at = time.monotonic()

    @property
    def capacity(self) -> int:
        """Candidates the pool judges at once (every live judge's slots)."""
        with self._lock:
            return sum(s.judge.slots for s in self.slots if s.lost is None)

    def live(self) -> list[JudgeSlot]:
        return [s for s in self.slots if s.lost is None]

    def _take(
        self, avoid: JudgeSlot | None, *, alone: bool, cancel: threading.Event | None
    ) -> tuple[JudgeSlot, float] | str:
        """A judge for one candidate, or why there is none ("lost", "cancelled").

        `alone`: the judge is reserved (no new candidate goes to it) and handed over once its
        candidates in flight have ended, so nothing else runs beside this one."""
        with self._free:
            mine: JudgeSlot | None = None
            while True:
                if cancel is not None and cancel.is_set():
                    if mine is not None:
                        mine.reserved = False
                        self._free.notify_all()
                    return "cancelled"
                live = [s for s in self.slots if s.lost is None]
                if not live:
                    return "lost"
                if mine is not None and mine.lost is not None:
                    mine.reserved, mine = False, None
                if mine is None:
                    open_ = [s for s in live if not s.reserved]
                    others = [s for s in open_ if s is not avoid] or open_
                    if others:
                        chosen = min(others, key=lambda s: (s.load(), s.verdicts + s.busy))
                        if alone:
                            mine = chosen
                            mine.reserved = True
                        else:
                            return self._start(chosen)
                if mine is not None and mine.busy == 0:
                    return self._start(mine)
                self._free.wait(timeout=POLL_S)

    def _start(self, slot: JudgeSlot) -> tuple[JudgeSlot, float]:
        slot.busy += 1
        started = time.monotonic()
        slot.starts.append(started)
        return slot, started

    def _give_back(self, slot: JudgeSlot, started: float, *, verdict: bool, alone: bool) -> None:
        with self._free:
            slot.busy -= 1
            if alone:
                slot.reserved = False  # the reservation ends with the candidate that held it
            slot.starts.remove(started)
            slot.busy_s += time.monotonic() - started
            slot.verdicts += verdict
            self._free.notify_all()

    def judge(
        self,
        kernel_file: Path,
        op: str,
        cases: list[TestCase],
        *,
        measure_performance: bool = False,
        cancel: threading.Event | None = None,
        keep_job_dir: bool = False,
    ) -> OperatorResult:
        losses: list[str] = []
        last: JudgeSlot | None = None
        while len(losses) < 2:
            # A retry runs alone on its judge: a kernel that kills its judge beside it cannot
            # cost it a second attempt.
            alone = bool(losses)
            taken = self._take(last, alone=alone, cancel=cancel)
            if taken == "cancelled":
                return _cancelled_verdict(Path(kernel_file), op, cases)
            if taken == "lost":
                losses.append("no judge is left in the pool")
                break
            slot, started = taken
            try:
                result = slot.judge.judge(
                    Path(kernel_file),
                    op,
                    cases,
                    measure_performance=measure_performance,
                    cancel=cancel,
                    keep_job_dir=keep_job_dir,
                )
            except JudgeLost as lost:
                self._give_back(slot, started, verdict=False, alone=alone)
                losses.append(lost.reason)
                log.warning("judge %s lost a candidate of %s: %s", slot.judge.label, op, lost)
                if lost.gone:
                    self._drop(slot, lost.reason)
                last = slot
                if cancel is not None and cancel.is_set():
                    break
                continue
            self._give_back(slot, started, verdict=True, alone=alone)
            result.judged_on = slot.judge.label
            if losses:
                result.phases_s["judge_retries"] = float(len(losses))
            return result
        return _lost_verdict(Path(kernel_file), op, cases, losses)

    def _drop(self, slot: JudgeSlot, reason: str) -> None:
        with self._lock:
            if slot.lost is None:
                slot.lost = reason
                log.warning("judge %s left the pool: %s", slot.judge.label, reason)

    def stats(self) -> list[dict[str, Any]]:
        """Per judge: label, busy, slots, verdicts, verdicts per minute, utilisation (seconds
        spent judging / (pool lifetime x slots), candidates still in flight counted so far), lost."""
        now = time.monotonic()
        elapsed = max(1e-9, now - self.started_at)
        with self._lock:
            return [
                {
                    "judge": s.judge.label,
                    "busy": s.busy,
                    "slots": s.judge.slots,
                    "verdicts": s.verdicts,
                    "verdicts_per_min": round(60 * s.verdicts / elapsed, 2),
                    "utilisation": round(
                        min(1.0, (s.busy_s + s.in_flight_s(now)) / (elapsed * s.judge.slots)), 3
                    ),
                    "lost": s.lost,
                }
                for s in self.slots
            ]

    def summary(self) -> dict[str, Any]:
        """The pool's throughput since it started: what run.json records under "judges"."""
        judges = self.stats()
        elapsed = time.monotonic() - self.started_at
        verdicts = sum(j["verdicts"] for j in judges)
        return {
            "executor": self.executor,
            "device": self.device,
            "num_judges": len(judges),
            "verdicts": verdicts,
            "elapsed_s": round(elapsed, 3),
            "verdicts_per_min": round(60 * verdicts / max(1e-9, elapsed), 2),
            "utilisation": round(sum(j["utilisation"] for j in judges) / max(1, len(judges)), 3),
            "judges": judges,
        }

    def close(self) -> None:
        for s in self.slots:
            try:
                s.judge.close()
            except Exception:  # noqa: BLE001 - closing one judge must not keep the others open
                log.debug("closing judge %s failed", s.judge.label, exc_info=True)


def _cancelled_verdict(kernel_file: Path, op: str, cases: list[TestCase]) -> OperatorResult:
    reason = "cancelled: another candidate won or the run stopped"
    return verdict_without_run(
        op, Status.ERROR, reason, kernel_file=str(kernel_file), tests=len(cases)
    )


def _lost_verdict(
    kernel_file: Path, op: str, cases: list[TestCase], losses: list[str]
) -> OperatorResult:
    twice = "twice" if len(losses) > 1 else ""
    return verdict_without_run(
        op,
        Status.ERROR,
        f"no verdict: the judge was lost {twice}; " + " / ".join(losses),
        kernel_file=str(kernel_file),
        flags=[Flag.CRASHED],
        tests=len(cases),
    )


# ---------------------------------------------------------------------------------- building


def num_local_judges(config: EvalConfig, device: str) -> int:
    return len(parse_devices(config.devices, device))


def make_pool(config: EvalConfig, device: str) -> JudgePool:
    """The judges `eval.devices` and `eval.executor` ask for (Ray connects or starts here)."""
    if config.executor == "ray":
        from evaluator.judging.ray_judges import make_ray_judges

        return JudgePool(make_ray_judges(config, device), device=device, executor="ray")
    indices = parse_devices(config.devices, device)
    if not indices:
        raise UsageError(
            f"--devices {config.devices} selects no judge on {device}: pass a number >= 1 or all."
        )
    pin = device == "cuda" and str(config.devices).strip() != "1"
    judges = [LocalJudge(config, device, i, pin=pin) for i in indices]
    return JudgePool(judges, device=device, executor="local")
