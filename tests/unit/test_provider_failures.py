"""Calls that get no answer: not rounds, a run that stops calling the provider (exit code 3) and a
`--resume` that finishes the run; attempts and unpriced costs as recorded."""

from __future__ import annotations

import io
import json
from pathlib import Path

from agent_fakes import MarkerJudge, QueueProvider, Scripted, answer, make_parts, marker_evaluate
from rich.console import Console

from agent.run import EXIT_PROVIDER, main
from evaluator.reports.runfolder import read_events

OPS = ["relu.default", "add.Tensor"]


def argv(tmp: Path, *extra: str) -> list[str]:
    return [
        "--ops", ",".join(OPS), "--num-workers", "1", "--max-rounds", "2", "--parallel-ops", "1",
        "--kernels-dir", str(tmp / "kernels"), "--log-dir", str(tmp / "logs"), "--device", "cpu",
        "--quiet", *extra,
    ]  # fmt: skip


def cli(args: list[str], provider: QueueProvider) -> tuple[int, str]:
    out = io.StringIO()
    parts = make_parts(provider, MarkerJudge(), evaluate=marker_evaluate)
    code = main(args, parts=parts, console=Console(file=out, width=200))
    return code, out.getvalue()


def run_dir(tmp: Path) -> Path:
    (only,) = (tmp / "logs").iterdir()
    return only


def test_calls_without_answers_stop_the_run_with_exit_3_and_resume_finishes_it(
    tmp_path: Path, capsys
):
    down = QueueProvider()
    down.enqueue("relu.default", 1, *[Scripted(error="openai: cannot connect") for _ in range(3)])
    code, console = cli(argv(tmp_path), down)
    err = capsys.readouterr().err
    folder = run_dir(tmp_path)

    assert code == EXIT_PROVIDER == 3
    assert len(down.calls) == 3  # 3 in a row (the default limit), then no more calls
    assert all(op == "relu.default" for op, _, _ in down.calls)  # add.Tensor was never asked
    assert "error: stopped calling the provider: 3 provider calls in a row failed" in err
    assert f"resume with: python -m agent.run --resume {folder}" in err
    run = json.loads((folder / "run.json").read_text())
    assert "openai: cannot connect" in run["provider_stop"]
    assert run["outcomes"] == {"relu.default": "provider_stopped", "add.Tensor": "provider_stopped"}
    assert [e["event"] for e in read_events(folder)].count("provider_stop") == 1
    assert (folder / "full_results.json").is_file()  # the reports are written all the same
    assert not list(folder.glob("ops/*/decision.json"))  # nothing was decided
    worker = folder / "ops/relu__default/worker_1"
    assert sorted(p.name for p in worker.iterdir()) == [
        "round_1",
        "round_1.failed1",
        "round_1.failed2",
    ]

    up = QueueProvider()
    up.enqueue("relu.default", 1, answer("relu.default", "pass"))
    up.enqueue("add.Tensor", 1, answer("add.Tensor", "fail"), answer("add.Tensor", "pass"))
    code, _ = cli(["--resume", str(folder), "--quiet"], up)
    assert code == 0
    assert up.calls == [("relu.default", 1, 1), ("add.Tensor", 1, 1), ("add.Tensor", 1, 2)]
    decisions = {
        p.parent.name: json.loads(p.read_text()) for p in folder.glob("ops/*/decision.json")
    }
    assert {k: d["status"] for k, d in decisions.items()} == {
        "relu__default": "kept",
        "add__Tensor": "kept",
    }
    # The failed calls did not use a round: relu passed in round 1 of max 2, add in round 2.
    assert (decisions["relu__default"]["round"], decisions["add__Tensor"]["round"]) == (1, 2)
    assert json.loads((folder / "run.json").read_text())["provider_stop"] is None


def test_a_failed_call_records_every_attempt_it_made(tmp_path: Path):
    provider = QueueProvider()
    provider.enqueue(
        "relu.default", 1, Scripted(error="HTTP 503 (gave up after 5 attempts)", attempts=5)
    )
    provider.enqueue("relu.default", 1, answer("relu.default", "pass"))
    provider.enqueue("add.Tensor", 1, answer("add.Tensor", "pass"))
    code, _ = cli(argv(tmp_path), provider)
    assert code == 0
    failed = run_dir(tmp_path) / "ops/relu__default/worker_1/round_1.failed1/meta.json"
    meta = json.loads(failed.read_text())
    assert (meta["outcome"], meta["attempts"]) == ("provider_error", 5)


def test_an_old_not_kept_decision_made_only_of_failed_calls_is_redone_on_resume(tmp_path: Path):
    first = QueueProvider()
    for op in OPS:
        first.enqueue(op, 1, answer(op, "fail"), answer(op, "fail"))
    assert cli(argv(tmp_path), first)[0] == 0
    folder = run_dir(tmp_path)
    # Rewrite relu's rounds as an older version recorded an outage: every round a failed call.
    for meta_file in folder.glob("ops/relu__default/worker_1/round_*/meta.json"):
        meta = json.loads(meta_file.read_text())
        meta.update(outcome="provider_error", error="openai: cannot connect", tokens=0)
        meta_file.write_text(json.dumps(meta))
    second = QueueProvider()
    second.enqueue("relu.default", 1, answer("relu.default", "pass"))
    assert cli(["--resume", str(folder), "--quiet"], second)[0] == 0
    assert second.calls == [("relu.default", 1, 1)]  # add.Tensor's real verdicts stand
    decision = json.loads((folder / "ops/relu__default/decision.json").read_text())
    assert decision["status"] == "kept"


def test_an_unpriced_model_shows_its_cost_as_unpriced_not_zero(tmp_path: Path):
    provider = QueueProvider()  # "fake-model" has no price
    for op in OPS:
        provider.enqueue(op, 1, answer(op, "pass"))
    code, console = cli(argv(tmp_path), provider)
    assert code == 0
    decision = json.loads((run_dir(tmp_path) / "ops/relu__default/decision.json").read_text())
    assert decision["cost_usd"] is None and decision["cost"] == "unpriced"
    assert "estimated cost unpriced" in console and "$0.0000" not in console


def test_a_replayed_round_that_was_never_recorded_is_a_round_not_an_outage(tmp_path: Path):
    from agent_fakes import write_replay

    from agent.providers.replay import ReplayProvider

    # Worker 1 of relu was never recorded in round 1 (say, cancelled); asking again cannot help.
    script = {
        ("relu.default", 1, 2): answer("relu.default", "pass"),
        ("add.Tensor", 1, 1): answer("add.Tensor", "pass"),
    }
    replay = ReplayProvider(write_replay(tmp_path / "recorded", script))
    out = io.StringIO()
    parts = make_parts(replay, MarkerJudge(), evaluate=marker_evaluate)
    code = main(argv(tmp_path), parts=parts, console=Console(file=out, width=200))
    assert code == 0
    folder = run_dir(tmp_path)
    relu = json.loads((folder / "ops/relu__default/decision.json").read_text())
    assert (relu["status"], relu["round"]) == ("kept", 2)
    first = json.loads((folder / "ops/relu__default/worker_1/round_1/meta.json").read_text())
    assert first["outcome"] == "provider_error" and "no recorded response" in first["error"]
    assert json.loads((folder / "run.json").read_text())["provider_stop"] is None


def test_a_worker_whose_own_calls_keep_failing_stops_while_the_run_goes_on(tmp_path: Path, capsys):
    op = "relu.default"
    provider = QueueProvider()
    # Worker 1's conversation is refused every time (0.2 s apart); worker 2 gets answers in
    # between (every 0.13 s), so the run never sees 3 failures in a row.
    refused = Scripted(error="openai HTTP 400 (bad request): invalid content", delay_s=0.2)
    provider.enqueue(op, 1, *[refused for _ in range(5)])
    provider.enqueue(op, 2, *[Scripted(answer(op, "fail"), delay_s=0.13) for _ in range(5)])
    args = argv(tmp_path, "--generate-only")
    args[args.index("--ops") + 1] = op
    args[args.index("--num-workers") + 1] = "2"
    args[args.index("--max-rounds") + 1] = "5"
    code, _ = cli(args, provider)
    err = capsys.readouterr().err
    folder = run_dir(tmp_path)
    assert sum(1 for call in provider.calls if call[1] == 1) == 3  # then worker 1 stopped
    assert sum(1 for call in provider.calls if call[1] == 2) == 5  # worker 2 used its rounds
    run = json.loads((folder / "run.json").read_text())
    assert run["provider_stop"] is None  # the run itself never stopped calling
    assert run["outcomes"] == {op: "provider_stopped"}  # undecided: resume retries worker 1
    assert not (folder / "ops/relu__default/decision.json").exists()
    assert code == EXIT_PROVIDER
    assert "stopped calling the provider: relu.default: provider: 3 calls in a row failed" in err
    assert "invalid content" in err
