"""Output comparison: dtype, shape, NaN positions and every element, against eager ATen.

Tolerances come from `CorrectnessConfig` per dtype code; integers and bools are compared exactly.
The functions used here are bound at import time (before any kernel is imported in the sandbox),
and `guards.HarnessSnapshot` restores the Tensor methods the kernel might patch.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import TYPE_CHECKING, Any

import torch

if TYPE_CHECKING:
    from evaluator.config import CorrectnessConfig
from evaluator.cases.testcase import CODE_OF_DTYPE
from evaluator.results import Flag

_isnan = torch.isnan
_isinf = torch.isinf
_abs = torch.abs
_where = torch.where
_equal = torch.equal
SHORT_FLOATS = (torch.float16, torch.bfloat16)


@dataclass
class Comparison:
    ok: bool
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    flags: list[str] = field(default_factory=list)
    message: str = ""

    def merge(self, other: Comparison) -> Comparison:
        def _max(a: float | None, b: float | None) -> float | None:
            vals = [v for v in (a, b) if v is not None]
            return max(vals) if vals else None

        return Comparison(
            ok=self.ok and other.ok,
            max_abs_error=_max(self.max_abs_error, other.max_abs_error),
            max_rel_error=_max(self.max_rel_error, other.max_rel_error),
            flags=self.flags + [f for f in other.flags if f not in self.flags],
            message=self.message or other.message,
        )


def compare(
    actual: Any,
    expected: Any,
    cfg: CorrectnessConfig,
    where: str = "output",
    exact: Any = None,
) -> Comparison:
    """Compare a kernel's result with eager's, recursively through tuples and lists.

    With `exact` (the op run in float64 on the same inputs, same structure), a 16-bit float
    element outside the tolerance of eager's value still counts as right when it is within the
    tolerance of the exact value widened by twice eager's own error there: eager's rounding and
    reduction order are then as far from the truth as the tolerance itself (a bf16 matmul with
    a long K, reduced in bf16 by cuBLAS), and a kernel as accurate as eager must not fail for it."""
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return Comparison(
                False,
                flags=[Flag.WRONG_VALUES],
                message=f"{where}: expected a tensor, got {type(actual).__name__}",
            )
        if not (
            isinstance(exact, torch.Tensor)
            and expected.dtype in SHORT_FLOATS
            and tuple(exact.shape) == tuple(expected.shape)
        ):
            exact = None
        return _compare_tensor(actual, expected, cfg, where, exact)
    if isinstance(expected, list | tuple):
        if not isinstance(actual, list | tuple) or len(actual) != len(expected):
            got = (
                f"{type(actual).__name__} of {len(actual)}"
                if isinstance(actual, list | tuple)
                else type(actual).__name__
            )
            return Comparison(
                False,
                flags=[Flag.WRONG_SHAPE],
                message=f"{where}: expected a {type(expected).__name__} of {len(expected)}, got {got}",
            )
        result = Comparison(True)
        exacts = (
            list(exact)
            if isinstance(exact, list | tuple) and len(exact) == len(expected)
            else [None] * len(expected)
        )
        for i, (a, e) in enumerate(zip(actual, expected, strict=True)):
            result = result.merge(compare(a, e, cfg, f"{where}[{i}]", exacts[i]))
        return result
    if expected is None:
        ok = actual is None
        return Comparison(
            ok,
            flags=[] if ok else [Flag.WRONG_VALUES],
            message="" if ok else f"{where}: expected None",
        )
    if isinstance(expected, int | float | bool):
        if isinstance(actual, torch.Tensor) and actual.numel() == 1:
            actual = actual.item()
        if not isinstance(actual, int | float | bool):
            return Comparison(
                False,
                flags=[Flag.WRONG_VALUES],
                message=f"{where}: expected {expected!r}, got {type(actual).__name__}",
            )
        ok = actual == expected or (
            isinstance(expected, float)
            and math.isclose(actual, expected, rel_tol=1e-6, abs_tol=1e-9)
        )
        return Comparison(
            ok,
            flags=[] if ok else [Flag.WRONG_VALUES],
            message="" if ok else f"{where}: expected {expected!r}, got {actual!r}",
        )
    ok = actual == expected
    return Comparison(
        bool(ok), message="" if ok else f"{where}: expected {expected!r}, got {actual!r}"
    )


def _compare_tensor(
    actual: torch.Tensor,
    expected: torch.Tensor,
    cfg: CorrectnessConfig,
    where: str,
    exact: torch.Tensor | None = None,
) -> Comparison:
    if actual.dtype != expected.dtype:
        return Comparison(
            False,
            flags=[Flag.WRONG_DTYPE],
            message=f"{where}: dtype {actual.dtype} != expected {expected.dtype}",
        )
    if tuple(actual.shape) != tuple(expected.shape):
        return Comparison(
            False,
            flags=[Flag.WRONG_SHAPE],
            message=f"{where}: shape {tuple(actual.shape)} != expected {tuple(expected.shape)}",
        )
    if actual.device != expected.device:
        return Comparison(
            False,
            flags=[Flag.WRONG_VALUES],
            message=f"{where}: on {actual.device}, expected {expected.device}",
        )
    if expected.numel() == 0:
        return Comparison(True, 0.0, 0.0)
    tol = tolerance_for(cfg, CODE_OF_DTYPE.get(expected.dtype, ""))
    if tol is None:  # integers and bools: exact
        if _equal(actual, expected):
            return Comparison(True, 0.0, 0.0)
        diff = (actual.to(torch.float64) - expected.to(torch.float64)).abs_()
        bad = int((diff != 0).sum().item())
        first = _first_index(diff != 0)
        return Comparison(
            False,
            float(diff.max().item()),
            None,
            [Flag.WRONG_VALUES],
            f"{where}: {bad} of {expected.numel()} elements differ (exact dtype {expected.dtype}); first at index {first}",
        )
    # Compare in float32 for 16/32-bit dtypes (the tolerances are far above float32's epsilon,
    # and float64 doubles the cost of checking 25M-element outputs); float64 only for 64-bit.
    if expected.is_complex():
        wide_c = torch.complex128 if expected.dtype == torch.complex128 else torch.complex64
        a = torch.view_as_real(actual.to(wide_c))
        e = torch.view_as_real(expected.to(wide_c))
    else:
        wide = torch.float64 if expected.dtype == torch.float64 else torch.float32
        a = actual.to(wide)
        e = expected.to(wide)
    a_nan, e_nan = _isnan(a), _isnan(e)
    if not _equal(a_nan, e_nan):
        n = int((a_nan != e_nan).sum().item())
        return Comparison(
            False,
            None,
            None,
            [Flag.NAN_MISMATCH],
            f"{where}: NaN positions differ at {n} elements; first at index {_first_index(a_nan != e_nan)}",
        )
    a_inf, e_inf = _isinf(a), _isinf(e)
    inf_mismatch = (a_inf | e_inf) & (a != e)
    if bool(inf_mismatch.any().item()):
        return Comparison(
            False,
            math.inf,
            math.inf,
            [Flag.WRONG_VALUES],
            f"{where}: infinities differ at {int(inf_mismatch.sum().item())} elements",
        )
    finite = ~(a_nan | a_inf | e_inf)
    a = _where(finite, a, 0.0)
    e = _where(finite, e, 0.0)
    diff = _abs(a - e)
    allowed = tol.atol + tol.rtol * _abs(e)
    bad_mask = diff > allowed
    rescued = exact is not None and bool(bad_mask.any().item())
    if rescued:
        x = _where(finite, exact.to(device=a.device, dtype=wide), 0.0)
        eager_error = _abs(e - x)
        bad_mask &= _abs(a - x) > tol.atol + tol.rtol * _abs(x) + 2 * eager_error
    max_abs = float(diff.max().item())
    rel = diff / _abs(e).clamp_min(1e-12)
    max_rel = float(rel.max().item())
    if bool(bad_mask.any().item()):
        n = int(bad_mask.sum().item())
        idx = _first_index(bad_mask)
        return Comparison(
            False,
            max_abs,
            max_rel,
            [Flag.WRONG_VALUES],
            f"{where}: {n} of {expected.numel()} elements outside atol={tol.atol:g} rtol={tol.rtol:g}; max abs error {max_abs:.3g}; first at index {idx}",
        )
    return Comparison(True, max_abs, max_rel, [Flag.WITHIN_EAGER_ERROR] if rescued else [])


def tolerance_for(cfg: Any, dtype_code: str) -> Any:
    """(atol, rtol) as an object with `.atol`/`.rtol`, or None for exact dtypes. Works on the
    pydantic `CorrectnessConfig` and on the plain view the sandbox child uses."""
    strict = cfg.strict
    if dtype_code not in strict:
        return None
    if cfg.tolerance_profile == "backendbench":
        return SimpleNamespace(atol=1e-2, rtol=1e-2)
    tol = strict[dtype_code]
    return SimpleNamespace(**tol) if isinstance(tol, dict) else tol


def _first_index(mask: torch.Tensor) -> list[int]:
    nz = mask.nonzero()
    return nz[0].tolist() if nz.numel() else []


def bitwise_equal(a: Any, b: Any) -> bool:
    """True when two results hold the same bits (NaNs included) - for aliasing checks."""
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        if a.dtype != b.dtype or a.shape != b.shape:
            return False
        return _equal(_bits(a), _bits(b))
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(bitwise_equal(x, y) for x, y in zip(a, b, strict=True))
    return bool(a == b)


def _bits(t: torch.Tensor) -> torch.Tensor:
    flat = t.detach().reshape(-1).contiguous()
    return flat if flat.dtype == torch.bool else flat.view(torch.uint8)


def snapshot(value: Any) -> Any:
    """A deep copy of tensors in a result (for later identity/aliasing comparisons)."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    if isinstance(value, list | tuple):
        return type(value)(snapshot(v) for v in value)
    return value


def tensor_leaves(value: Any) -> list[torch.Tensor]:
    """The tensors of a value, through lists and tuples."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for v in value for t in tensor_leaves(v)]
    return []


def _float_leaves(value: Any) -> list[torch.Tensor]:
    return [t for t in tensor_leaves(value) if t.is_floating_point()]


def widen_to_f64(value: Any) -> Any:
    """A copy of `value` with every floating tensor in float64 (tuples and lists followed)."""
    if isinstance(value, torch.Tensor):
        return value.to(torch.float64) if value.is_floating_point() else value.clone()
    if isinstance(value, list | tuple):
        return type(value)(widen_to_f64(v) for v in value)
    if isinstance(value, dict):
        return {k: widen_to_f64(v) for k, v in value.items()}
    return value


def errors_vs_f64(actual: Any, expected: Any, exact: Any) -> tuple[float, float] | None:
    """(kernel's, eager's) largest absolute difference from a float64 run of the same op, over
    the floating outputs of matching shapes and finite values; None when nothing compares.

    A diagnostic for failed comparisons: when eager's own rounding is the larger error (long
    reductions, statistics eager keeps in half precision), the report says so; the verdict stays
    the strict comparison with eager."""
    ours, theirs, truth = _float_leaves(actual), _float_leaves(expected), _float_leaves(exact)
    if not truth or not (len(ours) == len(theirs) == len(truth)):
        return None
    worst_ours = worst_eager = 0.0
    for a, e, x in zip(ours, theirs, truth, strict=True):
        if a.shape != x.shape or e.shape != x.shape:
            return None
        x64 = x.double()
        keep = torch.isfinite(x64)  # where the exact result is finite; a NaN/inf there is inf error
        if not bool(keep.any()):
            continue
        for t, side in ((a, 0), (e, 1)):
            t64 = t.double()
            err = _where(torch.isfinite(t64), _abs(t64 - x64), math.inf)[keep].max()
            if side == 0:
                worst_ours = max(worst_ours, float(err))
            else:
                worst_eager = max(worst_eager, float(err))
    return worst_ours, worst_eager
