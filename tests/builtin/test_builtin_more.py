"""The builtin provider's movement, embedding backward, loss, pooling, scan, norm_extra and
_safe_softmax kernels against eager ATen, in Triton's CPU interpreter.

Cases are small, odd-sized versions of the torchbench trace's cases (same dtypes, strides and
arguments), plus the edge cases each template claims: negative pads, strided gradients, broadcast
and separated index tensors, accumulation with duplicate indices, padding_idx, ignore_index,
ceil_mode, count_include_pad, divisor_override, channels-last inputs, fully masked softmax rows.
Inputs come from the evaluator's own `materialize` (valid indices, real max-pool indices, consistent
total_weight), so the kernels see what the evaluator will give them. A few kernels also go through
the real evaluator (`judge_candidate`, sandboxed): it must pass them with no flags, which catches
PyTorch compute in a wrapper that eager comparisons alone would miss.
"""

from __future__ import annotations

import importlib
import sys
import tempfile
from pathlib import Path

import pytest
import torch
from builtin_support import (
    assert_compiles_for_sm90,
    compare,
    load_kernel,
    materialize_case,
    run_generated,
)

from agent.providers.builtin import codegen
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.inputs import materialize
from evaluator.cases.testcase import TestCase, parse_case
from evaluator.naming import kernel_file_name, op_to_folder

MODULES = ("movement", "embedding", "loss", "pooling", "scan", "norm_extra", "softmax")


def _module(name: str):
    return importlib.import_module(f"agent.providers.builtin.{name}")


def _family_of(op: str) -> str:
    for name in MODULES:
        if op in _module(name).WRITERS:
            return name
    raise KeyError(op)


def _write(op: str, cases: list[TestCase], variant: int = 0) -> str:
    request = KernelRequest(op, str(codegen.schema_of(op)), cases, variant)
    text = _module(_family_of(op)).WRITERS[op](request)
    assert text is not None, f"the writer declined {op}"
    return text


def _evaluator_inputs(op: str, case: TestCase, gen: torch.Generator):
    """The evaluator's own inputs (valid indices, forward-made max-pool indices ...)."""
    return materialize(op, case, "cpu", int(gen.initial_seed()))


def _distinct(op: str, case: TestCase, gen: torch.Generator):
    """Distinct values: CPU eager sorts unstably, so ties would make its indices arbitrary."""
    args, kwargs = materialize_case(op, case, gen)
    x = args[0]
    n = x.numel()
    values = torch.randperm(n, generator=gen) - n // 2
    values = values.double() / 4 if x.is_floating_point() else values
    return (values.to(x.dtype).reshape(x.shape), *args[1:]), kwargs


CASES: dict[str, list[str]] = {
    # ---- movement
    "constant_pad_nd.default": [
        "((T([3, 5, 6, 7], f16), [0, 0, 0, 0, 0, 0], 0.0), {})",
        "((T([2, 3, 7, 9], f16), [0, 1, 0, 1], 0.0), {})",
        "((T([2, 3, 7, 9], f32), [1, 2, 1, 2], 1.5), {})",
        "((T([2, 3, 7, 9], bf16, [189, 1, 27, 3]), [-1, 2, 1, -2], 0.0), {})",
        "((T([4, 20], i64), [0, 1], -100.0), {})",
        # no padding (a plain copy): odd sizes, transposed and channels-last inputs, bools
        "((T([3, 5, 7, 11], f16, [385, 1, 55, 5]), [0, 0, 0, 0], 0.0), {})",
        "((T([2, 7, 5], f32, [1, 2, 14]), [0, 0], 3.0), {})",
        "((T([5, 3], b8), [0, 0], 0.0), {})",
        "((T([0, 3], f32), [0, 0], 0.0), {})",
        # rows follow by carries (ROW_STEP: a program's rows fit in the innermost row dim, 43)
        "((T([3, 40, 600], f16), [1, 2, 2, 1], 0.5), {})",
    ],
    "slice_backward.default": [
        "((T([2, 3, 5, 4], bf16, [120, 4, 24, 1]), [2, 3, 5, 8], 3, 4, 9223372036854775807, 1), {})",
        "((T([2, 3, 5, 4], bf16, [120, 40, 8, 1]), [2, 3, 5, 8], 3, 0, 4, 1), {})",
        "((T([2, 3, 5, 4], f16), [2, 7, 5, 4], 1, 1, 7, 2), {})",
        "((T([3, 4], f32), [3, 9], -1, -8, 9223372036854775807, 2), {})",
        "((T([3, 20, 600], f32), [3, 41, 600], 1, 1, 41, 2), {})",  # ROW_STEP with a step of 2
    ],
    "select_backward.default": [
        "((T([4, 7], f32), [4, 5, 7], 1, 0), {})",
        "((T([4, 7], f16), [4, 7, 3], -1, -1), {})",
        "((T([3, 600], f32), [3, 33, 600], 1, 5), {})",  # ROW_STEP
    ],
    "repeat.default": [
        "((T([3, 5, 6], f16), [4, 1, 1]), {})",
        "((T([1, 6], i64), [4, 1]), {})",
        "((T([3, 2], bf16, [1, 3]), [2, 2, 3]), {})",
    ],
    "roll.default": [
        "((T([2, 5, 6, 7], f16), [-3, -3], [1, 2]), {})",
        "((T([2, 5, 6, 7], f16), [3, 3], [1, 2]), {})",
        "((T([5, 7], f32), [3]), {})",
        "((T([5, 7], f32, [1, 5]), [9, -2], [0, 1]), {})",
        "((T([0, 7], f32), [2], [1]), {})",
        "((T([3, 37, 600], f16), [5, -7], [1, 2]), {})",  # ROW_STEP with wrap-around
    ],
    "index.Tensor": [
        "((T([73, 12], f16), [T([389], i64)]), {})",
        "((T([8, 51], b8), [T([8, 1, 1, 1], i64), T([1, 1, 1, 51], i64)]), {})",
        "((T([64, 33], bf16), [T([70], i64)]), {})",
        "((T([4, 19], f16), [None, T([19, 19], i64)]), {})",
        "((T([5, 7, 9], f16), [T([6], i64), T([6], i64)]), {})",
        "((T([44, 13], f16), [T([4, 6], i64)]), {})",
        "((T([5, 7, 9], f32), [T([3], i64), None, T([3], i64)]), {})",
        "((T([5, 7, 9], f32, [1, 5, 35]), [None, T([2, 3], i32)]), {})",
    ],
    "index_put.default": [
        "((T([40, 17], f32), [T([40], i64)], T([40, 17], f32), True), {})",
        "((T([30, 17], bf16), [T([60], i64)], T([60, 17], bf16), True), {})",
        "((T([50], f32), [T([50], i64)], T([50], f32), True), {})",
        "((T([6, 7, 8], f16), [None, T([4], i64)], T([8], f16), False), {})",
    ],
    "index_put_.default": [
        "((T([64], i64), [T([64], i64)], T([64], i64)), {})",
        "((T([30, 9], f16), [T([40], i64)], T([40, 9], f16), True), {})",
    ],
    "scatter.src": [
        "((T([64, 8], f32), -1, T([64, 2], i64), T([64, 2], f32)), {})",
        "((T([6, 8], f16), 0, T([4, 3], i64), T([5, 5], f16)), {})",
    ],
    "embedding_dense_backward.default": [
        "((T([2, 33, 40], bf16), T([2, 33], i64), 50, -1, False), {})",
        "((T([12, 12, 5], f32, [12, 1, 144]), T([12, 12], i64), 7, -1, False), {})",
        "((T([4, 16, 24], f32), T([4, 16], i64), 30, 0, False), {})",
        "((T([4, 16, 24], f16), T([4, 16], i64), 9, 3, True), {})",
    ],
    # ---- loss
    "nll_loss_forward.default": [
        "((T([32, 100], f32), T([32], i64), None, 1, -100), {})",
        "((T([32, 2], f32), T([32], i64), None, 2, -100), {})",
        "((T([17, 9], f32), T([17], i64), T([9], f32), 1, -100), {})",
        "((T([17, 9], f16), T([17], i64), T([9], f16), 0, -100), {})",
        "((T([9], f32), T([], i64), None, 1, -100), {})",
        "((T([2000, 5], f32), T([2000], i64), None, 1, -100), {})",
    ],
    "nll_loss_backward.default": [
        "((T([], f32), T([32, 100], f32), T([32], i64), None, 1, -100, T([], f32)), {})",
        "((T([], f32), T([32, 2], f32), T([32], i64), None, 2, -100, T([], f32)), {})",
        "((T([17], f32), T([17, 9], f32), T([17], i64), T([9], f32), 0, -100, T([], f32)), {})",
        "((T([], f16), T([17, 9], f16), T([17], i64), T([9], f16), 1, -100, T([], f16)), {})",
    ],
    # ---- pooling
    "max_pool2d_with_indices.default": [
        "((T([2, 3, 12, 12], f16), [2, 2], [2, 2]), {})",
        "((T([2, 3, 11, 11], f16), [3, 3], [2, 2], [1, 1]), {})",
        "((T([2, 3, 13, 13], bf16), [3, 3], [2, 2], [1, 1]), {})",
        "((T([2, 3, 13, 13], f32), [3, 3], [2, 2], [1, 1], [2, 2], True), {})",
        "((T([3, 10, 9], f32), [3, 2], [], [1, 1], [1, 1], True), {})",
        "((T([2, 3, 10, 10], f32, [300, 1, 30, 3]), [3, 3], [1, 1]), {})",
    ],
    "max_pool2d_with_indices_backward.default": [
        "((T([2, 4, 6, 6], bf16), T([2, 4, 12, 12], bf16), [3, 3], [2, 2], [1, 1], [1, 1], False, T([2, 4, 6, 6], i64)), {})",
        "((T([2, 4, 4, 4], f32), T([2, 4, 8, 8], f32), [3, 3], [2, 2], [1, 1], [1, 1], False, T([2, 4, 4, 4], i64)), {})",
        "((T([2, 4, 6, 6], f32), T([2, 4, 13, 13], f32), [3, 3], [2, 2], [1, 1], [2, 2], True, T([2, 4, 6, 6], i64)), {})",
    ],
    "avg_pool2d.default": [
        "((T([2, 5, 14, 14], f16), [3, 3], [1, 1], [1, 1], False, False), {})",
        "((T([2, 5, 17, 17], f16), [3, 3], [1, 1], [1, 1]), {})",
        "((T([2, 4, 11, 11], bf16), [2, 2], [2, 2], [0, 0], True, False), {})",
        "((T([2, 4, 11, 11], f32), [3, 3], [2, 2], [1, 1], True, True), {})",
        "((T([2, 4, 11, 11], f32), [3, 2], [2, 1], [1, 1], False, True, 5), {})",
    ],
    "avg_pool2d_backward.default": [
        "((T([2, 4, 6, 6], bf16), T([2, 4, 11, 11], bf16), [2, 2], [2, 2], [0, 0], True, False, None), {})",
        "((T([2, 4, 6, 6], f32), T([2, 4, 11, 11], f32), [3, 3], [2, 2], [1, 1], True, True, None), {})",
        "((T([2, 4, 6, 11], f32), T([2, 4, 11, 10], f32), [3, 2], [2, 1], [1, 1], False, True, 5), {})",
    ],
    "_adaptive_avg_pool2d.default": [
        "((T([2, 8, 7, 7], f16), [7, 7]), {})",
        "((T([2, 8, 7, 7], f32), [1, 1]), {})",
        "((T([2, 8, 10, 9], bf16), [3, 4]), {})",
    ],
    "upsample_bilinear2d.default": [
        "((T([2, 6, 8, 8], f16, [384, 1, 48, 6]), [16, 16], False), {})",
        "((T([2, 6, 5, 5], f16), [13, 13], False), {})",
        "((T([2, 6, 1, 1], f16), [7, 7], False), {})",
        "((T([2, 6, 5, 7], f32), [9, 4], True), {})",
        "((T([2, 3, 5, 7], f32), [11, 13], False, 2.1, 1.9), {})",
        # same size (the copy path), channels-last and not, align_corners or not, and with a
        # scale that is not 1 (ATen copies anyway)
        "((T([2, 6, 8, 8], bf16, [384, 1, 48, 6]), [8, 8], False), {})",
        "((T([2, 3, 5, 7], f32), [5, 7], True), {})",
        "((T([2, 3, 5, 7], f32), [5, 7], False, 2.0, 1.0), {})",
    ],
    "upsample_bilinear2d.vec": ["((T([2, 3, 5, 7], f32), None, False, [2.0, 1.5]), {})"],
    # ---- scan
    "cumsum.default": [
        "((T([8], i32), 0), {'dtype': torch.int32})",
        "((T([8, 51], i64), 1), {})",
        "((T([7, 300], f32), 1), {})",
        "((T([7, 30, 5], f16), 1), {})",
        "((T([6, 9], b8), -1), {})",
    ],
    "all.default": ["((T([4, 51, 76], b8),), {})", "((T([4, 5], f32),), {})"],
    "any.default": ["((T([4, 51, 7], b8),), {})"],
    "histc.default": ["((T([2048], f32), 8, 0, 7), {})", "((T([300], f16), 6, -1, 1), {})"],
    # ---- norm_extra
    "_safe_softmax.default": [
        "((T([2, 3, 17, 33], f32), -1), {})",
        "((T([2, 3, 17, 33], f16), -1), {'dtype': torch.float32})",
        "((T([4, 9, 7], bf16), 1), {})",
    ],
    "native_group_norm.default": [
        "((T([2, 32, 5, 5], f16), T([32], f16), T([32], f16), 2, 32, 25, 8, 1e-05), {})",
        "((T([2, 8, 333], f16), T([8], f16), T([8], f16), 2, 8, 333, 8, 1e-05), {})",
        "((T([3, 6, 4, 4], bf16), None, None, 3, 6, 16, 2, 1e-05), {})",
        # groups split into chunks (the interpreter aims at 8 programs); planes at least one
        # loop step long: chunks inside one channel, weight and bias as scalars
        "((T([1, 4, 8195], f32), T([4], f32), T([4], f32), 1, 4, 8195, 2, 1e-05), {})",
        "((T([1, 2, 16500], bf16), None, T([2], bf16), 1, 2, 16500, 1, 1e-05), {})",
    ],
    "_weight_norm_interface.default": [
        "((T([76, 48, 12], f16), T([1, 1, 12], f16), 2), {})",
        "((T([7, 48, 12], f32), T([7, 1, 1], f32), 0), {})",
    ],
}

SORT_CASES: dict[str, list[str]] = {
    "sort.default": ["((T([2048], i64),), {})", "((T([5, 33], f32), 1, True), {})"],
    "topk.default": ["((T([64, 8], f32), 2), {})", "((T([9, 5, 3], i32), 2, 1, False), {})"],
}


@pytest.mark.parametrize("op", sorted(CASES))
def test_kernel_matches_eager_on_trace_like_cases(op: str) -> None:
    cases = [parse_case(c) for c in CASES[op]]
    assert run_generated(op, _write(op, cases), cases, make_args=_evaluator_inputs) == []


@pytest.mark.parametrize("op", sorted(SORT_CASES))
def test_sort_and_topk_match_eager_on_distinct_values(op: str) -> None:
    cases = [parse_case(c) for c in SORT_CASES[op]]
    assert run_generated(op, _write(op, cases), cases, make_args=_distinct) == []


@pytest.mark.parametrize(
    "op", ["index.Tensor", "constant_pad_nd.default", "avg_pool2d.default", "cumsum.default"]
)
def test_conservative_variant_matches_eager(op: str) -> None:
    cases = [parse_case(c) for c in CASES[op]]
    text = _write(op, cases, variant=5)
    assert "_CONSERVATIVE = True" in text
    assert run_generated(op, text, cases, make_args=_evaluator_inputs) == []


def test_max_pool_picks_the_first_maximum_among_ties() -> None:
    op = "max_pool2d_with_indices.default"
    cases = [parse_case("((T([2, 3, 9, 9], f16), [3, 3], [2, 2], [1, 1]), {})")]

    def ties(op: str, case: TestCase, gen: torch.Generator):
        x = torch.randint(0, 2, (2, 3, 9, 9), generator=gen).to(torch.float16)
        return (x, [3, 3], [2, 2], [1, 1]), {}

    assert run_generated(op, _write(op, cases), cases, make_args=ties) == []


def test_safe_softmax_gives_zero_for_fully_masked_rows() -> None:
    op = "_safe_softmax.default"
    cases = [parse_case("((T([4, 33], f32), -1), {})"), parse_case("((T([4, 9000], f32), -1), {})")]

    def masked(op: str, case: TestCase, gen: torch.Generator):
        args, kwargs = materialize_case(op, case, gen)
        x = args[0].clone()
        x[1] = float("-inf")  # the whole row: 0, not NaN
        x[2, :5] = float("-inf")
        return (x, *args[1:]), kwargs

    assert run_generated(op, _write(op, cases), cases, make_args=masked) == []


def test_index_wraps_negative_indices() -> None:
    op = "index.Tensor"
    cases = [parse_case("((T([9, 5], f32), [T([7], i64)]), {})")]

    def negative(op: str, case: TestCase, gen: torch.Generator):
        return (torch.randn(9, 5, generator=gen), [torch.tensor([-1, -9, 0, 8, -3, 2, -2])]), {}

    assert run_generated(op, _write(op, cases), cases, make_args=negative) == []


def test_cached_plans_read_each_calls_tensors() -> None:
    """Plans are cached per geometry; a second call with new tensors must use those tensors."""
    import tempfile
    from pathlib import Path

    from builtin_support import load_kernel

    op = "index.Tensor"
    cases = [parse_case("((T([9, 5], f32), [T([7], i64)]), {})")]
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(op, cases), Path(tmp))
        for seed in range(2):
            gen = torch.Generator().manual_seed(seed)
            x = torch.randn(9, 5, generator=gen)
            index = torch.randint(0, 9, (7,), generator=gen)
            assert torch.equal(kernel(x, [index]), x[index])


# ops whose wrappers plan once per geometry: a repeated call with new tensors (new values, new
# indices) must read those tensors, not the first call's
REPLANNED = [
    ("scatter.src", "((T([9, 6], f32), 1, T([9, 2], i64), T([9, 2], f32)), {})"),
    ("index_put.default", "((T([7, 5], f32), [T([4], i64)], T([4, 5], f32), True), {})"),
    ("index_put.default", "((T([7, 5], bf16), [T([4], i64)], T([4, 5], bf16), False), {})"),
    ("upsample_bilinear2d.default", "((T([2, 3, 5, 4], f32), [9, 7], False), {})"),
    ("nll_loss_forward.default", "((T([6, 5], f32), T([6], i64), None, 0, -100), {})"),
    (
        "native_group_norm.default",
        "((T([2, 6, 3, 3], f32), T([6], f32), T([6], f32), 2, 6, 9, 3, 1e-05), {})",
    ),
]


@pytest.mark.parametrize(("op", "text"), REPLANNED)
def test_planned_wrappers_read_each_calls_tensors(op: str, text: str) -> None:
    case = parse_case(text)
    name, overload = op.split(".")
    eager = getattr(getattr(torch.ops.aten, name), overload)
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(op, [case]), Path(tmp))
        for seed in range(3):
            args, kwargs = materialize(op, case, "cpu", seed)
            want = eager(*[a.clone() if isinstance(a, torch.Tensor) else a for a in args], **kwargs)
            assert compare(f"{op} call {seed}", kernel(*args, **kwargs), want) == []


def _embedding_backward_kernel(tmp: str):
    op = "embedding_dense_backward.default"
    case = parse_case("((T([6, 50, 24], f32), T([6, 50], i64), 20, -1, False), {})")
    return load_kernel(op, _write(op, [case]), Path(tmp))


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("weights", [20, 5000])
def test_embedding_backward_sums_do_not_depend_on_the_order_of_the_rows(dtype, weights) -> None:
    """Past 3072 indices, integer (fixed-point) sums: the same bits whatever order the rows are
    added in, as the GPU's atomics add them in a different order on every call; and within one
    rounding of the exact (float64) sums. With more weight rows than indices (5000) the sums
    live in a row per index position; rows no index names stay zero. (The sorted path takes up
    to `_EMBED_SORT_MAX` indices; lowered here to test the atomics.)"""
    gen = torch.Generator().manual_seed(0)
    grad = (torch.randn(3100, 24, generator=gen, dtype=torch.float64) * 100).to(dtype)
    index = torch.randint(0, weights, (3100,), generator=gen)
    index[:40] = 3  # a weight row many positions share
    perm = torch.randperm(3100, generator=gen)
    with tempfile.TemporaryDirectory() as tmp:
        kernel = _embedding_backward_kernel(tmp)
        sys.modules[kernel.__module__]._EMBED_SORT_MAX = 3072
        first = kernel(grad, index, weights, -1, False)
        again = kernel(grad[perm], index[perm], weights, -1, False)
    assert torch.equal(first, again)
    exact = torch.zeros(weights, 24, dtype=torch.float64).index_add_(0, index, grad.double())
    ulp = torch.finfo(dtype).eps * exact.abs().clamp_min(1e-30)
    assert ((first.double() - exact).abs() <= ulp).all()


def _feature_kernel_reference(grad, index, num_weights, padding_idx):
    """CUDA eager's arithmetic for up to 3072 indices, step by step: per chunk of 32 rows, the
    rows sharing a weight row summed in fp32 in index order, that sum rounded to the dtype and
    added to the weight row in the dtype."""
    out = torch.zeros(num_weights, grad.shape[1], dtype=grad.dtype)
    for c0 in range(0, len(index), 32):
        chunk = list(range(c0, min(c0 + 32, len(index))))
        for i in chunk:
            row = int(index[i])
            if row == padding_idx or any(int(index[k]) == row for k in chunk if k < i):
                continue
            total = grad[i].float()
            for j in chunk:
                if j > i and int(index[j]) == row:
                    total = total + grad[j].float()
            out[row] = (out[row].float() + total.to(grad.dtype).float()).to(grad.dtype)
    return out


# (not bf16 here: Triton's interpreter rounds fp32 to bf16 by truncation, the GPU to nearest)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize(
    ("width", "weights", "link"),
    [(24, 20, (16, 128)), (300, 20, (16, 128)), (24, 20, (32, 32)), (24, 400, (8, 64))],
)
def test_embedding_backward_with_few_indices_repeats_eager_cuda_arithmetic(
    dtype, width, weights, link
) -> None:
    """Chunks in parallel, then each weight row's chunk sums added in index order: bit for bit
    the sequential arithmetic, with chains across many chunks (20 weight rows, 150 indices),
    more columns than one program takes (300), and chunks without peers, whose grads the fold
    reads directly (400 weight rows); the link kernel with several (rows, tile) shapes."""
    gen = torch.Generator().manual_seed(2)
    grad = (torch.randn(150, width, generator=gen) * 30).to(dtype)
    index = torch.randint(0, weights, (150,), generator=gen)
    index[40:52] = 7  # a chunk with many peers
    index[100] = index[140] = 7  # a chain through chunks without peers
    index[60] = 4  # the padding row below
    with tempfile.TemporaryDirectory() as tmp:
        kernel = _embedding_backward_kernel(tmp)
        module = sys.modules[kernel.__module__]
        module._EMBED_LINK_ROWS, module._EMBED_LINK_TILE = link
        got = kernel(grad, index, weights, 4, False)
    assert torch.equal(got, _feature_kernel_reference(grad, index, weights, 4))


@pytest.mark.parametrize(
    ("weights", "check_sums", "blocks"),
    [(20, True, 1), (5000, True, 1), (20, False, 1), (20, True, 2)],
)
def test_embedding_backward_carries_nan_and_infinity_like_eager(
    weights, check_sums, blocks
) -> None:
    """NaN and infinite grads (in a padding row too, and +inf meeting -inf in one weight row)
    past 3072 indices, whether the segment kernel looks for them in its sums or in the grads,
    and with a program summing two column blocks in turn (the NaN in the second)."""
    gen = torch.Generator().manual_seed(1)
    grad = torch.randn(3100, 24, generator=gen)
    index = torch.randint(0, weights, (3100,), generator=gen)
    index[7] = index[4]
    index[9] = 0  # the padding row below: its grads are left out
    grad[4, 2] = float("nan")
    grad[7, 5] = float("inf")
    grad[9, 3] = float("nan")  # in the padding row: left out
    index[11] = index[12] = 3
    grad[11, 1], grad[12, 1] = float("inf"), -float("inf")  # NaN where both meet
    with tempfile.TemporaryDirectory() as tmp:
        kernel = _embedding_backward_kernel(tmp)
        module = sys.modules[kernel.__module__]
        module._EMBED_SEG_CHECK_SUMS = check_sums
        if blocks == 2:
            module._EMBED_SEG_COLS, module._EMBED_SEG_COL_STEPS = 16, 2
            grad[4, 20] = float("nan")
        got = kernel(grad, index, weights, 0, False)
    want = torch.ops.aten.embedding_dense_backward(grad, index, weights, 0, False)
    assert compare("embedding_dense_backward", got, want) == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize(
    ("weights", "tile", "zero_rows"), [(20, 32, 1), (5000, 32, 1), (3, 16, 1), (20, 16, 0)]
)
def test_embedding_backward_sorted_path_sums_in_fp32_whatever_the_skew(
    dtype, weights, tile, zero_rows
) -> None:
    """Past eager's feature-kernel range (up to `_EMBED_SORT_MAX` indices) the rows are sorted
    by weight row and summed per weight row in fp32, rounded once, as eager's sorted path sums.
    The range is lowered to 100 here so that 300 indices take that path quickly. A long run on
    one weight row and a hot row holding a third of the indices (as in real token streams) span
    many tiles of sorted rows (16 rows a tile: one weight row across several), whose partial sums
    are added in tile order; rows of padding_idx are left out; a second call gives the same bits.
    The rank kernel zeroes the rows no index names, or (`_EMBED_ZERO_ROWS` 0) all rows; with
    16-row tiles a program sums two column blocks in turn."""
    gen = torch.Generator().manual_seed(4)
    grad = (torch.randn(300, 24, generator=gen) * 30).to(dtype)
    index = torch.randint(0, weights, (300,), generator=gen)
    index[100:140] = 1  # a long run on one weight row
    index[torch.randperm(300, generator=gen)[:100]] = 2  # a hot weight row all over
    index[5] = index[260] = weights - 1 if weights > 3 else 0
    with tempfile.TemporaryDirectory() as tmp:
        kernel = _embedding_backward_kernel(tmp)
        module = sys.modules[kernel.__module__]
        module._EAGER_FEATURE_MAX = 100
        module._EMBED_SEG_ROWS = tile
        module._EMBED_ZERO_ROWS = zero_rows
        if tile == 16:  # two column blocks of 16 for the 24 columns, one program doing both
            module._EMBED_SEG_COLS, module._EMBED_SEG_COL_STEPS = 16, 2
        got = kernel(grad, index, weights, 0, False)
        again = kernel(grad, index, weights, 0, False)
    assert torch.equal(got, again)
    keep = index != 0
    exact = torch.zeros(weights, 24, dtype=torch.float64).index_add_(
        0, index[keep], grad[keep].double()
    )
    size = torch.zeros(weights, 24, dtype=torch.float64).index_add_(
        0, index[keep], grad[keep].double().abs()
    )
    # one rounding to the dtype, plus fp32 sums of at most 300 terms
    bound = torch.finfo(dtype).eps * exact.abs() + 300 * torch.finfo(torch.float32).eps * size
    assert ((got.double() - exact).abs() <= bound).all()
    assert got[0].abs().max() == 0 and got[2].abs().max() > 0
    named = torch.zeros(weights, dtype=torch.bool)
    named[index[keep]] = True
    assert not got[~named].any()  # weight rows no index names stay zero


class _PoisonedTorch:
    """The kernel module's `torch`, whose `empty` hands out memory full of junk (NaN for floats,
    -7 for integers): on the CPU a fresh block often holds zeros, which would hide an output
    element the kernels never write."""

    def __getattr__(self, name):
        return getattr(torch, name)

    @staticmethod
    def empty(*args, **kwargs):
        t = torch.empty(*args, **kwargs)
        return t.fill_(float("nan") if t.is_floating_point() else -7)


@pytest.mark.parametrize("weights", [3, 20, 5000])
def test_embedding_backward_sorted_path_writes_every_output_row(weights) -> None:
    """Only the rows no index names are zeroed, and the rows named once copied, by extra
    programs of the rank kernel's launch; the others are written by the sums, and the scan,
    ranks and partial sums fill buffers from `torch.empty` too: on junk memory every row must
    come out as eager's, whether the indices leave most rows unnamed (5000 weight rows) or
    name every row (3)."""
    gen = torch.Generator().manual_seed(5)
    grad = torch.randn(300, 24, generator=gen)
    index = torch.randint(0, weights, (300,), generator=gen)
    index[40:80] = 1  # a weight row across tiles
    with tempfile.TemporaryDirectory() as tmp:
        kernel = _embedding_backward_kernel(tmp)
        module = sys.modules[kernel.__module__]
        module._EAGER_FEATURE_MAX = 100
        module._EMBED_SEG_ROWS = 16
        module.torch = _PoisonedTorch()
        got = kernel(grad, index, weights, 0, False)
    want = torch.ops.aten.embedding_dense_backward(grad, index, weights, 0, False)
    assert compare("embedding_dense_backward", got, want) == []


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("distinct", [True, False])
def test_embedding_backward_sorted_path_copies_rows_named_once(dtype, distinct) -> None:
    """Weight rows named once are copied from their grad rows by copy programs of the rank
    kernel's launch (`_EMBED_SINGLES`), only the others sorted and summed: with every index
    distinct nothing is sorted (no tile has work); otherwise lone rows sit between runs. On junk memory the sums are fp32 sums rounded once
    and the lone rows have the bits of the path that sorts every row: -0 grads come out +0
    (0 + g), a NaN stays, the padding row named once stays zero."""
    gen = torch.Generator().manual_seed(6)
    grad = (torch.randn(300, 24, generator=gen) * 10).to(dtype)
    if distinct:
        index = torch.randperm(5000, generator=gen)[:300]
    else:
        index = torch.randint(0, 400, (300,), generator=gen)
        index[50:70] = 7  # a run across tiles
    lone = [i for i in range(300) if (index == index[i]).sum() == 1]
    assert len(lone) > 20
    grad[lone[0]] = -0.0
    grad[lone[1], 3] = float("nan")
    padding = int(index[lone[2]])
    results = {}
    for singles in (True, False):
        with tempfile.TemporaryDirectory() as tmp:
            kernel = _embedding_backward_kernel(tmp)
            module = sys.modules[kernel.__module__]
            module._EAGER_FEATURE_MAX = 100
            module._EMBED_SEG_ROWS = 16
            module._EMBED_SINGLES = singles
            module.torch = _PoisonedTorch()
            results[singles] = kernel(grad, index, 5000, padding, False)
    got = results[True]
    keep = (index != padding) & ~torch.isnan(grad).any(1)
    exact = torch.zeros(5000, 24, dtype=torch.float64).index_add_(
        0, index[keep], grad[keep].double()
    )
    size = torch.zeros(5000, 24, dtype=torch.float64).index_add_(
        0, index[keep], grad[keep].double().abs()
    )
    # (CPU eager sums f16 in f16: the bound of one rounding and fp32 sums instead)
    bound = torch.finfo(dtype).eps * exact.abs() + 300 * torch.finfo(torch.float32).eps * size
    ok = (got.double() - exact).abs() <= bound
    ok[int(index[lone[1]])] = True  # the NaN row: below
    assert ok.all()
    # lone rows keep the bits the sums give them (runs may split over other tiles, so their
    # fp32 partial sums may round differently: both within the bound of the test above)
    bits = torch.int32 if dtype == torch.float32 else torch.int16
    rows = index[lone]
    assert torch.equal(got[rows].view(bits), results[False][rows].view(bits))
    assert not torch.signbit(got[int(index[lone[0]])]).any()
    assert torch.isnan(got[int(index[lone[1]]), 3])
    assert not got[padding].any()


def test_embedding_backward_sorted_path_compiles_for_an_sm90_gpu() -> None:
    """3200 indices (past eager's feature range): the count, scan, rank, segment and fix-up
    kernels, which the suite's small CPU cases never launch."""
    op = "embedding_dense_backward.default"
    cases = [
        parse_case("((T([4, 800, 40], bf16), T([4, 800], i64), 50, -1, False), {})"),
        parse_case("((T([4, 800, 24], f32), T([4, 800], i64), 5000, 3, False), {})"),
    ]
    assert_compiles_for_sm90([(op, _write(op, cases), cases)])


def test_embedding_backward_float64_matches_eager() -> None:
    op = "embedding_dense_backward.default"
    case = parse_case("((T([5, 7, 6], f64), T([5, 7], i64), 9, 2, True), {})")
    assert run_generated(op, _write(op, [case]), [case], make_args=_evaluator_inputs) == []


def test_all_is_true_when_every_element_is_nonzero() -> None:
    op = "all.default"
    cases = [parse_case("((T([4, 51, 7], b8),), {})")]

    def ones(op: str, case: TestCase, gen: torch.Generator):
        return (torch.ones(4, 51, 7, dtype=torch.bool),), {}

    assert run_generated(op, _write(op, cases), cases, make_args=ones) == []


def test_writers_decline_masks_and_complex_tensors() -> None:
    declined = {
        "index.Tensor": "((T([8, 5], f32), [T([8], b8)]), {})",
        "index_put.default": "((T([8, 5], f32), [T([8, 5], b8)], T([3], f32)), {})",
        "constant_pad_nd.default": "((T([4, 4], c64), [1, 1]), {})",
        "avg_pool2d.default": "((T([1, 1, 4, 4], c64), [2, 2]), {})",
        "nll_loss_forward.default": "((T([4, 3], c64), T([4], i64), None, 1, -100), {})",
        "cumsum.default": "((T([4], c64), 0), {})",
        "_safe_softmax.default": "((T([4], c64), 0), {})",
    }
    for op, text in declined.items():
        request = KernelRequest(op, str(codegen.schema_of(op)), [parse_case(text)])
        assert _module(_family_of(op)).WRITERS[op](request) is None, op


def test_every_claimed_overload_exists_in_torch_and_renders_its_entry_point() -> None:
    for name in MODULES:
        for op in _module(name).WRITERS:
            codegen.schema_of(op)
            text = _write(op, [])
            assert f"def {codegen.function_name(op)}(*args, **kwargs):" in text
            assert "@triton.jit" in text


def test_same_request_gives_the_same_text() -> None:
    cases = [parse_case(c) for c in CASES["index.Tensor"]]
    assert _write("index.Tensor", cases) == _write("index.Tensor", cases)


JUDGED = {
    "index.Tensor": [
        "((T([73, 12], f16), [T([389], i64)]), {})",
        "((T([8, 51], b8), [T([8, 1, 1, 1], i64), T([1, 1, 1, 51], i64)]), {})",
    ],
    "nll_loss_backward.default": [
        "((T([], f32), T([32, 100], f32), T([32], i64), None, 1, -100, T([], f32)), {})"
    ],
    "index_put.default": ["((T([30, 17], bf16), [T([60], i64)], T([60, 17], bf16), True), {})"],
    "embedding_dense_backward.default": [
        "((T([12, 12, 5], f32, [12, 1, 144]), T([12, 12], i64), 7, -1, False), {})"
    ],
    "max_pool2d_with_indices.default": ["((T([2, 3, 13, 13], bf16), [3, 3], [2, 2]), {})"],
    "native_group_norm.default": [
        "((T([4, 32, 7, 7], f16), T([32], f16), T([32], f16), 4, 32, 49, 8, 1e-05), {})"
    ],
}


@pytest.mark.parametrize("op", sorted(JUDGED))
def test_evaluator_passes_the_kernel_with_no_flags(op: str) -> None:
    from evaluator.config import EvalConfig
    from evaluator.evaluate import judge_candidate

    cases = [parse_case(c) for c in JUDGED[op]]
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / op_to_folder(op)
        folder.mkdir()
        path = folder / kernel_file_name(op)
        path.write_text(_write(op, cases), encoding="utf-8")
        result = judge_candidate(path, op, cases, config=EvalConfig(), device="cpu")
    assert result.status == "passed", [(r.args, r.error_msg) for r in result.results]
    assert result.flags == []
    assert all(not r.flags for r in result.results)


@pytest.mark.slow
def test_kernels_compile_for_an_sm90_gpu() -> None:
    """The interpreter accepts code the GPU compiler rejects; compile real launches for sm_90."""
    ops = sorted(CASES) + sorted(SORT_CASES)
    batch = []
    for op in ops:
        cases = [parse_case(c) for c in {**CASES, **SORT_CASES}[op][:2]]
        batch.append((op, _write(op, cases), cases))
    assert_compiles_for_sm90(batch)


def test_group_norm_rounds_its_statistics_where_cuda_eager_does() -> None:
    """On CUDA, f16/bf16 group norm normalises with the mean and rstd it stored in the input dtype
    (y = x*a + b, a = rstd*w, b = beta - a*mean). Run that rule here on CPU tensors."""
    op = "native_group_norm.default"
    case = parse_case(CASES[op][0])
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(op, [case]), Path(tmp))
        module = importlib.import_module(kernel.__module__)
        module._ROUND_STATS_DEVICES = ("cpu",)
        args, _ = materialize_case(op, case, torch.Generator().manual_seed(0))
        x, w, b = args[0], args[1], args[2]
        out, mean, rstd = kernel(*args)
    C, G = 32, 8  # channels, groups of the case
    a = rstd.float().repeat_interleave(C // G, dim=1) * w.float()  # [N, C]
    shift = b.float() - a * mean.float().repeat_interleave(C // G, dim=1)
    want = (x.float() * a[:, :, None, None] + shift[:, :, None, None]).half()
    torch.testing.assert_close(out, want, atol=2e-3, rtol=2e-3)
    assert mean.dtype == torch.float16 and rstd.dtype == torch.float16


# ---- histc: the one-program path (small inputs) and the atomic path, against eager

HISTC_RANGES = [(1, 0, 7), (7, -2, 5), (8, 0, 7), (100, -1, 1), (8, 0, 0), (3, 2, 2)]
HISTC_SIZES = [0, 1, 7, 333, 2050]
HISTC_PATHS = {  # module constants of the generated file for each path
    "one_program": {},
    "one_program_several_blocks": {"_HISTC_ONE_PROGRAM_BLOCK": 64},
    "atomic": {"_HISTC_ONE_PROGRAM_MAX": 0},
}


def _histc_int_reference(x: torch.Tensor, bins: int, lo: int, hi: int) -> torch.Tensor:
    """CUDA eager's integer histc (CPU eager has no integer kernel): bin = (x - min) * bins //
    (max - min), the top edge in the last bin, values outside [min, max] ignored, and the range
    from the data (widened by one when all values are equal) when min == max."""
    v = x.long()
    if lo == hi and v.numel():
        lo, hi = int(v.min()), int(v.max())
    if lo == hi:
        lo, hi = lo - 1, hi + 1
    inside = (v >= lo) & (v <= hi)
    bin_ = ((v - lo) * bins) // (hi - lo)
    bin_ = torch.where(bin_ == bins, bins - 1, bin_)
    return torch.bincount(bin_[inside], minlength=bins).to(x.dtype)


def _histc_inputs(dtype: torch.dtype, n: int, lo: float, hi: float, gen: torch.Generator):
    """Random values (some outside the range), one exactly at each edge when n allows; a second,
    all-equal tensor for the min == max ranges (the data range is then widened by one)."""
    if dtype.is_floating_point:
        x = (torch.randn(n, generator=gen, dtype=torch.float64) * 2).to(dtype)
    else:
        x = torch.randint(-4, 12, (n,), generator=gen).to(dtype)
    if n >= 2 and lo != hi:
        x[0], x[-1] = hi, lo
    inputs = [x]
    if lo == hi and n:
        inputs.append(torch.full((n,), 3, dtype=dtype))
    return inputs


def _bf16_bins(x: torch.Tensor, bins: int, lo: float, hi: float, truncate: bool) -> torch.Tensor:
    """The kernel's bf16 bin steps (each rounded to bf16) with round-to-nearest casts (the GPU's
    and eager's) or truncating ones (Triton's CPU interpreter)."""

    def cast(t: torch.Tensor) -> torch.Tensor:
        if truncate:
            return (t.float().view(torch.int32) & -65536).view(torch.float32)
        return t.float().to(torch.bfloat16).float()

    v = x.float()
    a, b = float(lo), float(hi)
    if a == b and v.numel():
        a, b = float(v.min()), float(v.max())
    if a == b:
        a, b = a - 1, b + 1
    q = cast(cast(cast(v - a) * bins) / cast(torch.tensor(b - a))).long()
    return torch.where(q == bins, bins - 1, q)


def _without_bf16_cast_artifacts(x: torch.Tensor, bins: int, lo: float, hi: float):
    """x less the elements whose bin the interpreter's truncating fp32->bf16 casts change (they
    would differ from eager on the CPU only); repeated while that moves a data-derived range."""
    for _ in range(8):
        keep = _bf16_bins(x, bins, lo, hi, True) == _bf16_bins(x, bins, lo, hi, False)
        if bool(keep.all()) or not x.numel():
            break
        x = x[keep]
    return x


@pytest.mark.parametrize("path", sorted(HISTC_PATHS))
@pytest.mark.parametrize(
    "dtype", [torch.int32, torch.int64, torch.float32, torch.float64, torch.float16, torch.bfloat16]
)
def test_histc_matches_eager_on_each_path(path: str, dtype: torch.dtype) -> None:
    op = "histc.default"
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(op, [parse_case(CASES[op][0])]), Path(tmp))
        module = importlib.import_module(kernel.__module__)
        for name, value in HISTC_PATHS[path].items():
            setattr(module, name, value)
        gen = torch.Generator().manual_seed(0)
        problems = []
        for n in HISTC_SIZES:
            if dtype == torch.bfloat16 and n > 333:
                continue  # CPU eager adds bf16 counts in bf16: past 256 they stop growing
            for bins, lo, hi in HISTC_RANGES:
                for x in _histc_inputs(dtype, n, lo, hi, gen):
                    if dtype == torch.bfloat16:
                        x = _without_bf16_cast_artifacts(x, bins, lo, hi)
                    if dtype.is_floating_point:
                        want = torch.histc(x, bins, lo, hi)
                    else:
                        want = _histc_int_reference(x, bins, lo, hi)
                    label = f"n={n} bins={bins} range=({lo}, {hi}) first={x[:1].tolist()}"
                    got = kernel(x, bins, lo, hi)
                    problems += [f"{label}: {p}" for p in compare("output", got, want)]
    assert problems == []


def test_histc_small_input_takes_one_launch() -> None:
    """Small inputs, even with the range from the data and a 16-bit output, launch only the
    one-program kernel: no zero fill, range pass, atomic pass or cast."""
    op = "histc.default"
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(op, [parse_case(CASES[op][0])]), Path(tmp))
        module = importlib.import_module(kernel.__module__)
        for name in ("_range_kernel", "_histc_kernel", "_cast_kernel"):
            setattr(module, name, None)  # calling any of them would raise
        x = torch.randn(2049, generator=torch.Generator().manual_seed(0)).half()
        assert compare("output", kernel(x, 8, 0, 0), torch.histc(x, 8, 0, 0)) == []


def test_histc_one_program_path_matches_the_atomic_path_exactly() -> None:
    """Both paths share the bin arithmetic; the counts (and their rounding to the output dtype,
    here bf16 counts past 256) must agree to the bit, whatever eager's tolerance allows."""
    op = "histc.default"
    gen = torch.Generator().manual_seed(1)
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(op, [parse_case(CASES[op][0])]), Path(tmp))
        module = importlib.import_module(kernel.__module__)
        for dtype in (torch.bfloat16, torch.float16, torch.int32):
            x = (torch.randn(5001, generator=gen) * 3).to(dtype)
            for bins, lo, hi in [(3, -1, 2), (256, -4, 4), (8, 0, 0)]:
                module._HISTC_ONE_PROGRAM_MAX = 8192
                one = kernel(x, bins, lo, hi)
                module._HISTC_ONE_PROGRAM_MAX = 0
                atomic = kernel(x, bins, lo, hi)
                assert torch.equal(one, atomic), (dtype, bins, lo, hi)


def test_histc_integer_ranges_past_int32_keep_64_bit_bins() -> None:
    """Ranges whose (max - min) * bins overflows int32 take the 64-bit bin arithmetic."""
    op = "histc.default"
    x = torch.tensor([-(2**40), -5, 0, 3, 2**33, 2**40, 2**41], dtype=torch.int64)
    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(op, [parse_case(CASES[op][0])]), Path(tmp))
        for bins, lo, hi in [(8, -(2**40), 2**40), (7, 0, 2**31 - 1), (3, -(2**31), 2**30)]:
            want = _histc_int_reference(x, bins, lo, hi)
            assert torch.equal(kernel(x, bins, lo, hi), want), (bins, lo, hi)
            x32 = x.clamp(-(2**31), 2**31 - 1).int()
            assert torch.equal(kernel(x32, bins, lo, hi), _histc_int_reference(x32, bins, lo, hi))


@pytest.mark.slow
def test_histc_kernels_compile_for_an_sm90_gpu() -> None:
    """GPU sizes of every histc path: the suite's int32 case, the range from the data, one bin,
    256 bins (one program), and an input past `_HISTC_ONE_PROGRAM_MAX` (atomic path)."""
    op = "histc.default"
    cases = [
        parse_case(c)
        for c in [
            "((T([2048], i32), 8, 0, 7), {})",
            "((T([5000], bf16), 100, 0, 0), {})",
            "((T([3001], f64), 1, -1, 1), {})",
            "((T([4099], i64), 256, -8, 8), {})",
            "((T([2048], f16), 8, 0, 0), {})",
            "((T([70000], f32), 8, 0, 0), {})",
            "((T([70001], i32), 5, 0, 0), {})",
        ]
    ]
    assert_compiles_for_sm90([(op, _write(op, cases), cases)])
