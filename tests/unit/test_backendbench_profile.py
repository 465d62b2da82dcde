"""The `backendbench` profile draws inputs as BackendBench does and compares with its tolerance,
so a kernel's verdict under it is BackendBench's; `strict` keeps signed inputs and tight
tolerances (a sigmoid-approximated gelu passes the first and fails the second)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evaluator.cases.inputs import materialize
from evaluator.cases.testcase import parse_case
from evaluator.config import CorrectnessConfig, EvalConfig
from evaluator.evaluate import judge_candidate
from evaluator.naming import kernel_function_name, kernel_path
from evaluator.results import Flag, Status

CASE = (
    "((T([4096], f32), T([512], i64), T([512], u8), T([512], i32), T([64], c64), T([64], b8)), {})"
)


def test_backendbench_profile_draws_as_backendbench_does() -> None:
    args, _ = materialize("add.Tensor", parse_case(CASE), "cpu", 3, profile="backendbench")
    floats, i64, u8, i32, c64, b8 = args
    assert 0 <= floats.min() and floats.max() < 1 and floats.std() > 0.25  # uniform [0, 1)
    for ints in (i64, i32):
        assert ints.min() == -9 and ints.max() == 9
    assert u8.min() == 0 and u8.max() == 9
    for part in (c64.real, c64.imag):
        assert -9 <= part.min() < -5 and 5 < part.max() < 9
    assert b8.dtype == torch.bool and 0 < b8.sum() < 64


def test_strict_profile_keeps_signed_inputs() -> None:
    args, _ = materialize("add.Tensor", parse_case(CASE), "cpu", 3)
    assert args[0].min() < -1 and args[1].min() < -9


def test_backendbench_draws_are_seeded() -> None:
    one, _ = materialize("add.Tensor", parse_case(CASE), "cpu", 5, profile="backendbench")
    two, _ = materialize("add.Tensor", parse_case(CASE), "cpu", 5, profile="backendbench")
    other, _ = materialize("add.Tensor", parse_case(CASE), "cpu", 6, profile="backendbench")
    assert torch.equal(one[0], two[0]) and not torch.equal(one[0], other[0])


def test_per_op_rules_still_apply_under_backendbench() -> None:
    # an index must be valid for eager to run: embedding's indices stay in [0, num_weights)
    case = parse_case("((T([7, 3], f32), T([50], i64)), {})")
    (weight, indices), _ = materialize("embedding.default", case, "cpu", 0, profile="backendbench")
    assert 0 <= indices.min() and indices.max() < 7 and 0 <= weight.min()


SIGMOID_GELU = """
import torch
import triton
import triton.language as tl

@triton.jit
def _gelu(x_ptr, o_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    x = tl.load(x_ptr + offs, mask=m)
    tl.store(o_ptr + offs, x * tl.sigmoid(1.702 * x), mask=m)

def FN(x, approximate="none"):
    out = torch.empty_like(x)
    _gelu[(triton.cdiv(x.numel(), 1024),)](x, out, x.numel(), BLOCK=1024)
    return out
"""


@pytest.mark.parametrize(
    ("profile", "status"), [("backendbench", Status.PASSED), ("strict", Status.FAILED)]
)
def test_sigmoid_gelu_passes_backendbench_and_fails_strict(
    tmp_path: Path, profile: str, status: Status
) -> None:
    op = "gelu.default"
    path = kernel_path(tmp_path, op)
    path.parent.mkdir(parents=True)
    path.write_text(SIGMOID_GELU.replace("FN", kernel_function_name(op)), encoding="utf-8")
    config = EvalConfig(correctness=CorrectnessConfig(tolerance_profile=profile))
    cases = [parse_case("((T([4096], f32),), {})"), parse_case("((T([33, 47], f32),), {})")]
    result = judge_candidate(path, op, cases, config=config, device="cpu")
    assert result.status is status, (result.reason, result.flags)
    if status is Status.FAILED:
        assert Flag.WRONG_VALUES in result.flags


def test_a_device_string_is_rewritten_by_keyword_and_by_schema_position() -> None:
    case = parse_case("((T([2], f32), 'cuda', torch.float16), {})")
    args, _ = materialize("to.device", case, "cpu", 0)
    assert args[1] == "cpu"
    case = parse_case("((T([2], f32),), {'dtype': torch.float16, 'device': 'cuda'})")
    _, kwargs = materialize("_to_copy.default", case, "cpu", 0)
    assert kwargs["device"] == "cpu"
    # other strings are left alone
    args, _ = materialize("gelu.default", parse_case("((T([2], f32), 'tanh'), {})"), "cpu", 0)
    assert args[1] == "tanh"
