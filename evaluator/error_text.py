"""An operator's largest error, written beside the tolerance it was judged against.

A passing addmm in half precision may show a max abs error of 1.0: that reads as a bug until one
sees the tolerance is relative (atol + rtol * |eager|) and eager's values are in the hundreds.

Contract: `error_with_tolerance(result, correctness) -> str`, e.g. `1.00e+00 (f16: atol 0.001,
rtol 0.002)`; `—` when no error was measured; `(exact)` for integer and bool outputs. The dtype
is the first floating dtype among the arguments of the test with the largest error (the output's
dtype for the elementwise, matmul and reduction ops that make up the suites).
"""

from __future__ import annotations

import math
import re
from typing import Any

from evaluator.config import CorrectnessConfig, EvalConfig
from evaluator.results import OperatorResult

_TENSOR_DTYPE = re.compile(r"T\(\[[^\]]*\],\s*(\w+)")


def correctness_config(run: dict[str, Any]) -> CorrectnessConfig:
    """The tolerances an evaluation used (recorded in its run info), else the defaults."""
    recorded = (run.get("eval_config") or {}).get("correctness")
    if isinstance(recorded, dict):
        try:
            return CorrectnessConfig(**recorded)
        except ValueError:
            pass  # an older or edited file: the defaults are still the right guide
    return EvalConfig().correctness


def error_with_tolerance(result: OperatorResult, correctness: CorrectnessConfig) -> str:
    """`max abs error (dtype: atol A, rtol R)`, see the module docstring."""
    measured = [t for t in result.results if t.max_abs_error is not None]
    if not measured:
        return "—"
    worst = max(measured, key=lambda t: _sort_key(t.max_abs_error))
    value = result.max_error("max_abs_error")
    text = f"{value:.2e}" if value is not None and math.isfinite(value) else str(value)
    codes = _TENSOR_DTYPE.findall(worst.args)
    floats = [c for c in codes if correctness.tolerance(c) is not None]
    if not floats:
        return f"{text} (exact)" if codes else text
    tol = correctness.tolerance(floats[0])
    assert tol is not None
    return f"{text} ({floats[0]}: atol {tol.atol:g}, rtol {tol.rtol:g})"


def _sort_key(value: Any) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return -1.0
    return math.inf if math.isnan(number) else number


def tolerance_legend(results: list[OperatorResult], correctness: CorrectnessConfig) -> str:
    """One line naming the tolerance of each floating dtype the results' errors were measured on;
    empty when no result has a nonzero error (exact results need no tolerance to be read)."""
    codes: dict[str, None] = {}
    for r in results:
        for t in r.results:
            if t.max_abs_error is not None and _sort_key(t.max_abs_error) != 0:
                codes.update(dict.fromkeys(_TENSOR_DTYPE.findall(t.args)))
    parts = []
    for code in codes:
        tol = correctness.tolerance(code)
        if tol is not None:
            parts.append(f"{code}: atol {tol.atol:g}, rtol {tol.rtol:g}")
    if not parts:
        return ""
    return (
        "max err: largest |kernel - eager|; a value passes within atol + rtol * |eager| ("
        + "; ".join(parts)
        + ")"
    )
