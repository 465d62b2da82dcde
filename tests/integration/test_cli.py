"""`python -m agent.run`: flags, exit codes, and one-line usage errors without a traceback."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import pytest
from agent_fakes import QueueProvider, answer, make_parts
from rich.console import Console

from agent.run import build_parser, main, make_request

ROOT = Path(__file__).resolve().parents[2]
ISSUE_FLAGS = [
    "--generate-only", "--evaluate-only", "--suite", "--ops", "--num-operators", "--trace-file",
    "--kernels-dir", "--provider", "--model", "--config", "--num-workers", "--max-rounds",
    "--parallel-ops", "--log-dir", "--device", "--resume", "--seed", "--quiet", "-v",
]  # fmt: skip


def run_cli(args: list[str], parts=None) -> tuple[int, str]:
    out = io.StringIO()
    code = main(args, parts=parts, console=Console(file=out, width=120))
    return code, out.getvalue()


def assert_one_line_error(stderr: str, *needles: str) -> None:
    lines = stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), stderr
    assert "Traceback" not in stderr
    for needle in needles:
        assert needle in lines[0]


def test_generate_only_with_evaluate_only_is_a_one_line_usage_error(capsys):
    assert run_cli(["--generate-only", "--evaluate-only"])[0] == 2
    assert_one_line_error(capsys.readouterr().err, "--evaluate-only")


def test_unknown_flag_is_a_one_line_usage_error(capsys):
    assert run_cli(["--num-wokers", "3"])[0] == 2
    assert_one_line_error(capsys.readouterr().err, "--num-wokers")


def test_missing_kernels_dir_for_evaluate_only_exits_2_and_creates_no_run_folder(tmp_path, capsys):
    args = [
        "--evaluate-only",
        "--kernels-dir",
        str(tmp_path / "nope"),
        "--log-dir",
        str(tmp_path / "logs"),
    ]
    assert run_cli(args)[0] == 2  # the real parts, wired as in production
    assert_one_line_error(capsys.readouterr().err, "does not exist", "--kernels-dir")
    assert not (tmp_path / "logs").exists() or not any((tmp_path / "logs").iterdir())


def test_empty_kernels_dir_for_evaluate_only_exits_2(tmp_path, capsys):
    (tmp_path / "kernels").mkdir()
    args = [
        "--evaluate-only",
        "--kernels-dir",
        str(tmp_path / "kernels"),
        "--log-dir",
        str(tmp_path / "logs"),
    ]
    assert run_cli(args, make_parts(QueueProvider()))[0] == 2
    assert_one_line_error(capsys.readouterr().err, "holds no kernels")


def test_bad_config_value_exits_2_naming_the_key(capsys):
    assert run_cli(["--num-workers", "0"])[0] == 2
    assert_one_line_error(capsys.readouterr().err, "agent.num_workers")


def test_missing_config_file_exits_2(tmp_path, capsys):
    assert run_cli(["--config", str(tmp_path / "none.toml")])[0] == 2
    assert_one_line_error(capsys.readouterr().err, "--config")


def test_resume_with_a_selection_flag_exits_2(tmp_path, capsys):
    assert run_cli(["--resume", str(tmp_path), "--ops", "relu"])[0] == 2
    assert_one_line_error(capsys.readouterr().err, "drop --ops")


def test_resume_of_a_folder_without_config_exits_2(tmp_path, capsys):
    assert run_cli(["--resume", str(tmp_path)])[0] == 2
    assert_one_line_error(capsys.readouterr().err, "config.json")


def test_debug_flag_shows_the_traceback_of_a_usage_error(capsys):
    assert run_cli(["--num-workers", "0", "-v"])[0] == 2
    err = capsys.readouterr().err
    assert "Traceback" in err and err.strip().splitlines()[-1].startswith("error: ")


def test_internal_failure_exits_1_with_one_line(tmp_path, capsys):
    def broken_judge(*args, **kwargs):
        raise RuntimeError("judge exploded")

    provider = QueueProvider().enqueue("relu.default", 1, answer("relu.default", "pass"))
    args = ["--generate-only", "--ops", "relu.default", "--num-workers", "1", "--log-dir", str(tmp_path / "logs"),
            "--kernels-dir", str(tmp_path / "k")]  # fmt: skip
    assert run_cli(args, make_parts(provider, broken_judge))[0] == 1
    assert_one_line_error(
        capsys.readouterr().err, "internal error: RuntimeError: judge exploded", "-v"
    )


def test_completed_run_exits_0_and_prints_the_final_table(tmp_path):
    provider = QueueProvider().enqueue("relu.default", 1, answer("relu.default", "pass"))
    args = ["--generate-only", "--ops", "relu.default", "--num-workers", "1", "--log-dir", str(tmp_path / "logs"),
            "--kernels-dir", str(tmp_path / "k")]  # fmt: skip
    code, out = run_cli(args, make_parts(provider))
    assert code == 0
    assert "relu.default" in out and "kept" in out and "run folder:" in out


def test_help_explains_every_flag_of_the_issue():
    parser = build_parser()
    text = parser.format_help()
    for flag in ISSUE_FLAGS:
        assert flag in text, flag
    assert all(a.help for a in parser._actions)


def test_flags_override_config_fields():
    _, req = make_request(
        [
            "--ops",
            "add.Tensor,relu",
            "--num-workers",
            "3",
            "--provider",
            "builtin",
            "--seed",
            "7",
            "--max-tokens",
            "1000",
            "--generate-only",
        ]  # fmt: skip
    )
    cfg = req.cfg
    assert cfg.suite.ops == ["add.Tensor", "relu"]
    assert (cfg.agent.num_workers, cfg.provider.name, cfg.seed, cfg.agent.max_tokens) == (
        3,
        "builtin",
        7,
        1000,
    )
    assert cfg.eval.correctness.seed == 7
    assert req.mode == "generate"


def test_module_entry_point_gives_exit_2_and_one_line_in_a_fresh_process():
    proc = subprocess.run(
        [sys.executable, "-m", "agent.run", "--generate-only", "--evaluate-only"],
        cwd=ROOT, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 2
    assert_one_line_error(proc.stderr)


@pytest.mark.parametrize("flag", ["--help"])
def test_help_exits_0(flag):
    proc = subprocess.run(
        [sys.executable, "-m", "agent.run", flag],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0 and "--evaluate-only" in proc.stdout


def _recorded_run(tmp_path: Path) -> Path:
    provider = QueueProvider().enqueue(
        "relu.default", 1, answer("relu.default", "fail"), answer("relu.default", "pass")
    )
    args = ["--generate-only", "--ops", "relu.default", "--num-workers", "1", "--log-dir", str(tmp_path / "logs"),
            "--kernels-dir", str(tmp_path / "k")]  # fmt: skip
    assert run_cli(args, make_parts(provider))[0] == 0
    (run_dir,) = (tmp_path / "logs").iterdir()
    return run_dir


def logs(args: list[str]) -> tuple[int, str]:
    from agent.logs import main as logs_main

    out = io.StringIO()
    code = logs_main(args, console=Console(file=out, width=160))
    return code, out.getvalue()


def test_logs_lists_runs_with_status_and_kept_count(tmp_path):
    run_dir = _recorded_run(tmp_path)
    code, out = logs(["--log-dir", str(tmp_path / "logs")])
    assert code == 0 and run_dir.name in out and "completed" in out and "1/1" in out


def test_logs_shows_a_run_summary_with_each_operator(tmp_path):
    _recorded_run(tmp_path)
    code, out = logs(["latest", "--log-dir", str(tmp_path / "logs")])
    assert code == 0 and "relu.default" in out and "kept" in out and "w1 r2" in out


def test_logs_shows_an_operators_rounds_with_prompt_response_and_verdict(tmp_path):
    run_dir = _recorded_run(tmp_path)
    code, out = logs([str(run_dir), "--op", "relu.default"])
    assert code == 0
    assert "worker 1 round 1: failed" in out and "worker 1 round 2: passed" in out
    for part in ("prompt (last message):", "response:", "verdict:"):
        assert part in out


def test_logs_unknown_run_exits_2_with_one_line(tmp_path, capsys):
    assert logs(["nope", "--log-dir", str(tmp_path)])[0] == 2
    assert_one_line_error(capsys.readouterr().err, "not found")


CORPUS = ROOT / "tests" / "fixtures" / "kernels" / "corpus"


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--suite", "nosuch"], "unknown suite"),
        (["--suite", "smoke", "--ops", "addd"], "addd"),
        (["--trace-file", "MALFORMED"], "no valid operators"),
        (["--trace-file", "MISSING"], "does not exist"),
    ],
)
def test_bad_suite_op_or_trace_exits_2_with_one_line(tmp_path, capsys, extra, needle):
    bad = tmp_path / "bad_trace.txt"
    bad.write_text("Operator: aten.add.Tensor\ncnt: x, ((T([2], f32),), {})\n")
    extra = [
        str(bad) if a == "MALFORMED" else str(tmp_path / "none.txt") if a == "MISSING" else a
        for a in extra
    ]
    args = [
        "--evaluate-only",
        "--kernels-dir",
        str(CORPUS),
        "--log-dir",
        str(tmp_path / "logs"),
        *extra,
    ]
    assert run_cli(args)[0] == 2
    assert_one_line_error(capsys.readouterr().err, needle)


def test_speed_rounds_flag_sets_the_config_and_a_negative_count_is_a_usage_error(capsys):
    _, request = make_request(["--speed-rounds", "2", "--ops", "relu"])
    assert request.cfg.agent.speed_rounds == 2
    _, request = make_request(["--ops", "relu"])
    assert request.cfg.agent.speed_rounds == "auto"
    assert run_cli(["--speed-rounds", "-1"])[0] == 2
    assert_one_line_error(capsys.readouterr().err, "agent.speed_rounds")
