"""The agent reaches the evaluator through one typed `Evaluator` passed in (agent.judging)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from agent_fakes import FakeEvaluator, QueueProvider, answer, config, fake_select, make_parts

from agent.judging import Evaluator, LocalEvaluator
from agent.session import Parts, RunRequest, Session


class RecordingEvaluator(FakeEvaluator):
    """An Evaluator whose every call is recorded by name, then answered by the fakes."""

    def __init__(self, calls: list[str], **stand_ins: Any) -> None:
        super().__init__(**stand_ins)
        self.calls = calls
        for name in ("judge", "evaluate", "resolve_device", "close", "select", "environment_info"):
            setattr(self, name, self._recorded(name, getattr(self, name)))

    def _recorded(self, name: str, call: Any) -> Any:
        def recorded(*args: Any, **kwargs: Any) -> Any:
            self.calls.append(name)
            return call(*args, **kwargs)

        return recorded


def _protocol_methods() -> set[str]:
    return {n for n in vars(Evaluator) if not n.startswith("_")}


def test_the_local_evaluator_has_every_call_of_the_interface() -> None:
    assert _protocol_methods() == {
        "judge",
        "evaluate",
        "resolve_device",
        "close",
        "select",
        "judge_stats",
        "environment_info",
    }
    for name in _protocol_methods():
        assert callable(getattr(LocalEvaluator(), name)), name


def test_a_session_reaches_the_evaluator_only_through_the_one_passed_in(tmp_path: Path) -> None:
    fakes = make_parts(None).evaluator
    calls: list[str] = []
    evaluator = RecordingEvaluator(
        calls,
        judge=fakes.judge,
        evaluate=fakes.evaluate,
        resolve_device=lambda device: "cpu",
        close=lambda: None,
        select=fake_select,
    )
    provider = QueueProvider()
    provider.enqueue("relu.default", 1, answer("relu.default", "pass"))
    cfg = config(tmp_path, num_workers=1)
    result = Session(RunRequest(cfg=cfg, mode="generate"), Parts(evaluator, provider)).run()
    assert [o.status for o in result.outcomes] == ["kept"]
    assert calls[:2] == ["resolve_device", "select"]
    assert "judge" in calls and calls[-1] == "close"
    assert set(calls) <= _protocol_methods()


def test_parts_default_to_the_local_evaluator_and_the_configured_provider() -> None:
    parts = Parts()
    assert isinstance(parts.evaluator, LocalEvaluator)
    assert parts.provider is None
    assert parts.evaluator.resolve_device("cpu") == "cpu"


def test_local_evaluator_selects_from_the_suites() -> None:
    selection = LocalEvaluator().select("smoke", num_operators=1, max_cases_per_op=2)
    assert len(selection.ops) == 1
    assert 1 <= len(selection.ops[0].cases) <= 2
