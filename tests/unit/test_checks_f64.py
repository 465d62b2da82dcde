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
