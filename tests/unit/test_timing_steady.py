"""The steady L2 state of the timer (evaluator/judge/timing.py): what a timed call finds in L2 must be
another call's data, never its own inputs, and the argument sets must be equal to the case.

The batching logic runs here with CPU stand-ins for CUDA events and the GPU wait (no GPU on this
machine); tests/gpu/test_gpu.py times real calls this way on the device."""

from __future__ import annotations

import time
import weakref
from typing import Any

import pytest
import torch

from evaluator.config import EvalConfig, TimingConfig
from evaluator.judge import timing
from evaluator.judge.timing import _exact_copy, rotation_sets, time_sides


def _layout(t: torch.Tensor) -> tuple[Any, ...]:
    return (t.shape, t.stride(), t.storage_offset(), t.dtype)


@pytest.mark.parametrize(
    "make",
    [
        lambda b: b[:, 1:4],  # a slice: non-dense, storage offset 1
        lambda b: b.t(),  # transposed
        lambda b: b[1:, ::2],  # strided rows and columns
        lambda b: b[0].expand(5, 6),  # stride 0
        lambda b: b,  # contiguous
    ],
)
def test_exact_copy_keeps_values_and_layout_in_new_memory(make: Any) -> None:
    base = torch.randn(4, 6)
    t = make(base)
    c = _exact_copy(t)
    assert _layout(c) == _layout(t)
    assert torch.equal(c, t)
    assert c.untyped_storage().data_ptr() != t.untyped_storage().data_ptr()
    base.zero_()  # the copy owns its memory
    assert not torch.equal(c, t) or not c.any()


def test_exact_copy_walks_lists_tuples_and_dicts_and_leaves_scalars() -> None:
    a, b = torch.randn(3), torch.randn(2, 2).t()
    value = [(a, 2.5), {"x": b, "n": None}, "mean"]
    c = _exact_copy(value)
    assert isinstance(c[0], tuple) and c[0][1] == 2.5 and c[2] == "mean" and c[1]["n"] is None
    assert torch.equal(c[0][0], a) and c[0][0].data_ptr() != a.data_ptr()
    assert _layout(c[1]["x"]) == _layout(b)


def test_rotation_sets_by_method_and_case_size() -> None:
    steady = TimingConfig()
    assert steady.l2_state == "steady"
    assert rotation_sets(1 << 20, steady) == steady.steady_sets
    # a case of 3 GiB with 8 GiB per side: two sets; bigger: never under two
    assert rotation_sets(3 << 30, steady) == 2
    assert rotation_sets(64 << 30, steady) == 2
    assert rotation_sets(1 << 20, steady.model_copy(update={"steady_sets": 7})) == 7
    assert rotation_sets(1 << 20, TimingConfig(l2_state="flushed")) == 1


def test_l2_state_is_validated_and_loads_from_toml(tmp_path: Any) -> None:
    from agent.config import load_config

    with pytest.raises(ValueError):
        TimingConfig(l2_state="warm")  # type: ignore[arg-type]
    with pytest.raises(ValueError):
        TimingConfig(steady_sets=1)
    path = tmp_path / "c.toml"
    path.write_text('[eval.timing]\nl2_state = "flushed"\nsteady_sets = 3\n')
    cfg = load_config(path)
    assert cfg.eval.timing.l2_state == "flushed" and cfg.eval.timing.steady_sets == 3
    assert EvalConfig().timing.l2_state == "steady"


class _CpuEvent:
    """Stands in for torch.cuda.Event on a machine without a GPU: wall time between records."""

    def __init__(self, enable_timing: bool = True) -> None:
        self.t = 0.0

    def record(self) -> None:
        self.t = time.perf_counter()

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end: _CpuEvent) -> float:
        return (end.t - self.t) * 1e3


class _Result:
    pass


def test_steady_batches_flush_once_time_all_but_the_first_call_and_keep_results(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(timing, "_Event", _CpuEvent)
    waits: list[int] = []
    monkeypatch.setattr(timing, "_gpu_wait", waits.append)
    log: list[str] = []
    alive: list[weakref.ref[_Result]] = []

    def call(side: str, k: int) -> Any:
        def fn() -> _Result:
            if k:  # the previous call's result is still held: its memory is not reused
                assert alive[-1]() is not None
            log.append(f"{side}{k}")
            r = _Result()
            alive.append(weakref.ref(r))
            return r

        return fn

    def flush() -> None:
        log.append("flush")

    a = [call("a", k) for k in range(3)]
    b = [call("b", k) for k in range(3)]
    times_a, times_b, host_a, host_b = time_sides(a, b, flush, 4, 60.0, wait_cycles=7)
    # 4 timed calls per side, 2 per batch: two batches, each side flushed before its own calls
    assert log == ["flush", "a0", "a1", "a2", "flush", "b0", "b1", "b2"] * 2
    assert len(times_a) == len(times_b) == len(host_a) == len(host_b) == 4
    assert waits == [7] * 12  # the GPU wait before every call, timed or not
    assert all(r() is None for r in alive)  # released after the batches


def test_time_sides_takes_the_flushed_path_with_one_set(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(timing, "_Event", _CpuEvent)
    monkeypatch.setattr(timing, "_gpu_wait", lambda cycles: None)
    log: list[str] = []
    times_a, times_b, _, _ = time_sides(
        [lambda: log.append("a")], [lambda: log.append("b")], lambda: log.append("f"), 3, 60.0
    )
    assert log == ["f", "a", "f", "b"] * 3  # a flush before every timed call
    assert len(times_a) == len(times_b) == 3


def test_window_grows_with_the_host_time_of_a_slow_side(monkeypatch: pytest.MonkeyPatch) -> None:
    """`timed_with_window` (the evaluator's and knob_sweep's timing): a side whose calls need more
    host time than the configured window gets a proportionally longer GPU wait before each timed
    call, so host time is not read as GPU time; a fast pair keeps the configured wait."""
    monkeypatch.setattr(timing, "_Event", _CpuEvent)
    monkeypatch.setattr(timing, "_sync", lambda: None)
    waits: list[int] = []
    monkeypatch.setattr(timing, "_gpu_wait", waits.append)
    cfg = TimingConfig(num_warmup=3, num_reps=4, host_window_us=200.0)

    def slow() -> None:
        time.sleep(0.002)  # 2 ms of host time: 10x the window

    _, _, _, kernel_host, window = timing.timed_with_window(
        [lambda: None], [slow], lambda: None, cfg, 1000
    )
    assert window >= timing.HOST_WINDOW_MARGIN * 2000 * 0.99
    assert min(kernel_host) >= 2.0  # host ms of the slow side
    assert waits and min(waits) >= int(1000 * window / 200.0) * 0.99
    waits.clear()
    eager, kernel, _, _, window = timing.timed_with_window(
        [lambda: None], [lambda: None], lambda: None, cfg, 1000
    )
    assert window == 200.0 and set(waits) == {1000}
    assert len(eager) == len(kernel) == 4


def test_knob_sweep_zipf_indices_are_skewed_in_range_and_keep_the_layout() -> None:
    """`knob_sweep.py --zipf`: index tensors redrawn over their own range, skewed (the most
    frequent id far above a uniform draw's share), the same every time, views kept as views;
    float tensors untouched."""
    import importlib.util
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "knob_sweep.py"
    spec = importlib.util.spec_from_file_location("knob_sweep_under_test", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    idx = torch.randint(0, 1000, (8, 512))
    rows = torch.arange(512).expand(8, 512)  # stride 0 over the first dim
    grad = torch.randn(8, 512, 4)
    got = module.zipf_indices([grad, idx, rows, 7], 1.1)
    again = module.zipf_indices([grad, idx, rows, 7], 1.1)
    assert got[0] is grad and got[3] == 7
    assert torch.equal(got[1], again[1]) and got[1].dtype == idx.dtype
    assert got[1].min() >= 0 and got[1].max() <= idx.max()
    top = torch.bincount(got[1].flatten()).max().item()
    assert top > 20 * idx.numel() / 1000  # uniform: ~4 per id; Zipf(1.1): hundreds
    assert got[2].stride() == rows.stride() and got[2].shape == rows.shape
    assert got[2].max() <= 511 and torch.equal(got[2][0], got[2][7])


def test_resweep_list_names_knobs_the_generated_kernels_have() -> None:
    """Each line of `benchmarks/data/resweep.txt` (`gpu_batch.sh ... resweep`, device time) names
    a suite operator with a builtin kernel, a positive case count, and knobs that are module
    constants of that kernel's file with literal values: a typo would only show on the GPU
    (knob_sweep stops on a constant the file lacks)."""
    import ast
    import importlib.util
    from pathlib import Path

    from agent.providers.builtin.registry import WRITERS
    from agent.providers.builtin.request import KernelRequest
    from evaluator.cases.suites import select_operators

    root = Path(__file__).resolve().parents[2]
    spec = importlib.util.spec_from_file_location("knob_sweep_lines", root / "benchmarks" / "knob_sweep.py")
    sweep = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sweep)  # type: ignore[union-attr]
    lines = [
        line.split()
        for line in (root / "benchmarks" / "data" / "resweep.txt").read_text().splitlines()
        if line.strip() and not line.startswith("#")
    ]
    assert lines
    texts: dict[str, set[str]] = {}
    for op, cases, *rest in lines:
        assert int(cases) > 0 and rest and rest[::2] == ["--knob"] * (len(rest) // 2), (op, rest)
        knobs = sweep._knobs(rest[1::2])
        if op not in texts:
            oc = select_operators("torchbench", ops=[op]).ops[0]
            text = WRITERS[op](KernelRequest(op=op, schema="", cases=oc.cases))
            assert text is not None, op
            names = set()
            for node in ast.parse(text).body:
                targets = node.targets if isinstance(node, ast.Assign) else []
                for target in targets:
                    elts = target.elts if isinstance(target, ast.Tuple) else [target]
                    names |= {e.id for e in elts if isinstance(e, ast.Name)}
            texts[op] = names
        assert set(knobs) <= texts[op], (op, set(knobs) - texts[op])
