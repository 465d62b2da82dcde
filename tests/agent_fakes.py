"""Fakes for the agent loop's tests: a queue provider and a judge that reads a verdict marker.

`QueueProvider` is llm's `MockModel.enqueue` per (operator, worker): each call pops the next
scripted answer, or raises a scripted ProviderError. `MarkerJudge` never runs the kernel: it reads
`# VERDICT: pass|fail|skip` from the candidate file and answers like the evaluator would, taking
`delay_s` (cut short, like a killed sandbox, when the cancel event is set). `FakeEvaluator` is an
`agent.judging.Evaluator` made of such stand-ins; `make_parts` builds the session's
`agent.session.Parts` from them (the agent's own prompts, extraction and feedback are the real ones).
"""

from __future__ import annotations

import _thread
import json
import threading
import time
from collections import defaultdict, deque
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agent.config import load_config
from agent.judging import LocalEvaluator
from agent.providers.base import Completion, Message, OperatorContext, ProviderError
from agent.session import Parts
from evaluator.cases.testcase import parse_case
from evaluator.naming import kernel_function_name, op_to_folder
from evaluator.results import OperatorResult, Status, TestResult


def answer(op: str, verdict: str, note: str = "") -> str:
    """A model answer holding one kernel file whose verdict under MarkerJudge is `verdict`."""
    fn = kernel_function_name(op)
    return (
        f"Here is the kernel{note}.\n\n```python\n# VERDICT: {verdict}\n# {note}\n"
        f"def {fn}(*args, **kwargs):\n    return None\n```\n"
    )


@dataclass
class Scripted:
    text: str | None = None
    error: str | None = None
    delay_s: float = 0.0
    input_tokens: int = 100
    output_tokens: int = 50
    hook: Any = None  # called (in the provider thread) before answering
    attempts: int = 1  # requests the failed call says it made


class QueueProvider:
    name = "fake"
    model = "fake-model"

    def __init__(self) -> None:
        self.queues: dict[tuple[str, int], deque[Scripted]] = defaultdict(deque)
        self.calls: list[tuple[str, int, int]] = []
        self.messages: dict[tuple[str, int, int], list[Message]] = {}
        self._lock = threading.Lock()

    def enqueue(self, op: str, worker: int, *items: str | Scripted) -> QueueProvider:
        for item in items:
            self.queues[(op, worker)].append(Scripted(text=item) if isinstance(item, str) else item)
        return self

    def complete(self, messages: list[Message], context: OperatorContext) -> Completion:
        with self._lock:
            self.calls.append((context.op, context.worker, context.round))
            self.messages[(context.op, context.worker, context.round)] = list(messages)
            queue = self.queues[(context.op, context.worker)]
            item = queue.popleft() if queue else Scripted(error="queue empty")
        if item.hook is not None:
            item.hook()
        if item.delay_s:
            time.sleep(item.delay_s)
        if item.error is not None:
            raise ProviderError(item.error, attempts=item.attempts)
        return Completion(
            text=item.text or "",
            model=self.model,
            input_tokens=item.input_tokens,
            output_tokens=item.output_tokens,
            latency_s=item.delay_s,
        )


class MarkerJudge:
    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = delay_s
        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()

    def __call__(
        self,
        kernel_file: Path,
        op: str,
        cases: list[Any],
        *,
        config: Any,
        device: str = "auto",
        measure_performance: bool = False,
        cancel: threading.Event | None = None,
    ) -> OperatorResult:
        text = Path(kernel_file).read_text()
        verdict = text.split("# VERDICT:", 1)[1].split()[0] if "# VERDICT:" in text else "fail"
        with self._lock:
            self.calls.append((op, verdict))
        folder = op_to_folder(op)
        if self.delay_s and cancel is not None and cancel.wait(self.delay_s):
            return OperatorResult(
                op, folder, Status.ERROR, reason="cancelled", kernel_file=str(kernel_file)
            )
        if verdict == "pass":
            results = [TestResult(args=c.serialize(), passed=True) for c in cases]
            return OperatorResult(
                op, folder, Status.PASSED, tests=len(cases), passed=len(cases), results=results
            )
        if verdict == "skip":
            return OperatorResult(
                op, folder, Status.SKIPPED, reason="every case is too large for the CPU"
            )
        results = [
            TestResult(
                args=c.serialize(), passed=False, max_abs_error=1.0, error_type="wrong_values"
            )
            for c in cases
        ]
        return OperatorResult(
            op,
            folder,
            Status.FAILED,
            flags=["wrong_values"],
            tests=len(cases),
            results=results,
            reason="a test gave a wrong result",
        )


@dataclass
class OpCases:
    op: str
    cases: list[Any]


@dataclass
class Selection:
    suite: str
    ops: list[OpCases]
    excluded: list[tuple[str, str]] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)


CASES = {
    "relu.default": ["((T([8, 16], f32),), {})"],
    "add.Tensor": ["((T([8, 16], f32), T([8, 16], f32)), {})"],
    "mul.Tensor": ["((T([8, 16], f32), T([16], f32)), {})"],
}


def fake_select(
    suite: str | None = "torchbench",
    ops: list[str] | None = None,
    num_operators=None,
    trace_file=None,
    max_cases_per_op: int = 10,
    prefer: Any = None,
    hidden_per_set: int = 0,
    hidden_salt: str = "",
) -> Selection:
    """The fake suite's operators and cases, without hidden cases (tests count judged cases)."""
    names = ops or list(CASES)
    if num_operators:
        names = names[:num_operators]
    return Selection(
        suite or "fake", [OpCases(op, [parse_case(c) for c in CASES[op]]) for op in names]
    )


class FakeEvaluator:
    """An `agent.judging.Evaluator` whose calls are the stand-ins given; environment_info is the
    local evaluator's unless given, judge_stats has no judges to report."""

    def __init__(
        self,
        *,
        judge: Any,
        evaluate: Any,
        resolve_device: Any,
        close: Any,
        select: Any,
        environment_info: Any = None,
    ) -> None:
        self.judge = judge
        self.evaluate = evaluate
        self.resolve_device = resolve_device
        self.close = close
        self.select = select
        self.environment_info = environment_info or LocalEvaluator.environment_info

    def judge_stats(self) -> list[dict[str, Any]]:
        return []


def make_parts(provider: Any, judge: Any = None, **over: Any) -> Parts:
    """Parts with `provider` and a FakeEvaluator: `judge` (a MarkerJudge by default) and `over`
    (evaluate, resolve_device, close_sandboxes, select, environment_info) stand in for the
    evaluator's calls; evaluate() is refused unless given."""

    def no_evaluate(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("evaluate() must not be called in this test")

    calls = {
        "judge": judge or MarkerJudge(),
        "evaluate": no_evaluate,
        "resolve_device": lambda device: "cpu",
        "close": over.pop("close_sandboxes", lambda: None),
        "select": fake_select,
    }
    calls.update(over)
    return Parts(evaluator=FakeEvaluator(**calls), provider=provider)


def config(tmp_path: Path, ops: list[str] | None = None, **agent: Any):
    """A RunConfig writing under tmp_path for `ops` (default relu.default); `agent` sets [agent] keys."""
    return load_config(
        None,
        {
            "suite": {"ops": ops or ["relu.default"]},
            "kernels_dir": str(tmp_path / "kernels"),
            "log_dir": str(tmp_path / "logs"),
            "device": "cpu",
            "agent": {"num_workers": 2, "max_rounds": 3, "parallel_ops": 1, **agent},
        },
    )


def atenforge_threads() -> list[threading.Thread]:
    """Threads the agent started that are still alive (workers, operators, provider calls)."""
    return [t for t in threading.enumerate() if t.name.startswith("atenforge")]


def write_replay(
    run_dir: Path, script: dict[tuple[str, int, int], str], tokens: tuple[int, int] = (100, 50)
) -> Path:
    """A recorded run folder the replay provider answers from: {(op, worker, round): answer}."""
    for (op, worker, round_), text in script.items():
        d = run_dir / "ops" / op_to_folder(op) / f"worker_{worker}" / f"round_{round_}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "response.md").write_text(text)
        meta = {"model": "recorded", "input_tokens": tokens[0], "output_tokens": tokens[1]}
        (d / "meta.json").write_text(json.dumps(meta))
    return run_dir


class Recording:
    """Wraps a provider: records (op, worker, round) of each call; interrupts the main thread
    (as Ctrl-C would) at the call `interrupt_at`."""

    def __init__(self, inner: Any, interrupt_at: tuple[str, int, int] | None = None) -> None:
        self.inner = inner
        self.name, self.model = inner.name, inner.model
        self.interrupt_at = interrupt_at
        self.calls: list[tuple[str, int, int]] = []

    def complete(self, messages: list[Message], context: OperatorContext) -> Completion:
        key = (context.op, context.worker, context.round)
        self.calls.append(key)
        if key == self.interrupt_at:
            _thread.interrupt_main()
            time.sleep(0.5)  # the main thread stops the run meanwhile
        return self.inner.complete(messages, context)


def marker_evaluate(
    kernels_dir: Path,
    *,
    suite: str | None = None,
    ops: list[str] | None = None,
    run_dir: Path | None = None,
    device: str = "cpu",
    progress: Any = None,
    config: Any = None,
    **_: Any,
) -> Any:
    """evaluate() with the marker judge: every selected op judged from the kernels dir; reports written."""
    from evaluator.naming import kernel_path
    from evaluator.reports.report import Report, write_reports

    judge = MarkerJudge()
    results = []
    for oc in fake_select(suite, ops=ops).ops:
        path = kernel_path(kernels_dir, oc.op)
        if path.exists():
            res = judge(path, oc.op, oc.cases, config=config)
        else:
            res = OperatorResult(oc.op, op_to_folder(oc.op), Status.MISSING, tests=len(oc.cases))
        results.append(res)
        if progress is not None:
            progress(res)
    report = Report(
        run={}, operators=results, excluded=[], suite="fake", device=device, run_dir=run_dir
    )
    if run_dir is not None:
        write_reports(run_dir, report)
    return report
