"""The judge pool: devices, least-loaded choice, a lost fork server, and --devices 2 vs 1."""

from __future__ import annotations

import json
import os
import signal
import textwrap
import threading
import time
from pathlib import Path

import pytest

from agent.parallelism import operators_in_flight
from agent.run import main
from evaluator.cases.testcase import parse_case
from evaluator.config import EvalConfig
from evaluator.errors import UsageError
from evaluator.judging.judge_pool import (
    JudgePool,
    LocalJudge,
    gpu_env_value,
    make_pool,
    parse_devices,
)
from evaluator.results import Status

RELU = textwrap.dedent(
    """
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _relu(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
        offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(y_ptr + offs, tl.maximum(tl.load(x_ptr + offs, mask=mask), 0.0), mask=mask)

    def relu__default_kernel_impl(x):
        x = x.contiguous()
        y = torch.empty_like(x)
        _relu[(triton.cdiv(x.numel(), 256),)](x, y, x.numel(), BLOCK=256)
        return y
    """
)
SLOW_RELU = "import time\ntime.sleep(4)\n" + RELU
# Kills the process that forked it (its judge's fork server), then behaves honestly.
# Kills its fork server: the runner's grandparent (runner -> verifier -> fork server). Run with
# containment off: confined, the signal is refused (tests/integration/test_adversarial.py covers that); the
# pool's own fault handling is what is tested here, for judges lost to any cause (OOM, a driver).
KILLS_ITS_JUDGE = (
    "import os, signal\n"
    "_stat = open(f'/proc/{os.getppid()}/stat').read()\n"
    "os.kill(int(_stat.rsplit(')', 1)[1].split()[1]), signal.SIGKILL)\n"
) + RELU
CASES = [parse_case("((T([37, 19], f32),), {})"), parse_case("((T([300], f32),), {})")]


def _kernel(tmp_path: Path, body: str, tag: str) -> Path:
    folder = tmp_path / tag
    folder.mkdir()
    path = folder / "relu__default_implementation_v1.py"
    path.write_text(body)
    return path


def test_devices_spec_names_gpus_or_counts_cpu_judges(monkeypatch: pytest.MonkeyPatch) -> None:
    assert parse_devices("all", "cuda", num_visible=4) == [0, 1, 2, 3]
    assert parse_devices("2", "cuda", num_visible=4) == [0, 1]
    assert parse_devices("0,1,3", "cuda", num_visible=4) == [0, 1, 3]
    assert parse_devices("3,", "cuda", num_visible=4) == [3]
    assert parse_devices("3", "cpu") == [0, 1, 2]
    assert parse_devices("5,7", "cpu") == [0, 1]
    with pytest.raises(UsageError, match="GPU 4 is not visible"):
        parse_devices("0,4", "cuda", num_visible=4)
    with pytest.raises(UsageError, match="only 2 GPU"):
        parse_devices("3", "cuda", num_visible=2)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "5,6")
    assert gpu_env_value(1) == "6"  # the caller's own mask is kept
    monkeypatch.delenv("CUDA_VISIBLE_DEVICES")
    assert gpu_env_value(1) == "1"


def test_gpu_judges_each_see_only_their_gpu() -> None:
    # No GPU needed: the judges' fork servers start lazily, their environment is set already.
    judges = [LocalJudge(EvalConfig(), "cuda", i, pin=True) for i in (0, 2)]
    try:
        assert [j.box.env["CUDA_VISIBLE_DEVICES"] for j in judges] == ["0", "2"]
        assert [j.label for j in judges] == ["cuda:0", "cuda:2"]
        # Separate scratch folders: the timing lock (gpu_timing.lock) is per GPU.
        assert judges[0].box.scratch != judges[1].box.scratch
    finally:
        for j in judges:
            j.close()


class _Fake:
    def __init__(self, label: str) -> None:
        self.label, self.slots, self.calls = label, 1, 0

    def judge(self, kernel_file, op, cases, **kw):
        from evaluator.results import OperatorResult

        self.calls += 1
        time.sleep(0.2)
        return OperatorResult(op=op, folder="x", status=Status.PASSED)

    def close(self) -> None:
        pass


def test_candidates_go_to_the_least_loaded_judge(tmp_path: Path) -> None:
    judges = [_Fake("a"), _Fake("b"), _Fake("c")]
    pool = JudgePool(judges, device="cpu")
    results = []
    threads = [
        threading.Thread(target=lambda: results.append(pool.judge(tmp_path, "relu.default", [])))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(r.judged_on for r in results) == ["a", "b", "c"]
    assert [s["verdicts"] for s in pool.stats()] == [1, 1, 1]
    assert pool.capacity == 3


def test_live_table_shows_each_judge_busy_or_idle_with_its_rate() -> None:
    from rich.console import Console

    from agent.live import RunView

    pool = JudgePool([_Fake("cpu:0"), _Fake("cpu:1")], device="cpu")
    pool.slots[0].busy, pool.slots[1].verdicts = 1, 3
    pool.slots[1].lost = "the actor died"
    view = RunView(Console(record=True, width=200), live=False)
    view.judge_stats = lambda: [pool.summary()]
    view.start(["relu.default"], 1)
    view.console.print(view.table())
    text = view.console.export_text()
    assert "judges: cpu:0 busy 1/1 0 (0/min) · cpu:1 lost 3 (" in text


def test_parallel_ops_auto_fills_the_judges() -> None:
    assert operators_in_flight(3, 8, 4) == 3
    assert operators_in_flight("auto", 8, 4) == 4  # 16 workers in flight for 8 judge slots
    assert operators_in_flight("auto", 2, 1) == 4
    assert operators_in_flight("auto", 1, 4) == 2
    assert operators_in_flight("auto", 1000, 1) == 64


def first_busy(pool: JudgePool, timeout_s: float):
    """The first judge seen with a candidate in flight."""
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        busy = next((s for s in pool.slots if s.busy), None)
        if busy is not None:
            return busy
        time.sleep(0.02)
    raise AssertionError(f"no judge became busy within {timeout_s} s")


@pytest.fixture(scope="module")
def cpu_pool():
    cfg = EvalConfig(devices="2")
    cfg.sandbox.test_timeout_s = 30
    cfg.sandbox.confine = False  # see KILLS_ITS_JUDGE
    pool = make_pool(cfg, "cpu")
    yield pool
    pool.close()


@pytest.mark.slow
def test_a_killed_fork_server_costs_no_verdict(cpu_pool: JudgePool, tmp_path: Path) -> None:
    honest = _kernel(tmp_path, RELU, "honest")
    warm = [cpu_pool.judge(honest, "relu.default", CASES) for _ in range(2)]
    assert [r.status for r in warm] == [Status.PASSED] * 2
    assert sorted(r.judged_on for r in warm) == ["cpu:0", "cpu:1"]

    box: dict = {}
    slow = _kernel(tmp_path, SLOW_RELU, "slow")
    thread = threading.Thread(
        target=lambda: box.update(r=cpu_pool.judge(slow, "relu.default", CASES))
    )
    thread.start()
    busy = first_busy(cpu_pool, timeout_s=30)
    time.sleep(1.5)  # the candidate's child is asleep inside the fork server's child
    os.kill(busy.judge.server_pid(), signal.SIGKILL)
    thread.join(timeout=60)
    result = box["r"]
    assert result.status == Status.PASSED, result.reason
    assert result.judged_on != busy.judge.label  # judged again, elsewhere
    assert result.phases_s["judge_retries"] == 1.0
    # The judge restarted its fork server: the pool did not shrink.
    assert cpu_pool.capacity == 4
    again = [cpu_pool.judge(honest, "relu.default", CASES) for _ in range(2)]
    assert [r.status for r in again] == [Status.PASSED] * 2


@pytest.mark.slow
def test_a_kernel_that_kills_its_judge_is_an_error_never_a_pass(
    cpu_pool: JudgePool, tmp_path: Path
) -> None:
    killer = _kernel(tmp_path, KILLS_ITS_JUDGE, "killer")
    result = cpu_pool.judge(killer, "relu.default", CASES)
    assert result.status == Status.ERROR
    assert "lost twice" in result.reason and "fork server" in result.reason
    assert result.tests == len(CASES) and result.passed == 0
    honest = _kernel(tmp_path, RELU, "honest")
    assert cpu_pool.judge(honest, "relu.default", CASES).status == Status.PASSED


@pytest.mark.slow
def test_a_judge_killer_beside_an_honest_kernel_costs_it_no_verdict(tmp_path: Path) -> None:
    # One judge, two slots: both candidates share it, so the killer takes the honest one's first
    # attempt with it; the retries run one at a time, alone.
    cfg = EvalConfig(devices="1")
    cfg.sandbox.test_timeout_s = 30
    cfg.sandbox.confine = False  # see KILLS_ITS_JUDGE
    pool = make_pool(cfg, "cpu")
    try:
        slow = _kernel(tmp_path, SLOW_RELU, "slow")
        killer = _kernel(tmp_path, "import time\ntime.sleep(1.5)\n" + KILLS_ITS_JUDGE, "killer")
        box: dict = {}
        thread = threading.Thread(
            target=lambda: box.update(honest=pool.judge(slow, "relu.default", CASES))
        )
        thread.start()
        first_busy(pool, timeout_s=30)
        bad = pool.judge(killer, "relu.default", CASES)
        thread.join(timeout=120)
        assert bad.status == Status.ERROR and "lost twice" in bad.reason
        honest = box["honest"]
        assert honest.status == Status.PASSED, honest.reason
        assert honest.phases_s["judge_retries"] == 1.0
    finally:
        pool.close()


def _smoke_run(tmp_path: Path, name: str, *flags: str) -> tuple[dict, dict, dict]:
    logs, kernels = tmp_path / f"logs_{name}", tmp_path / f"kernels_{name}"
    code = main(
        [
            "--provider",
            "builtin",
            "--suite",
            "smoke",
            "--num-workers",
            "1",
            "--device",
            "cpu",
            "--log-dir",
            str(logs),
            "--kernels-dir",
            str(kernels),
            "-q",
            *flags,
        ]  # fmt: skip
    )
    assert code == 0
    (run_dir,) = logs.iterdir()
    full = json.loads((run_dir / "atenforge_results.json").read_text())
    verdicts = {
        o["op"]: (o["status"], o["tests"], o["passed"], o["reason"], o["flags"])
        for o in full["operators"]
    }
    judged = {o["op"]: o["judged_on"] for o in full["operators"]}
    judged["run.json"] = json.loads((run_dir / "run.json").read_text())
    files = {p.parent.name: p.read_text() for p in kernels.glob("*/*.py")}
    return verdicts, files, judged


@pytest.mark.slow
def test_two_cpu_judges_give_the_same_verdicts_and_kernels_as_one(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one, one_files, one_judged = _smoke_run(tmp_path, "one", "--devices", "1")
    two, two_files, two_judged = _smoke_run(tmp_path, "two", "--devices", "2")
    assert len(one) == 8 and one == two
    assert one_files == two_files
    run_json = two_judged.pop("run.json")
    one_judged.pop("run.json")
    assert set(one_judged.values()) == {"cpu:0"}
    assert set(two_judged.values()) == {"cpu:0", "cpu:1"}
    # run.json records the pool's throughput: 8 generation verdicts + 8 evaluation verdicts.
    (pool,) = run_json["judges"]
    assert (pool["num_judges"], pool["executor"], pool["verdicts"]) == (2, "local", 16)
    assert pool["verdicts_per_min"] > 0 and 0 < pool["utilisation"] <= 1
    assert sum(j["verdicts"] for j in pool["judges"]) == 16
    assert all(j["verdicts"] > 0 for j in pool["judges"])
    assert "judges: 2 (local cpu), 16 verdicts" in capsys.readouterr().out


def test_flags_set_the_pool_and_bad_values_are_one_line_errors() -> None:
    from agent.run import make_request

    _, request = make_request(
        ["--devices", "0,2", "--executor", "ray", "--ray-address", "auto", "--parallel-ops", "auto"]
    )
    cfg = request.cfg
    assert (cfg.eval.devices, cfg.eval.executor, cfg.eval.ray_address) == ("0,2", "ray", "auto")
    assert cfg.agent.parallel_ops == "auto"
    with pytest.raises(UsageError, match="eval.devices"):
        make_request(["--devices", "two"])
    with pytest.raises(UsageError, match="parallel-ops"):
        make_request(["--parallel-ops", "many"])
