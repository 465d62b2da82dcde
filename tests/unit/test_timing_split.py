"""The pieces of timing through the runner that run without a GPU: the verifier's validation of
the runner's raw numbers, the numbers it derives from them, eager's outputs poisoned before they
are freed, and the numerics switches a kernel may not flip."""

from __future__ import annotations

import math
import statistics

import torch

from evaluator.config import TimingConfig
from evaluator.judge.gpu_guards import NumericsState
from evaluator.judge.outputs import clean_raw_timing
from evaluator.judge.timing import derive

RAW = {
    "eager_ms": [0.020, 0.021, 0.019],
    "kernel_ms": [0.010, 0.011, 0.012],
    "eager_host_ms": 0.05,
    "kernel_host_ms": 0.04,
    "host_window_us": 200.0,
    "empty_launch_ms": 0.003,
    "l2_state": "steady",
}


def test_raw_numbers_pass_validation_unchanged() -> None:
    assert clean_raw_timing(dict(RAW)) == RAW


def test_raw_numbers_that_lie_are_refused() -> None:
    for bad in (
        {**RAW, "kernel_ms": []},
        {**RAW, "kernel_ms": [0.01, -1.0]},
        {**RAW, "kernel_ms": [math.nan]},
        {**RAW, "eager_ms": "fast"},
        {**RAW, "l2_state": "warm"},
        {**RAW, "empty_launch_ms": float("inf")},
        {k: v for k, v in RAW.items() if k != "host_window_us"},
        [1, 2, 3],
    ):
        assert clean_raw_timing(bad) is None, bad


def test_derive_clamps_a_kernel_time_below_the_bandwidth_floor() -> None:
    """The verifier computes the floor from its own copy of the inputs and eager's output: a
    runner that reports an impossible time gets the floor, and the flag."""
    cfg = TimingConfig()
    x = torch.empty(1 << 20, dtype=torch.float32)
    raw = {**RAW, "kernel_ms": [1e-6] * 3}
    got = derive("relu.default", cfg, raw, (x,), torch.empty_like(x))
    assert got["kernel_ms"] == got["floor_ms"] > 1e-6
    assert "roofline_clamped" in got["flags"]
    assert got["speedup"] == statistics.median(RAW["eager_ms"]) / got["floor_ms"]


def test_derive_keeps_an_honest_time() -> None:
    cfg = TimingConfig()
    x = torch.empty(16, dtype=torch.float32)
    got = derive("relu.default", cfg, dict(RAW), (x,), torch.empty_like(x))
    assert got["kernel_ms"] == got["kernel_ms_measured"] == 0.011
    assert got["speedup"] == 0.020 / 0.011


def test_numerics_switch_flipped_is_named_and_set_back() -> None:
    state = NumericsState()
    before = torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = not before
    torch.set_float32_matmul_precision("medium")
    try:
        # the matmul precision also switches TF32 for matmuls: both are named
        changed = set(state.changed())
        assert {
            "matmul.allow_fp16_reduced_precision_reduction",
            "float32_matmul_precision",
        } <= changed
        assert torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction is before
        assert torch.get_float32_matmul_precision() == state.original["float32_matmul_precision"]
        assert state.changed() == []
    finally:
        torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = before
        torch.set_float32_matmul_precision(state.original["float32_matmul_precision"])


def test_ghost_replay_own_determinism_switch_is_not_the_kernels() -> None:
    state = NumericsState()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        assert state.changed(ghost=True) == []
    finally:
        torch.use_deterministic_algorithms(False)
