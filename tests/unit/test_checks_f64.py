"""errors_vs_f64: the diagnostic that tells a kernel's error from eager's own rounding."""

from __future__ import annotations

import math

import torch

from evaluator.judge.checks import errors_vs_f64, widen_to_f64


def test_kernel_closer_to_the_exact_result_than_eager() -> None:
    exact = torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64)
    eager = torch.tensor([1.0, 2.01, 3.0])  # eager's own rounding
    ours = torch.tensor([1.0, 2.001, 3.0])
    k, e = errors_vs_f64(ours, eager, exact)
    assert k < e and math.isclose(e, 0.01, rel_tol=1e-3)


def test_nan_where_the_exact_result_is_finite_is_an_infinite_error() -> None:
    exact = torch.tensor([1.0, 2.0], dtype=torch.float64)
    k, e = errors_vs_f64(torch.tensor([1.0, math.nan]), torch.tensor([1.0, 2.0]), exact)
    assert k == math.inf and e == 0.0


def test_tuples_are_followed_and_mismatched_structures_give_none() -> None:
    exact = (torch.ones(2, dtype=torch.float64), torch.arange(2))
    ours = (torch.ones(2) * 1.5, torch.arange(2))
    eager = (torch.ones(2), torch.arange(2))
    assert errors_vs_f64(ours, eager, exact) == (0.5, 0.0)
    assert errors_vs_f64((torch.ones(3), torch.arange(2)), eager, exact) is None  # shapes differ
    assert errors_vs_f64((ours[0], ours[0]), eager, exact) is None  # float leaves differ


def test_widen_to_f64_copies_floats_and_keeps_integers() -> None:
    x, i = torch.ones(2, dtype=torch.float16), torch.arange(3)
    wide = widen_to_f64(((x, i), {"k": x}, 2.0))
    assert wide[0][0].dtype == torch.float64 and wide[0][1].dtype == torch.int64
    assert wide[1]["k"].dtype == torch.float64 and wide[2] == 2.0
    assert wide[0][1] is not i


def _strict() -> object:
    from evaluator.config import CorrectnessConfig

    return CorrectnessConfig()


def test_a_bf16_output_as_accurate_as_eager_passes_against_the_exact_result() -> None:
    from evaluator.judge.checks import compare
    from evaluator.results import Flag

    # eager off by 1.0 at one element (bf16 reduced in bf16), the kernel exact
    exact = torch.tensor([0.5, 28.0, 0.1], dtype=torch.float64)
    eager = torch.tensor([0.5, 29.0, 0.1], dtype=torch.bfloat16)
    ours = torch.tensor([0.5, 28.0, 0.1], dtype=torch.bfloat16)
    assert not compare(ours, eager, _strict()).ok  # 1.0 > atol 0.01 + rtol 0.016 * 29
    wide = compare(ours, eager, _strict(), exact=exact)
    assert wide.ok and wide.flags == [Flag.WITHIN_EAGER_ERROR]


def test_an_error_past_twice_eagers_own_fails_even_against_the_exact_result() -> None:
    from evaluator.judge.checks import compare

    exact = torch.tensor([28.0, 0.1], dtype=torch.float64)
    eager = torch.tensor([29.0, 0.1], dtype=torch.bfloat16)
    assert not compare(
        torch.tensor([31.0, 0.1], dtype=torch.bfloat16), eager, _strict(), exact=exact
    ).ok
    # where eager is exact, the kernel gets no more than the tolerance
    assert not compare(
        torch.tensor([29.0, 0.2], dtype=torch.bfloat16), eager, _strict(), exact=exact
    ).ok


def test_the_exact_result_widens_only_16_bit_floats_and_follows_tuples() -> None:
    from evaluator.judge.checks import compare

    exact = torch.tensor([1.0, 2.0], dtype=torch.float64)
    eager32 = torch.tensor([1.0, 2.1])
    assert not compare(torch.tensor([1.0, 2.0]), eager32, _strict(), exact=exact).ok
    eager16 = torch.tensor([1.0, 2.1], dtype=torch.float16)
    ours16 = torch.tensor([1.0, 2.0], dtype=torch.float16)
    assert compare(
        (ours16, torch.arange(2)),
        (eager16, torch.arange(2)),
        _strict(),
        exact=(exact, torch.arange(2)),
    ).ok
    assert not compare(
        ours16, eager16, _strict(), exact=torch.ones(3, dtype=torch.float64)
    ).ok  # shape differs


class _MmJudge:
    """What `case_checks.matches_eager` reads of the verifier: its config, the op, a sync."""

    def __init__(self, profile: str = "strict") -> None:
        from evaluator.config import CorrectnessConfig

        self.cfg = type("Cfg", (), {"correctness": CorrectnessConfig(tolerance_profile=profile)})()
        self.packet = torch.ops.aten.mm.default

    def sync(self) -> None:
        pass


def _bf16_mm_inputs(k: int = 4096) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(0)
    a = torch.randn(16, k, generator=g).to(torch.bfloat16)
    b = torch.randn(k, 16, generator=g).to(torch.bfloat16)
    return a, b


def test_a_kernel_that_sums_in_bf16_is_not_saved_by_the_float64_rule() -> None:
    # the attacker's reading: "within twice eager's error of float64" - but eager here sums in
    # fp32, so its error is one bf16 rounding, and a bf16 running sum is far beyond that
    from evaluator.judge.case_checks import matches_eager

    a, b = _bf16_mm_inputs()
    eager = torch.mm(a, b)
    acc = torch.zeros(16, 16, dtype=torch.bfloat16)
    for k in range(0, a.shape[1], 64):
        acc = acc + torch.mm(a[:, k : k + 64].float(), b[k : k + 64].float()).to(torch.bfloat16)
    cmp = matches_eager(_MmJudge(), acc, eager, (a, b), {})
    assert not cmp.ok


def test_the_float64_rule_passes_the_exact_result_and_is_off_under_backendbench() -> None:
    from evaluator.judge.case_checks import matches_eager
    from evaluator.results import Flag

    a, b = _bf16_mm_inputs()
    exact = torch.mm(a.double(), b.double()).to(torch.bfloat16)
    # eager perturbed by 3% where the values are large: the rounding error a bf16 reduction makes
    eager = (exact.float() * torch.where(exact.float().abs() > 40, 1.03, 1.0)).to(torch.bfloat16)
    strict = matches_eager(_MmJudge(), exact, eager, (a, b), {})
    assert strict.ok and Flag.WITHIN_EAGER_ERROR in strict.flags
    assert not matches_eager(_MmJudge("backendbench"), exact, eager, (a, b), {}).ok
