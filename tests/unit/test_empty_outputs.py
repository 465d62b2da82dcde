"""A call whose outputs all have zero elements needs no Triton launch; every other call still does.

The OpInfo empty cases (mm [0,5]x[5,10], mul [0,1,3]*[0,10,3], _softmax [5,0,0]) pass with the
builtin writer's kernels, which return an empty result without launching; a kernel that skips the
launch on a non-empty case of the same operator is still rejected.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.testcase import parse_case
from evaluator.config import EvalConfig
from evaluator.evaluate import judge_candidate
from evaluator.naming import kernel_function_name, kernel_path
from evaluator.results import Flag, Status

EMPTY_CASES = {
    "mm.default": ["((T([0, 5], f32), T([5, 10], f32)), {})", "((T([4, 5], f32), T([5, 3], f32)), {})"],
    "mul.Tensor": ["((T([0, 1, 3], f32), T([0, 10, 3], f32)), {})", "((T([2, 3], f32), T([2, 3], f32)), {})"],
    "_softmax.default": ["((T([5, 0, 0], f32), 1, False), {})", "((T([4, 7], f32), 1, False), {})"],
}  # fmt: skip


def _judge(tmp_path: Path, op: str, source: str, texts: list[str]):
    path = kernel_path(tmp_path, op)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(source, encoding="utf-8")
    cases = [parse_case(t) for t in texts]
    return judge_candidate(path, op, cases, config=EvalConfig(), device="cpu")


@pytest.mark.parametrize("op", sorted(EMPTY_CASES))
def test_builtin_kernels_pass_the_empty_opinfo_cases(tmp_path: Path, op: str) -> None:
    cases = [parse_case(t) for t in EMPTY_CASES[op]]
    source = WRITERS[op](KernelRequest(op=op, schema="", cases=cases))
    assert source is not None
    result = _judge(tmp_path, op, source, EMPTY_CASES[op])
    assert result.status is Status.PASSED, (result.reason, result.flags)
    assert result.passed == 2 and not result.flags


_SKIP_WHEN_EMPTY_ONLY = """
import torch
import triton
import triton.language as tl

@triton.jit
def _mul(a, b, o, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(o + offs, tl.load(a + offs, mask=m) * tl.load(b + offs, mask=m), mask=m)

def FN(a, b):
    shape = torch.broadcast_shapes(a.shape, b.shape)
    out = torch.empty(shape, dtype=a.dtype, device=a.device)
    if out.numel() == 0 or SKIP_ALWAYS:
        return out
    a, b = a.expand(shape).contiguous(), b.expand(shape).contiguous()
    _mul[(triton.cdiv(out.numel(), 128),)](a, b, out, out.numel(), BLOCK=128)
    return out
"""


def _kernel(skip_always: bool) -> str:
    return _SKIP_WHEN_EMPTY_ONLY.replace("FN", kernel_function_name("mul.Tensor")).replace(
        "SKIP_ALWAYS", str(skip_always)
    )


def test_a_kernel_that_launches_only_when_there_is_work_passes(tmp_path: Path) -> None:
    result = _judge(tmp_path, "mul.Tensor", _kernel(False), EMPTY_CASES["mul.Tensor"])
    assert result.status is Status.PASSED, (result.reason, result.flags)


def test_skipping_the_launch_on_a_non_empty_case_is_still_rejected(tmp_path: Path) -> None:
    # Only the zero-element output is exempt: the [2, 3] case must launch (here it returns
    # uninitialised memory without launching, and the empty case cannot excuse that).
    result = _judge(tmp_path, "mul.Tensor", _kernel(True), EMPTY_CASES["mul.Tensor"])
    assert result.status is Status.REJECTED
    assert Flag.NO_TRITON_LAUNCH in result.flags
    empty, full = result.results
    assert empty.passed and Flag.NO_TRITON_LAUNCH not in empty.flags
    assert Flag.NO_TRITON_LAUNCH in full.flags
