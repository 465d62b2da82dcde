"""Generation: the workers of every selected operator, winners kept on disk.

Contract:
- `Generator(cfg, provider=..., evaluator=..., renderer=..., runlog=..., budget=..., device=...,
  kernels_dir=..., stop=...).run(ops) -> list[OpOutcome]` works on `ops` (evaluator.cases.suites OpCases) up to
  `agent.parallel_ops` at once, each with `agent.num_workers` workers (agent.worker).
- The first passing candidate of an operator wins: it goes to
  `<kernels_dir>/<folder>/<folder>_implementation_v1.py` (an earlier, different file there is
  copied to `run_dir/archive/<folder>/` first, and a `<folder>_implementation*.py` sorting before
  it, which BackendBench would load instead, is moved there) and `ops/<folder>/decision.json`
  records it. An
  operator whose workers all used their rounds, or that no test can run on here, is decided
  "not_kept". Operators stopped by the budget, an interrupt or the provider (the run's
  `ProviderHealth` stopped calling it, or a worker's own calls kept failing) get no decision:
  `--resume` does them, continuing each worker after its last finished round. Decided operators
  are skipped, except a "not_kept" whose every round was a failed call (written by older
  versions, where a failed call used a round): that operator never got an answer, so it is redone.
- Verdicts come from the `agent.judging.Evaluator` passed in (a test passes a fake), prompts from
  the `agent.prompts.PromptRenderer` passed in.
- KeyboardInterrupt in the main thread (Ctrl-C) sets `stop` and every operator's cancel event:
  workers stop, the judge kills their sandboxes, and `run` re-raises once every worker has ended.
  A worker's exception stops the others the same way and is re-raised (a bug, exit code 1).
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from agent.budget import Budget, cost_text
from agent.config import RunConfig
from agent.judging import Evaluator, judge_capacity
from agent.parallelism import run_side_by_side
from agent.prompts import PromptRenderer, build_op_context
from agent.providers.base import Provider
from agent.providers.health import ProviderHealth
from agent.runlog import (
    DECISION_FILE,
    FINISHED_OUTCOMES,
    PASSED,
    PROVIDER_ERROR,
    UNTESTABLE,
    RunLog,
)
from agent.worker import OpTask, Worker, WorkerReport
from evaluator.naming import find_kernel_file, kernel_path, op_to_folder
from evaluator.reports.runfolder import write_text

log = logging.getLogger(__name__)

JOIN_POLL_S = 0.1
ABANDONED_CALL_GRACE_S = 2.0  # how long the end of a run waits for abandoned provider calls

# Operator outcomes (OpOutcome.status, op_done events, decision.json "status").
KEPT = "kept"
NOT_KEPT = "not_kept"
BUDGET_STOPPED = "budget_stopped"
INTERRUPTED = "interrupted"
PROVIDER_STOPPED = "provider_stopped"  # the provider gave no answers: not decided, resume redoes it
DECIDED = {KEPT, NOT_KEPT}
# Providers whose workers all write the same text for an operator (no sampling, no state across
# calls): a second worker would only send the same file to the sandbox again.
DETERMINISTIC_PROVIDERS = {"builtin"}


def workers_per_operator(provider: Any, num_workers: int) -> int:
    """`agent.num_workers`, or 1 for a deterministic provider (see DETERMINISTIC_PROVIDERS)."""
    return 1 if getattr(provider, "name", None) in DETERMINISTIC_PROVIDERS else num_workers


# ---------------------------------------------------------------------------------- results


@dataclass
class OpOutcome:
    op: str
    status: str  # kept, not_kept, budget_stopped, interrupted, provider_stopped
    worker: int | None = None
    round: int | None = None
    kernel_file: str | None = None
    reason: str = ""
    rounds: int = 0  # finished rounds of all workers, this run folder
    input_tokens: int = 0
    output_tokens: int = 0
    cost_usd: float = 0.0  # the priced calls' estimate
    cost_known: bool = True  # False when some call had no price (a local model): "unpriced"
    earlier: bool = False  # decided by an earlier part of a resumed run

    @property
    def folder(self) -> str:
        return op_to_folder(self.op)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


def aten_schema(op: str) -> str:
    """The overload's schema string from torch (for prompts and the provider context)."""
    import torch

    base, _, overload = op.partition(".")
    try:
        return str(getattr(getattr(torch.ops.aten, base), overload)._schema)
    except (AttributeError, RuntimeError):
        return ""


# ---------------------------------------------------------------------------------- generation


class Generator:
    """Runs the workers of every operator; keeps winners; writes decisions and events."""

    def __init__(
        self,
        cfg: RunConfig,
        *,
        provider: Provider,
        evaluator: Evaluator,
        renderer: PromptRenderer,
        runlog: RunLog,
        budget: Budget,
        device: str,
        kernels_dir: Path,
        stop: threading.Event,
        health: ProviderHealth | None = None,
    ) -> None:
        self.cfg = cfg
        self.provider = provider
        self.evaluator = evaluator
        self.renderer = renderer
        self.runlog = runlog
        self.budget = budget
        self.device = device
        self.kernels_dir = kernels_dir
        self.stop = stop
        self.health = health or ProviderHealth(cfg.provider.max_consecutive_failures)
        # Candidates in flight = every judge's slots (the judge pool on this host or on Ray).
        self.judge_capacity = judge_capacity(cfg.eval, device)
        self.judge_slots = threading.BoundedSemaphore(self.judge_capacity)
        self._tasks: list[OpTask] = []
        self._lock = threading.Lock()
        self._errors: list[BaseException] = []
        self._speed: dict[str, dict[str, Any]] = {}  # op -> its speed rounds' record (agent.speed)

    def interrupt(self) -> None:
        """Stop everything: no new operators, no new rounds, sandboxes killed by the judge."""
        self.stop.set()
        with self._lock:
            for task in self._tasks:
                task.cancel.set()

    def run(self, ops: list[Any]) -> list[OpOutcome]:
        """Generate kernels for `ops` (OpCases); KeyboardInterrupt stops cleanly, then re-raises."""
        outcomes: dict[str, OpOutcome] = {}
        pending: list[Any] = []
        for oc in ops:
            decision = self.runlog.read_decision(oc.op)
            if (
                decision is not None
                and decision.get("status") in DECIDED
                and not self._never_answered(oc.op, decision)
            ):
                outcomes[oc.op] = _outcome_from_decision(oc.op, decision)
                self.runlog.emit("op_decided_earlier", op=oc.op, status=decision["status"])
            else:
                if decision is not None:  # never answered: that decision does not stand
                    (self.runlog.op_dir(oc.op) / DECISION_FILE).unlink(missing_ok=True)
                pending.append(oc)
        queue = list(reversed(pending))  # pop() from the end keeps the selection order

        def op_loop() -> None:
            while True:
                with self._lock:
                    if not queue or self.stop.is_set() or self._errors:
                        return
                    oc = queue.pop()
                try:
                    outcomes[oc.op] = self._run_op(oc)
                except BaseException as exc:  # re-raised in the main thread after the others stop
                    log.debug("operator %s failed", oc.op, exc_info=True)
                    with self._lock:
                        self._errors.append(exc)
                    self.interrupt()
                    return

        threads = [
            threading.Thread(target=op_loop, name=f"atenforge-op-{i}", daemon=True)
            for i in range(min(self._operators_in_flight(), len(pending)))
        ]
        for t in threads:
            t.start()
        try:
            _join_all(threads)
        except KeyboardInterrupt:
            self.interrupt()
            self.runlog.emit("interrupted", where="generation")
            try:
                _join_all(threads)
            finally:
                self._join_abandoned_calls()
            raise
        self._join_abandoned_calls()
        if self._errors:
            raise self._errors[0]
        for oc in ops:  # operators never started (budget, interrupt) still get an outcome
            if oc.op not in outcomes:
                if self.stop.is_set():
                    status = INTERRUPTED
                elif self.health.stop_reason is not None:
                    status = PROVIDER_STOPPED
                else:
                    status = BUDGET_STOPPED
                outcomes[oc.op] = OpOutcome(oc.op, status, reason="not started")
        return [outcomes[oc.op] for oc in ops]

    def _operators_in_flight(self) -> int:
        from agent.parallelism import operators_in_flight

        workers = workers_per_operator(self.provider, self.cfg.agent.num_workers)
        return operators_in_flight(self.cfg.agent.parallel_ops, self.judge_capacity, workers)

    def _join_abandoned_calls(self) -> None:
        """Give abandoned provider calls a moment to return; they are daemons if they do not."""
        deadline = time.monotonic() + ABANDONED_CALL_GRACE_S
        alive = 0
        for task in self._tasks:
            for t in task.call_threads:
                t.join(timeout=max(0.0, deadline - time.monotonic()))
                alive += t.is_alive()
        if alive:
            log.info(
                "%d abandoned provider call(s) still running; they end with the process", alive
            )

    # ------------------------------------------------------------------ one operator

    def _make_task(self, oc: Any) -> OpTask:
        cfg, renderer = self.cfg, self.renderer
        ctx = build_op_context(oc.op, oc.cases, cfg.agent.num_prompt_cases)
        schema = ctx.get("schema") if isinstance(ctx, dict) else None
        return OpTask(
            op=oc.op,
            # judged on the shown cases and the rounds' hidden ones; the prompt shows the former
            cases=[*oc.cases, *getattr(oc, "hidden_round", [])],
            prompt_context=ctx,
            schema=schema or aten_schema(oc.op),
            system_prompt=renderer.system(ctx),
            generate_prompt=renderer.generate(ctx),
            provider=self.provider,
            renderer=renderer,
            evaluator=self.evaluator,
            runlog=self.runlog,
            budget=self.budget,
            eval_config=cfg.eval,
            device=self.device,
            max_rounds=cfg.agent.max_rounds,
            feedback_max_chars=cfg.agent.feedback_max_chars,
            prices=getattr(self.provider, "prices", None) or cfg.provider.prices,
            judge_slots=self.judge_slots,
            health=self.health,
        )

    def _run_op(self, oc: Any) -> OpOutcome:
        if self.stop.is_set():
            return OpOutcome(oc.op, INTERRUPTED, reason="not started")
        if self.budget.stop_reason is not None:
            return OpOutcome(oc.op, BUDGET_STOPPED, reason=self.budget.stop_reason)
        if self.health.stop_reason is not None:
            return OpOutcome(
                oc.op, PROVIDER_STOPPED, reason="not started: " + self.health.stop_reason
            )
        task = self._make_task(oc)
        with self._lock:
            self._tasks.append(task)
            if self.stop.is_set():
                task.cancel.set()
        num_workers = workers_per_operator(self.provider, self.cfg.agent.num_workers)
        can_write = getattr(self.provider, "can_write", None)
        if callable(can_write) and not can_write(oc.op):
            # The provider said it cannot write this operator: one round records that, honestly.
            num_workers, task.max_rounds = 1, 1
        workers = [Worker(task, w) for w in range(1, num_workers + 1)]
        self._restore(task, workers)
        self.runlog.emit(
            "op_start",
            op=oc.op,
            folder=task.folder,
            cases=len(oc.cases),
            workers=num_workers,
            max_rounds=task.max_rounds,
        )
        started = time.monotonic()
        if task.winner is None and task.untestable_reason is None:
            self._run_workers(task, workers)
        if task.winner is not None and not self.stop.is_set():
            from agent.speed import run_speed_rounds  # may make task.winner_code a faster file

            run_speed_rounds(self, task, num_workers)
        outcome = self._decide(task, [w.report for w in workers])
        self.runlog.emit(
            "op_done",
            op=oc.op,
            status=outcome.status,
            worker=outcome.worker,
            round=outcome.round,
            kernel_file=outcome.kernel_file,
            rounds=outcome.rounds,
            reason=outcome.reason,
            input_tokens=outcome.input_tokens,
            output_tokens=outcome.output_tokens,
            cost_usd=outcome.cost_usd,
            elapsed_s=round(time.monotonic() - started, 3),
        )
        return outcome

    def _restore(self, task: OpTask, workers: list[Worker]) -> None:
        """On resume: continue each worker; a win or an untestable verdict on disk decides the op."""
        for worker in workers:
            finished = self.runlog.finished_rounds(task.op, worker.number)
            for record in finished:
                outcome = record.meta.get("outcome")
                if outcome == PASSED and task.winner is None:
                    code = record.text("candidate.py")
                    if code is not None:
                        task.claim_win(worker.number, record.round, code)
                elif outcome == UNTESTABLE:
                    task.mark_untestable(record.meta.get("error") or "untestable")
            worker.restore(finished)

    def _run_workers(self, task: OpTask, workers: list[Worker]) -> None:
        def failed(exc: BaseException) -> None:
            log.debug("%s failed", threading.current_thread().name, exc_info=exc)  # op and worker
            task.cancel.set()  # the others stop too: the operator cannot be decided

        run_side_by_side(
            {f"atenforge-{task.folder}-w{w.number}": w.run for w in workers}, on_error=failed
        )

    def _decide(self, task: OpTask, reports: list[WorkerReport]) -> OpOutcome:
        inp, out, cost, rounds, priced = self._op_usage(task.op)
        base = {
            "input_tokens": inp,
            "output_tokens": out,
            "cost_usd": cost,
            "cost_known": priced,
            "rounds": rounds,
        }
        if task.winner is not None:
            worker, round_ = task.winner
            dest, archived = self._keep(task)
            outcome = OpOutcome(
                task.op,
                KEPT,
                worker,
                round_,
                str(dest),
                f"worker {worker} passed in round {round_}",
                **base,
            )
            if task.op in self._speed:  # what the speed rounds did and spent (agent.speed)
                from agent.speed import speed_outcome

                speed_outcome(outcome, self._speed[task.op])
            self._write_decision(outcome, archived)
            return outcome
        if task.untestable_reason is not None:
            outcome = OpOutcome(
                task.op, NOT_KEPT, reason=f"untestable here: {task.untestable_reason}", **base
            )
            self._write_decision(outcome, None)
            return outcome
        if self.stop.is_set():
            return OpOutcome(task.op, INTERRUPTED, reason="run interrupted", **base)
        stopped = [r for r in reports if r.stopped == "provider"]
        if stopped:
            why = self.health.stop_reason or stopped[0].reason
            return OpOutcome(task.op, PROVIDER_STOPPED, reason=f"provider: {why}", **base)
        if any(r.stopped == "budget" for r in reports):
            return OpOutcome(task.op, BUDGET_STOPPED, reason=self.budget.stop_reason or "", **base)
        outcome = OpOutcome(
            task.op,
            NOT_KEPT,
            reason=f"no candidate passed in {rounds} round(s): {self._last_failure(task)}",
            **base,
        )
        self._write_decision(outcome, None)
        return outcome

    def _keep(self, task: OpTask) -> tuple[Path, str | None]:
        """Write the winner into the kernels dir; an earlier, different kernel is archived first."""
        dest = kernel_path(self.kernels_dir, task.op)
        archived = None
        code = task.winner_code or ""
        if dest.exists():
            try:
                same = dest.read_text(encoding="utf-8") == code
            except (OSError, UnicodeDecodeError):
                same = False
            if not same:
                archived = str(self.runlog.archive(dest, task.folder))
                self.runlog.emit("kernel_archived", op=task.op, path=str(dest), archived=archived)
        write_text(dest, code)
        # BackendBench (and the evaluation) load the first sorted `<folder>_implementation*.py`:
        # a file sorting before the winner would be judged instead, so it moves to the archive.
        while (first := find_kernel_file(self.kernels_dir, task.op)) not in (None, dest):
            moved = str(self.runlog.archive(first, task.folder))
            first.unlink()
            self.runlog.emit("kernel_archived", op=task.op, path=str(first), archived=moved)
            archived = archived or moved
        return dest, archived

    def _write_decision(self, outcome: OpOutcome, archived: str | None) -> None:
        self.runlog.write_decision(
            outcome.op,
            {
                "op": outcome.op,
                "folder": outcome.folder,
                "status": outcome.status,
                "worker": outcome.worker,
                "round": outcome.round,
                "kernel_file": outcome.kernel_file,
                "archived": archived,
                "reason": outcome.reason,
                "rounds": outcome.rounds,
                "input_tokens": outcome.input_tokens,
                "output_tokens": outcome.output_tokens,
                # null when no call had a price: unknown, not free
                "cost_usd": None
                if not outcome.cost_known and not outcome.cost_usd
                else outcome.cost_usd,
                "cost": cost_text(outcome.cost_usd, outcome.cost_known),
                "decided_at": _now(),
                "speed": self._speed.get(outcome.op),
            },
        )

    def _op_usage(self, op: str) -> tuple[int, int, float, int, bool]:
        """(input tokens, output tokens, priced cost, finished rounds, every call priced)."""
        inp = out = rounds = 0
        cost = 0.0
        priced = True
        for _w, _path, meta in self.runlog.all_rounds(op):
            if not meta:
                continue
            inp += int(meta.get("input_tokens") or 0)
            out += int(meta.get("output_tokens") or 0)
            if meta.get("cost_usd") is None:
                priced = priced and not (meta.get("input_tokens") or meta.get("output_tokens"))
            cost += float(meta.get("cost_usd") or 0.0)
            rounds += meta.get("outcome") in FINISHED_OUTCOMES
        return inp, out, round(cost, 6), rounds, priced

    def _never_answered(self, op: str, decision: dict[str, Any]) -> bool:
        """A "not_kept" decision whose every round was a failed call: no answer was ever judged."""
        if decision.get("status") != NOT_KEPT or "untestable" in str(decision.get("reason")):
            return False
        metas = [meta for _w, _path, meta in self.runlog.all_rounds(op) if meta]
        return bool(metas) and all(m.get("outcome") == PROVIDER_ERROR for m in metas)

    def _last_failure(self, task: OpTask) -> str:
        last = ""
        for _w, _path, meta in self.runlog.all_rounds(task.op):
            if meta and meta.get("error"):
                last = str(meta["error"])
        return last.splitlines()[0][:200] if last else "see the rounds' verdicts"


def _outcome_from_decision(op: str, d: dict[str, Any]) -> OpOutcome:
    return OpOutcome(
        op,
        d["status"],
        d.get("worker"),
        d.get("round"),
        d.get("kernel_file"),
        d.get("reason", ""),
        int(d.get("rounds") or 0),
        int(d.get("input_tokens") or 0),
        int(d.get("output_tokens") or 0),
        float(d.get("cost_usd") or 0.0),
        cost_known=d.get("cost_usd") is not None or not (d.get("input_tokens") or 0),
        earlier=True,
    )


def _join_all(threads: list[threading.Thread]) -> None:
    # Short timeouts keep the main thread responsive to Ctrl-C.
    while any(t.is_alive() for t in threads):
        for t in threads:
            t.join(timeout=JOIN_POLL_S)
