"""The run's budget: tokens and cost are counted across threads, and a reached limit stops new calls."""

from __future__ import annotations

import json
import threading
from pathlib import Path

from agent_fakes import QueueProvider, answer, config, make_parts

from agent.budget import Budget
from agent.session import RunRequest, Session
from evaluator.reports.runfolder import read_events


def test_budget_counts_every_charge_from_many_threads():
    budget = Budget()

    def spend() -> None:
        for _ in range(1000):
            budget.charge(1, 2, 0.001)

    threads = [threading.Thread(target=spend) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    snap = budget.snapshot()
    assert (snap["calls"], snap["input_tokens"], snap["output_tokens"]) == (8000, 8000, 16000)
    assert abs(snap["cost_usd"] - 8.0) < 1e-6


def test_reached_token_limit_refuses_calls_and_announces_once():
    said: list[str] = []
    budget = Budget(max_tokens=300, on_exhausted=said.append)
    assert budget.allow_call()
    budget.charge(200, 100, 0.0)
    assert [budget.allow_call() for _ in range(3)] == [False, False, False]
    assert len(said) == 1 and "max_tokens = 300" in said[0]


def test_reached_cost_limit_refuses_calls():
    budget = Budget(max_cost_usd=0.01)
    budget.charge(10, 10, 0.02)
    assert not budget.allow_call()
    assert "max_cost_usd" in (budget.stop_reason or "")


def test_unknown_price_marks_the_cost_incomplete_not_free():
    budget = Budget()
    budget.charge(10, 10, None)
    assert budget.snapshot()["cost_known"] is False


def test_resumed_budget_starts_from_what_was_spent():
    budget = Budget(max_tokens=1000, input_tokens=600, output_tokens=400)
    assert not budget.allow_call()


def test_run_with_max_tokens_below_need_stops_new_calls_and_says_so(tmp_path: Path):
    op = "relu.default"
    provider = QueueProvider()
    # Each call costs 150 tokens; the operator would pass only in round 3 (450 tokens).
    provider.enqueue(op, 1, answer(op, "fail"), answer(op, "fail"), answer(op, "pass"))
    said: list[str] = []

    class View:
        def say(self, text: str) -> None:
            said.append(text)

        def handle(self, event) -> None:
            pass

        def start(self, ops, num_workers) -> None:
            pass

        def stop(self) -> None:
            pass

    cfg = config(tmp_path, num_workers=1, max_rounds=5, max_tokens=250)
    result = Session(RunRequest(cfg=cfg, mode="generate"), make_parts(provider), View()).run()

    assert len(provider.calls) == 2  # 150 < 250 allows a second call; 300 >= 250 stops the third
    assert result.status == "completed"
    assert result.outcomes[0].status == "budget_stopped"
    assert not (result.run_dir / "ops/relu__default/decision.json").exists()
    stops = [e for e in read_events(result.run_dir) if e["event"] == "budget_stop"]
    assert len(stops) == 1 and "max_tokens = 250" in stops[0]["reason"]
    assert any("no new provider calls" in line for line in said)
    run = json.loads((result.run_dir / "run.json").read_text())
    assert run["budget"]["stopped"] and run["budget"]["tokens"] == 300


def test_replayed_run_with_max_tokens_below_need_stops_after_the_call_that_reaches_it(
    tmp_path: Path,
):
    from agent.providers.replay import ReplayProvider

    replay = ReplayProvider(Path(__file__).resolve().parents[1] / "fixtures" / "replay_run")
    # relu.default worker 1 recorded 2060 tokens in round 1 and 3040 in round 2.
    cfg = config(tmp_path, num_workers=1, max_rounds=3, max_tokens=2500)
    result = Session(RunRequest(cfg=cfg, mode="generate"), make_parts(replay)).run()
    rounds = sorted(p.name for p in (result.run_dir / "ops/relu__default/worker_1").iterdir())
    assert rounds == ["round_1", "round_2"]
    assert result.budget["tokens"] == 2060 + 3040
    assert result.outcomes[0].status == "budget_stopped"
