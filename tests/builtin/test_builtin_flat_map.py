"""The movement family's flat map kernel (`_flat_kernel`: contiguous outputs of pad, roll,
slice/select backward and repeat) against eager ATen, in Triton's CPU interpreter.

Cases cover the kernel's three row forms (aligned vector rows, gathered rows that never cross an
inner row, rows that wrap into the next inner row), odd sizes (odd totals give one-element rows),
negative pads, pads on several dims, transposed and strided inputs, every dtype the ops see, rolls
on several dims and flat rolls, slice steps above 1, and plans too deep for the flat kernel (the
[rows x last dim] kernel then). The int64 form runs by lowering the module's int32 limit.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
from builtin_support import assert_compiles_for_sm90, load_kernel, run_generated, sm90_load_order

from agent.providers.builtin import codegen, movement
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.testcase import TestCase, parse_case

CASES: dict[str, list[str]] = {
    "constant_pad_nd.default": [
        "((T([2, 3, 9, 11], f16), [0, 1, 0, 1], 0.0), {})",  # odd rows that wrap
        "((T([2, 3, 7, 9], bf16), [-1, 2, 1, -2], 0.0), {})",  # cropping
        "((T([2, 3, 7, 9], f32), [-3, -2, -1, -1], 2.5), {})",
        "((T([3, 4, 5, 6], f32), [1, 1, 2, 0, 0, 3], -1.5), {})",  # three padded dims
        "((T([2, 3, 5, 6], f16, [90, 1, 18, 3]), [1, 2, 1, 2], 0.5), {})",  # channels-last
        "((T([4, 6, 5], f16, [1, 4, 24]), [2, 1], 0.0), {})",  # transposed
        "((T([3, 5, 8], f32, [96, 16, 2]), [1, 0], 0.0), {})",  # strided last dim
        "((T([2, 3, 16, 16], f16), [8, 8, 0, 1], 0.0), {})",  # aligned rows
        "((T([2, 3, 16, 32], bf16, [2048, 32, 96, 1]), [0, 0, 2, 0], 1.0), {})",
        "((T([3, 5, 7], f16), [1, 1], 0.0), {})",  # odd total: one-element rows
        "((T([4, 20], i64), [0, 1], -100.0), {})",
        "((T([4, 21], i32), [2, 1, 1, 0], 7.0), {})",
        "((T([5, 3], b8), [1, 1], True), {})",
        "((T([37], f32), [3, -2], 4.0), {})",
        "((T([2, 3, 4, 5, 6], f32), [1, 1, 1, 1, 1, 1, 1, 1], 0.0), {})",  # 5 dims: 2-D kernel
    ],
    "roll.default": [
        "((T([2, 9, 9, 16], f16), [-3, -3], [1, 2]), {})",  # aligned rows
        "((T([2, 9, 9, 16], f16), [3, 3], [1, 2]), {})",
        "((T([3, 5, 7], f32), [2, -1, 9], [0, 1, 2]), {})",  # wrapped rows, every dim
        "((T([4, 16], f16), [3], [1]), {})",  # shift not a multiple of the row
        "((T([4, 16], bf16), [8, 1], [-1, 0]), {})",
        "((T([5, 7], f32, [1, 5]), [9, -2], [0, 1]), {})",  # transposed
        "((T([5, 7], f32), [3]), {})",  # flat roll
        "((T([5, 7], f16, [1, 5]), [-4]), {})",
        "((T([40], i64), [-7], [0]), {})",
        "((T([6, 10], b8), [2], [1]), {})",
    ],
    "slice_backward.default": [
        # torchbench-like: permuted grads into a doubled last dim (aligned rows)
        "((T([2, 4, 16, 32], bf16, [2048, 32, 128, 1]), [2, 4, 16, 64], 3, 32, 9223372036854775807, 1), {})",
        "((T([2, 4, 16, 32], bf16, [4096, 64, 256, 1]), [2, 4, 16, 64], 3, 0, 32, 1), {})",
        "((T([2, 3, 5, 4], f16), [2, 3, 5, 9], 3, 1, 9, 2), {})",  # step 2 on the last dim
        "((T([2, 3, 5], f32), [2, 9, 5], 1, 1, 9, 3), {})",  # step 3 on a middle dim
        "((T([3, 4], f32), [3, 9], -1, -8, 9223372036854775807, 2), {})",
        "((T([3, 7], f16), [3, 11], 1, 3, 10, 1), {})",
    ],
    "select_backward.default": [
        "((T([4, 24], f32), [4, 5, 24], 1, 0), {})",
        "((T([4, 7], f16), [4, 7, 3], -1, -1), {})",
        "((T([7, 3], bf16), [5, 7, 3], 0, 4), {})",
        "((T([6, 5], f16, [1, 6]), [6, 3, 5], 1, 2), {})",
    ],
    "repeat.default": [
        "((T([3, 5, 8], f16), [4, 1, 1]), {})",
        "((T([3, 5, 6], f32), [2, 1, 3]), {})",
        "((T([5], bf16), [2, 3, 4]), {})",
        "((T([3, 2], f16, [1, 3]), [2, 2, 3]), {})",
        "((T([1, 6], i64), [4, 1]), {})",
    ],
}

OPS = sorted(CASES)

# `_flat_args` of the torchbench pad [32, 96, 112, 112] f16 by [0, 1, 0, 1] (N and C merged)
PAD_ARGS = (
    [12544, 112, 1],
    [(3072, 3072, 0, 1), (113, 112, 0, 1), (113, 112, 0, 1)],
    False,
    0.0,
    2,
)


def _cases(op: str) -> list[TestCase]:
    return [parse_case(c) for c in CASES[op]]


def _write(op: str, cases: list[TestCase], variant: int = 0) -> str:
    text = movement.WRITERS[op](KernelRequest(op, str(codegen.schema_of(op)), cases, variant))
    assert text is not None, f"the writer declined {op}"
    return text


def _int64_everywhere(source: str) -> str:
    """The kernel file with every flat launch planned for int64 offsets."""
    assert "_IDX32_LIMIT = 2**31" in source
    return source.replace("_IDX32_LIMIT = 2**31", "_IDX32_LIMIT = 1")


def _module(op: str):
    """The generated kernel file's module (its planning functions), loaded once per test."""
    tmp = tempfile.mkdtemp(prefix="flat_map_")
    kernel = load_kernel(op, _write(op, _cases(op)), Path(tmp))
    return sys.modules[kernel.__module__]


@pytest.mark.parametrize("op", OPS)
def test_flat_map_matches_eager_on_odd_sizes_strides_and_dtypes(op: str) -> None:
    cases = _cases(op)
    assert run_generated(op, _write(op, cases), cases) == []


@pytest.mark.parametrize("op", ["constant_pad_nd.default", "roll.default"])
def test_flat_map_conservative_variant_matches_eager(op: str) -> None:
    cases = _cases(op)
    assert run_generated(op, _write(op, cases, variant=1), cases) == []


@pytest.mark.parametrize("row_bytes", [4, 16, 32])
def test_flat_map_other_unaligned_row_widths_match_eager(row_bytes: int) -> None:
    op = "constant_pad_nd.default"
    cases = _cases(op)
    text = _write(op, cases)
    assert "_FLAT_ROW_BYTES = 8" in text
    text = text.replace("_FLAT_ROW_BYTES = 8", f"_FLAT_ROW_BYTES = {row_bytes}")
    assert run_generated(op, text, cases) == []


@pytest.mark.parametrize("op", OPS)
def test_flat_map_int64_offsets_match_eager(op: str) -> None:
    cases = _cases(op)
    assert run_generated(op, _int64_everywhere(_write(op, cases)), cases) == []


def test_flat_plan_uses_int64_only_past_2_31() -> None:
    """int32 offsets unless a flat index or an x offset (masked lanes too) reaches 2**31."""
    m = _module("constant_pad_nd.default")
    assert m._flat_args(*PAD_ARGS)[2]["IDX64"] is False
    big = m._flat_args([2**16, 1], [(40000, 40000, 0, 1), (65537, 65536, 0, 1)], False, 0.0, 2)
    assert big[2]["IDX64"] is True  # 2.6e9 output elements
    # few output elements, but an input stride of 2**31 (a slice of a huge tensor)
    far = m._flat_args([2**31, 1], [(2, 2, 0, 1), (9, 8, 1, 1)], False, 0.0, 2)
    assert far[2]["IDX64"] is True
    # a crop reaching far into x: offsets past the output's size count
    crop = m._flat_args([2**20, 1], [(4, 2**11, -(2**11) + 4, 1), (8, 8, 0, 1)], False, 0.0, 4)
    assert crop[2]["IDX64"] is True


def test_flat_plan_vectorizes_odd_rows_and_aligned_runs() -> None:
    """The torchbench pad (rows of 113 halves) stores 8-byte rows that may wrap; the roll and
    the slice gradient read and write aligned 16-byte rows; coordinates are int32."""
    m = _module("constant_pad_nd.default")
    pad = m._flat_args(*PAD_ARGS)[2]
    assert (pad["V"], pad["ALIGNED"], pad["O3"], pad["IDX64"]) == (4, False, 113, False)
    roll_plan = [(32, 32, 0, 1), (56, 56, 3, 1), (56, 56, 3, 1), (96, 96, 0, 1)]
    roll = m._flat_args([301056, 5376, 96, 1], roll_plan, True, None, 2)[2]
    assert (roll["V"], roll["ALIGNED"], roll["K1"], roll["K2"]) == (8, True, 2, 2)
    grad_plan = [(4, 4, 0, 1), (32, 32, 0, 1), (2048, 2048, 0, 1), (64, 32, 32, 1)]
    grad = m._flat_args([2097152, 32, 1024, 1], grad_plan, False, 0.0, 2)[2]
    assert (grad["V"], grad["ALIGNED"]) == (8, True)


def test_flat_plan_merges_copied_dims_and_splits_repeats() -> None:
    m = _module("repeat.default")
    # repeat [8, 1, 1] of a contiguous [12, 512, 64]: a broadcast dim of 8 and one copied run
    dims = m._flat_dims(
        [0, 32768, 64, 1], [(8, 1, 0, 1), (12, 12, 0, 1), (512, 512, 0, 1), (64, 64, 0, 1)], True
    )
    assert dims == [[8, 8, 0, 1, 0, 0], [393216, 393216, 0, 1, 1, 0]]
    # a plain contiguous copy is one dim in the runtime slot: one compilation for every size
    consts = m._flat_args([60, 1], [(7, 7, 0, 1), (60, 60, 0, 1)], False, None, 4)[2]
    assert (consts["O1"], consts["O2"], consts["O3"]) == (1, 1, 1)


def test_flat_plan_leaves_deep_plans_to_the_tile_kernel() -> None:
    m = _module("constant_pad_nd.default")
    plan = [(2, 2, 0, 1)] + [(n + 2, n, 1, 1) for n in (3, 4, 5, 6)]
    assert m._flat_args([360, 120, 30, 6, 1], plan, False, 0.0, 4) is None


def test_flat_map_compiles_for_an_sm90_gpu() -> None:
    """The interpreter accepts code the GPU compiler rejects: compile every launch (int32 and
    int64 offsets, both variants) for sm_90."""
    batch = []
    for op in OPS:
        cases = _cases(op)
        batch.append((op, _write(op, cases), cases))
    jobs = [
        *batch,
        *[(op, _int64_everywhere(text), cases) for op, text, cases in batch],
        *[(op, _write(op, cases, variant=1), cases) for op, _, cases in batch],
    ]
    for start in range(0, len(jobs), len(batch)):  # one op per job list: results are per op
        assert_compiles_for_sm90(jobs[start : start + len(batch)])


def test_padding_issues_every_gather_before_using_one() -> None:
    """A fill applied by a select after each masked load made the warp wait a memory latency
    per gather before issuing the next (12 of 16 loads read early for the torchbench pad
    [32, 96, 112, 112] f16): the fill is the loads' `other`, rounded once to x's dtype.
    Compiled for sm_90, the flat and tile kernels consume no load early, float and int fills."""
    op = "constant_pad_nd.default"
    texts = [
        "((T([32, 96, 112, 112], f16), [0, 1, 0, 1], 0.0), {})",  # rows that wrap
        "((T([32, 144, 56, 56], f16), [1, 2, 1, 2], 0.0), {})",
        "((T([8, 1024], i64), [0, 1], -100.0), {})",
        "((T([2, 3, 7, 9], f32), [-3, -2, -1, -1], 2.5), {})",
        "((T([2, 3, 16, 16], f16), [8, 8, 0, 1], 0.5), {})",  # aligned rows
        "((T([2, 3, 4, 5, 6], f32), [1, 1, 1, 1, 1, 1, 1, 1], 0.0), {})",  # the tile kernel
    ]
    cases = [parse_case(t) for t in texts]
    seen = set()
    for index, kernel, early, loads, *_resources in sm90_load_order([(op, _write(op, cases), cases)])[op]:
        seen.add(kernel)
        assert early == 0, (index, kernel, f"{early} of {loads} loads read early")
    assert seen == {"_flat_kernel", "_map_kernel"}
