"""The agent's one door into the evaluator: a typed interface, and the local implementation.

The session, the generator and the workers reach the evaluator only through the `Evaluator`
passed to them (`agent.session.Parts.evaluator`; tests pass fakes). `LocalEvaluator` is the real
one: candidates are judged in this machine's sandboxes (evaluator.evaluate), operators selected
from the suites (evaluator.cases.suites), the machine described by evaluator.reports.runfolder. This module imports the evaluator at its top, so the
agent -> evaluator edge is visible in the imports; the evaluator never imports the agent.
Importing it loads torch: `python -m agent.run --help` never reaches it.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol

from evaluator.cases.suites import Selection, select_operators
from evaluator.cases.testcase import TestCase
from evaluator.config import EvalConfig
from evaluator.evaluate import (
    close_sandboxes,
    evaluate,
    judge_candidate,
    judge_capacity,
    judge_stats,
    resolve_device,
)
from evaluator.reports.runfolder import environment_info
from evaluator.results import OperatorResult


class Evaluator(Protocol):
    """What the agent asks of the evaluator."""

    def judge(
        self,
        kernel_file: Path,
        op: str,
        cases: list[TestCase],
        *,
        config: EvalConfig,
        device: str = "auto",
        measure_performance: bool = False,
        cancel: threading.Event | None = None,
    ) -> OperatorResult:
        """The verdict on one candidate file for one operator (run in a sandbox)."""
        ...

    def evaluate(self, kernels_dir: Path | str, **options: Any) -> Any:
        """Evaluate a kernels folder and write the reports (an evaluator.reports.report.Report)."""
        ...

    def resolve_device(self, device: str) -> str:
        """`auto` -> `cuda` or `cpu`; a UsageError for a device that is not there."""
        ...

    def close(self) -> None:
        """Stop every sandbox this evaluator started."""
        ...

    def select(
        self,
        suite: str | None = "torchbench",
        ops: list[str] | None = None,
        num_operators: int | None = None,
        trace_file: str | Path | None = None,
        max_cases_per_op: int = 10,
        prefer: Callable[[TestCase], bool] | None = None,
        hidden_per_set: int = 0,
        hidden_salt: str = "",
    ) -> Selection:
        """The operators to work on and their cases."""
        ...

    def judge_stats(self) -> list[dict[str, Any]]:
        """Every judge's throughput so far (device, busy/idle, verdicts), for views and run.json."""
        ...

    def environment_info(self, device: str, *, confine: bool = True) -> dict[str, Any]:
        """Versions, host, accelerator and containment of the machine that judges, for run.json."""
        ...


class LocalEvaluator:
    """The evaluator on this machine: sandboxes shared across calls, closed by `close`."""

    judge = staticmethod(judge_candidate)
    evaluate = staticmethod(evaluate)
    resolve_device = staticmethod(resolve_device)
    close = staticmethod(close_sandboxes)
    select = staticmethod(select_operators)
    judge_stats = staticmethod(judge_stats)
    environment_info = staticmethod(environment_info)


__all__ = ["Evaluator", "LocalEvaluator", "judge_capacity"]
