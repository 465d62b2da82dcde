"""Scan, predicate and ordering family of the builtin provider: cumsum, all, any, sort, topk, histc.

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template, e.g. complex inputs).
Same request -> same text.

How the generated kernels work:
- cumsum: the input (made contiguous) is read as [outer, R, inner]; a row kernel (inner == 1) or a
  column kernel (inner > 1) walks R in tiles with `tl.cumsum` plus a running carry, accumulating in
  int64 for integers and bools, fp32 for 16/32-bit floats (fp64 for fp64 or a fp64 dtype);
- all/any: the result starts as the neutral value (a fill of the fresh 0-d output); every program
  that sees a deciding element stores the other value (all stores are the same value, so the
  races are benign): one launch, no partials;
- sort/topk: stable ranking: the rank of element i is the number of elements that come before it
  (smaller, or equal with a smaller index; larger for descending/largest; NaN sorts as the
  largest value), computed in tiles of the row; each element is then stored at its rank. This is
  CUDA's order (its sorts are stable radix sorts); rows longer than 16384 raise;
- histc: bin = (x - min) * bins / (max - min) (integer arithmetic for integer inputs, as eager's
  CUDA kernel), elements outside [min, max] ignored; when min == max the range comes from a
  min/max pass over the data, as in eager. Small inputs (`_HISTC_ONE_PROGRAM_MAX` elements,
  `_HISTC_ONE_PROGRAM_BINS` bins) take one launch: one program finds the range, sums
  `tl.histogram` counts in registers and stores every bin (at that size each extra launch, the
  zero fill, the range pass or the f16/bf16 cast, costs more than the work); larger ones add
  counts atomically from many programs into a zero-filled output.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING

import torch

from agent.providers.builtin import codegen, kernelsource

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer

NUM_VARIANTS = 2  # 0: big tiles; 1: small tiles

_INTS = (torch.int8, torch.int16, torch.int32, torch.int64, torch.uint8, torch.bool)

_COMMON = kernelsource.emitted("scan", "common")

_CUMSUM = kernelsource.emitted("scan", "cumsum")

_PREDICATE = kernelsource.emitted("scan", "predicate")

_RANK = kernelsource.emitted("scan", "rank")

_HISTC = kernelsource.emitted("scan", "histc")


_SPECS: dict[str, tuple[str, str, str, tuple[torch.dtype, ...]]] = {
    "cumsum.default": (
        "cumulative sum along a dim (optional dtype)",
        _CUMSUM,
        "def _op(self, dim, *, dtype=None):\n    return _cumsum(self, dim, dtype)",
        codegen.FLOATS + _INTS,
    ),
    "all.default": (
        "whether every element is non-zero",
        _PREDICATE,
        "def _op(self):\n    return _decide(self, True)",
        codegen.FLOATS + _INTS,
    ),
    "any.default": (
        "whether some element is non-zero",
        _PREDICATE,
        "def _op(self):\n    return _decide(self, False)",
        codegen.FLOATS + _INTS,
    ),
    "sort.default": (
        "stable sort along a dim (values and int64 indices)",
        _RANK,
        "def _op(self, dim=-1, descending=False):\n"
        "    d = _wrap_dim(dim, self.dim())\n"
        "    return _rank_sort(self, d, self.shape[d] if self.dim() else 1, descending)",
        codegen.FLOATS + _INTS[:-1],
    ),
    "topk.default": (
        "k largest (or smallest) elements along a dim, sorted",
        _RANK,
        "def _op(self, k, dim=-1, largest=True, sorted=True):\n"
        "    return _rank_sort(self, dim, k, largest)",
        codegen.FLOATS + _INTS[:-1],
    ),
    "histc.default": (
        "histogram with equal-width bins over [min, max]",
        _HISTC,
        "def _op(self, bins=100, min=0, max=0):\n    return _histc(self, bins, min, max)",
        codegen.FLOATS + (torch.int32, torch.int64),  # atomic adds need 32/64-bit counts
    ),
}

_PLAN = (
    "Plan: scans walk rows in tiles with tl.cumsum and a carry; all/any store the deciding value "
    "from any program that sees it; sort/topk place each element at its stable rank; histc counts "
    "small inputs in one program with tl.histogram and adds large ones' counts atomically. "
    "Offsets are int64."
)


def _write(request: KernelRequest) -> str | None:
    allowed = operator.itemgetter(3)  # each scan op has its own dtypes
    int64 = frozenset({torch.int64})
    return codegen.write_tiled(
        request, _SPECS, NUM_VARIANTS, _PLAN, allowed, common=(_COMMON,), ignored=int64
    )


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
