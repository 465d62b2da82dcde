"""The builtin provider's core and its elementwise families (unary, binary, backward).

Generated kernels run in Triton's CPU interpreter against eager ATen on odd sizes, broadcasting,
non-contiguous inputs, f32/f16/bf16 (plus integer and bool where the op takes them) and scalars.
"""

from __future__ import annotations

import inspect
import re
from pathlib import Path
from tempfile import TemporaryDirectory

import pytest
import torch
import triton.language as tl
from builtin_support import assert_compiles_for_sm90, load_kernel, materialize_case, run_generated

from agent.providers.base import Message, OperatorContext
from agent.providers.builtin import (
    BuiltinProvider,
    backward,
    binary,
    elementwise,
    unary,
)
from agent.providers.builtin.provider import choose_variant
from agent.providers.builtin.registry import FAMILIES, WRITERS
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.testcase import parse_case
from evaluator.naming import kernel_function_name

# The interpreter evaluates masked-off lanes too (log(0), x / 0): numpy warns, results are unused.
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def write(op: str, cases: list, variant: int = 0) -> str:
    source = WRITERS[op](KernelRequest(op=op, schema="", cases=cases, variant=variant))
    assert source is not None, f"{op} declined"
    return source


def check(op: str, texts: list[str], variant: int = 0, **kwargs) -> list[str]:
    cases = [parse_case(t) for t in texts]
    return run_generated(op, write(op, cases, variant), cases, **kwargs)


# ---------------------------------------------------------------- unary

# odd sizes; a permuted (dense, non-contiguous) f16 input; a row-sliced (non-dense) bf16 input
UNARY_CASES = [
    "((T([37, 53], f32),), {})",
    "((T([5, 7, 9], f16, [1, 5, 35]),), {})",
    "((T([3, 129], bf16, [256, 1]),), {})",
]
UNARY_EXTRA = {
    "relu.default": ["((T([2, 9], i64),), {})"],
    "gelu.default": [
        "((T([4, 33], f16),), {'approximate': 'tanh'})",
        "((T([33], bf16),), {'approximate': 'tanh'})",
    ],
    "hardtanh.default": ["((T([4, 33], f16), 0.0, 6.0), {})"],
    "leaky_relu.default": ["((T([4, 33], bf16), 0.2), {})"],
    "elu.default": ["((T([4, 33], f32), 1.5, 1.2, 0.8), {})"],
    "softplus.default": ["((T([4, 33], f32), 2.0, 3.0), {})"],
    "abs.default": ["((T([9], i32),), {})"],
    "neg.default": ["((T([9], i64),), {})"],
    "sign.default": ["((T([9], i32),), {})"],
    "floor.default": ["((T([9], i64),), {})"],
    "exp.default": ["((T([9], i64),), {})"],
    "isnan.default": ["((T([9], i64),), {})"],
    "isinf.default": ["((T([9], i32),), {})"],
    "logical_not.default": ["((T([9], b8),), {})", "((T([9], i64),), {})"],
}
UNARY_ARGS = {  # ops whose scalars have no default: every case gets them
    "clamp.default": ["((T([37, 53], f32), -0.5, 0.5), {})", "((T([5, 7, 9], f16, [1, 5, 35]), None, 0.2), {})",
                      "((T([3, 129], bf16, [256, 1]), -0.1), {})", "((T([9], i64), 0.5), {})", "((T([9], i64), -1, 3), {})"],
    "clamp_min.default": ["((T([37, 53], f32), 0.1), {})", "((T([3, 129], bf16, [256, 1]), -0.2), {})"],
    "clamp_max.default": ["((T([5, 7, 9], f16, [1, 5, 35]), 0.1), {})", "((T([9], i32), 2), {})"],
    "pow.Tensor_Scalar": [
        "((T([37, 53], f32), 2), {})", "((T([5, 7, 9], f16, [1, 5, 35]), 0.5), {})",
        "((T([3, 129], bf16, [256, 1]), 3), {})", "((T([9, 5], f32), 1.7), {})", "((T([9], f32), 0), {})",
        "((T([9], f32), 1), {})", "((T([9], f32), -0.5), {})", "((T([9], f32), -1), {})",
        "((T([9], f16), -2), {})", "((T([9, 4], i64), 5), {})", "((T([9], i32), 2), {})", "((T([9], i32), 2.5), {})",
    ],
    "bitwise_not.default": ["((T([9, 5], i64),), {})", "((T([5, 9], b8, [1, 5]),), {})", "((T([9], u8),), {})"],
}  # fmt: skip


@pytest.mark.parametrize("op", sorted(unary.SPECS))
def test_unary_matches_eager_on_odd_strided_and_each_float_dtype(op: str) -> None:
    texts = UNARY_ARGS.get(op, UNARY_CASES + UNARY_EXTRA.get(op, []))
    assert check(op, texts) == []


@pytest.mark.parametrize(
    "op",
    ["relu_.default", "silu_.default", "sigmoid_.default", "hardtanh_.default", "gelu_.default"],
)
def test_inplace_unary_writes_self_through_its_strides_and_returns_it(op: str) -> None:
    texts = ["((T([5, 7, 9], f16, [1, 5, 35]),), {})", "((T([3, 129], bf16, [256, 1]),), {})"]
    assert check(op, texts) == []


def test_out_overload_writes_the_out_tensor() -> None:
    assert check("relu.out", ["((T([5, 7], f32),), {'out': T([5, 7], f32)})"]) == []
    assert check("add.out", ["((T([5, 3], f16), T([3], f16)), {'out': T([5, 3], f16)})"]) == []


# ---------------------------------------------------------------- binary

BINARY_CASES = [
    "((T([37, 53], f32), T([53], f32)), {})",
    "((T([4, 1, 5], f16), T([3, 1], f16)), {})",
    "((T([6, 5], bf16, [1, 6]), T([6, 5], bf16)), {})",
]
BINARY_ARGS = {
    "add.Tensor": BINARY_CASES + [
        "((T([4, 5], f16), T([4, 5], f16)), {'alpha': 2})",
        "((T([2, 3], bf16), T([], f32)), {})",  # 0-d tensor does not promote a dimensioned one
        "((T([6, 5], f32, [1, 6]), T([6, 5], f16)), {'alpha': 0.5})",
        "((T([7], i64), T([7], i32)), {})",
        "((T([7], b8), T([7], b8)), {})",
        "((T([3, 4], f16), 2.5), {})",  # a Python number in a Tensor slot
        "((T([7], i32), 1.5), {})",
    ],
    "add.Scalar": ["((T([5, 3], f16), 3), {})", "((T([5, 3], i64), 3, 2), {})", "((T([4, 7], bf16), -1.5), {})"],
    "sub.Tensor": BINARY_CASES + ["((T([4, 5], f32), T([5], f32)), {'alpha': 3})"],
    "sub.Scalar": ["((T([5, 3], f16), 1.5), {})", "((T([5, 3], f32, [1, 5]), 2, 0.5), {})"],
    "rsub.Tensor": BINARY_CASES + ["((T([4, 5], f32), T([5], f32)), {'alpha': 2})"],
    "rsub.Scalar": ["((T([5, 3], f16), 1.0), {})", "((T([5, 3], f32), 1), {'alpha': 2})", "((T([5, 3], i64), 4), {})"],
    "mul.Scalar": ["((T([4, 5], bf16), 0.125), {})", "((T([4, 5], i32), 3), {})", "((T([4, 5], f16, [1, 4]), 2), {})"],
    "div.Tensor": BINARY_CASES + ["((T([7], i64), T([7], i64)), {})", "((T([4, 5], f16), T([], f32)), {})"],
    "div.Scalar": ["((T([4, 5], bf16), 8.0), {})", "((T([4, 5], i64), 2), {})", "((T([4, 5], f16, [1, 4]), 3), {})"],
    "div.Tensor_mode": [
        "((T([37, 53], f32), T([53], f32)), {'rounding_mode': 'floor'})",
        "((T([7, 9], f16), T([9], f16)), {'rounding_mode': 'trunc'})",
        "((T([7, 9], bf16, [1, 7]), T([7, 9], bf16)), {'rounding_mode': 'floor'})",
        "((T([50], i64), T([50], i64)), {'rounding_mode': 'floor'})",
        "((T([50], i32), T([50], i32)), {'rounding_mode': 'trunc'})",
        "((T([50], f32), T([50], f32)), {'rounding_mode': None})",
    ],
    "div.Scalar_mode": ["((T([50], f32), 0.7), {'rounding_mode': 'floor'})", "((T([50], i64), -3), {'rounding_mode': 'trunc'})"],
    "floor_divide.default": ["((T([50], i64), T([50], i64)), {})", "((T([5, 10], f16), T([10], f16)), {})"],
    "floor_divide.Scalar": ["((T([50], i64), 3), {})", "((T([50], f32), -0.3), {})"],
    "remainder.Tensor": ["((T([50], i64), T([50], i64)), {})", "((T([5, 10], f32), T([10], f32)), {})"],
    "remainder.Scalar": ["((T([50], i64), 3), {})", "((T([50], bf16), -1.5), {})"],
    "remainder.Scalar_Tensor": ["((5, T([50], i64)), {})", "((2.5, T([50], f32)), {})"],
    "fmod.Tensor": ["((T([50], i64), T([50], i64)), {})", "((T([5, 10], f16), T([10], f16)), {})"],
    "fmod.Scalar": ["((T([50], i32), 3), {})", "((T([50], f32), 0.4), {})"],
    "maximum.default": BINARY_CASES + ["((T([5], i64), T([5], i32)), {})"],
    "minimum.default": BINARY_CASES + ["((T([5], i64), T([5], i32)), {})"],
    "pow.Tensor_Tensor": ["((T([5, 6], f32), T([6], f32)), {})", "((T([5, 6], f16), T([6], f16)), {})", "((T([5, 6], bf16), T([5, 6], bf16)), {})"],
    "pow.Scalar": ["((2.0, T([5, 6], f32)), {})", "((3, T([5, 6], f16)), {})", "((0.5, T([5, 6], bf16)), {})"],
    "where.self": [
        "((T([5, 6], b8), T([5, 6], f16), T([6], f16)), {})",
        "((T([5, 1], b8), T([5, 6], f32, [1, 5]), T([], f32)), {})",
        "((T([5, 6], b8), T([5, 6], bf16), T([5, 6], bf16)), {})",
        "((T([5, 6], b8), T([5, 6], i64), T([5, 6], i32)), {})",
    ],
    "where.ScalarOther": ["((T([5, 6], b8), T([5, 6], f16), 0.0), {})"],
    "where.ScalarSelf": ["((T([5, 6], b8), -1.0, T([5, 6], bf16)), {})"],
    "where.Scalar": ["((T([5, 6], b8), 1.0, 0.0), {})", "((T([5, 6], b8), 1, 0), {})"],
    "masked_fill.Scalar": [
        "((T([2, 3, 5, 5], f16), T([2, 1, 1, 5], b8), -65504.0), {})",
        "((T([4, 5], f32), T([4, 5], b8), 0), {})",
        "((T([4, 5], bf16, [1, 4]), T([5], b8), 1.5), {})",
        "((T([4, 5], i64), T([4, 5], b8), 7), {})",
    ],
    "masked_fill.Tensor": ["((T([4, 5], bf16), T([4, 5], b8), T([], bf16)), {})", "((T([4, 5], f16), T([5], b8), T([], f32)), {})"],
    "bitwise_and.Tensor": ["((T([4, 5], b8), T([4, 5], b8)), {})", "((T([4, 5], i64), T([5], i64)), {})"],
    "bitwise_and.Scalar": ["((T([4, 5], i32), 6), {})"],
    "bitwise_or.Tensor": ["((T([4, 5], b8), T([4, 5], b8)), {})", "((T([4, 5], i64), T([5], i64)), {})"],
    "bitwise_or.Scalar": ["((T([4, 5], i32), 6), {})"],
    "bitwise_xor.Tensor": ["((T([4, 5], b8), T([4, 5], b8)), {})", "((T([4, 5], u8), T([5], u8)), {})"],
    "bitwise_xor.Scalar": ["((T([4, 5], i64), 5), {})"],
    "logical_and.default": ["((T([4, 5], b8), T([4, 5], b8)), {})", "((T([4, 5], f32), T([5], i64)), {})"],
    "logical_or.default": ["((T([4, 5], b8), T([4, 5], b8)), {})", "((T([4, 5], i32), T([5], b8)), {})"],
    "logical_xor.default": ["((T([4, 5], b8), T([4, 5], b8)), {})", "((T([4, 5], i32), T([5], i32)), {})"],
    "addcmul.default": ["((T([4, 5], f32), T([4, 5], f32), T([5], f32)), {'value': 0.5})", "((T([4, 5], f16), T([4, 5], f16), T([4, 5], f16)), {})"],
    "addcdiv.default": ["((T([4, 5], f32), T([4, 5], f32), T([5], f32)), {'value': -0.1})", "((T([4, 5], bf16), T([4, 5], bf16), T([4, 5], bf16)), {})"],
    "lerp.Scalar": ["((T([4, 5], f32), T([4, 5], f32), 0.3), {})", "((T([4, 5], f16), T([5], f16), 0.7), {})"],
    "lerp.Tensor": ["((T([4, 5], f16), T([4, 5], f16), T([5], f16)), {})", "((T([4, 5], f32), T([4, 5], f32), T([4, 5], f32)), {})"],
}  # fmt: skip
for _cmp in ("eq", "ne", "lt", "le", "gt", "ge"):
    BINARY_ARGS[f"{_cmp}.Tensor"] = BINARY_CASES + [
        "((T([5, 6], i64), T([6], i64)), {})",  # small ints: many equal pairs
        "((T([5, 6], f32), T([6], f16)), {})",
    ]
    BINARY_ARGS[f"{_cmp}.Scalar"] = [
        "((T([5, 6], i64), 0), {})",
        "((T([5, 6], f16), 0.5), {})",
        "((T([5, 6], bf16, [1, 5]), 0), {})",
        "((T([5, 6], i32), 2.5), {})",
    ]


@pytest.mark.parametrize("op", sorted(binary.SPECS))
def test_binary_matches_eager_with_broadcasting_promotion_and_scalars(op: str) -> None:
    assert check(op, BINARY_ARGS.get(op, BINARY_CASES)) == []


@pytest.mark.parametrize(
    "op, texts",
    [
        ("add_.Tensor", ["((T([6, 5], f32, [1, 6]), T([5], f32)), {})", "((T([4, 5], bf16), T([4, 5], bf16)), {'alpha': -1})"]),
        ("mul_.Tensor", ["((T([2, 3, 4], f16, [12, 1, 3]), T([3, 1], f16)), {})"]),
        ("div_.Scalar", ["((T([4, 5], f32, [1, 4]), 3.0), {})"]),
        ("masked_fill_.Scalar", ["((T([2, 3, 5, 5], f32), T([5, 5], b8), -1e9), {})"]),
        ("eq_.Scalar", ["((T([4, 5], f16), 0.0), {})"]),
    ],
)  # fmt: skip
def test_inplace_binary_mutates_self_and_returns_it(op: str, texts: list[str]) -> None:
    assert check(op, texts) == []


def test_broadcast_over_permuted_nd_inputs_uses_strided_index_math() -> None:
    # channels-last x with a per-channel y and a transposed z: no dims merge for every operand
    texts = [
        "((T([2, 3, 5, 7], f32, [105, 1, 21, 3]), T([3, 1, 1], f32)), {})",
        "((T([2, 3, 5, 7], f16, [105, 35, 1, 5]), T([2, 1, 5, 7], f16)), {})",
        "((T([4, 1, 6, 1, 5], bf16), T([3, 1, 2, 5], bf16)), {})",
    ]
    assert check("add.Tensor", texts) == []
    assert (
        check(
            "where.self",
            ["((T([3, 1, 7], b8), T([2, 3, 5, 7], f32, [105, 1, 21, 3]), T([5, 1], f32)), {})"],
        )
        == []
    )


def test_more_than_six_unmergeable_dims_fall_back_to_contiguous_copies() -> None:
    # alternating broadcast pattern: 7 dims that cannot be merged
    texts = ["((T([2, 1, 2, 1, 2, 1, 2], f32), T([1, 3, 1, 3, 1, 3, 1], f32)), {})"]
    assert check("mul.Tensor", texts) == []


@pytest.mark.parametrize("variant", [1, 2])
def test_fallback_variants_match_eager_on_strided_broadcast_inputs(variant: int) -> None:
    texts = [
        "((T([2, 3, 5, 7], f32, [105, 1, 21, 3]), T([3, 1, 1], f32)), {'alpha': 2})",
        "((T([37, 53], bf16), T([53], bf16)), {})",
    ]
    assert check("add.Tensor", texts, variant) == []
    assert check("relu_.default", ["((T([5, 7, 9], f16, [1, 5, 35]),), {})"], variant) == []


# strided (`_kernel`) cases of each arity: permuted, sliced, broadcast (stride 0), 0-d operands
STRIDED_CASES = {
    "neg.default": [
        "((T([1, 32, 12, 8], f16, [6144, 16, 512, 1]),), {})",
        "((T([3, 129], bf16, [256, 1]),), {})",
        "((T([2, 3, 5, 7], f32, [210, 1, 42, 3]),), {})",
    ],
    "add.Tensor": [
        "((T([2, 3, 5, 7], f32, [210, 1, 42, 3]), T([], f32)), {'alpha': 2})",
        "((T([4, 6], f16, [12, 2]), T([6], f16)), {})",
        "((T([2, 3, 5, 7], f16, [105, 35, 1, 5]), T([2, 1, 5, 7], f16)), {})",
    ],
    "threshold_backward.default": ["((T([4, 6], f32, [1, 4]), T([6], f32), 0.1), {})"],
    "where.self": [
        "((T([3, 1, 7], b8), T([2, 3, 5, 7], f32, [105, 1, 21, 3]), T([5, 1], f32)), {})",
        "((T([5, 1], b8), T([5, 6], bf16, [1, 5]), T([], bf16)), {})",
    ],
}  # fmt: skip


def _set_constant(text: str, name: str, value: object) -> str:
    """The same file with module constant `name` set to `value` (as knob_sweep sets it)."""
    line = re.search(rf"^{name} = .*$", text, re.M)
    assert line is not None, name
    return text[: line.start()] + f"{name} = {value!r}" + text[line.end() :]


def _tiny_tiles(text: str) -> str:
    """`_kernel_tile` for every strided case here, with several row and column blocks."""
    text = _set_constant(text, "_TILE_ELEMS_CPU", 16)
    text = _set_constant(text, "_TILE_MIN_COLS", 1)  # uneven widths too (masked column blocks)
    return _set_constant(text, "_TILE_MIN_ELEMS", 1)


def _strided_launches(op: str, texts: list[str], source: str, launch: int) -> None:
    """Every case takes the strided kernel `launch` (2 `_kernel`, 4 `_kernel_tile`) and matches
    eager."""
    cases = [parse_case(t) for t in texts]
    assert run_generated(op, source, cases) == []
    with TemporaryDirectory() as tmp:
        fn = load_kernel(op, source, Path(tmp))
        for index, case in enumerate(cases):
            args, kwargs = materialize_case(op, case, torch.Generator().manual_seed(index))
            fn(*args, **kwargs)
            plans = fn.__globals__["_PLANS"]
            assert [plan[0] for plan in plans.values()][-1] == launch, case.serialize()


# the strided kernels: `_kernel` (tiles off) and `_kernel_tile` with several blocks per axis
STRIDED_KERNELS = {2: lambda text: _set_constant(text, "_TILE", False), 4: _tiny_tiles}


@pytest.mark.parametrize("launch", sorted(STRIDED_KERNELS))
@pytest.mark.parametrize("op", sorted(STRIDED_CASES))
def test_strided_path_of_each_arity_matches_eager(op: str, launch: int) -> None:
    cases = [parse_case(t) for t in STRIDED_CASES[op]]
    source = STRIDED_KERNELS[launch](write(op, cases))
    _strided_launches(op, STRIDED_CASES[op], source, launch)


def _force_int64_offsets(text: str) -> str:
    """The same file with every strided launch on its int64-offset path (sizes here are small)."""
    old = "idx64 = wide or n + block >= 2**31"
    assert old in text
    return text.replace(old, "idx64 = True")


@pytest.mark.parametrize("launch", sorted(STRIDED_KERNELS))
@pytest.mark.parametrize("op", sorted(STRIDED_CASES))
def test_strided_path_with_int64_offsets_matches_eager(op: str, launch: int) -> None:
    cases = [parse_case(t) for t in STRIDED_CASES[op]]
    source = STRIDED_KERNELS[launch](_force_int64_offsets(write(op, cases)))
    _strided_launches(op, STRIDED_CASES[op], source, launch)


# rotary-embedding halves: contiguous 32/64-element rows, dims 1 and 2 transposed; odd row sizes
ROTARY_CASES = [
    "((T([2, 4, 40, 32], bf16, [20480, 64, 512, 1]),), {})",
    "((T([1, 4, 24, 64], f16, [12288, 128, 512, 1]),), {})",
    "((T([3, 5, 7, 31], f32, [4340, 62, 620, 1]),), {})",
]


def test_tile_kernel_reads_rotary_halves_in_vector_rows() -> None:
    """Default tiles (one program covers whole rows): the case plans `_kernel_tile`, with the
    unit-stride rows promised 16-element aligned where the strides allow it."""
    source = write("neg.default", [parse_case(t) for t in ROTARY_CASES])
    assert check("neg.default", ROTARY_CASES) == []
    with TemporaryDirectory() as tmp:
        fn = load_kernel("neg.default", source, Path(tmp))
        x = torch.randn(2, 64, 4, 64, dtype=torch.bfloat16).permute(0, 2, 1, 3)[..., :32]
        _same(fn(x), -x)
        plan = next(iter(fn.__globals__["_PLANS"].values()))
        assert plan[0] == 4 and plan[7] == (64, 32)
        assert plan[9][-2:] == (16, True)  # ALIGN, EVEN_C


def _expanded_calls() -> list[tuple]:
    """div.Scalar on per-channel values expanded over H*W (stride-0 inner dims), as torchbench
    records them: column counts divisible by 16 (masked), not (power-of-two column blocks), odd."""

    def per_channel(n: int, c: int, hw: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
        base = torch.randn(n, c, dtype=dtype).view(n, c, *([1] * len(hw)))
        return base.expand(n, c, *hw)

    return [
        (per_channel(3, 40, (28, 28), torch.bfloat16), 784),
        (per_channel(2, 96, (14, 14), torch.bfloat16), 196),
        (per_channel(2, 33, (7, 7), torch.float16), 49),
        (per_channel(4, 20, (2048,), torch.float32), 2048),
        (per_channel(2, 3, (5, 37), torch.float32), -3),
    ]


@pytest.mark.parametrize("tiles", ["default", "tiny"])
def test_tile_kernel_on_stride_zero_inner_dims_matches_eager(tiles: str) -> None:
    source = write("div.Scalar", [])
    if tiles == "tiny":
        source = _tiny_tiles(source)
    with TemporaryDirectory() as tmp:
        fn = load_kernel("div.Scalar", source, Path(tmp))
        for x, other in _expanded_calls():
            _same(fn(x, other), torch.div(x, other))
            if tiles == "tiny":
                assert list(fn.__globals__["_PLANS"].values())[-1][0] == 4


def test_tile_kernel_with_row_broadcast_zero_dim_and_number_operands() -> None:
    """add with a [C] operand (row stride 0), a 0-d tensor, a number; where with a bool mask
    broadcast along rows and columns; in-place with a transposed operand (columns step by 7)."""
    with TemporaryDirectory() as tmp:
        add = _tiny_tiles(write("add.Tensor", []))
        fn = load_kernel("add.Tensor", add, Path(tmp) / "add")
        x = torch.randn(6, 10, dtype=torch.float16)[:, 1:8]
        bias = torch.randn(7, dtype=torch.float16)
        _same(fn(x, bias), x + bias)
        _same(fn(x, torch.tensor(2.0), alpha=3), torch.add(x, torch.tensor(2.0), alpha=3))
        _same(fn(x, 1.5), x + 1.5)
        assert {p[0] for p in fn.__globals__["_PLANS"].values()} == {4}
        where = _tiny_tiles(write("where.self", []))
        fn = load_kernel("where.self", where, Path(tmp) / "where")
        cond = torch.rand(5, 1) > 0.5  # stride 0 along the rows of y
        y = torch.randn(3, 5, 14)[..., ::2]
        _same(fn(cond, y, torch.tensor(-1.0)), torch.where(cond, y, torch.tensor(-1.0)))
        mul = _tiny_tiles(write("mul_.Tensor", []))
        fn = load_kernel("mul_.Tensor", mul, Path(tmp) / "mul")
        z = torch.randn(6, 8)
        other = torch.randn(8, 7)[:, :6].t()  # [6, 8] with strides [1, 7]: not dense
        want = z * other
        assert fn(z, other) is z
        _same(z, want)
        assert list(fn.__globals__["_PLANS"].values())[-1][0] == 4


def test_tile_plan_keeps_the_strided_kernel_for_tiny_uneven_inner_dims(tmp_path: Path) -> None:
    fn, module = _load("neg.default", tmp_path)
    x = torch.randn(400, 4, 4)[:, :3, :3]  # rows of 3, 3 rows: tiles of one element
    _same(fn(x), -x)
    assert next(iter(module["_PLANS"].values()))[0] == 2


class _Counting:
    """Stands in for a launched kernel: counts `kernel[grid](...)` launches, then runs them."""

    def __init__(self, kernel) -> None:
        self.kernel, self.launches = kernel, 0

    def __getitem__(self, grid):
        def launch(*args, **kwargs):
            self.launches += 1
            return self.kernel[grid](*args, **kwargs)

        return launch


def test_geometry_is_stored_once_per_plan_and_passed_as_one_pointer(tmp_path: Path) -> None:
    fn, module = _load("add.Tensor", tmp_path)
    store = module["_store_geometry"] = _Counting(module["_store_geometry"])
    kernel = module["_kernel"] = _Counting(module["_kernel"])
    x, y = torch.randn(6, 10)[:, ::2], torch.randn(5)
    for _ in range(3):
        _same(fn(x, y), x + y)
    assert (store.launches, kernel.launches) == (1, 3)
    _same(fn(x.t(), y.view(5, 1)), x.t() + y.view(5, 1))  # a new geometry: a new plan
    assert (store.launches, kernel.launches) == (2, 4)
    plan = next(p for p in module["_PLANS"].values() if p[0] == 2)
    geo = next(a for a in plan[9] if isinstance(a, torch.Tensor))
    # sizes, then the out's, x's and y's strides, _MAX_DIMS each (outer dims padded)
    assert geo.dtype == torch.int32
    assert geo.tolist() == [1] * 4 + [6, 5] + [0] * 4 + [5, 1] + [0] * 4 + [10, 2] + [0] * 5 + [1]
    # launch arguments from n: n, geometry, LAYOUT, 2 operand flags, CDT, FLOAT, OUT_BOOL, IDX64
    assert len(plan[9]) == 9 and plan[9][1] is geo and plan[9][2] == 2 + 8  # 2 dims, out linear


def test_geometry_of_a_zero_dim_and_a_number_operand(tmp_path: Path) -> None:
    fn, module = _load("where.self", tmp_path)
    cond = torch.rand(4, 1) > 0.5
    x = torch.randn(6, 4).t()
    for other in (torch.tensor(2.0), 2.0, torch.tensor(2.0, dtype=torch.float64)):
        _same(fn(cond, x, other), torch.where(cond, x, other))
    assert sum(p[0] == 2 for p in module["_PLANS"].values()) == 3


# ---------------------------------------------------------------- the wrapper's plan cache


def _load(op: str, tmp_path: Path, variant: int = 0):
    """The op's entry point and its module globals (the plan cache lives there)."""
    fn = load_kernel(op, write(op, [], variant), tmp_path)
    return fn, fn.__globals__


def _same(got: torch.Tensor, want: torch.Tensor) -> None:
    torch.testing.assert_close(got, want, rtol=1e-3, atol=1e-3)
    assert got.shape == want.shape and got.dtype == want.dtype


def test_plan_cache_tells_same_shapes_with_different_strides_apart(tmp_path: Path) -> None:
    fn, _ = _load("add.Tensor", tmp_path)
    y = torch.randn(6, 5)
    for x in (
        torch.randn(6, 5),  # contiguous: flat launch
        torch.randn(5, 6).t(),  # transposed: dense, output laid out like it
        torch.randn(6, 10)[:, ::2],  # non-dense: strided launch
        torch.randn(6, 1).expand(6, 5),  # broadcast view (stride 0)
    ):
        _same(fn(x, y), x + y)
        _same(fn(y, x), y + x)


def test_plan_cache_tells_zero_dim_tensors_numbers_and_dtypes_in_one_slot_apart(
    tmp_path: Path,
) -> None:
    fn, _ = _load("mul.Tensor", tmp_path)
    for x in (torch.randn(4, 3).half(), torch.arange(12, dtype=torch.int32).view(4, 3)):
        for other in (
            torch.tensor(2.5),
            2.5,
            torch.tensor(3, dtype=torch.int64),
            3,
            True,
            torch.tensor(1.5, dtype=torch.float64),
            torch.full((4, 3), 2, dtype=torch.int16),
        ):
            _same(fn(x, other), torch.mul(x, other))


def test_inplace_on_a_broadcast_input(tmp_path: Path) -> None:
    fn, _ = _load("add_.Tensor", tmp_path)
    small, big = torch.randn(1, 5), torch.randn(4, 5)
    with pytest.raises(RuntimeError):
        fn(small.clone(), big)  # self would have to grow, as eager refuses
    x = big.clone()
    assert fn(x, small) is x
    _same(x, big + small)
    x = big.clone()
    other = torch.randn(5).expand(4, 5)  # stride-0 rows, read as a broadcast
    fn(x, other)
    _same(x, big + other)


def test_out_overload_resizes_a_wrongly_shaped_out_on_every_call(tmp_path: Path) -> None:
    fn, _ = _load("add.out", tmp_path)
    x, y = torch.randn(5, 3), torch.randn(3)
    for _ in range(2):
        out = torch.empty(0)
        assert fn(x, y, out=out) is out
        _same(out, x + y)
    assert fn(x, y, out=out) is out  # now the right shape: a cached plan
    _same(out, x + y)


def test_plan_cache_is_bounded_and_holds_no_tensors(tmp_path: Path) -> None:
    import gc
    import weakref

    fn, module = _load("sub.Tensor", tmp_path)
    module["_MAX_PLANS"] = 4
    refs = []
    for n in range(1, 12):
        x = torch.randn(n, 3)
        _same(fn(x, torch.tensor(1.0)), x - 1.0)
        refs.append(weakref.ref(x))
        del x
        assert len(module["_PLANS"]) <= 4
    gc.collect()
    assert all(r() is None for r in refs)


def test_zero_element_and_tensor_subclass_inputs_match_eager(tmp_path: Path) -> None:
    fn, _ = _load("mul.Tensor", tmp_path)
    y = torch.randn(5)
    _same(fn(torch.randn(0, 5), y), torch.randn(0, 5) * y)
    p = torch.nn.Parameter(torch.randn(3, 5), requires_grad=False)  # keyed like a tensor
    _same(fn(p, y), p.detach() * y)


def test_result_type_matches_torch_for_tensors_zero_dim_tensors_and_scalars() -> None:
    module_fn = load_kernel(
        "add.Tensor", write("add.Tensor", []), Path(__import__("tempfile").mkdtemp())
    )
    result_type = module_fn.__globals__["_result_type"]
    dtypes = [torch.bool, torch.uint8, torch.int8, torch.int16, torch.int32, torch.int64,
              torch.float16, torch.bfloat16, torch.float32, torch.float64]  # fmt: skip
    for a in dtypes:
        for b in dtypes:
            x, y0 = torch.zeros(2, dtype=a), torch.zeros((), dtype=b)
            for other in (torch.zeros(2, dtype=b), y0):
                assert result_type(x, other) == torch.result_type(x, other), (a, b, other.dim())
            assert result_type(torch.zeros((), dtype=a), y0) == torch.result_type(
                torch.zeros((), dtype=a), y0
            )
        for scalar in (True, 3, 2.5):
            assert result_type(torch.zeros(2, dtype=a), scalar) == torch.result_type(
                torch.zeros(2, dtype=a), scalar
            )


def _with_values(values: dict[int, torch.Tensor]):
    """make_args that replaces positional tensors by given values (special inputs)."""

    def make(op, case, gen):
        args, kwargs = materialize_case(op, case, gen)
        args = tuple(
            values.get(i, a) if isinstance(a, torch.Tensor) else a for i, a in enumerate(args)
        )
        return args, kwargs

    return make


def test_float_floor_and_trunc_division_are_exact_on_integer_quotients() -> None:
    a = torch.tensor([6.0, -6.0, 7.0, -7.0, 1.0, 0.3, -0.3, 5.0, 0.0, 3.0] * 3)
    b = torch.tensor([3.0, 3.0, -2.0, 2.0, 0.1, 0.1, 0.1, 0.0, 2.0, 3.0] * 3)
    cases = ["((T([30], f32), T([30], f32)), {'rounding_mode': 'floor'})"]
    make = _with_values({0: a, 1: b})
    assert check("div.Tensor_mode", cases, make_args=make) == []
    cases = ["((T([30], f32), T([30], f32)), {'rounding_mode': 'trunc'})"]
    assert check("div.Tensor_mode", cases, make_args=make) == []


def test_numbers_keep_their_kind_through_the_kernel_argument_pairs(tmp_path: Path) -> None:
    """A number reaches the kernel as an (integer, float) pair: integers in the integer half (an
    int64 alpha past 2**53 stays exact, which a double would round), floats in the half annotated
    tl.float64 (a double on the GPU too, where a plain float argument is packed as fp32)."""
    add, module = _load("add.Tensor", tmp_path)
    x = torch.tensor([1, -3, 2**40], dtype=torch.int64)
    big = 2**53 + 1
    assert torch.equal(add(x, x, alpha=big), torch.add(x, x, alpha=big))
    assert torch.equal(add(x, big), torch.add(x, big))
    d = torch.tensor([0.5, -1.25, 3.0], dtype=torch.float64)
    assert torch.equal(add(d, 0.1), torch.add(d, 0.1))
    assert torch.equal(add(d, d, alpha=0.1), torch.add(d, d, alpha=0.1))
    signature = inspect.signature(module["_kernel_flat"].fn)
    annotated = {n for n, p in signature.parameters.items() if p.annotation == tl.float64}
    assert annotated == {"x_fval", "y_fval", "alpha_f"}


def test_pow_of_negative_bases_follows_integer_exponent_rules() -> None:
    x = torch.tensor([-2.0, -1.5, 0.0, 1.5, -0.0, 2.0] * 2)
    e = torch.tensor([3.0, 2.0, -1.0, 0.5, 2.0, 0.0, 0.5, -2.0, 3.0, 0.0, 1.0, -3.0])
    cases = ["((T([12], f32), T([12], f32)), {})"]
    assert check("pow.Tensor_Tensor", cases, make_args=_with_values({0: x, 1: e})) == []


@pytest.mark.parametrize(
    "op, text",
    [
        ("relu.default", "((T([6], f32),), {})"),
        ("hardtanh.default", "((T([6], f32),), {})"),
        ("clamp.default", "((T([6], f32), -0.5, 0.5), {})"),
        ("maximum.default", "((T([6], f32), T([6], f32)), {})"),
        ("minimum.default", "((T([6], f32), T([6], f32)), {})"),
        ("sigmoid.default", "((T([6], f32),), {})"),
        ("tanh.default", "((T([6], f32),), {})"),
        ("isnan.default", "((T([6], f32),), {})"),
        ("isinf.default", "((T([6], f32),), {})"),
        ("exp.default", "((T([6], f32),), {})"),
        ("log1p.default", "((T([6], f32),), {})"),
        ("expm1.default", "((T([6], f32),), {})"),
    ],
)
def test_nan_and_inf_propagate_like_eager(op: str, text: str) -> None:
    special = torch.tensor([float("nan"), float("inf"), -float("inf"), 0.0, 1e-30, -3.0])
    other = torch.tensor([1.0, float("nan"), 0.0, float("nan"), -1.0, 2.0])
    assert check(op, [text], make_args=_with_values({0: special, 1: other})) == []


# ---------------------------------------------------------------- backward

BACKWARD_ARGS = {
    "threshold_backward.default": ["((T([37, 53], f16), T([37, 53], f16), 0), {})", "((T([9, 5], f32, [1, 9]), T([9, 5], f32), 0.5), {})", "((T([4, 33], bf16), T([4, 33], bf16), 0), {})"],
    "sigmoid_backward.default": ["((T([37, 53], f32), T([37, 53], f32)), {})", "((T([4, 33], bf16), T([4, 33], bf16)), {})"],
    "tanh_backward.default": ["((T([37, 53], f16), T([37, 53], f16)), {})", "((T([4, 33], bf16), T([4, 33], bf16, [1, 4])), {})"],
    "gelu_backward.default": ["((T([37, 53], f32), T([37, 53], f32)), {})", "((T([4, 33], f16), T([4, 33], f16)), {'approximate': 'tanh'})", "((T([4, 33], bf16), T([4, 33], bf16)), {})"],
    "silu_backward.default": ["((T([37, 53], f16), T([37, 53], f16)), {})", "((T([4, 33], bf16), T([4, 33], bf16)), {})", "((T([4, 33], f32), T([4, 33], f32)), {})"],
    "hardtanh_backward.default": ["((T([37, 53], f16), T([37, 53], f16), -1.0, 1.0), {})", "((T([4, 33], f32), T([4, 33], f32), 0.0, 6.0), {})"],
    "leaky_relu_backward.default": ["((T([37, 53], f16), T([37, 53], f16), 0.1, False), {})", "((T([4, 33], bf16), T([4, 33], bf16), 0.2, True), {})"],
    "elu_backward.default": ["((T([37, 53], f32), 1.0, 1.0, 1.0, False, T([37, 53], f32)), {})", "((T([4, 33], f16), 1.5, 1.0, 2.0, True, T([4, 33], f16)), {})"],
    "hardsigmoid_backward.default": ["((T([37, 53], f16), T([37, 53], f16)), {})", "((T([4, 33], f32), T([4, 33], f32)), {})"],
    "hardswish_backward.default": ["((T([37, 53], f16), T([37, 53], f16)), {})", "((T([4, 33], bf16), T([4, 33], bf16)), {})"],
    "softplus_backward.default": ["((T([37, 53], f32), T([37, 53], f32), 1.0, 20.0), {})", "((T([4, 33], f16), T([4, 33], f16), 2.0, 1.0), {})"],
    "mish_backward.default": ["((T([37, 53], f32), T([37, 53], f32)), {})", "((T([4, 33], f16), T([4, 33], f16)), {})"],
    "native_dropout_backward.default": ["((T([37, 53], f16), T([37, 53], b8), 1.1111111111111112), {})", "((T([4, 33], f32), T([4, 33], b8), 2.0), {})"],
}  # fmt: skip


@pytest.mark.parametrize("op", sorted(backward.SPECS))
def test_backward_matches_eager_for_each_dtype(op: str) -> None:
    assert check(op, BACKWARD_ARGS[op]) == []


# ---------------------------------------------------------------- every writer, the files, the provider


def test_every_elementwise_writer_renders_a_file_with_the_entry_point_and_allowed_imports() -> None:
    # render_file already compiles every file; here: the entry point and the sandbox's imports
    for family in (unary, binary, backward):
        for op, writer in family.WRITERS.items():
            source = writer(KernelRequest(op=op, schema="", cases=[], variant=0))
            assert f"\ndef {kernel_function_name(op)}(*args, **kwargs):" in source, op
            imports = set(re.findall(r"^(?:import|from) ([\w.]+)", source, flags=re.M))
            assert imports == {"torch", "triton", "triton.language"}, (op, imports)
            assert "@triton.jit" in source, op


def test_every_covered_name_is_a_real_aten_overload() -> None:
    for op in WRITERS:
        name, overload = op.split(".")
        assert overload in getattr(torch.ops.aten, name).overloads(), op


def test_writer_declines_complex_dtypes() -> None:
    cases = [parse_case("((T([4], c64), T([4], c64)), {})")]
    assert WRITERS["add.Tensor"](KernelRequest("add.Tensor", "", cases)) is None


def test_writer_declines_integer_pow_with_a_tensor_exponent() -> None:
    cases = [parse_case("((T([4], i64), T([4], i64)), {})")]
    assert WRITERS["pow.Tensor_Tensor"](KernelRequest("pow.Tensor_Tensor", "", cases)) is None


def _context(op: str, cases: list[str], **kwargs) -> OperatorContext:
    return OperatorContext(op=op, schema="", cases=[parse_case(c) for c in cases], **kwargs)


def test_completion_holds_one_python_block_with_the_kernel_file() -> None:
    done = BuiltinProvider().complete(
        [Message("user", "write add")], _context("aten.add.Tensor", BINARY_CASES)
    )
    blocks = re.findall(r"```python\n(.*?)```", done.text, flags=re.S)
    assert len(blocks) == 1 and done.text.count("```") == 2
    assert f"def {kernel_function_name('add.Tensor')}(" in blocks[0]
    assert done.model == "builtin-v1"


def test_same_request_gives_the_same_text() -> None:
    provider = BuiltinProvider()
    first = provider.complete([], _context("gelu.default", UNARY_CASES, worker=1, round=1))
    again = BuiltinProvider().complete([], _context("gelu.default", UNARY_CASES, worker=2, round=1))
    assert first.text == again.text


def test_unknown_op_answer_has_no_code_block_and_names_the_families() -> None:
    provider = BuiltinProvider()
    done = provider.complete([], _context("aten.totally_unknown.default", []))
    assert "```" not in done.text
    assert done.text.startswith(
        "builtin provider has no writer for totally_unknown.default; it covers:"
    )
    assert all(family in done.text for family in FAMILIES)
    assert not provider.can_write("totally_unknown.default") and provider.can_write(
        "aten.relu_.default"
    )


def test_declined_cases_answer_without_code() -> None:
    done = BuiltinProvider().complete(
        [], _context("add.Tensor", ["((T([4], c64), T([4], c64)), {})"])
    )
    assert "```" not in done.text and "has no writer for add.Tensor" in done.text


def test_variant_policy_moves_to_fallbacks_only_after_feedback() -> None:
    assert choose_variant(_context("relu.default", [], round=1)) == 0
    assert choose_variant(_context("relu.default", [], round=3)) == 0
    assert choose_variant(_context("relu.default", [], round=2, feedback={"status": "failed"})) == 1
    assert choose_variant(_context("relu.default", [], round=3, feedback={"status": "failed"})) == 2
    text = (
        BuiltinProvider()
        .complete([], _context("relu.default", UNARY_CASES, round=2, feedback={"status": "failed"}))
        .text
    )
    assert "variant 1" in text and "_CONTIGUOUS_INPUTS = True" in text


def test_elementwise_variants_clamp_to_the_last_one() -> None:
    assert elementwise.render("relu.default", unary.SPECS["relu.default"], 7) == write(
        "relu.default", [], 2
    )


@pytest.mark.slow
def test_kernels_compile_for_an_sm90_gpu() -> None:
    """The interpreter accepts code the GPU compiler rejects; compile real launches for sm_90."""
    jobs = {
        "add.Tensor": ["((T([2, 3, 5, 7], f32, [105, 1, 21, 3]), T([3, 1, 1], f16)), {})", "((T([8], bf16), 2.0), {})"],
        "pow.Tensor_Scalar": ["((T([9], i64), 5), {})", "((T([9], f16), 1.7), {})"],
        "div.Tensor_mode": ["((T([9], f32), T([9], f32)), {'rounding_mode': 'floor'})", "((T([9], i64), T([9], i64)), {'rounding_mode': 'floor'})"],
        "gelu_backward.default": ["((T([9], bf16), T([9], bf16)), {'approximate': 'tanh'})"],
        "neg.default": ["((T([1, 32, 12, 8], f16, [6144, 16, 512, 1]),), {})"],  # strided unary
        "div.Scalar": ["((T([4, 6, 5], bf16, [30, 5, 1]), 3.0), {})"],
        "where.self": [STRIDED_CASES["where.self"][0]],
    }  # fmt: skip
    batch = []
    for op, texts in jobs.items():
        cases = [parse_case(t) for t in texts]
        batch.append((op, write(op, cases), cases))
    for op in ("neg.default", "add.Tensor"):  # the strided path with int64 offsets too
        cases = [parse_case(t) for t in STRIDED_CASES[op][:1]]
        batch.append((op, _force_int64_offsets(write(op, cases)), cases))
    for op in ("neg.default", "add.Tensor", "where.self"):  # `_kernel` with tiles off
        cases = [parse_case(t) for t in STRIDED_CASES[op][:1]]
        batch.append((op, _set_constant(write(op, cases), "_TILE", False), cases))
    cases = [parse_case(t) for t in ROTARY_CASES]
    batch.append(("neg.default", write("neg.default", cases), cases))
    assert_compiles_for_sm90(batch)


def test_gelu_and_its_backward_without_erf_stay_as_accurate_as_eager(tmp_path: Path) -> None:
    """`_normal_tail` replaces erf for f16/bf16/f32: over a dense sweep (large |x| included) the
    error vs float64 stays below eager's own, and +-inf / NaN give CUDA eager's inf, NaN, NaN."""
    x = torch.cat([torch.linspace(-12, 12, 200_001), torch.tensor([5.99, 6.0, -6.0, -6.01])])
    gelu = load_kernel("gelu.default", write("gelu.default", []), tmp_path / "f")
    backward = load_kernel(
        "gelu_backward.default", write("gelu_backward.default", []), tmp_path / "b"
    )
    g = torch.randn(x.shape, generator=torch.Generator().manual_seed(0))
    for dtype in (torch.float32, torch.float16):
        xd, gd = x.to(dtype), g.to(dtype)
        for ours, eager, ref in (
            (gelu(xd), torch.nn.functional.gelu(xd), torch.nn.functional.gelu(xd.double())),
            (
                backward(gd, xd),
                torch.ops.aten.gelu_backward(gd, xd),
                torch.ops.aten.gelu_backward(gd.double(), xd.double()),
            ),
        ):
            ours_err = (ours.double() - ref).abs().max().item()
            eager_err = (eager.double() - ref).abs().max().item()
            assert ours_err <= max(eager_err, 5e-7), (dtype, ours_err, eager_err)
    special = torch.tensor([float("inf"), -float("inf"), float("nan"), -100.0, 100.0])
    out = gelu(special)
    assert out[[0, 3, 4]].tolist() == [float("inf"), 0.0, 100.0] and out[1:3].isnan().all()


def test_tile_plan_leaves_uneven_widths_to_the_strided_kernel(tmp_path: Path) -> None:
    """GPU plans for 196-wide rows (div.Scalar over [N, C, 14, 14] expanded per channel): 4-wide
    column blocks (196's power-of-two divisor) ran 42 us on the H200 and rows padded to 256
    columns 24 us, against `_kernel`'s 17; so no tile. 784-wide rows keep 64-wide blocks."""
    _, module = _load("div.Scalar", tmp_path)
    gpu = torch.device("cuda")  # only its type is read
    for cols, want in ((196, None), (49, None), (784, 64), (2048, 1024)):
        sizes = [1, 1, 1, 1, 4096, cols]
        merged = [[0, 0, 0, 0, cols, 1], [0, 0, 0, 0, 1, 0]]  # out contiguous, x expanded
        plan = module["_tile_plan"](2, sizes, merged, 4096 * cols, gpu)
        assert (plan if plan is None else plan[1]) == want, cols


@pytest.mark.parametrize("op", ["div.Scalar", "div.Tensor", "div_.Tensor", "div.Scalar_mode"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
def test_true_division_by_a_scalar_multiplies_by_its_reciprocal_like_cuda_eager(
    op: str, dtype: torch.dtype
) -> None:
    """CUDA eager divides by a CPU scalar (a Python number) as x * (1 / y), the reciprocal
    rounded once in fp32 (div_true_kernel_cuda), and by a tensor with an IEEE division: the
    kernel repeats both, bit for bit. (Not bf16: the interpreter truncates fp32 to bf16.)"""
    gen = torch.Generator().manual_seed(5)
    x = (torch.randn(4, 37, generator=gen) * 100).to(dtype)
    y = (torch.rand(4, 37, generator=gen) + 0.3).to(dtype)
    kwargs = {"rounding_mode": None} if op.endswith("_mode") else {}
    with TemporaryDirectory() as tmp:
        fn = load_kernel(op, write(op, []), Path(tmp))
        for scalar in (0.825, 3.0, -7.1):
            got = fn(x.clone(), scalar, **kwargs)
            inv = torch.tensor(1.0) / torch.tensor(scalar, dtype=torch.float32)
            assert torch.equal(got, (x.float() * inv).to(dtype)), scalar
        if op != "div.Scalar" and op != "div.Scalar_mode":
            got = fn(x.clone(), y)
            assert torch.equal(got, (x.float() / y.float()).to(dtype))
