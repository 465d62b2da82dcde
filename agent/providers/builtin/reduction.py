"""Reduction family of the builtin provider: sum, mean, var/std (and var_mean/std_mean), amax,
amin, max/min (whole tensor, or values+indices along one dim) and argmax/argmin.

Contract: `WRITERS` maps a normalized overload name ("sum.dim_IntList") to a Writer
(KernelRequest -> text of a whole kernel file, or None when the request is outside what this
template handles, e.g. complex inputs). Same request -> same text.

How the generated kernels work. Every reduction is seen as an `[outer, R, inner]` array, R being
the product of the reduced dims:
- the wrapper first looks for a *view*: the input itself when contiguous, or its dims in memory
  order (a transposed input) when the reduced dims form one block there and the kept dims keep
  their order; only otherwise does it make a permuted `.contiguous()` copy (reduced dims last);
- `inner == 1` runs a row kernel (tile BLOCK_M rows x BLOCK_N columns, looping over the row),
  `inner > 1` a column kernel (tile BLOCK_R x BLOCK_I, coalesced along inner), so reducing dim 0
  of a [8192, 768] tensor reads memory once, in order;
- when the kept elements are too few to fill the GPU, R is split over several programs that
  write fp32/fp64/int64 partials, and a second kernel combines them in a fixed order
  (deterministic: no atomics);
- accumulation is in fp32 for 16/32-bit floats, fp64 for fp64, int64 for integers and bools;
  var/std use sums shifted by the row's first element (one pass, no catastrophic cancellation
  for data with a large mean); max/min propagate NaN and return the first index of the extreme.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import torch

from agent.providers.builtin import codegen, kernelsource

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer

NUM_VARIANTS = 2  # 0: split reductions and big tiles; 1: no splits, small tiles

_INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)

# ---------------------------------------------------------------- shared text of every file


# ------------------------------------------------ sum / mean / var / std (+ the mean)

_MOMENTS_KERNELS = kernelsource.emitted("reduction_moments", "moments")

# ------------------------------------------------ amax / amin / max / min / argmax / argmin

_EXTREMES_KERNELS = kernelsource.emitted("reduction_extremes", "extremes")


# ---------------------------------------------------------------- per-overload wrappers


@dataclass(frozen=True)
class _Spec:
    family: str  # "moments" | "extremes"
    summary: str
    body: str  # the wrapper: `def _op(<schema args>):` ...
    floats_only: bool = False


def _sum_like(kind_expr: str, default_dtype: str) -> str:
    return f"""
    dims = _norm_dims(dim, self.dim())
    out_dtype = dtype if dtype is not None else {default_dtype}
    return _moments(self, dims, keepdim, out_dtype, {kind_expr})
"""


_SUM_DTYPE = "(torch.int64 if not (self.is_floating_point() or self.is_complex()) else self.dtype)"

_SPECS: dict[str, _Spec] = {
    "sum.default": _Spec(
        "moments",
        "sum of every element (optional dtype)",
        "def _op(self, *, dtype=None):\n    dim, keepdim = None, False"
        + _sum_like("0", _SUM_DTYPE),
    ),
    "sum.dim_IntList": _Spec(
        "moments",
        "sum over dims with keepdim and dtype",
        "def _op(self, dim, keepdim=False, *, dtype=None):" + _sum_like("0", _SUM_DTYPE),
    ),
    "mean.default": _Spec(
        "moments",
        "mean of every element (optional dtype)",
        "def _op(self, *, dtype=None):\n    dim, keepdim = None, False"
        + _sum_like("1", "self.dtype"),
        floats_only=True,
    ),
    "mean.dim": _Spec(
        "moments",
        "mean over dims with keepdim and dtype",
        "def _op(self, dim, keepdim=False, *, dtype=None):" + _sum_like("1", "self.dtype"),
        floats_only=True,
    ),
}


def _var_body(signature: str, kind: int, correction_expr: str) -> str:
    return f"""{signature}
    correction = {correction_expr}
    dims = _norm_dims(dim, self.dim())
    return _moments(self, dims, keepdim, self.dtype, {kind}, correction)
"""


for _name, _kind, _what in (
    ("var", 2, "variance"),
    ("std", 3, "standard deviation"),
    ("var_mean", 4, "variance and mean"),
    ("std_mean", 5, "standard deviation and mean"),
):
    _SPECS[f"{_name}.correction"] = _Spec(
        "moments",
        f"{_what} over dims with a correction (Bessel by default)",
        _var_body(
            "def _op(self, dim=None, *, correction=None, keepdim=False):",
            _kind,
            "1 if correction is None else correction",
        ),
        floats_only=True,
    )
    _SPECS[f"{_name}.dim"] = _Spec(
        "moments",
        f"{_what} over dims, unbiased by default",
        _var_body(
            "def _op(self, dim, unbiased=True, keepdim=False):", _kind, "1 if unbiased else 0"
        ),
        floats_only=True,
    )

for _name, _is_max in (("amax", True), ("amin", False)):
    _SPECS[f"{_name}.default"] = _Spec(
        "extremes",
        f"{'maximum' if _is_max else 'minimum'} over dims with keepdim",
        f"""def _op(self, dim=(), keepdim=False):
    dims = _norm_dims(dim, self.dim())
    return _extremes(self, dims, keepdim, {_is_max}, True, False)[0]
""",
    )

for _name, _is_max in (("max", True), ("min", False)):
    _SPECS[f"{_name}.default"] = _Spec(
        "extremes",
        f"{'maximum' if _is_max else 'minimum'} of every element",
        f"""def _op(self):
    dims = _norm_dims(None, self.dim())
    return _extremes(self, dims, False, {_is_max}, True, False)[0]
""",
    )
    _SPECS[f"{_name}.dim"] = _Spec(
        "extremes",
        f"{'maximum' if _is_max else 'minimum'} values and first indices along one dim",
        f"""def _op(self, dim, keepdim=False):
    dims = _norm_dims([dim], self.dim())
    values, indices = _extremes(self, dims, keepdim, {_is_max}, True, True)
    return values, indices
""",
    )

for _name, _is_max in (("argmax", True), ("argmin", False)):
    _SPECS[f"{_name}.default"] = _Spec(
        "extremes",
        f"first index of the {'maximum' if _is_max else 'minimum'} (flat when dim is None)",
        f"""def _op(self, dim=None, keepdim=False):
    if dim is None:
        # over the flattened tensor: indices count in the input's logical (row-major) order
        dims = list(range(self.dim()))
        flat_shape = [1] * self.dim() if keepdim else []
        idx = _extremes(self, dims, False, {_is_max}, False, True, logical_order=True)[1]
        return idx.view(flat_shape)
    dims = _norm_dims([dim], self.dim())
    return _extremes(self, dims, keepdim, {_is_max}, False, True)[1]
""",
    )


_PLAN = (
    "Plan: the input is read as a row-major [outer, R, inner] array (a view when its layout "
    "allows, else a permuted contiguous copy); inner == 1 runs a row kernel, inner > 1 a column "
    "kernel coalesced along inner; when too few programs would run, R is split and a second "
    "kernel combines the partials in a fixed order. Accumulation is fp32 (fp64 for fp64, int64 "
    "for integers); var/std use sums shifted by each row's first element."
)


def _dtypes(spec: _Spec) -> tuple[torch.dtype, ...]:
    return codegen.FLOATS if spec.floats_only else codegen.FLOATS + _INTS


def _write(request: KernelRequest) -> str | None:
    picked = codegen.pick(request, _SPECS, NUM_VARIANTS, _dtypes)
    if picked is None:
        return None
    spec, variant = picked
    prelude = kernelsource.emitted(
        "reduction", "prelude", values={"_CONSERVATIVE": str(variant >= 1)}
    )
    kernels = _MOMENTS_KERNELS if spec.family == "moments" else _EXTREMES_KERNELS
    sections = (prelude, codegen.PDL_SOURCE, kernels, spec.body)
    return codegen.render_family(
        request, variant, summary=spec.summary, plan=_PLAN, sections=sections
    )


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
