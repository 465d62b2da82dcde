"""The agent loop with a queue provider and a marker judge: who wins, who stops, what is written."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from agent_fakes import (
    MarkerJudge,
    QueueProvider,
    Scripted,
    answer,
    atenforge_threads,
    config,
    make_parts,
)

from agent.session import RunRequest, Session
from evaluator.naming import find_kernel_file, kernel_path
from evaluator.reports.runfolder import read_events

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"

ROUND_FILES = {
    "messages.json",
    "response.md",
    "candidate.py",
    "verdict.json",
    "feedback.md",
    "meta.json",
}
META_KEYS = {"model", "input_tokens", "output_tokens", "latency_s", "attempts", "cost_usd", "error"}


def run(cfg, parts, mode="generate", resume_dir=None):
    return Session(
        RunRequest(cfg=cfg, mode=mode, argv=["--test"], resume_dir=resume_dir), parts
    ).run()


def wait_threads_gone(timeout_s: float = 3.0) -> list:
    deadline = time.monotonic() + timeout_s
    while atenforge_threads() and time.monotonic() < deadline:
        time.sleep(0.05)
    return atenforge_threads()


def test_worker_2_passing_in_round_1_ends_the_op_before_worker_1_needs_3_rounds(tmp_path: Path):
    op = "relu.default"
    provider = QueueProvider()
    provider.enqueue(
        op, 1, answer(op, "fail", "w1r1"), answer(op, "fail", "w1r2"), answer(op, "pass", "w1r3")
    )
    provider.enqueue(op, 2, answer(op, "pass", "w2r1"))
    # Every verdict takes 0.3 s, so worker 1 is in round 2 at the latest when worker 2 wins.
    result = run(config(tmp_path, max_rounds=3), make_parts(provider, MarkerJudge(delay_s=0.3)))

    decision = json.loads((result.run_dir / "ops/relu__default/decision.json").read_text())
    assert (decision["status"], decision["worker"], decision["round"]) == ("kept", 2, 1)
    assert "w2r1" in kernel_path(tmp_path / "kernels", op).read_text()
    assert (op, 1, 3) not in provider.calls
    assert not (result.run_dir / "ops/relu__default/worker_1/round_3").exists()
    assert wait_threads_gone() == []


def test_losing_worker_s_unfinished_round_is_marked_cancelled(tmp_path: Path):
    op = "relu.default"
    provider = QueueProvider()
    provider.enqueue(
        op, 1, answer(op, "fail", "r1"), answer(op, "fail", "r2"), answer(op, "pass", "r3")
    )
    # Worker 2 wins at ~0.75 s, while worker 1's round 2 is being judged (0.5 s to 1.0 s).
    provider.enqueue(op, 2, Scripted(text=answer(op, "pass"), delay_s=0.25))
    result = run(config(tmp_path), make_parts(provider, MarkerJudge(delay_s=0.5)))
    metas = {
        p.parent.name: json.loads(p.read_text())
        for p in (result.run_dir / "ops/relu__default/worker_1").glob("round_*/meta.json")
    }
    assert metas["round_1"]["outcome"] == "failed"
    assert metas["round_2"]["outcome"] == "cancelled"
    assert "round_3" not in metas


def test_abandoned_provider_call_does_not_delay_the_operator(tmp_path: Path):
    op = "relu.default"
    provider = QueueProvider()
    provider.enqueue(op, 1, Scripted(text=answer(op, "fail"), delay_s=2.5))
    provider.enqueue(op, 2, answer(op, "pass"))
    started = time.monotonic()
    result = run(config(tmp_path), make_parts(provider))
    # The op is decided as soon as worker 2 passes; the run then waits at most ~2 s in all for
    # the abandoned call before leaving it to die with the process (it is a daemon thread).
    assert result.outcomes[0].status == "kept"
    meta = json.loads((result.run_dir / "ops/relu__default/worker_1/round_1/meta.json").read_text())
    assert meta["outcome"] == "cancelled"
    assert time.monotonic() - started < 2.4
    assert wait_threads_gone(timeout_s=3.0) == []


def test_identical_candidates_of_an_operator_share_one_sandbox_verdict(tmp_path: Path):
    op = "relu.default"
    provider = QueueProvider()
    for w in (1, 2, 3):
        provider.enqueue(op, w, answer(op, "fail"), answer(op, "pass", "fixed"))
    judge = MarkerJudge(delay_s=0.2)
    result = run(config(tmp_path, num_workers=3, max_rounds=2), make_parts(provider, judge))
    assert result.outcomes[0].status == "kept"
    assert judge.calls == [(op, "fail"), (op, "pass")]  # one sandbox run per distinct file
    metas = [
        json.loads(p.read_text()) for p in result.run_dir.glob("ops/*/worker_*/round_1/meta.json")
    ]
    assert sorted(m["verdict_reused_from"] is None for m in metas) == [False, False, True]
    assert all(m["outcome"] == "failed" for m in metas)


def test_every_finished_round_has_all_its_files(tmp_path: Path):
    op = "add.Tensor"
    provider = QueueProvider()
    provider.enqueue(op, 1, answer(op, "fail"), answer(op, "pass"))
    result = run(config(tmp_path, [op], num_workers=1), make_parts(provider))
    for r in (1, 2):
        rdir = result.run_dir / f"ops/add__Tensor/worker_1/round_{r}"
        assert ROUND_FILES <= {p.name for p in rdir.iterdir()}
        meta = json.loads((rdir / "meta.json").read_text())
        assert META_KEYS <= set(meta)
        assert (meta["input_tokens"], meta["output_tokens"]) == (100, 50)
    for name in ("run.json", "config.json", "events.jsonl"):
        assert (result.run_dir / name).is_file()


def test_refine_prompt_carries_previous_candidate_and_feedback(tmp_path: Path):
    op = "add.Tensor"
    provider = QueueProvider()
    provider.enqueue(op, 1, answer(op, "fail", "first try"), answer(op, "pass"))
    run(config(tmp_path, [op], num_workers=1), make_parts(provider))
    msgs = provider.messages[(op, 1, 2)]
    assert [m.role for m in msgs] == ["system", "user", "assistant", "user"]
    assert "first try" in msgs[2].content and "first try" in msgs[3].content
    assert "wrong_values" in msgs[3].content


def test_answer_without_code_is_a_failed_round_whose_reason_goes_back(tmp_path: Path):
    op = "relu.default"
    provider = QueueProvider()
    provider.enqueue(op, 1, "I cannot write this kernel.", answer(op, "pass"))
    result = run(config(tmp_path, num_workers=1), make_parts(provider))
    meta = json.loads((result.run_dir / "ops/relu__default/worker_1/round_1/meta.json").read_text())
    assert meta["outcome"] == "no_code"
    assert "no code block" in meta["error"]
    assert "no code block" in provider.messages[(op, 1, 2)][-1].content
    assert result.outcomes[0].status == "kept"


def test_failed_call_is_recorded_with_its_reason_but_is_not_a_round(tmp_path: Path):
    op = "relu.default"
    provider = QueueProvider()
    provider.enqueue(op, 1, Scripted(error="HTTP 503 after 5 attempts"), answer(op, "pass"))
    result = run(config(tmp_path, num_workers=1, max_rounds=1), make_parts(provider))
    worker = result.run_dir / "ops/relu__default/worker_1"
    failed = json.loads((worker / "round_1.failed1/meta.json").read_text())
    assert (failed["outcome"], failed["error"]) == ("provider_error", "HTTP 503 after 5 attempts")
    # The one allowed round was not used up by the failed call: it was asked again, and passed.
    assert provider.calls == [(op, 1, 1), (op, 1, 1)]
    assert json.loads((worker / "round_1/meta.json").read_text())["outcome"] == "passed"
    assert result.outcomes[0].status == "kept" and result.outcomes[0].rounds == 1


def test_operator_whose_rounds_all_fail_is_decided_not_kept(tmp_path: Path):
    op = "relu.default"
    provider = QueueProvider()
    provider.enqueue(op, 1, answer(op, "fail"), answer(op, "fail"))
    result = run(config(tmp_path, num_workers=1, max_rounds=2), make_parts(provider))
    decision = json.loads((result.run_dir / "ops/relu__default/decision.json").read_text())
    assert decision["status"] == "not_kept" and decision["rounds"] == 2
    assert not kernel_path(tmp_path / "kernels", op).exists()


def test_skipped_verdict_stops_the_operator_after_one_round(tmp_path: Path):
    op = "relu.default"
    provider = QueueProvider()
    provider.enqueue(op, 1, answer(op, "skip"), answer(op, "pass"))
    result = run(config(tmp_path, num_workers=1), make_parts(provider))
    assert provider.calls == [(op, 1, 1)]
    assert result.outcomes[0].status == "not_kept"
    assert "untestable" in result.outcomes[0].reason


def test_earlier_kernel_is_archived_before_the_winner_replaces_it(tmp_path: Path):
    op = "relu.default"
    old = kernel_path(tmp_path / "kernels", op)
    old.parent.mkdir(parents=True)
    old.write_text("# an earlier kept kernel\n")
    provider = QueueProvider().enqueue(op, 1, answer(op, "pass"))
    result = run(config(tmp_path, num_workers=1), make_parts(provider))
    archived = result.run_dir / "archive/relu__default" / old.name
    assert archived.read_text() == "# an earlier kept kernel\n"
    assert "VERDICT: pass" in old.read_text()


def test_a_file_that_would_shadow_the_winner_is_moved_to_the_archive(tmp_path: Path):
    op = "relu.default"
    folder = tmp_path / "kernels" / "relu__default"
    folder.mkdir(parents=True)
    (folder / "relu__default_implementation.py").write_text("# sorts before _v1\n")
    (folder / "relu__default_implementation_v2.py").write_text("# sorts after _v1\n")
    provider = QueueProvider().enqueue(op, 1, answer(op, "pass"))
    result = run(config(tmp_path, num_workers=1), make_parts(provider))
    assert find_kernel_file(tmp_path / "kernels", op) == kernel_path(tmp_path / "kernels", op)
    archive = result.run_dir / "archive/relu__default"
    assert (archive / "relu__default_implementation.py").read_text() == "# sorts before _v1\n"
    assert (folder / "relu__default_implementation_v2.py").exists()  # not in the way: kept


def test_events_trace_each_operator_and_round(tmp_path: Path):
    provider = QueueProvider()
    for op in ("relu.default", "add.Tensor"):
        provider.enqueue(op, 1, answer(op, "pass"))
    cfg = config(tmp_path, ["relu.default", "add.Tensor"], num_workers=1, parallel_ops=2)
    result = run(cfg, make_parts(provider))
    kinds = [e["event"] for e in read_events(result.run_dir)]
    assert kinds[0] == "run_start" and kinds[-1] == "run_end"
    for kind in ("op_start", "round_start", "round_end", "op_done"):
        assert kinds.count(kind) == 2
    assert [o.status for o in result.outcomes] == ["kept", "kept"]


def test_run_json_records_command_config_environment_and_end(tmp_path: Path):
    op = "relu.default"
    provider = QueueProvider().enqueue(op, 1, answer(op, "pass"))
    result = run(config(tmp_path, num_workers=1), make_parts(provider))
    data = json.loads((result.run_dir / "run.json").read_text())
    assert data["command"].startswith("python -m agent.run")
    assert data["config"]["agent"]["num_workers"] == 1
    assert data["environment"]["gpu"] == "cpu-interpreter"
    assert data["status"] == "completed" and data["ended_at"]
    assert json.loads((result.run_dir / "config.json").read_text()) == data["config"]


@pytest.mark.slow
def test_recorded_replay_fixture_with_the_real_judge_keeps_worker_2s_round_1_kernels(
    tmp_path: Path,
):
    """The fixture's scenario holds under the real sandbox: worker 1's round-1 kernels are wrong,
    worker 2's are right, so worker 2 wins both operators in round 1."""
    from agent.extract import extract_candidate
    from agent.providers.replay import ReplayProvider
    from agent.session import Parts

    recorded = FIXTURES / "replay_run"
    ops = ["relu.default", "add.Tensor"]
    # One operator at a time: its two workers then never wait for a sandbox slot (num_parallel 2).
    cfg = config(tmp_path, ops, num_workers=2, max_rounds=3, parallel_ops=1)
    cfg.suite.suite = "smoke"
    result = run(cfg, Parts(provider=ReplayProvider(recorded)))
    for op in ops:
        folder = op.replace(".", "__")
        decision = json.loads((result.run_dir / f"ops/{folder}/decision.json").read_text())
        assert (decision["status"], decision["worker"], decision["round"]) == ("kept", 2, 1)
        expected = extract_candidate(
            (recorded / f"ops/{folder}/worker_2/round_1/response.md").read_text(), op
        )
        assert kernel_path(tmp_path / "kernels", op).read_text() == expected
        w1r1 = result.run_dir / f"ops/{folder}/worker_1/round_1"
        if (w1r1 / "verdict.json").exists():  # it may have been cancelled once worker 2 won
            verdict = json.loads((w1r1 / "verdict.json").read_text())
            assert verdict["status"] in ("failed", "error") or "cancel" in verdict["reason"]
