"""Judges as Ray actors on a local Ray (2 CPUs): same verdicts and kernels as local judges, and a
killed actor costs no operator. Skipped when Ray is not installed (pip install 'atenforge[ray]')."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path

import pytest
from conftest import FIXTURES
from test_judge_pool import _smoke_run

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
    close_sandboxes()
    ray.shutdown()


def test_ray_judges_give_the_same_verdicts_and_kernels_as_local_ones(tmp_path: Path) -> None:
    local, local_files, _ = _smoke_run(tmp_path, "local", "--devices", "1")
    remote, remote_files, judged = _smoke_run(
        tmp_path, "ray", "--executor", "ray", "--devices", "2"
    )
    assert len(local) == 8 and remote == local
    assert remote_files == local_files
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
    deadline = time.monotonic() + 120
    busy = None
    while busy is None and time.monotonic() < deadline:
        busy = next((s for s in pool.slots if s.busy), None)
        time.sleep(0.02)
    assert busy is not None
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
