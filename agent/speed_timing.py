"""The evaluator's timing of a kernel, read for speed rounds: per-case rows, ceilings, noise, keep rule.

Contract (pure functions over `evaluator.results.OperatorResult`, no GPU needed):
- `case_rows(result, flops, peak_tflops, launch_ms) -> list[CaseTiming]`: per timed case the
  kernel's and eager's time (and torch.compile's when it was timed), the speedups, host time per
  call beside GPU time, and the share of the case's ceiling the kernel reached: the ceiling is the
  largest of bytes that must move / measured copy bandwidth (`floor_ms`, from the evaluator),
  flops / the dtype's peak, and an empty launch's time.
- `timing_text(rows, result, noise, threshold)`: those rows as the text a speed prompt shows,
  slowest cases (lowest share of their ceiling) marked.
- `timing_noise(results)`: the spread of the geomean speedup over repeated timings of one kernel,
  relative to the smallest ((max - min) / min); None with fewer than two timed results.
- `keep_threshold(noise, min_gain)`, `is_faster(candidate, best_speedup, threshold)`: a candidate
  replaces the kept kernel only when it passed and its geomean speedup beats the kept one's by more
  than the threshold, so noise is never kept as progress.
- `at_ceiling(rows, fraction)`: every timed case reached `fraction` of its ceiling.
- `case_flops(op, case)`: floating-point operations of one call (torch's FlopCounterMode on meta
  tensors); None when torch counts none (elementwise ops: their ceiling is bandwidth).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from evaluator.results import OperatorResult, Status, geomean

# Cases marked slowest in a speed prompt.
NUM_SLOWEST = 3


@dataclass
class CaseTiming:
    args: str
    kernel_ms: float
    eager_ms: float | None
    speedup: float | None
    compile_ms: float | None
    speedup_vs_compile: float | None
    kernel_host_ms: float | None
    eager_host_ms: float | None
    ceiling_ms: float | None
    bound: str  # "bandwidth", "compute", "launch" or "unknown"

    @property
    def ceiling_fraction(self) -> float | None:
        if self.ceiling_ms is None or self.kernel_ms <= 0:
            return None
        return min(1.0, self.ceiling_ms / self.kernel_ms)


def case_flops(op: str, case: Any) -> float | None:
    """Floating-point operations of one call of `op` on `case` (see the module docstring)."""
    try:
        import torch
        from torch.utils.flop_counter import FlopCounterMode

        from evaluator.cases.inputs import materialize

        base, _, overload = op.partition(".")
        packet = getattr(getattr(torch.ops.aten, base), overload)
        args, kwargs = materialize(op, case, "meta", 0)
        counter = FlopCounterMode(display=False)
        with counter:
            packet(*args, **kwargs)
        total = counter.get_total_flops()
    except Exception:  # noqa: BLE001 - an op torch cannot count on meta tensors: no compute ceiling
        return None
    return float(total) if total else None


def _peak_for(case_args: str, peak_tflops: dict[str, float]) -> float | None:
    """The peak of the widest float dtype named in the case (f32 beside f16 computes in f32)."""
    order = ["f64", "f32", "bf16", "f16"]
    for code in order:
        if f", {code}" in case_args and code in peak_tflops:
            return peak_tflops[code]
    return None


def case_rows(
    result: OperatorResult,
    flops: dict[str, float | None],
    peak_tflops: dict[str, float],
    launch_ms: float = 0.0,
) -> list[CaseTiming]:
    """Per timed case of `result` (see the module docstring); `flops` by case args. No call
    takes less than an empty launch (`launch_ms`): a tiny case's ceiling is the launch."""
    rows = []
    for t in result.results:
        if t.skipped or not t.passed or t.kernel_ms is None:
            continue
        ceilings = [(launch_ms, "launch")] if launch_ms > 0 else []
        if t.floor_ms:
            ceilings.append((t.floor_ms, "bandwidth"))
        f = flops.get(t.args)
        peak = _peak_for(t.args, peak_tflops)
        if f and peak:
            ceilings.append((f / (peak * 1e12) * 1e3, "compute"))
        ceiling_ms, bound = max(ceilings) if ceilings else (None, "unknown")
        rows.append(
            CaseTiming(
                args=t.args,
                kernel_ms=t.kernel_ms,
                eager_ms=t.eager_ms,
                speedup=t.speedup,
                compile_ms=getattr(t, "compile_ms", None),
                speedup_vs_compile=getattr(t, "speedup_vs_compile", None),
                kernel_host_ms=t.kernel_host_ms,
                eager_host_ms=t.eager_host_ms,
                ceiling_ms=ceiling_ms,
                bound=bound,
            )
        )
    return rows


def _us(ms: float | None) -> str:
    return "n/a" if ms is None else f"{ms * 1e3:.1f} us"


def _x(value: float | None) -> str:
    return "n/a" if value is None or not math.isfinite(value) else f"{value:.2f}x"


def _shorten(text: str, limit: int = 160) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def geomean_vs_compile(result: OperatorResult) -> float | None:
    values = [getattr(t, "speedup_vs_compile", None) for t in result.results if t.passed]
    values = [v for v in values if v is not None]
    return geomean(values) if values else None


def timing_text(
    rows: list[CaseTiming], result: OperatorResult, noise: float | None, threshold: float
) -> str:
    """The timing block of a speed prompt (see the module docstring)."""
    if not rows:
        return "No case of this kernel was timed."
    ranked = sorted(
        range(len(rows)),
        key=lambda i: (rows[i].ceiling_fraction or 0.0, rows[i].speedup or 0.0),
    )
    slowest = set(ranked[:NUM_SLOWEST]) if len(rows) > 1 else set()
    head = f"Geomean speedup vs eager: {_x(result.geomean_speedup)}"
    vs_compile = geomean_vs_compile(result)
    if vs_compile is not None:
        head += f"; vs torch.compile: {_x(vs_compile)}"
    noise_text = "not measured" if noise is None else f"{noise * 100:.1f}%"
    lines = [
        head + ".",
        f"Timing noise (spread of repeated timings of this kernel): {noise_text}; a new file is "
        f"kept only when its geomean speedup is more than {threshold * 100:.1f}% higher.",
        "",
    ]
    for i, r in enumerate(rows):
        frac = r.ceiling_fraction
        ceiling = (
            "ceiling unknown"
            if frac is None
            else f"{frac * 100:.0f}% of its {r.bound} ceiling ({_us(r.ceiling_ms)})"
        )
        mark = " <- among the slowest" if i in slowest else ""
        lines.append(f"{i + 1}. `{_shorten(r.args)}`{mark}")
        compile_part = ""
        if r.compile_ms is not None:
            compile_part = f", torch.compile {_us(r.compile_ms)} ({_x(r.speedup_vs_compile)})"
        lines.append(
            f"   kernel {_us(r.kernel_ms)}, eager {_us(r.eager_ms)}, speedup {_x(r.speedup)}"
            f"{compile_part}; {ceiling}"
        )
        lines.append(
            f"   host time per call: kernel {_us(r.kernel_host_ms)}, eager {_us(r.eager_host_ms)}"
            " (beside the GPU times above: a call whose host time exceeds its GPU time is "
            "launch-bound)"
        )
    return "\n".join(lines)


def timing_noise(results: list[OperatorResult]) -> float | None:
    values = [
        r.geomean_speedup
        for r in results
        if r.status == Status.PASSED and r.geomean_speedup is not None and r.geomean_speedup > 0
    ]
    if len(values) < 2:
        return None
    return (max(values) - min(values)) / min(values)


def keep_threshold(noise: float | None, min_gain: float) -> float:
    return max(min_gain, noise or 0.0)


def is_faster(candidate: OperatorResult | None, best_speedup: float, threshold: float) -> bool:
    if candidate is None or candidate.status != Status.PASSED:
        return False
    g = candidate.geomean_speedup
    return g is not None and math.isfinite(g) and g > best_speedup * (1.0 + threshold)


def at_ceiling(rows: list[CaseTiming], fraction: float) -> bool:
    fracs = [r.ceiling_fraction for r in rows]
    return bool(fracs) and all(f is not None and f >= fraction for f in fracs)


def median_result(results: list[OperatorResult]) -> OperatorResult | None:
    """The timed result whose geomean speedup is the median of `results` (lower middle)."""
    timed = [r for r in results if r.status == Status.PASSED and r.geomean_speedup is not None]
    if not timed:
        return None
    timed.sort(key=lambda r: r.geomean_speedup)
    return timed[(len(timed) - 1) // 2]
