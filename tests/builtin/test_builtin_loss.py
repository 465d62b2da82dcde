"""The builtin provider's nll_loss_backward against eager ATen (CPU interpreter).

The backward writes grad_input in a flat walk: a block of contiguous elements either matches each
of the few rows it touches by the target's flat position (long rows) or finds every element's row
by division (short rows). Cases put targets on the first and last columns, on rows that straddle
block boundaries, on ignore_index (-100, and a real class), weight or none, each reduction, 1-D
inputs, and a mean over rows that are all ignored (total_weight 0).
"""

from __future__ import annotations

import pytest
import torch
from builtin_support import assert_compiles_for_sm90, run_generated

from agent.providers.builtin import codegen, loss
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.testcase import TestCase, parse_case

OP = "nll_loss_backward.default"

# (grad_output, self, target, weight, reduction, ignore_index, total_weight); the interpreter's
# block is 1024 elements: C >= 1023 / 2 takes the per-row matching, smaller C the division
CASES = [
    "((T([], f32), T([17, 3000], f32), T([17], i64), None, 1, -100, T([], f32)), {})",
    "((T([], f32), T([9, 1000], f32), T([9], i64), T([1000], f32), 2, 3, T([], f32)), {})",
    "((T([33], f16), T([33, 700], f16), T([33], i64), T([700], f16), 0, -100, T([], f16)), {})",
    "((T([], bf16), T([40, 9], bf16), T([40], i64), T([9], bf16), 1, -100, T([], bf16)), {})",
    "((T([2000], f32), T([2000, 5], f32), T([2000], i64), None, 0, -100, T([], f32)), {})",
    "((T([], f32), T([6, 1025], f32), T([6], i64), T([1025], f32), 1, 0, T([], f32)), {})",
    "((T([], f64), T([7, 512], f64), T([7], i64), None, 2, -100, T([], f64)), {})",
    "((T([], f32), T([300], f32), T([], i64), None, 0, -100, T([], f32)), {})",
    "((T([], f64), T([5000], f64), T([], i64), T([5000], f64), 1, -100, T([], f64)), {})",
    "((T([], f32), T([3, 1500], f32), T([3], i64), T([1500], f32), 1, 7, T([], f32)), {})",
]


def _targets(op: str, case: TestCase, gen: torch.Generator, *, all_ignored: bool = False):
    """Seeded arguments: targets on columns 0 and C-1 first, a quarter on ignore_index, and the
    total_weight eager's forward would have returned for them."""
    spec_go, spec_x, spec_t, spec_w, reduction, ignore, _ = case.args
    C = spec_x.shape[-1]
    x = torch.randn(spec_x.shape, generator=gen, dtype=torch.float64).to(spec_x.dtype)
    go = torch.randn(spec_go.shape, generator=gen, dtype=torch.float64).to(spec_go.dtype)
    t = torch.randint(0, C, spec_t.shape, generator=gen)
    flat = t.reshape(-1)
    if flat.numel() >= 2:
        flat[0], flat[1] = 0, C - 1
    drop = torch.rand(flat.shape, generator=gen) < 0.25
    flat[drop | torch.tensor(all_ignored)] = ignore
    w = None
    if spec_w is not None:
        w = (torch.rand(C, generator=gen, dtype=torch.float64) + 0.5).to(spec_w.dtype)
    kept = flat[flat != ignore]
    total = float(kept.numel()) if w is None else w.double()[kept].sum().item()
    tw = torch.tensor(total, dtype=spec_x.dtype)
    return (go, x, t, w, reduction, ignore, tw), {}


def _write(cases: list[TestCase], variant: int = 0) -> str:
    text = loss.WRITERS[OP](KernelRequest(OP, str(codegen.schema_of(OP)), cases, variant))
    assert text is not None
    return text


@pytest.mark.parametrize("variant", [0, 1])
def test_nll_loss_backward_matches_eager_on_ignore_index_weights_reductions_and_1d(
    variant: int,
) -> None:
    cases = [parse_case(c) for c in CASES]
    problems = run_generated(OP, _write(cases, variant), cases, make_args=_targets)
    assert problems == []


def test_nll_loss_backward_writes_zeros_when_every_target_is_ignored() -> None:
    cases = [
        parse_case(
            "((T([], f32), T([12, 2000], f32), T([12], i64), None, 1, -100, T([], f32)), {})"
        )
    ]

    def ignored(op: str, case: TestCase, gen: torch.Generator):
        return _targets(op, case, gen, all_ignored=True)

    assert run_generated(OP, _write(cases), cases, make_args=ignored) == []


def test_nll_loss_backward_compiles_for_an_sm90_gpu() -> None:
    """Both flat walks at GPU block sizes: per-row matching (C = 50257) and division (C = 9)."""
    texts = [
        "((T([], f32), T([4, 50257], f32), T([4], i64), None, 1, -100, T([], f32)), {})",
        "((T([16], f16), T([16, 9], f16), T([16], i64), T([9], f16), 0, -100, T([], f16)), {})",
        "((T([], f64), T([3000], f64), T([], i64), T([3000], f64), 2, -100, T([], f64)), {})",
    ]
    cases = [parse_case(t) for t in texts]
    assert_compiles_for_sm90([(OP, _write(cases), cases)])
