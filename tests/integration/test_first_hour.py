"""What a new user meets in the first hour: a fast `--help`, honest reports and console lines.

Each test pins one thing a first run tripped over: arguments parsed before torch is imported,
excluded operators in every report, kernel errors naming the user's file, unknown operators in a
trace named once, console labels that show skipped cases and tolerances, one builtin worker.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("torch", "triton", "agent.session", "agent.providers.registry")


def _imported_modules(args: list[str]) -> tuple[subprocess.CompletedProcess, set[str]]:
    """Run `python -X importtime -m agent.run ARGS` and return the process and what it imported."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    proc = subprocess.run(
        [sys.executable, "-X", "importtime", "-m", "agent.run", *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    modules = {
        line.rsplit("|", 1)[1].strip()
        for line in proc.stderr.splitlines()
        if line.startswith("import time:") and "|" in line
    }
    return proc, modules


@pytest.mark.parametrize(
    ("args", "code", "needle"),
    [
        (["--help"], 0, "--evaluate-only"),
        (["--num-operators", "abc"], 2, "invalid int value: 'abc'"),
        (["--generate-only", "--evaluate-only"], 2, "not allowed with"),
        (["--no-such-flag"], 2, "--no-such-flag"),
        (["--num-workers", "0"], 2, "agent.num_workers"),
        (["--resume", ".", "--ops", "relu"], 2, "drop --ops"),
    ],
)
def test_help_and_usage_errors_answer_before_torch_is_imported(args, code, needle):
    proc, modules = _imported_modules(args)
    assert proc.returncode == code, proc.stderr[-2000:]
    assert needle in proc.stdout + proc.stderr
    assert "agent.run" in modules or "argparse" in modules  # the probe saw the imports
    assert not [m for m in modules if m in HEAVY], sorted(m for m in modules if m in HEAVY)


def run_cli(args: list[str], parts=None) -> tuple[int, str]:
    import io

    from rich.console import Console

    from agent.run import main

    out = io.StringIO()
    code = main(args, parts=parts, console=Console(file=out, width=120))
    return code, out.getvalue()


def test_reports_list_the_suites_excluded_operators(tmp_path):
    import json

    kernels = tmp_path / "kernels" / "zz__default"
    kernels.mkdir(parents=True)
    (kernels / "zz__default_implementation_v1.py").write_text(
        "def zz__default_kernel_impl(): pass\n"
    )
    args = ["--evaluate-only", "--kernels-dir", str(tmp_path / "kernels"), "--suite", "torchbench",
            "--num-operators", "1", "--log-dir", str(tmp_path / "logs"), "-q"]  # fmt: skip
    code, out = run_cli(args)
    assert code == 0, out
    (run_dir,) = (tmp_path / "logs").iterdir()
    run = json.loads((run_dir / "run.json").read_text())
    assert len(run["excluded"]) > 10
    summary = (run_dir / "OVERALL_SUMMARY.md").read_text()
    excluded_part = summary.split("## Excluded operators", 1)[1]
    assert "None." not in excluded_part
    for op, _reason in run["excluded"]:
        assert f"`{op}`" in excluded_part
    assert f"{len(run['excluded'])} excluded" in summary
    reports = [json.loads(p.read_text()) for p in run_dir.glob("*results.json")]
    assert any(
        len(r.get("excluded") or []) == len(run["excluded"]) for r in reports if isinstance(r, dict)
    )
    assert f"excluded operators: {len(run['excluded'])}" in out


def test_kernel_errors_name_the_users_file_with_the_line_and_caret(tmp_path):
    kernels = tmp_path / "kernels"
    files = {
        "add__Tensor": "import triton\n\ndef add__Tensor_kernel_impl(a, b, **kw):\n    return a +* b\n",
        "mul__Tensor": "import not_a_module_xyz\n\ndef mul__Tensor_kernel_impl(a, b):\n    return a\n",
    }
    for folder, text in files.items():
        (kernels / folder).mkdir(parents=True)
        (kernels / folder / f"{folder}_implementation_v1.py").write_text(text)
    args = ["--evaluate-only", "--kernels-dir", str(kernels), "--suite", "smoke",
            "--ops", "add.Tensor,mul.Tensor", "--log-dir", str(tmp_path / "logs"), "-q"]  # fmt: skip
    code, out = run_cli(args)
    assert code == 0, out
    user_file = kernels / "add__Tensor" / "add__Tensor_implementation_v1.py"
    lines = out.splitlines()
    (syntax,) = [i for i, line in enumerate(lines) if line.startswith("[eval] add.Tensor")]
    assert f"SyntaxError: invalid syntax ({user_file}, line 4)" in lines[syntax]
    # the smoke suite's 3 add.Tensor cases and the final evaluation's 2 hidden ones
    assert "error (0/5 tests)" in lines[syntax]
    assert lines[syntax + 1].strip() == "return a +* b"
    caret = lines[syntax + 2]
    assert caret.strip() == "^" and caret.index("^") == lines[syntax + 1].index("*")
    assert "atenforge_sandbox" not in out and "job_" not in out
    (missing,) = [line for line in lines if line.startswith("[eval] mul.Tensor")]
    assert "ModuleNotFoundError: No module named 'not_a_module_xyz'" in missing
    assert "ModuleNotFoundError: ModuleNotFoundError" not in out


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import not_a_module_xyz", "ModuleNotFoundError: No module named 'not_a_module_xyz'"),
        (
            "def f(:\n    pass",
            "SyntaxError: invalid syntax (K.py, line 1)\n    def f(:\n          ^",
        ),
        ("if True:\nx = 1", "IndentationError: expected an indented block after 'if' statement"),
    ],
)
def test_load_error_reason_from_what_python_prints(source, expected):
    import traceback

    from evaluator.kernel_errors import load_error_reason

    try:
        exec(compile(source, "K.py", "exec"), {})
    except BaseException as exc:  # noqa: BLE001 - the harness formats any import failure
        printed = "".join(traceback.format_exception_only(type(exc), exc))
        reason = load_error_reason(type(exc).__name__, printed)
    assert reason.startswith(expected), reason
    assert reason.count(expected.split(":")[0] + ":") == 1


def _addmm_report():
    from evaluator.reports.report import Report
    from evaluator.results import OperatorResult, Status, TestResult

    args = "((T([512], f16), T([64, 256], f16), T([256, 512], f16)), {})"
    test = TestResult(args=args, passed=True, max_abs_error=1.0, max_rel_error=0.37)
    result = OperatorResult(
        op="addmm.default", folder="addmm__default", status=Status.PASSED, tests=1, passed=1,
        results=[test],
    )  # fmt: skip
    return Report(run={}, operators=[result], excluded=[], suite="smoke", device="cpu")


def test_a_passing_max_error_is_shown_beside_its_tolerance():
    import io

    from rich.console import Console

    from evaluator.reports.report import print_summary, render_markdown

    report = _addmm_report()
    wide = io.StringIO()
    print_summary(report, Console(file=wide, width=160))
    assert "1.00e+00 (f16: atol 0.001, rtol 0.002)" in wide.getvalue()
    narrow = io.StringIO()
    print_summary(report, Console(file=narrow, width=80))
    text = " ".join(narrow.getvalue().split())
    assert "within atol + rtol * |eager| (f16: atol 0.001, rtol 0.002)" in text
    assert "1.00e+00 (f16: atol 0.001, rtol 0.002)" in render_markdown(report)
    report.run = {"eval_config": {"correctness": {"tolerance_profile": "backendbench"}}}
    assert "1.00e+00 (f16: atol 0.01, rtol 0.01)" in render_markdown(report)


def test_console_line_of_a_pass_shows_the_cases_skipped_on_the_cpu():
    import io

    from rich.console import Console

    from agent.live import RunView
    from evaluator.results import OperatorResult, Status, TestResult

    ran = [TestResult(args=f"(({i},), {{}})", passed=True) for i in range(5)]
    big = [
        TestResult(args="big", passed=False, skipped=True, flags=["skipped_size:300000>262144"])
        for _ in range(5)
    ]
    result = OperatorResult(
        op="relu.default", folder="relu__default", status=Status.PASSED, tests=5, passed=5,
        skipped_tests=5, results=ran + big,
    )  # fmt: skip
    out = io.StringIO()
    RunView(Console(file=out, width=120), live=False).evaluated(result)
    assert out.getvalue().strip() == "[eval] relu.default: passed (5/5 tests, 5 skipped on CPU)"


def test_the_kept_worker_is_the_one_whose_sandbox_run_passed(tmp_path):
    import json

    from agent_fakes import MarkerJudge, QueueProvider, Scripted, answer, config, make_parts

    from agent.session import RunRequest, Session

    op = "relu.default"
    provider = QueueProvider()
    provider.enqueue(op, 1, answer(op, "pass"))
    for w in (2, 3):  # the same text, a moment later: they wait for worker 1's verdict
        provider.enqueue(op, w, Scripted(text=answer(op, "pass"), delay_s=0.1))
    parts = make_parts(provider, MarkerJudge(delay_s=0.5))
    cfg = config(tmp_path, num_workers=3, max_rounds=1)
    result = Session(RunRequest(cfg=cfg, mode="generate", argv=["--test"]), parts).run()
    decision = json.loads((result.run_dir / "ops/relu__default/decision.json").read_text())
    assert (decision["status"], decision["worker"]) == ("kept", 1)
    metas = {
        int(p.parent.parent.name.split("_")[1]): json.loads(p.read_text())
        for p in result.run_dir.glob("ops/relu__default/worker_*/round_1/meta.json")
    }
    assert metas[1]["outcome"] == "passed" and metas[1]["verdict_reused_from"] is None
    for w in (2, 3):
        assert metas[w]["outcome"] in ("passed_not_kept", "cancelled"), metas[w]
        assert metas[w]["outcome"] != "passed"


@pytest.mark.slow
def test_builtin_provider_runs_one_worker_per_operator_and_says_so_once(tmp_path):
    args = ["--generate-only", "--provider", "builtin", "--suite", "smoke", "--ops", "relu",
            "--num-workers", "4", "--log-dir", str(tmp_path / "logs"),
            "--kernels-dir", str(tmp_path / "kernels")]  # fmt: skip
    code, out = run_cli(args)
    assert code == 0, out
    assert out.count("workers: 1 per operator, not 4") == 1
    (run_dir,) = (tmp_path / "logs").iterdir()
    assert [p.name for p in (run_dir / "ops" / "relu__default").glob("worker_*")] == ["worker_1"]
    assert "kept" in out and (tmp_path / "kernels/relu__default").is_dir()
    # a provider with no server still leaves its answer and its model in the round folder
    round_1 = run_dir / "ops" / "relu__default" / "worker_1" / "round_1"
    assert "```python" in (round_1 / "response.md").read_text()
    assert json.loads((round_1 / "meta.json").read_text())["model"]


def _trace_with_unknown_ops(tmp_path: Path) -> Path:
    trace = tmp_path / "trace.txt"
    trace.write_text(
        "Operator: aten.frobnicate.default\ncnt: 1, ((T([64], f32),), {})\n"
        "Operator: aten.relu.Nope\ncnt: 1, ((T([64], f32),), {})\n"
    )
    return trace


def test_unknown_operators_in_a_trace_are_named_in_one_warning_when_evaluating(tmp_path):
    trace = _trace_with_unknown_ops(tmp_path)
    kernels = tmp_path / "kernels" / "zz__default"
    kernels.mkdir(parents=True)
    (kernels / "zz__default_implementation_v1.py").write_text(
        "def zz__default_kernel_impl(): pass\n"
    )
    args = ["--evaluate-only", "--kernels-dir", str(tmp_path / "kernels"), "--trace-file",
            str(trace), "--log-dir", str(tmp_path / "logs"), "-q"]  # fmt: skip
    code, out = run_cli(args)
    assert code == 0, out
    warnings = [line for line in out.splitlines() if line.startswith("warning:")]
    assert len(warnings) == 1, out
    assert "2 operator(s) are not ATen operators" in warnings[0]
    assert "frobnicate.default, relu.Nope" in warnings[0]
    (run_dir,) = (tmp_path / "logs").iterdir()
    assert "frobnicate.default, relu.Nope" in (run_dir / "OVERALL_SUMMARY.md").read_text()


def test_generation_reports_the_builtin_providers_own_reason_for_an_unknown_operator(tmp_path):
    trace = _trace_with_unknown_ops(tmp_path)
    args = ["--generate-only", "--provider", "builtin", "--trace-file", str(trace),
            "--log-dir", str(tmp_path / "logs"), "--kernels-dir", str(tmp_path / "k")]  # fmt: skip
    code, out = run_cli(args)
    assert code == 0, out
    assert "not ATen operators" in out
    assert "builtin provider has no writer for frobnicate.default" in out
    assert "no code block" not in out


def _generate_then_evaluate_only(tmp_path: Path) -> tuple[Path, Path]:
    """A generation run for relu.default, then a newer evaluate-only run of the same kernels."""
    from agent_fakes import QueueProvider, answer, make_parts, marker_evaluate

    op = "relu.default"
    provider = QueueProvider().enqueue(op, 1, answer(op, "fail"), answer(op, "pass"))
    common = [
        "--ops",
        op,
        "--log-dir",
        str(tmp_path / "logs"),
        "--kernels-dir",
        str(tmp_path / "k"),
    ]
    assert run_cli(["--generate-only", "--num-workers", "1", *common], make_parts(provider))[0] == 0
    parts = make_parts(QueueProvider(), evaluate=marker_evaluate)
    assert run_cli(["--evaluate-only", *common], parts)[0] == 0
    from agent.logs import run_dirs

    evaluated, generated = run_dirs(tmp_path / "logs")
    return generated, evaluated


def logs(args: list[str]) -> tuple[int, str]:
    import io

    from rich.console import Console

    from agent.logs import main as logs_main

    out = io.StringIO()
    code = logs_main(args, console=Console(file=out, width=160))
    return code, out.getvalue()


def test_logs_latest_op_finds_the_newest_run_with_rounds_past_an_evaluate_only_run(tmp_path):
    generated, evaluated = _generate_then_evaluate_only(tmp_path)
    code, out = logs(["latest", "--log-dir", str(tmp_path / "logs")])
    assert code == 0 and evaluated.name in out
    assert "not started" not in out and "evaluate-only" in out
    assert "relu.default" in out and "passed" in out
    code, out = logs(["latest", "--op", "relu.default", "--log-dir", str(tmp_path / "logs")])
    assert code == 0, out
    assert "worker 1 round 1: failed" in out and "worker 1 round 2: passed" in out
    # The evaluate-only run itself shows the operator's evaluation instead of an error.
    code, out = logs([str(evaluated), "--op", "relu"])
    assert code == 0 and "evaluated, no rounds in this run" in out and "verdict: passed" in out


def test_logs_piped_output_is_not_cut_to_80_columns(tmp_path):
    generated, _ = _generate_then_evaluate_only(tmp_path)
    proc = subprocess.run(
        [sys.executable, "-m", "agent.logs", "--log-dir", str(tmp_path / "logs")],
        capture_output=True, text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    row = [line for line in proc.stdout.splitlines() if f" {generated.name} " in line]
    assert len(row) == 1 and "completed" in row[0] and "1/1" in row[0], proc.stdout
    assert max(len(line) for line in proc.stdout.splitlines()) > 80
