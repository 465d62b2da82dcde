"""Speed rounds: once an operator has a passing kernel, its workers are asked for faster files.

Contract: `SpeedRounds(gen, task, num_workers, num_rounds).run() -> dict` (the `speed` block of
the operator's decision.json), called by agent.orchestrator after the normal rounds found a
winner; `kept_code` is then the file to keep (the winner's, or a faster speed candidate's).
`gen` is the agent.orchestrator.Generator (its config, stop event, task list).
- Baseline: the kept kernel is judged with timing `agent.speed.num_noise_repeats` times; the
  spread of its geomean speedups is the timing noise (agent.speed_timing.timing_noise), carried
  on the kept result (`timing_noise`) and in the decision.
- Per speed round each worker gets the system prompt and `speed.j2` (the kept file, its timing per
  case, its last attempt's outcome) and answers with one file, judged in full with timing
  (correctness, guards, then timing). The fastest passing candidate of the round replaces the kept
  kernel only when it beats it beyond max(noise, `min_gain`); a failing one never does, nor one
  with a case the evaluator flagged `suspicious_speedup`.
- Stops before a round when: the run stops or the budget is spent, every case is within
  `ceiling_fraction` of its ceiling, `num_idle_rounds` rounds in a row kept nothing, or the kept
  kernel has no measured speedup (nothing to compare against).
- Written as it happens: `ops/<folder>/speed_baseline/` (the kept file and its timed verdicts)
  and `ops/<folder>/worker_<w>/speed_round_<n>/` with the files of a normal round; each attempt
  ends with a `speed_round_end` event (tokens count toward the budget on resume).
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from agent.extract import ExtractError, extract_candidate
from agent.parallelism import run_side_by_side
from agent.providers.base import Message
from agent.speed_timing import (
    at_ceiling,
    case_flops,
    case_rows,
    geomean_vs_compile,
    is_faster,
    keep_threshold,
    median_result,
    timing_noise,
    timing_text,
)
from agent.worker import OpTask, Worker
from evaluator.reports.runfolder import write_json
from evaluator.results import Flag, OperatorResult, Status, flag_name

log = logging.getLogger(__name__)

SPEED_TEMPLATE = "speed.j2"
AUTO_GPU_ROUNDS = 3

# Attempt outcomes (meta.json "outcome", speed_round_end events).
FASTER = "faster"  # passed and beat the kept kernel beyond the noise (the round's best is kept)
NOT_FASTER = "not_faster"  # passed, but within the noise or slower
FAILED = "failed"  # did not pass: never kept
NO_CODE = "no_code"
PROVIDER_ERROR = "provider_error"
SUSPICIOUS = "suspicious"  # passed, but the evaluator flagged a speedup as suspicious: not kept
SAME = "same_as_kept"  # the kept file again: nothing to judge
CANCELLED = "cancelled"
NOT_CALLED = "budget"  # the budget stopped the call


def resolve_speed_rounds(setting: int | str, device: str) -> tuple[int, str | None]:
    """(rounds, a line to say once or None). Nothing is timed on the CPU, so none run there."""
    if device != "cuda":
        if setting == "auto":
            return 0, "speed rounds: none on the CPU (kernels are not timed there)"
        if setting:
            return 0, (
                f"speed rounds: {setting} asked for, none run: kernels are not timed on the CPU"
            )
        return 0, None
    return (AUTO_GPU_ROUNDS if setting == "auto" else int(setting)), None


@dataclass
class Attempt:
    worker: int
    round: int
    outcome: str
    result: OperatorResult | None = None
    code: str | None = None
    reason: str = ""
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0

    @property
    def speedup(self) -> float | None:
        return self.result.geomean_speedup if self.result is not None else None

    def summary(self) -> dict[str, Any]:
        return {
            "worker": self.worker,
            "outcome": self.outcome,
            "geomean_speedup": self.speedup,
            "reason": self.reason,
        }


class SpeedRounds:
    """The speed rounds of one operator (see the module docstring)."""

    def __init__(self, gen: Any, task: OpTask, num_workers: int, num_rounds: int) -> None:
        self.gen = gen
        self.cfg = gen.cfg.agent.speed
        self.num_rounds = num_rounds
        self.num_workers = num_workers
        # A cancel event of their own: the normal rounds' one is set once a worker won.
        self.task = replace(task, cancel=threading.Event(), call_threads=[])
        with gen._lock:
            gen._tasks.append(self.task)
            if gen.stop.is_set():
                self.task.cancel.set()
        self.kept_code = task.winner_code or ""
        self.kept: OperatorResult | None = None
        self.noise: float | None = None
        self.tried: dict[str, OperatorResult | None] = {}  # sha256 of a file -> its verdict
        self.last: dict[int, Attempt] = {}  # worker -> its last attempt
        self.flops: dict[str, float | None] = {}
        self.baseline_failure: str | None = None  # why a timed judging of the kept file failed

    @property
    def runlog(self) -> Any:
        return self.task.runlog

    # ------------------------------------------------------------------ the loop

    def run(self) -> dict[str, Any]:
        task = self.task
        started = time.monotonic()
        self.flops = {c.serialize(): case_flops(task.op, c) for c in task.cases}
        self.runlog.emit("speed_start", op=task.op, rounds=self.num_rounds)
        self._baseline()
        before = self.kept.geomean_speedup if self.kept is not None else None
        before_compile = geomean_vs_compile(self.kept) if self.kept is not None else None
        threshold = keep_threshold(self.noise, self.cfg.min_gain)
        history: list[dict[str, Any]] = []
        kept_from: dict[str, Any] | None = None
        idle = 0
        stopped = "rounds_done"
        usage = [0, 0, 0.0]
        for n in range(1, self.num_rounds + 1):
            why = self._stop_reason(idle)
            if why is not None:
                stopped = why
                break
            attempts = self._round(n, threshold)
            for a in attempts:
                usage[0] += a.input_tokens
                usage[1] += a.output_tokens
                usage[2] += a.cost_usd
            best = self._fastest(attempts, threshold)
            entry: dict[str, Any] = {
                "round": n,
                "candidates": [a.summary() for a in attempts],
                "kept_worker": None,
            }
            if best is not None:
                old = self.kept.geomean_speedup if self.kept else None
                best.result.timing_noise = self.noise
                self.kept, self.kept_code = best.result, best.code or ""
                entry.update(kept_worker=best.worker, gain=_ratio(best.speedup, old))
                kept_from = {"worker": best.worker, "speed_round": n}
                idle = 0
                self.runlog.emit(
                    "speed_kept", op=task.op, round=n, worker=best.worker, speedup=best.speedup
                )
            else:
                idle += 1
            history.append(entry)
            if any(a.outcome == NOT_CALLED for a in attempts):
                stopped = "budget"
                break
            if any(a.outcome == CANCELLED for a in attempts):
                stopped = "interrupted"
                break
        after = self.kept.geomean_speedup if self.kept is not None else None
        record = {
            "rounds": len(history),
            "stopped": stopped,
            "noise": self.noise,
            "threshold": threshold,
            "speedup_before": before,
            "speedup_after": after,
            "gain": _ratio(after, before),
            "speedup_vs_compile_before": before_compile,
            "speedup_vs_compile_after": geomean_vs_compile(self.kept) if self.kept else None,
            "kept": kept_from,
            "baseline_failure": self.baseline_failure,
            "history": history,
            "input_tokens": usage[0],
            "output_tokens": usage[1],
            "cost_usd": round(usage[2], 6),
            "elapsed_s": round(time.monotonic() - started, 3),
        }
        self.runlog.emit("speed_done", op=task.op, **{k: record[k] for k in SPEED_EVENT_KEYS})
        return record

    def _stop_reason(self, idle: int) -> str | None:
        task = self.task
        if self.gen.stop.is_set() or task.cancel.is_set():
            return "interrupted"
        if task.budget.stop_reason is not None:
            return "budget"
        if self.baseline_failure is not None:
            return "kept_kernel_failed_timed_judging"
        if self.kept is None or self.kept.geomean_speedup is None:
            return "not_timed"
        if at_ceiling(self._rows(self.kept), self.cfg.ceiling_fraction):
            return "at_ceiling"
        if idle >= self.cfg.num_idle_rounds:
            return "no_gain"
        return None

    def _rows(self, result: OperatorResult) -> list[Any]:
        launch_ms = self.gen.cfg.eval.timing.empty_launch_ms
        return case_rows(result, self.flops, self.cfg.peak_tflops, launch_ms)

    @staticmethod
    def _fastest(attempts: list[Attempt], threshold: float) -> Attempt | None:
        faster = [a for a in attempts if a.outcome == FASTER]
        return max(faster, key=lambda a: a.speedup or 0.0) if faster else None

    # ------------------------------------------------------------------ baseline and noise

    def _baseline(self) -> None:
        task = self.task
        folder = self.runlog.op_dir(task.op) / "speed_baseline"
        _set_aside(folder)
        folder.mkdir(parents=True)
        path = folder / "candidate.py"
        path.write_text(self.kept_code, encoding="utf-8")
        results = []
        for k in range(1, self.cfg.num_noise_repeats + 1):
            result = self._judge(path)
            if result is None:
                break
            write_json(folder / f"verdict_{k}.json", result.to_json())
            results.append(result)
            if result.status != Status.PASSED:
                break  # a kept kernel that fails a timed judging: no speed rounds on it
        self.noise = timing_noise(results)
        failed = [r for r in results if r.status != Status.PASSED]
        self.baseline_failure = (failed[0].reason or str(failed[0].status)) if failed else None
        self.kept = median_result(results)
        if self.kept is not None:
            self.kept.timing_noise = self.noise
        self.tried[_sha(self.kept_code)] = self.kept
        write_json(
            folder / "meta.json",
            {
                "op": task.op,
                "repeats": len(results),
                "speedups": [r.geomean_speedup for r in results],
                "statuses": [str(r.status) for r in results],
                "noise": self.noise,
            },
        )

    # ------------------------------------------------------------------ one round

    def _round(self, n: int, threshold: float) -> list[Attempt]:
        attempts: dict[int, Attempt] = {}
        best_speedup = self.kept.geomean_speedup if self.kept else 0.0
        prompt_vars = {
            "best_code": self.kept_code.rstrip("\n"),
            "timing": timing_text(self._rows(self.kept), self.kept, self.noise, threshold),
            "speed_round": n,
            "num_speed_rounds": self.num_rounds,
        }

        def attempt(w: int) -> Callable[[], None]:
            def job() -> None:
                attempts[w] = self._attempt(w, n, prompt_vars, best_speedup or 0.0, threshold)

            return job

        # An exception is a bug, not a failed attempt: it cancels the round and is raised again.
        run_side_by_side(
            {
                f"atenforge-{self.task.folder}-speed-w{w}": attempt(w)
                for w in range(1, self.num_workers + 1)
            },
            on_error=lambda exc: self.task.cancel.set(),
        )
        out = [attempts[w] for w in sorted(attempts)]
        for a in out:
            self.last[a.worker] = a
        return out

    def _attempt(
        self, w: int, n: int, prompt_vars: dict[str, Any], best_speedup: float, threshold: float
    ) -> Attempt:
        task, rl = self.task, self.runlog
        path = rl.op_dir(task.op) / f"worker_{w}" / f"speed_round_{n}"
        _set_aside(path)
        path.mkdir(parents=True)
        last = self.last.get(w)
        prompt = task.renderer.render(
            SPEED_TEMPLATE,
            {**task.prompt_context, **prompt_vars, "last_attempt": _describe(last)},
        )
        messages = [Message("system", task.system_prompt), Message("user", prompt)]
        rl.write_messages(path, messages)
        rl.emit("speed_round_start", op=task.op, worker=w, round=n)
        started = time.monotonic()
        attempt = Attempt(w, n, CANCELLED)
        meta: dict[str, Any] = {"op": task.op, "worker": w, "speed_round": n, "error": None}
        if not task.budget.allow_call():
            attempt.outcome, attempt.reason = NOT_CALLED, task.budget.stop_reason or "budget"
            return self._finish(path, meta, attempt, started)
        context = task.context(
            w,
            n,
            {
                "status": "passed",
                "speed": {
                    "round": n,
                    "best_code": self.kept_code,
                    "best_speedup": best_speedup,
                    "tried": sorted(self.tried),
                },
            },
        )
        worker = Worker(task, w)
        completion, error = worker._call_provider(messages, context, n)
        if completion is not None:
            attempt.input_tokens = completion.input_tokens
            attempt.output_tokens = completion.output_tokens
            attempt.cost_usd = worker._cost(completion) or 0.0
            meta.update(model=completion.model, latency_s=round(completion.latency_s, 3))
            rl.write_text(path, "response.md", completion.text)
        if completion is None:
            attempt.outcome = PROVIDER_ERROR if error else CANCELLED
            attempt.reason = error or "cancelled while waiting for the provider"
            return self._finish(path, meta, attempt, started)
        try:
            code = extract_candidate(completion.text, task.op)
        except ExtractError as exc:
            attempt.outcome = NO_CODE
            attempt.reason = getattr(exc, "reason", None) or str(exc)
            return self._finish(path, meta, attempt, started)
        attempt.code = code
        candidate = rl.write_text(path, "candidate.py", code)
        key = _sha(code)
        if key == _sha(self.kept_code):
            attempt.outcome, attempt.reason = SAME, "the kept file itself"
            return self._finish(path, meta, attempt, started)
        if key in self.tried:
            result = self.tried[key]
            meta["verdict_reused"] = True
        else:
            result = self._judge(candidate)
            with task.lock:
                self.tried[key] = result
        if result is None:
            attempt.outcome, attempt.reason = CANCELLED, "cancelled while the file was judged"
            return self._finish(path, meta, attempt, started)
        rl.write_verdict(path, result)
        attempt.result = result
        if result.status != Status.PASSED:
            attempt.outcome = FAILED
            attempt.reason = result.reason or str(result.status)
        elif suspicious(result):
            # a speedup the evaluator itself doubts is not kept as progress
            attempt.outcome = SUSPICIOUS
            attempt.reason = (
                f"{_x(result.geomean_speedup)}, but a case is flagged {Flag.SUSPICIOUS_SPEEDUP}"
            )
        elif is_faster(result, best_speedup, threshold):
            attempt.outcome = FASTER
        else:
            attempt.outcome = NOT_FASTER
            attempt.reason = (
                f"{_x(result.geomean_speedup)} vs the kept {_x(best_speedup)}: not faster by more "
                f"than {threshold * 100:.1f}%"
            )
        return self._finish(path, meta, attempt, started)

    def _finish(self, path: Path, meta: dict[str, Any], a: Attempt, started: float) -> Attempt:
        meta.update(
            outcome=a.outcome,
            error=a.reason or None,
            status=str(a.result.status) if a.result is not None else None,
            geomean_speedup=a.speedup,
            input_tokens=a.input_tokens,
            output_tokens=a.output_tokens,
            cost_usd=a.cost_usd,
            round_s=round(time.monotonic() - started, 3),
        )
        self.runlog.write_text(path, "feedback.md", _describe(a))  # what the next prompt says
        self.runlog.write_meta(path, meta)
        self.runlog.emit(
            "speed_round_end",
            op=self.task.op,
            worker=a.worker,
            round=a.round,
            outcome=a.outcome,
            speedup=a.speedup,
            input_tokens=a.input_tokens,
            output_tokens=a.output_tokens,
            cost_usd=a.cost_usd,
            reason=a.reason or None,
        )
        return a

    def _judge(self, kernel_file: Path) -> OperatorResult | None:
        """A full judging with timing; None when the run stopped before a sandbox was free."""
        return self.task.judge(kernel_file, measure_performance=True)[0]


SPEED_EVENT_KEYS = ("rounds", "stopped", "noise", "speedup_before", "speedup_after", "gain")


def suspicious(result: OperatorResult) -> bool:
    return any(flag_name(f) == Flag.SUSPICIOUS_SPEEDUP for t in result.results for f in t.flags)


def _ratio(a: float | None, b: float | None) -> float | None:
    return a / b if a is not None and b else None


def _x(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.3f}x"


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _describe(a: Attempt | None) -> str:
    if a is None:
        return ""
    if a.outcome == FASTER:
        return f"it passed at {_x(a.speedup)} and was the fastest file so far."
    if a.outcome == NOT_FASTER:
        return f"it passed, but was not kept: {a.reason}."
    if a.outcome == FAILED:
        return f"it did not pass and was discarded: {a.reason}"
    if a.outcome == SAME:
        return "it was the kept file unchanged."
    return f"no file was judged ({a.outcome}: {a.reason})."


def _set_aside(path: Path) -> None:
    """A folder left by a run cut short is moved to `<name>.cut<k>`, never deleted."""
    if not path.exists():
        return
    k = 1
    while path.with_name(f"{path.name}.cut{k}").exists():
        k += 1
    path.rename(path.with_name(f"{path.name}.cut{k}"))


def run_speed_rounds(gen: Any, task: OpTask, num_workers: int) -> None:
    """The orchestrator's hook after an operator's win: its speed rounds, when any are due here.

    Records them in `gen._speed[op]` (decision.json's `speed` block) and makes `task.winner_code`
    the file to keep."""
    num_rounds = resolve_speed_rounds(gen.cfg.agent.speed_rounds, gen.device)[0]
    if num_rounds <= 0:
        return
    rounds = SpeedRounds(gen, task, num_workers, num_rounds)
    gen._speed[task.op] = rounds.run()
    task.winner_code = rounds.kept_code


def speed_outcome(outcome: Any, record: dict[str, Any]) -> None:
    """Adds what the speed rounds did to an operator's kept outcome: the reason says it, and
    their calls count in its tokens and cost."""
    outcome.input_tokens += record.get("input_tokens", 0)
    outcome.output_tokens += record.get("output_tokens", 0)
    outcome.cost_usd = round(outcome.cost_usd + record.get("cost_usd", 0.0), 6)
    kept = record.get("kept")
    if kept:
        outcome.reason += (
            f"; speed round {kept['speed_round']} (worker {kept['worker']}) made it "
            f"{_x(record['speedup_before'])} -> {_x(record['speedup_after'])} eager"
        )
    else:
        outcome.reason += (
            f"; {record['rounds']} speed round(s) kept nothing faster ({record['stopped']})"
        )
