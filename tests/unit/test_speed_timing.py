"""Reading a timed verdict for speed rounds: ceilings, noise, the keep rule (pure functions)."""

from __future__ import annotations

import pytest

from agent.speed_timing import (
    at_ceiling,
    case_flops,
    case_rows,
    is_faster,
    keep_threshold,
    median_result,
    timing_noise,
)
from evaluator.cases.testcase import parse_case
from evaluator.results import OperatorResult, Status, TestResult

MM = "((T([256, 512], f16), T([512, 128], f16)), {})"
ADD = "((T([1024, 1024], f32), T([1024, 1024], f32)), {})"
PEAKS = {"f16": 989.0, "f32": 67.0}


def passed(*tests: TestResult, speedup: float | None = 1.0) -> OperatorResult:
    return OperatorResult(
        "x.default",
        "x__default",
        Status.PASSED,
        tests=len(tests),
        passed=len(tests),
        geomean_speedup=speedup,
        results=list(tests),
    )


def test_flops_are_counted_for_matmuls_and_absent_for_elementwise_ops():
    assert case_flops("mm.default", parse_case(MM)) == 2 * 256 * 512 * 128
    assert case_flops("add.Tensor", parse_case(ADD)) is None
    assert case_flops("no_such_op.default", parse_case(ADD)) is None


def test_the_ceiling_is_the_largest_of_bandwidth_compute_and_a_launch():
    flops = {MM: 2.0 * 256 * 512 * 128}
    mm = TestResult(args=MM, passed=True, kernel_ms=0.01, floor_ms=0.0002)
    add = TestResult(args=ADD, passed=True, kernel_ms=0.004, floor_ms=0.003)
    tiny = TestResult(args="((T([4], f32),), {})", passed=True, kernel_ms=0.004, floor_ms=1e-8)
    failed = TestResult(args=ADD, passed=False, kernel_ms=0.001)
    rows = case_rows(passed(mm, add, tiny, failed), flops, PEAKS, launch_ms=0.0013)
    assert [r.bound for r in rows] == ["launch", "bandwidth", "launch"]
    assert rows[1].ceiling_fraction == pytest.approx(0.75)
    assert rows[2].ceiling_fraction == pytest.approx(0.0013 / 0.004)
    # a 4096-cubed f16 matmul: 137 GFLOP at 989 TFLOP/s (0.139 ms) outweighs its 100 MB (0.024 ms)
    big = "((T([4096, 4096], f16), T([4096, 4096], f16)), {})"
    test = TestResult(args=big, passed=True, kernel_ms=0.2, floor_ms=0.0236)
    (row,) = case_rows(passed(test), {big: 2.0 * 4096**3}, PEAKS, launch_ms=0.0013)
    assert row.bound == "compute"
    assert row.ceiling_ms == pytest.approx(2.0 * 4096**3 / 989e12 * 1e3)
    assert row.ceiling_fraction == pytest.approx(row.ceiling_ms / 0.2)


def test_at_ceiling_needs_every_case_within_the_fraction():
    near = TestResult(args=ADD, passed=True, kernel_ms=0.0032, floor_ms=0.003)
    far = TestResult(args=MM, passed=True, kernel_ms=0.01, floor_ms=0.003)
    assert at_ceiling(case_rows(passed(near), {}, PEAKS), 0.9)
    assert not at_ceiling(case_rows(passed(near, far), {}, PEAKS), 0.9)
    assert not at_ceiling([], 0.9)


def test_noise_is_the_spread_of_repeated_timings_and_sets_the_bar():
    runs = [passed(speedup=s) for s in (1.0, 1.1, 1.05)]
    assert timing_noise(runs) == pytest.approx(0.1)
    assert timing_noise(runs[:1]) is None
    assert timing_noise([*runs[:1], OperatorResult("x", "x", Status.FAILED)]) is None
    assert median_result(runs).geomean_speedup == 1.05
    assert keep_threshold(0.1, 0.03) == 0.1
    assert keep_threshold(None, 0.03) == 0.03


def test_only_a_passing_file_faster_beyond_the_bar_is_kept():
    assert is_faster(passed(speedup=1.2), 1.0, 0.1)
    assert not is_faster(passed(speedup=1.1), 1.0, 0.1)  # within the noise
    assert not is_faster(passed(speedup=0.8), 1.0, 0.1)
    assert not is_faster(passed(speedup=None), 1.0, 0.1)  # not timed
    fast_but_wrong = OperatorResult("x", "x", Status.FAILED, geomean_speedup=9.0)
    assert not is_faster(fast_but_wrong, 1.0, 0.1)
    assert not is_faster(None, 1.0, 0.1)
