"""One worker: one conversation with the provider about one operator, for up to `max_rounds` rounds.

A round: ask the provider -> extract the kernel file from the answer (agent.extract) -> test it
in the evaluator's sandbox (`OpTask.evaluator.judge`, the `agent.judging.Evaluator` of the run)
-> verdict -> feedback (agent.feedback), which opens the next round's refine prompt. Every step is
written to `run_dir/ops/<folder>/worker_<w>/round_<r>/` as it happens (agent.runlog), `meta.json`
last.

Stopping promptly: the operator's `cancel` event is set when a worker of the operator wins (or the
operator turns out untestable here, or the run is interrupted). A worker checks it between steps,
waits for the provider in a way it can walk away from (the call runs on a daemon thread; an
abandoned call's tokens are still charged to the budget when it returns), and hands the same event
to the judge, which kills the sandbox when it is set. No kernel code ever runs in this process.

A call that gets no answer (refused connection, 5xx after the provider's retries, a 400) is
recorded in the round folder with outcome `provider_error` but is not a round: the worker asks
again for the same round, and the next attempt sets the failed one aside as `round_<r>.failed<k>`.
The run's `ProviderHealth` decides when calls stop (failures in a row across the run, with a wait
for a server that went away); a worker whose own calls fail `max_consecutive_failures` times in a
row while the rest of the run gets answers stops on its own (`stopped = "provider"`). The builtin
and replay providers have no server: asking them again gives the same answer, so their failed
call is a round, as recorded.

An answer cut off at the output limit (`Completion.truncated`) whose last code block is not closed
is `no_code` with the reason "answer truncated at max_output_tokens", and the refine prompt asks
for a shorter file.

Concurrent sandboxes are bounded by `judge_slots` (eval.sandbox.num_parallel, shared by every
operator). A candidate text already judged for the operator (by another worker or an earlier
round) reuses that verdict (`meta.json` "verdict_reused_from") instead of running again.
"""

from __future__ import annotations

import hashlib
import logging
import threading
import time
from dataclasses import dataclass, field
from typing import Any

from agent.budget import Budget
from agent.extract import ExtractError, code_blocks, extract_candidate
from agent.feedback import format_feedback
from agent.judging import Evaluator
from agent.prompts import PromptRenderer
from agent.providers.base import Completion, Message, OperatorContext, Provider, ProviderError
from agent.providers.health import ProviderHealth
from agent.providers.pricing import estimate_cost_usd
from agent.runlog import (
    CANCELLED,
    FAILED,
    NO_CODE,
    PASSED,
    PASSED_NOT_KEPT,
    PROVIDER_ERROR,
    UNTESTABLE,
    RoundRecord,
    RunLog,
)
from evaluator.cases.testcase import TestCase
from evaluator.config import EvalConfig
from evaluator.naming import op_to_folder
from evaluator.results import OperatorResult, Status

log = logging.getLogger(__name__)

POLL_S = 0.05  # how often a waiting worker looks at its cancel event
FREE_PROVIDERS = {"builtin", "replay"}  # answers that cost nothing now, whatever they cost once
TRUNCATED_REASON = "answer truncated at max_output_tokens"


@dataclass
class SharedVerdict:
    """The verdict on one candidate text, shared by every worker of the operator that sends it."""

    owner: str  # worker_<w>/round_<r> that ran the sandbox
    done: threading.Event = field(default_factory=threading.Event)
    result: OperatorResult | None = None


@dataclass
class OpTask:
    """What the workers of one operator share: the task, the tools, and who won."""

    op: str
    cases: list[TestCase]
    prompt_context: dict[str, Any]  # agent.prompts.build_op_context(...)
    schema: str
    system_prompt: str
    generate_prompt: str
    provider: Provider
    renderer: PromptRenderer
    evaluator: Evaluator
    runlog: RunLog
    budget: Budget
    eval_config: EvalConfig
    device: str
    max_rounds: int
    feedback_max_chars: int
    prices: Any
    judge_slots: threading.Semaphore  # bounds concurrent sandboxes across all operators
    health: ProviderHealth = field(default_factory=ProviderHealth)  # shared by the whole run
    cancel: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    winner: tuple[int, int] | None = None  # (worker, round)
    winner_code: str | None = None
    untestable_reason: str | None = None
    call_threads: list[threading.Thread] = field(default_factory=list)
    verdicts: dict[str, SharedVerdict] = field(default_factory=dict)  # by sha256 of the file

    @property
    def folder(self) -> str:
        return op_to_folder(self.op)

    def judge(
        self, kernel_file: Any, *, measure_performance: bool = False
    ) -> tuple[OperatorResult | None, float | None]:
        """The verdict on one candidate file and the seconds the judging took (a free judge slot
        is waited for first, not counted); (None, None) when the operator was cancelled before.
        The evaluator kills the sandbox when `cancel` is set meanwhile."""
        while not self.judge_slots.acquire(timeout=POLL_S):
            if self.cancel.is_set():
                return None, None
        try:
            if self.cancel.is_set():
                return None, None
            started = time.monotonic()
            result = self.evaluator.judge(
                kernel_file,
                self.op,
                self.cases,
                config=self.eval_config,
                device=self.device,
                cancel=self.cancel,
                measure_performance=measure_performance,
            )
            return result, round(time.monotonic() - started, 3)
        finally:
            self.judge_slots.release()

    def context(self, worker: int, round_: int, feedback: dict[str, Any] | None) -> OperatorContext:
        """What a provider is told about this operator and this round of this worker."""
        return OperatorContext(
            op=self.op,
            schema=self.schema,
            cases=self.cases,
            worker=worker,
            round=round_,
            feedback=feedback,
        )

    def claim_win(self, worker: int, round_: int, code: str) -> bool:
        """The first passing candidate wins; the others are told to stop."""
        with self.lock:
            if self.winner is not None:
                return False
            self.winner = (worker, round_)
            self.winner_code = code
            self.cancel.set()
            return True

    def mark_untestable(self, reason: str) -> None:
        """No test of this operator can run on this device: more rounds cannot change that."""
        with self.lock:
            if self.untestable_reason is None:
                self.untestable_reason = reason
            self.cancel.set()


@dataclass
class WorkerReport:
    worker: int
    rounds: int = 0  # rounds that finished in this process
    last_round: int = 0
    stopped: str = ""  # why: won, cancelled, budget, max_rounds, untestable, provider
    reason: str = ""  # with stopped == "provider": the last failed call's reason


class Worker:
    def __init__(self, task: OpTask, number: int) -> None:
        self.task = task
        self.number = number
        self.report = WorkerReport(worker=number)
        self._base = [
            Message("system", task.system_prompt),
            Message("user", task.generate_prompt),
        ]
        self._messages = list(self._base)
        self._feedback: dict[str, Any] | None = None
        self._first_round = 1
        self._last_error = ""
        self._serverless = task.provider.name in FREE_PROVIDERS

    # ------------------------------------------------------------------ resume

    def restore(self, finished: list[RoundRecord]) -> None:
        """Continue after the last finished round of an interrupted run (same conversation)."""
        if not finished:
            return
        last = finished[-1]
        self._first_round = last.round + 1
        self.report.last_round = last.round
        outcome = last.meta.get("outcome")
        response = last.text("response.md") or ""
        code = last.text("candidate.py") or ""
        feedback = last.text("feedback.md") or ""
        self._feedback = last.verdict() or {"status": outcome, "reason": last.meta.get("error")}
        self._messages = self._next_messages(
            response, code, feedback, truncated=bool(last.meta.get("truncated")) and not code
        )

    # ------------------------------------------------------------------ the loop

    def run(self) -> WorkerReport:
        task = self.task
        health = task.health
        round_ = self._first_round
        failures = 0  # this worker's calls in a row that got no answer
        epoch = health.epoch()
        while True:
            if health.epoch() != epoch:  # the server came back after an outage: a fresh start
                epoch, failures = health.epoch(), 0
            if task.cancel.is_set():
                self.report.stopped = self.report.stopped or "cancelled"
                break
            if round_ > task.max_rounds:
                self.report.stopped = "max_rounds"
                break
            if not task.budget.allow_call():
                self.report.stopped = "budget"
                break
            if failures >= health.max_consecutive_failures and not health.in_outage():
                # The rest of the run gets answers: this conversation is what the server refuses.
                self.report.stopped = "provider"
                self.report.reason = (
                    f"{failures} calls in a row failed; the last: {self._last_error}"
                )
                break
            if not health.allow_call(task.cancel):
                if task.cancel.is_set():
                    self.report.stopped = self.report.stopped or "cancelled"
                else:
                    self.report.stopped = "provider"
                    self.report.reason = health.stop_reason or self._last_error
                break
            outcome = self._round(round_)
            self.report.last_round = round_
            if outcome == CANCELLED:
                self.report.stopped = "cancelled"
                break
            if outcome == PROVIDER_ERROR and not self._serverless:
                failures += 1  # no answer, so no round: the same round is asked again
                continue
            failures = 0
            self.report.rounds += 1
            if outcome in (PASSED, PASSED_NOT_KEPT):
                self.report.stopped = "won" if outcome == PASSED else "cancelled"
                break
            if outcome == UNTESTABLE:
                self.report.stopped = "untestable"
                break
            round_ += 1
        return self.report

    def _round(self, round_: int) -> str:
        task, w = self.task, self.number
        rl = task.runlog
        path = rl.start_round(task.op, w, round_)
        messages = self._messages
        rl.write_messages(path, messages)
        rl.emit("round_start", op=task.op, worker=w, round=round_)
        meta: dict[str, Any] = {
            "op": task.op,
            "worker": w,
            "round": round_,
            "provider": task.provider.name,
            "model": task.provider.model,
            "input_tokens": 0,
            "output_tokens": 0,
            "latency_s": None,
            "attempts": 0,
            "cost_usd": None,
            "finish_reason": None,
            "truncated": False,
            "error": None,
            "outcome": None,
            "status": None,
            "tests": None,
            "passed": None,
            "verdict_s": None,
        }
        started = time.monotonic()
        context = task.context(w, round_, self._feedback)
        epoch = task.health.epoch()
        completion, error = self._call_provider(messages, context, round_)
        if completion is not None:
            if not self._serverless:
                task.health.succeeded()
            rl.write_text(path, "response.md", completion.text)
            meta.update(
                model=completion.model or task.provider.model,
                input_tokens=completion.input_tokens,
                output_tokens=completion.output_tokens,
                latency_s=round(completion.latency_s, 3),
                attempts=completion.attempts,
                cost_usd=self._cost(completion),
                finish_reason=completion.finish_reason,
                truncated=completion.truncated,
            )
            if completion.request:
                meta["request"] = completion.request

        if error is not None:
            if not self._serverless:
                task.health.failed(error.reason, error.retryable, epoch)
            self._last_error = error.reason
            meta["error"] = error.reason
            meta["attempts"] = error.attempts
            # No answer: not a round. The same conversation is sent again (or the run stops).
            return self._finish(path, meta, PROVIDER_ERROR, started)
        if completion is None:
            meta["error"] = f"cancelled while waiting for the provider: {self._why_cancelled()}"
            return self._finish(path, meta, CANCELLED, started)
        if task.cancel.is_set():
            meta["error"] = f"cancelled after the provider answered: {self._why_cancelled()}"
            return self._finish(path, meta, CANCELLED, started)

        try:
            if completion.truncated and _ends_in_open_block(completion.text):
                raise ExtractError(TRUNCATED_REASON)
            code = extract_candidate(completion.text, task.op)
        except ExtractError as exc:
            reason = getattr(exc, "reason", None) or str(exc)
            cut = completion.truncated
            if cut and reason != TRUNCATED_REASON:
                reason = f"{TRUNCATED_REASON} ({reason})"
            meta["error"] = f"no usable kernel in the answer: {reason}"
            if completion.raw.get("written") is False:
                # The provider said why it wrote nothing (the builtin one: no writer for the op).
                said = completion.text.strip().split(";")[0].splitlines()
                meta["error"] = (said[0] if said else meta["error"])[:300]
            feedback = f"Your answer could not be tested: {reason}"
            rl.write_text(path, "feedback.md", feedback)
            self._feedback = {"status": NO_CODE, "reason": reason}
            self._messages = self._next_messages(completion.text, "", feedback, truncated=cut)
            return self._finish(path, meta, NO_CODE, started)
        candidate = rl.write_text(path, "candidate.py", code)

        result, verdict_s, reused = self._judge(candidate, code, round_)
        meta["verdict_s"] = verdict_s
        meta["verdict_reused_from"] = reused
        if result is None:
            meta["error"] = f"cancelled while waiting for a sandbox: {self._why_cancelled()}"
            return self._finish(path, meta, CANCELLED, started)
        rl.write_verdict(path, result)
        meta.update(
            status=str(result.status),
            tests=result.tests,
            passed=result.passed,
            skipped=result.skipped_tests,
        )
        if result.status != Status.PASSED and task.cancel.is_set():
            meta["error"] = f"cancelled while the candidate was tested: {self._why_cancelled()}"
            return self._finish(path, meta, CANCELLED, started)

        feedback = format_feedback(result, task.feedback_max_chars)
        rl.write_text(path, "feedback.md", feedback)
        self._feedback = result.to_json()
        self._messages = self._next_messages(completion.text, code, feedback)
        if result.status == Status.PASSED:
            # The worker whose sandbox run gave the verdict claimed the win in _judge already.
            won = task.winner == (w, round_) or (reused is None and task.claim_win(w, round_, code))
            return self._finish(path, meta, PASSED if won else PASSED_NOT_KEPT, started)
        if result.status == Status.SKIPPED:
            meta["error"] = result.reason or "no test could run on this device"
            task.mark_untestable(meta["error"])
            return self._finish(path, meta, UNTESTABLE, started)
        meta["error"] = result.reason or None
        return self._finish(path, meta, FAILED, started)

    def _why_cancelled(self) -> str:
        task = self.task
        if task.winner is not None:
            return f"worker {task.winner[0]} passed in round {task.winner[1]}"
        if task.untestable_reason is not None:
            return "no test can run on this device"
        return "the run was interrupted"

    def _finish(self, path: Any, meta: dict[str, Any], outcome: str, started: float) -> str:
        meta["outcome"] = outcome
        meta["round_s"] = round(time.monotonic() - started, 3)
        # meta.json last: its presence marks the round finished for --resume.
        self.task.runlog.write_meta(path, meta)
        self.task.runlog.emit(
            "round_end",
            op=self.task.op,
            worker=self.number,
            round=meta["round"],
            outcome=outcome,
            status=meta["status"],
            tests=meta["tests"],
            passed=meta["passed"],
            skipped=meta.get("skipped"),
            input_tokens=meta["input_tokens"],
            output_tokens=meta["output_tokens"],
            cost_usd=meta["cost_usd"],
            latency_s=meta["latency_s"],
            verdict_s=meta["verdict_s"],
            verdict_reused_from=meta.get("verdict_reused_from"),
            reason=meta["error"],
        )
        return outcome

    def _next_messages(
        self, response: str, code: str, feedback: str, *, truncated: bool = False
    ) -> list[Message]:
        """The next round's conversation: the task, the last answer, and what was wrong with it.

        Only the last exchange is kept, not every earlier round: the refine prompt already carries
        the previous candidate and its verdict, and the conversation stays a bounded size. An
        answer cut off at the output limit is told so (the refine prompt asks for a shorter file).
        """
        ctx = self.task.prompt_context
        if truncated:
            refine = self.task.renderer.refine(ctx, code, feedback, truncated=True)
        else:
            refine = self.task.renderer.refine(ctx, code, feedback)
        return [*self._base, Message("assistant", response), Message("user", refine)]

    # ------------------------------------------------------------------ waiting, abandonably

    def _call_provider(
        self, messages: list[Message], context: OperatorContext, round_: int
    ) -> tuple[Completion | None, ProviderError | None]:
        """(completion, None), (None, error) when the call failed, (None, None) when abandoned."""
        task = self.task
        box: dict[str, Any] = {}
        done = threading.Event()

        def call() -> None:
            try:
                completion = task.provider.complete(list(messages), context)
                box["completion"] = completion
                task.budget.charge(
                    completion.input_tokens, completion.output_tokens, self._cost(completion)
                )
            except ProviderError as exc:
                box["error"] = exc
            except Exception as exc:  # an SDK or provider bug is a failed call, with its reason
                log.debug("provider %s raised", task.provider.name, exc_info=True)
                box["error"] = ProviderError(f"{type(exc).__name__}: {exc}")
            finally:
                done.set()

        thread = threading.Thread(
            target=call, name=f"atenforge-call-{task.folder}-w{self.number}-r{round_}", daemon=True
        )
        with task.lock:
            task.call_threads.append(thread)
        thread.start()
        while not done.wait(POLL_S):
            if task.cancel.is_set():
                return None, None
        if "error" in box:
            return None, box["error"]
        return box["completion"], None

    def _judge(
        self, candidate: Any, code: str, round_: int
    ) -> tuple[OperatorResult | None, float | None, str | None]:
        """(verdict, seconds in the sandbox, whose verdict was reused); verdict None when cancelled.

        A file already judged for this operator (another worker, or an earlier round, sent the
        same text: the builtin writer is deterministic, LLMs at temperature 0 repeat themselves)
        reuses that verdict instead of a second sandbox run; a worker that sends it while the
        first judging is under way waits for it.
        """
        task = self.task
        key = hashlib.sha256(code.encode("utf-8")).hexdigest()
        with task.lock:
            shared = task.verdicts.get(key)
            mine = shared is None
            if shared is None:
                shared = task.verdicts[key] = SharedVerdict(f"worker_{self.number}/round_{round_}")
        if not mine:
            while not shared.done.wait(POLL_S):
                if task.cancel.is_set():
                    return None, None, None
            if shared.result is not None:
                return shared.result, None, shared.owner
            # The first judging ended without a verdict (cancelled or crashed): judge it here.
        try:
            result, seconds = self.task.judge(candidate)
            if mine:
                shared.result = result
                if result is not None and result.status == Status.PASSED:
                    # Before the workers waiting on this verdict wake: the kept kernel is the
                    # one whose sandbox run passed, not a copy that reused its verdict.
                    task.claim_win(self.number, round_, code)
            return result, seconds, None
        finally:
            if mine:
                shared.done.set()

    def _cost(self, completion: Completion) -> float | None:
        if self.task.provider.name in FREE_PROVIDERS:
            return 0.0
        return estimate_cost_usd(
            completion.model or self.task.provider.model,
            completion.input_tokens,
            completion.output_tokens,
            self.task.prices,
        )


def _ends_in_open_block(text: str) -> bool:
    """True when the answer's last code block has no closing fence (it was cut off inside it)."""
    blocks = code_blocks((text or "").replace("\r\n", "\n"))
    return bool(blocks) and not blocks[-1].closed
