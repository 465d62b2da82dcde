"""The flat map kernel's range-and-gather form (`_flat_kernel` with GATHER: a pad's unaligned rows
read as one vector-loaded range of x per program, placed by a register gather) against eager ATen,
in Triton's CPU interpreter.

Cases: pads on the last dim only and on the last two, three padded dims, odd sizes, tiny tensors,
every dtype pads see, slice/select gradients of the same shape; crops, strided inputs and rolls
keep the per-element gathers. Small interpreter tiles (the prelude's tile cap lowered) give many
programs, so programs start and end mid-row and straddle planes; both range buffers (twice BLOCK,
and BLOCK with its fallback to per-element gathers), int64 offsets, and the switch turned off.
"""

from __future__ import annotations

import sys
import tempfile
from pathlib import Path

import pytest
import torch
from builtin_support import assert_compiles_for_sm90, load_kernel, materialize_case, run_generated

from agent.providers.builtin import codegen, movement
from agent.providers.builtin.request import KernelRequest
from evaluator.testcase import TestCase, parse_case

PAD_CASES = [
    "((T([2, 3, 9, 11], f16), [0, 1, 0, 1], 0.0), {})",  # the torchbench form, odd sizes
    "((T([3, 5, 13], f16), [0, 1], 0.0), {})",  # last dim only
    "((T([2, 4, 7, 7], bf16), [2, 1, 3, 0], 1.5), {})",  # last two dims, both sides
    "((T([3, 4, 5, 6], f32), [1, 1, 2, 0, 0, 3], -1.5), {})",  # three padded dims
    "((T([2, 5, 9], i32), [1, 2], 7.0), {})",
    "((T([4, 21], i64), [2, 1, 1, 0], -100.0), {})",
    "((T([3, 13], b8), [0, 1], True), {})",
    "((T([1, 1, 3, 3], f16), [0, 1, 0, 1], 2.0), {})",  # tiny
    "((T([5], f16), [1, 2], 0.0), {})",  # one dim
    "((T([2, 3, 9, 11], f16), [0, 0, 0, 0, 0, 1], 0.0), {})",  # an extra plane of fill
    "((T([2, 3, 4, 5], f32), [0, 0, 0, 0, 0, 0, 1, 1], 0.0), {})",  # a padded batch dim
]
CROP_CASES = [
    "((T([2, 3, 7, 9], bf16), [-1, 2, 1, -2], 0.0), {})",
    "((T([2, 3, 7, 9], f32), [-3, -2, -1, -1], 2.5), {})",
    "((T([3, 17], f16), [1, -2], 0.0), {})",
    "((T([2, 3, 5, 6], f16, [90, 1, 18, 3]), [1, 2, 1, 2], 0.5), {})",  # channels-last
    "((T([4, 6, 5], f16, [1, 4, 24]), [2, 1], 0.0), {})",  # transposed
]
OTHER_CASES: dict[str, list[str]] = {
    "slice_backward.default": [
        "((T([2, 3, 5, 7], f16), [2, 3, 5, 9], 3, 1, 8, 1), {})",
        "((T([4, 7], bf16), [4, 11], 1, 3, 10, 1), {})",
        "((T([2, 3, 5, 4], f16), [2, 3, 5, 9], 3, 1, 9, 2), {})",  # step 2: gathers
    ],
    "select_backward.default": [
        "((T([4, 7], f16), [4, 5, 7], 1, 2), {})",
        "((T([7, 3], bf16), [5, 7, 3], 0, 4), {})",
    ],
    "roll.default": ["((T([3, 5, 7], f16), [2, -1, 9], [0, 1, 2]), {})"],
}

PAD = "constant_pad_nd.default"
SMALL_TILES = ("        return 16384\n", "        return 64\n")  # interpreter tiles of 64 elements


def _cases(texts: list[str]) -> list[TestCase]:
    return [parse_case(c) for c in texts]


def _write(op: str, cases: list[TestCase], variant: int = 0) -> str:
    text = movement.WRITERS[op](KernelRequest(op, str(codegen.schema_of(op)), cases, variant))
    assert text is not None, f"the writer declined {op}"
    return text


def _edit(source: str, *pairs: tuple[str, str]) -> str:
    for old, new in pairs:
        assert old in source, old
        source = source.replace(old, new)
    return source


CHUNK_BLOCK = ("_FLAT_GATHER_CHUNK = 2", "_FLAT_GATHER_CHUNK = 1")
GATHER_OFF = ("_FLAT_GATHER = True", "_FLAT_GATHER = False")
INT64 = ("_IDX32_LIMIT = 2**31", "_IDX32_LIMIT = 1")


def _module(source: str, op: str = PAD):
    kernel = load_kernel(op, source, Path(tempfile.mkdtemp(prefix="pad_gather_")))
    return sys.modules[kernel.__module__], kernel


def _gather_modes(op: str, texts: list[str], *edits: tuple[str, str]) -> list[int]:
    """The GATHER constexpr each case's flat launch is planned with."""
    cases = _cases(texts)
    m, kernel = _module(_edit(_write(op, cases), *edits), op)
    planned = []
    flat_args = m._flat_args
    m._flat_args = lambda *a: planned.append(flat_args(*a)) or planned[-1]
    modes = []
    for index, case in enumerate(cases):
        args, kwargs = materialize_case(op, case, torch.Generator().manual_seed(index))
        del planned[:]
        kernel(*args, **kwargs)
        modes.append(planned[0][2]["GATHER"] if planned and planned[0] else None)
    return modes


@pytest.mark.parametrize(
    "edits",
    [
        (),
        (SMALL_TILES,),
        (SMALL_TILES, CHUNK_BLOCK),
        (SMALL_TILES, INT64),
        (SMALL_TILES, GATHER_OFF),
    ],
    ids=["big-tiles", "small-tiles", "chunk-of-block", "int64", "switch-off"],
)
def test_pad_gather_matches_eager_across_programs_dtypes_and_buffers(edits) -> None:
    cases = _cases(PAD_CASES + CROP_CASES)
    assert run_generated(PAD, _edit(_write(PAD, cases), *edits), cases) == []


@pytest.mark.parametrize("op", sorted(OTHER_CASES))
def test_pad_gather_slice_select_roll_match_eager(op: str) -> None:
    cases = _cases(OTHER_CASES[op])
    for edits in [(SMALL_TILES,), (SMALL_TILES, CHUNK_BLOCK)]:
        assert run_generated(op, _edit(_write(op, cases), *edits), cases) == []


def test_pad_gather_conservative_variant_matches_eager() -> None:
    cases = _cases(PAD_CASES)
    assert run_generated(PAD, _edit(_write(PAD, cases, variant=1), SMALL_TILES), cases) == []


def test_pad_gather_is_bit_exact_with_eager_on_straddling_programs() -> None:
    """Every value is copied or the fill: equal, not close. 64-element programs over 11 x 12
    planes start mid-row and cross planes."""
    source = _edit(_write(PAD, _cases(PAD_CASES[:1])), SMALL_TILES)
    _, kernel = _module(source)
    x = torch.randn(2, 3, 11, 11, generator=torch.Generator().manual_seed(0)).half()
    for pad in ([0, 1, 0, 1], [0, 1], [3, 0, 0, 2]):
        want = torch.constant_pad_nd(x, pad, -2.0)
        assert torch.equal(kernel(x, pad, -2.0), want)


def test_pad_gather_plan_takes_pads_and_leaves_crops_strides_and_rolls() -> None:
    """GATHER 1 for pads with unaligned rows (2 with a buffer of one BLOCK), 0 for crops,
    non-contiguous inputs, aligned rows, step slices and rolls, and with the switch off."""
    assert _gather_modes(PAD, PAD_CASES[:7]) == [1] * 7
    assert _gather_modes(PAD, PAD_CASES[:2], CHUNK_BLOCK) == [2, 2]
    assert _gather_modes(PAD, PAD_CASES[:2], GATHER_OFF) == [0, 0]
    assert _gather_modes(PAD, CROP_CASES) == [0] * len(CROP_CASES)
    assert _gather_modes(PAD, ["((T([2, 3, 16, 16], f16), [8, 8, 0, 1], 0.0), {})"]) == [0]
    assert _gather_modes("slice_backward.default", OTHER_CASES["slice_backward.default"]) == [
        1,
        1,
        0,
    ]
    assert _gather_modes("roll.default", OTHER_CASES["roll.default"]) == [0]


def test_pad_gather_torchbench_plan_is_int32_with_a_two_block_buffer() -> None:
    """The H200 case [32, 96, 112, 112] f16 -> 113 x 113: 16-byte groups, x's size a multiple
    of them (unmasked alignment), int32 offsets."""
    m, _ = _module(_write(PAD, _cases(PAD_CASES[:1])))
    m._INTERPRET = False
    plan = [(3072, 3072, 0, 1), (113, 112, 0, 1), (113, 112, 0, 1)]
    consts = m._flat_args([12544, 112, 1], plan, False, 0.0, 2)[2]
    assert (consts["GATHER"], consts["CHUNK"], consts["BLOCK"]) == (1, 4096, 2048)
    assert (consts["GA"], consts["X_EVEN"], consts["IDX64"]) == (8, True, False)


def test_pad_gather_compiles_for_an_sm90_gpu() -> None:
    """Both buffers, int64 offsets and the conservative variant compile for sm_90."""
    cases = _cases(PAD_CASES + CROP_CASES)
    text = _write(PAD, cases)
    jobs = [
        (PAD, text, cases),
        (PAD, _edit(text, CHUNK_BLOCK), cases),
        (PAD, _edit(text, INT64), cases),
        (PAD, _write(PAD, cases, variant=1), cases),
    ]
    for job in jobs:
        assert_compiles_for_sm90([job])
