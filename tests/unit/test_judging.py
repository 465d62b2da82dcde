"""The agent reaches the evaluator through one typed `Evaluator` passed in (agent.judging)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent.config import RunConfig
from agent.judging import LocalEvaluator
from agent.orchestrator import Parts


class RecordingEvaluator:
    """An Evaluator that answers with markers and records which method was called."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def judge(self, kernel_file: Path, op: str, cases: list[Any], **kw: Any) -> Any:
        self.calls.append("judge")
        return "verdict"

    def evaluate(self, kernels_dir: Path | str, **options: Any) -> Any:
        self.calls.append("evaluate")
        return "report"

    def resolve_device(self, device: str) -> str:
        self.calls.append("resolve_device")
        return "cpu"

    def close(self) -> None:
        self.calls.append("close")

    def select(self, suite: str | None = "torchbench", **kw: Any) -> Any:
        self.calls.append("select")
        return "selection"


def test_every_evaluator_call_of_the_parts_goes_to_the_evaluator_passed_in() -> None:
    fake = RecordingEvaluator()
    parts = Parts(evaluator=fake).resolved(RunConfig())
    assert parts.judge(Path("k.py"), "relu.default", []) == "verdict"
    assert parts.evaluate("kernels") == "report"
    assert parts.resolve_device("auto") == "cpu"
    assert parts.select("smoke") == "selection"
    parts.close_sandboxes()
    assert fake.calls == ["judge", "evaluate", "resolve_device", "select", "close"]


def test_a_single_call_passed_in_overrides_the_evaluators_method() -> None:
    fake = RecordingEvaluator()
    parts = Parts(evaluator=fake, resolve_device=lambda device: "cuda").resolved(RunConfig())
    assert parts.resolve_device("auto") == "cuda"
    assert fake.calls == []


def test_parts_default_to_the_local_evaluator() -> None:
    parts = Parts().resolved(RunConfig())
    assert isinstance(parts.evaluator, LocalEvaluator)
    assert parts.resolve_device("cpu") == "cpu"


def test_local_evaluator_selects_from_the_suites() -> None:
    selection = LocalEvaluator().select("smoke", num_operators=1, max_cases_per_op=2)
    assert len(selection.ops) == 1
    assert 1 <= len(selection.ops[0].cases) <= 2
