"""--resume: an interrupted run, resumed, ends with the same kept kernels and scores as one that was not."""

from __future__ import annotations

import io
import json
from pathlib import Path

from agent_fakes import MarkerJudge, Recording, answer, make_parts, marker_evaluate, write_replay
from rich.console import Console

from agent.providers.replay import ReplayProvider
from agent.run import main
from evaluator.reports.runfolder import read_events

OPS = ["relu.default", "add.Tensor"]


def script() -> dict[tuple[str, int, int], str]:
    """relu: only worker 2 passes (round 1). add: only worker 1 passes (round 2)."""
    s = {}
    for r in (1, 2, 3):
        s[("relu.default", 1, r)] = answer("relu.default", "fail", f"relu w1 r{r}")
        s[("add.Tensor", 2, r)] = answer("add.Tensor", "fail", f"add w2 r{r}")
    s[("relu.default", 2, 1)] = answer("relu.default", "pass", "relu w2 r1")
    s[("add.Tensor", 1, 1)] = answer("add.Tensor", "fail", "add w1 r1")
    s[("add.Tensor", 1, 2)] = answer("add.Tensor", "pass", "add w1 r2")
    return s


def argv(tmp: Path, name: str) -> list[str]:
    return [
        "--ops", ",".join(OPS), "--num-workers", "2", "--max-rounds", "3", "--parallel-ops", "1",
        "--kernels-dir", str(tmp / name / "kernels"), "--log-dir", str(tmp / name / "logs"),
        "--device", "cpu", "--quiet",
    ]  # fmt: skip


def cli(args: list[str], provider) -> int:
    parts = make_parts(provider, MarkerJudge(delay_s=0.05), evaluate=marker_evaluate)
    return main(args, parts=parts, console=Console(file=io.StringIO(), width=120))


def kernels(tmp: Path, name: str) -> dict[str, str]:
    root = tmp / name / "kernels"
    return {p.relative_to(root).as_posix(): p.read_text() for p in sorted(root.rglob("*.py"))}


def only_run_dir(tmp: Path, name: str) -> Path:
    (run_dir,) = (tmp / name / "logs").iterdir()
    return run_dir


def interrupted_then_resumed(tmp: Path, capsys) -> tuple[Path, Recording, int, str]:
    replay = ReplayProvider(write_replay(tmp / "recorded", script()))
    first = Recording(replay, interrupt_at=("add.Tensor", 1, 2))
    code = cli(argv(tmp, "b"), first)
    stderr = capsys.readouterr().err
    run_dir = only_run_dir(tmp, "b")
    second = Recording(replay)
    assert cli(["--resume", str(run_dir), "--quiet"], second) == 0
    return run_dir, second, code, stderr


def test_interrupted_and_resumed_run_keeps_the_same_kernels_and_scores(tmp_path: Path, capsys):
    replay = ReplayProvider(write_replay(tmp_path / "recorded", script()))
    assert cli(argv(tmp_path, "a"), Recording(replay)) == 0
    run_b, _, code, _ = interrupted_then_resumed(tmp_path, capsys)
    assert code == 130
    assert kernels(tmp_path, "b") == kernels(tmp_path, "a")
    assert len(kernels(tmp_path, "a")) == 2
    scores_a = json.loads((only_run_dir(tmp_path, "a") / "atenforge_results.json").read_text())["scores"]
    scores_b = json.loads((run_b / "atenforge_results.json").read_text())["scores"]
    assert scores_a == scores_b and scores_a["correctness_score"] == 1.0


def test_interrupt_exits_130_and_prints_the_resume_command(tmp_path: Path, capsys):
    replay = ReplayProvider(write_replay(tmp_path / "recorded", script()))
    code = cli(argv(tmp_path, "b"), Recording(replay, interrupt_at=("add.Tensor", 1, 2)))
    run_dir = only_run_dir(tmp_path, "b")
    assert code == 130
    assert (
        f"Interrupted. Resume with: python -m agent.run --resume {run_dir}"
        in capsys.readouterr().err
    )
    assert json.loads((run_dir / "run.json").read_text())["status"] == "interrupted"
    assert "interrupted" in [e["event"] for e in read_events(run_dir)]


def test_resume_keeps_decided_operators_and_continues_workers_after_their_last_round(
    tmp_path: Path, capsys
):
    run_dir, second, _, _ = interrupted_then_resumed(tmp_path, capsys)
    assert not any(
        op == "relu.default" for op, _, _ in second.calls
    )  # decided before the interrupt
    assert ("add.Tensor", 1, 1) not in second.calls  # round 1 had finished: not asked again
    assert ("add.Tensor", 1, 2) in second.calls
    events = read_events(run_dir)
    assert {"event": "op_decided_earlier", "op": "relu.default"}.items() <= next(
        e for e in events if e["event"] == "op_decided_earlier"
    ).items()
    run = json.loads((run_dir / "run.json").read_text())
    assert run["status"] == "completed" and len(run["resumes"]) == 1
