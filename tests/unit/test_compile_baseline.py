"""The torch.compile baseline: config, the timing events' way into verdicts and prompts, and (on a
GPU) the real Inductor timing. On the CPU the timing events stand in for the GPU timer."""

from __future__ import annotations

import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
from layout import FIXTURES

from agent.speed_timing import case_rows, timing_text
from evaluator.cases.testcase import parse_case
from evaluator.config import EvalConfig, TimingConfig
from evaluator.judging.job_log import JobState
from evaluator.judging.verdict import Outcome, assemble
from evaluator.results import OperatorResult, Status, TestResult

ROOT = Path(__file__).resolve().parents[2]
CASES = ["((T([8, 16], f32),), {})", "((T([4, 4], f32),), {})"]


def test_baselines_default_to_eager_and_must_keep_it():
    assert TimingConfig().baselines == ["eager"]
    assert TimingConfig(baselines=["eager", "compile", "compile"]).baselines == ["eager", "compile"]
    with pytest.raises(ValueError, match="'eager' must be among the baselines"):
        TimingConfig(baselines=["compile"])


def _timed_outcome(compile_fields: list[dict]) -> Outcome:
    events: list[dict] = [{"event": "loaded", "flags": []}]
    for i, case in enumerate(CASES):
        events.append(
            {"event": "test_result", "index": i, "result": {"args": case, "passed": True}}
        )
    for i, extra in enumerate(compile_fields):
        events.append(
            {
                "event": "timing",
                "index": i,
                "eager_ms": 0.02,
                "kernel_ms": 0.01,
                "speedup": 2.0,
                "floor_ms": 0.002,
                "kernel_host_ms": 0.015,
                "eager_host_ms": 0.006,
                **extra,
            }
        )
    events.append({"event": "done"})
    return Outcome(state=JobState(events=events, loaded_at=0.0, done=True), exit_code=0)


def test_compile_timings_reach_the_verdict_and_the_speed_prompt():
    cases = [parse_case(c) for c in CASES]
    outcome = _timed_outcome(
        [
            {"compile_ms": 0.015, "speedup_vs_compile": 1.5},
            {"compile_ms": 0.006, "speedup_vs_compile": 0.6},
        ]
    )
    result = assemble("relu.default", "k.py", cases, outcome)
    assert result.status == Status.PASSED
    assert [t.compile_ms for t in result.results] == [0.015, 0.006]
    assert result.geomean_speedup == pytest.approx(2.0)
    assert result.geomean_speedup_vs_compile == pytest.approx(math.sqrt(1.5 * 0.6))
    back = OperatorResult.from_json(result.to_json())
    assert back.geomean_speedup_vs_compile == pytest.approx(result.geomean_speedup_vs_compile)

    rows = case_rows(result, {}, {"f32": 67.0})
    text = timing_text(rows, result, 0.02, 0.03)
    assert "vs torch.compile: 0.95x" in text
    assert "torch.compile 15.0 us (1.50x)" in text


def test_a_compile_baseline_that_fails_is_a_note_not_a_verdict():
    cases = [parse_case(c) for c in CASES]
    outcome = _timed_outcome([{"compile_error": "BackendCompilerFailed: no"}, {}])
    result = assemble("relu.default", "k.py", cases, outcome)
    assert result.status == Status.PASSED
    assert "compile_baseline_error" in result.results[0].flags
    assert result.geomean_speedup_vs_compile is None


def test_timing_text_without_compile_says_nothing_of_it():
    result = OperatorResult(
        "relu.default",
        "relu__default",
        Status.PASSED,
        tests=1,
        passed=1,
        geomean_speedup=1.2,
        results=[
            TestResult(args=CASES[0], passed=True, kernel_ms=0.01, eager_ms=0.012, speedup=1.2)
        ],
    )
    text = timing_text(case_rows(result, {}, {}), result, None, 0.03)
    assert "compile" not in text and "ceiling unknown" in text


@pytest.mark.gpu
def test_compile_baseline_is_timed_on_gpu(tmp_path):
    from evaluator.evaluate import evaluate

    cfg = EvalConfig()
    cfg.timing.baselines = ["eager", "compile"]
    report = evaluate(
        FIXTURES / "kernels" / "corpus",
        trace_file=FIXTURES / "corpus_trace.txt",
        ops=["relu.default"],
        config=cfg,
        device="cuda",
        run_dir=tmp_path,
    )
    (res,) = report.operators
    assert res.status is Status.PASSED, res.reason
    for t in res.results:
        assert "compile_baseline_error" not in t.flags, t.flags
        assert t.compile_ms is not None and t.compile_ms > 0
        assert t.speedup_vs_compile is not None and math.isfinite(t.speedup_vs_compile)
    assert res.geomean_speedup_vs_compile is not None


def test_the_compiled_baseline_is_made_once_per_op_with_its_cache_beside_triton_s(tmp_path):
    # a fresh interpreter, as a sandbox child is: Inductor not imported yet
    code = (
        "import os, torch\n"
        "from evaluator.judge import timing\n"
        "first = timing._compiled(torch.ops.aten.relu.default)\n"  # compiled lazily: nothing runs
        "assert timing._compiled(torch.ops.aten.relu.default) is first\n"
        "print(os.environ['TORCHINDUCTOR_CACHE_DIR'])\n"
    )
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "triton")}
    env.pop("TORCHINDUCTOR_CACHE_DIR", None)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == str(tmp_path / "triton" / "inductor")
