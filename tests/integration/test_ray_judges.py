"""Judges as Ray actors on a local Ray (2 CPUs): same verdicts and kernels as local judges, and a
killed actor costs no operator. Skipped when Ray is not installed (pip install 'atenforge[ray]')."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from layout import FIXTURES
from test_judge_pool import _smoke_run, first_busy

from evaluator.config import EvalConfig
from evaluator.evaluate import close_sandboxes, evaluate, shared_sandbox
from evaluator.results import Status

ray = pytest.importorskip("ray", reason="Ray is not installed: pip install 'atenforge[ray]'")

pytestmark = pytest.mark.slow
CORPUS = FIXTURES / "kernels" / "corpus"
EXPECTED = json.loads((CORPUS / "EXPECTED.json").read_text())
OPS = ["add.Tensor", "relu.default", "gelu.default", "_softmax.default", "mm.default", "mul.Tensor"]


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


@pytest.fixture(autouse=True)
def fresh_pools():
    # An actor holds one of the 2 CPUs until its pool closes: the next test needs them free.
    yield
    close_sandboxes()


def test_ray_judges_give_the_same_verdicts_and_kernels_as_local_ones(tmp_path: Path) -> None:
    local, local_files, _ = _smoke_run(tmp_path, "local", "--devices", "1")
    remote, remote_files, judged = _smoke_run(
        tmp_path, "ray", "--executor", "ray", "--devices", "2"
    )
    assert len(local) == 8 and remote == local
    assert remote_files == local_files
    assert judged.pop("run.json")["judges"][0]["executor"] == "ray"
    node = next(iter(judged.values())).split("/")[0]
    assert node.startswith("ray:")
    assert set(judged.values()) == {f"{node}/cpu:0", f"{node}/cpu:1"}


def test_a_killed_judge_actor_costs_no_operator(tmp_path: Path) -> None:
    cfg = EvalConfig(devices="2", executor="ray")
    cfg.sandbox.test_timeout_s = 30
    pool = shared_sandbox(cfg, "cpu")  # the pool evaluate() below uses
    assert pool.capacity == 4
    box: dict = {}

    def run() -> None:
        box["report"] = evaluate(
            CORPUS, suite="smoke", ops=OPS, config=cfg, device="cpu", run_dir=tmp_path / "run"
        )

    thread = threading.Thread(target=run)
    thread.start()
    busy = first_busy(pool, timeout_s=120)
    ray.kill(busy.judge.actor)
    thread.join(timeout=300)
    report = box["report"]
    got = {r.op: r for r in report.operators}
    assert sorted(got) == sorted(OPS)
    for op in OPS:
        assert str(got[op].status) == EXPECTED[op]["status"], (op, got[op].reason)
        assert got[op].judged_on != busy.judge.label
    assert any(r.phases_s.get("judge_retries") for r in got.values())
    lost = [s for s in pool.stats() if s["lost"]]
    assert [s["judge"] for s in lost] == [busy.judge.label]
    assert pool.capacity == 2
    assert got["mul.Tensor"].status == Status.REJECTED  # a cheat is caught on an actor too


def test_a_cancel_on_the_driver_kills_the_candidate_on_its_actor(tmp_path: Path) -> None:
    from test_judge_pool import CASES, SLOW_RELU, _kernel

    cfg = EvalConfig(devices="1", executor="ray")
    pool = shared_sandbox(cfg, "cpu")
    cancel = threading.Event()
    threading.Timer(1.0, cancel.set).start()
    started = time.monotonic()
    slow = _kernel(tmp_path, SLOW_RELU.replace("sleep(4)", "sleep(60)"), "slow")
    result = pool.judge(slow, "relu.default", CASES, cancel=cancel)
    assert time.monotonic() - started < 30
    assert result.status == Status.ERROR and result.reason.startswith("cancelled")


def test_resume_after_a_driver_crash_judges_on_ray_again(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from agent.run import main

    logs, kernels = tmp_path / "logs", tmp_path / "kernels"
    argv = ["--generate-only", "--provider", "builtin", "--suite", "smoke", "--ops", "relu,add",
            "--device", "cpu", "--executor", "ray", "--devices", "2", "--parallel-ops", "1",
            "--log-dir", str(logs),
            "--kernels-dir", str(kernels), "-q"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    (run_dir,) = logs.iterdir()
    # The driver "crashed" while relu's round was judged: no meta.json, no decision, no kernel.
    relu = run_dir / "ops" / "relu__default"
    kept = relu / "worker_1" / f"round_{json.loads((relu / 'decision.json').read_text())['round']}"
    (relu / "decision.json").unlink()
    (kept / "meta.json").unlink()
    (kept / "verdict.json").unlink()
    for path in (kernels / "relu__default").glob("*.py"):
        path.unlink()
    assert main(["--resume", str(run_dir), "-q"]) == 0, capsys.readouterr().err
    decision = json.loads((relu / "decision.json").read_text())
    assert decision["status"] == "kept"
    kept_round = relu / "worker_1" / f"round_{decision['round']}"
    verdict = json.loads((kept_round / "verdict.json").read_text())
    assert verdict["judged_on"].startswith("ray:")
    assert json.loads((run_dir / "run.json").read_text())["judges"][0]["executor"] == "ray"
