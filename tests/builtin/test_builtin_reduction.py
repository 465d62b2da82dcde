"""The builtin provider's reduction kernels against eager ATen, in Triton's CPU interpreter.

Cases cover odd sizes, lists of dims (adjacent and not), keepdim, the dtype keyword, every float
dtype the suites use, integers and bools, transposed inputs read in place, and rows long enough
that the interpreter's small tiles loop and split the reduction over programs.
"""

from __future__ import annotations

import sys

import pytest
import torch
from builtin_support import materialize_case, run_generated

from agent.providers.builtin import codegen, reduction
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.testcase import parse_case

CASES: dict[str, list[str]] = {
    "sum.dim_IntList": [
        "((T([7, 33], f32), [1]), {})",
        "((T([7, 33], f16), [0], True), {})",
        "((T([3, 5, 7, 9], bf16), [1, 2]), {})",
        "((T([3, 5, 7, 9], f32), [0, 2], True), {})",
        "((T([30, 47], f16, [1, 30]), [1]), {})",
        "((T([3000], f32), [0]), {})",
        "((T([3000, 5], f32), [0]), {})",
        "((T([5, 700], f32), [-1]), {'dtype': torch.float64})",
        "((T([6, 9], f16), [1]), {'dtype': torch.float32})",
        "((T([5, 7], i32), [1]), {})",
        "((T([5, 7], b8), [0]), {})",
        "((T([5, 600, 3], f32), [1]), {})",
        "((T([4, 6], f32), []), {})",
        # strided rows read in place (no copy): a row stride larger than the row
        "((T([3, 1, 700], f32, [2100, 700, 1]), [-1], True), {})",
        "((T([4, 3, 5], f32, [30, 5, 1]), [1]), {})",
    ],
    "sum.default": [
        "((T([37, 41], f16),), {})",
        "((T([], f32),), {})",
        "((T([5, 7], i64),), {})",
    ],
    "mean.dim": [
        "((T([4, 6, 5, 5], f16), [2, 3], True), {})",
        "((T([4, 6, 5, 5], bf16), [-1, -2], True), {})",
        "((T([9, 2000], f32), [1]), {})",
    ],
    "mean.default": ["((T([11, 13], bf16),), {})"],
    "var.correction": [
        "((T([4, 33], f32), [1]), {})",
        "((T([4, 33], f16), [0]), {'correction': 0, 'keepdim': True})",
        "((T([6, 3000], f32), [1]), {})",
        "((T([2, 1, 3000], f32, [9000, 3000, 1]), [2]), {})",
        "((T([3, 40, 7], f32, [560, 7, 1]), [1]), {})",
        "((T([60, 50], bf16),), {})",
    ],
    "var_mean.correction": [
        "((T([4, 33, 5], f32), [0, 2]), {'keepdim': True})",
        "((T([500, 7], f32), [0]), {})",
    ],
    "std.correction": ["((T([4, 33], f16), [1]), {'correction': 1})"],
    "std_mean.correction": ["((T([4, 33, 6], f32), [0, 2]), {'correction': 2})"],
    "var.dim": ["((T([4, 33], f32), [0], False, True), {})"],
    "std.dim": ["((T([4, 33], f16), [1], True), {})"],
    "var_mean.dim": ["((T([4, 33], bf16), [1]), {})"],
    "std_mean.dim": ["((T([4, 33], f32), [1], False), {})"],
    "amax.default": [
        "((T([4, 33], f16), [1]), {})",
        "((T([4, 33, 3], bf16), [0, 2], True), {})",
        "((T([3000], f32),), {})",
        "((T([7, 9], i32), [0]), {})",
    ],
    "amin.default": ["((T([4, 33], f32), [0], True), {})"],
    "max.dim": [
        "((T([4, 33], f16), 1), {})",
        "((T([4, 33, 3], f32), 1, True), {})",
        "((T([30, 470], f16, [1, 30]), 1), {})",
        "((T([5, 3000], f32), -1), {})",
    ],
    "min.dim": ["((T([4, 33], f32), 0), {})"],
    "max.default": ["((T([4, 330], bf16),), {})"],
    "min.default": ["((T([4, 333], f32),), {})", "((T([4, 33], i64),), {})"],
    "argmin.default": ["((T([4, 33], f32), 0), {})", "((T([4, 33], f16),), {})"],
    "argmax.default": [
        "((T([4, 33], f32),), {})",
        "((T([4, 33], f32), 1, True), {})",
        "((T([30, 47], f32, [1, 30]),), {})",
        # the last position of [batch, seq, vocab] logits: rows strided, read in place
        "((T([3, 1, 1517], bf16, [6068, 1517, 1]), -1), {})",
        "((T([4, 1, 503], f16, [2012, 503, 1]), -1), {})",
        "((T([16, 77], i32), -1), {})",
        "((T([2, 3, 5], f32, [30, 5, 1]),), {})",
    ],
}


def _write(op: str, cases: list, variant: int = 0) -> str:
    request = KernelRequest(op, str(codegen.schema_of(op)), cases, variant)
    text = reduction.WRITERS[op](request)
    assert text is not None, f"the reduction writer declined {op}"
    return text


@pytest.mark.parametrize("op", sorted(CASES))
def test_reduction_matches_eager_on_odd_shapes_dims_and_dtypes(op: str) -> None:
    cases = [parse_case(c) for c in CASES[op]]
    assert run_generated(op, _write(op, cases), cases) == []


def test_conservative_variant_matches_eager() -> None:
    op = "sum.dim_IntList"
    cases = [parse_case(c) for c in CASES[op]]
    assert run_generated(op, _write(op, cases, variant=5), cases) == []


def test_max_dim_returns_the_first_index_among_ties() -> None:
    op = "max.dim"
    cases = [parse_case("((T([3, 700], f16), 1), {})")]

    def ties(op: str, case, gen: torch.Generator):
        # few distinct values: every row holds its maximum many times, in several loop chunks
        return (torch.randint(0, 3, (3, 700), generator=gen).to(torch.float16), 1), {}

    assert run_generated(op, _write(op, cases), cases, make_args=ties) == []


def test_amax_propagates_nan() -> None:
    op = "amax.default"
    cases = [parse_case("((T([4, 300], f32), [1]), {})")]

    def with_nan(op: str, case, gen: torch.Generator):
        args, kwargs = materialize_case(op, case, gen)
        x = args[0].clone()
        x[1, 257] = float("nan")
        return (x, *args[1:]), kwargs

    assert run_generated(op, _write(op, cases), cases, make_args=with_nan) == []


def test_var_of_data_with_a_large_mean_is_accurate() -> None:
    op = "var.correction"
    cases = [parse_case("((T([3, 3000], f32), [1]), {})")]

    def offset(op: str, case, gen: torch.Generator):
        return (torch.randn(3, 3000, generator=gen) + 1e4, [1]), {}

    assert run_generated(op, _write(op, cases), cases, make_args=offset) == []


def test_strided_rows_are_read_in_place() -> None:
    """A slice whose reduced dim is dense is reduced without a contiguous copy."""
    op = "argmax.default"
    cases = [parse_case("((T([3, 1, 50], f32, [200, 50, 1]), -1), {})")]
    import tempfile
    from pathlib import Path

    from builtin_support import load_kernel

    with tempfile.TemporaryDirectory() as tmp:
        kernel = load_kernel(op, _write(op, cases), Path(tmp))
        module = sys.modules[kernel.__module__]
        x = torch.randn(3, 4, 50)[:, -1:, :]
        assert module._as_outer_r_inner(x, [2], False) == (None, 3, 50, 1, 200)
        assert torch.equal(kernel(x, -1), torch.argmax(x, -1))


def test_writer_declines_complex_inputs() -> None:
    op = "sum.dim_IntList"
    cases = [parse_case("((T([4, 4], c64), [1]), {})")]
    request = KernelRequest(op, str(codegen.schema_of(op)), cases)
    assert reduction.WRITERS[op](request) is None


def test_same_request_gives_the_same_text() -> None:
    op = "var_mean.correction"
    cases = [parse_case(c) for c in CASES[op]]
    assert _write(op, cases) == _write(op, cases)


def test_every_claimed_overload_exists_in_torch() -> None:
    for op in reduction.WRITERS:
        codegen.schema_of(op)  # KeyError if torch has no such overload


def test_argmax_and_sum_compile_for_an_sm90_gpu() -> None:
    """The interpreter accepts code the GPU compiler rejects; compile real launches for sm_90."""
    from builtin_support import assert_compiles_for_sm90

    ops = ("argmax.default", "sum.dim_IntList", "var.correction")
    batch = []
    for op in ops:
        cases = [parse_case(c) for c in CASES[op]]
        batch.append((op, _write(op, cases), cases))
    assert_compiles_for_sm90(batch)
