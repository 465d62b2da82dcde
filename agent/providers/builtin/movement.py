"""Movement family of the builtin provider: padding, slice/select backward, repeat, roll, advanced
indexing (index.Tensor, index_put, index_put_), scatter.src and embedding_dense_backward.

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template: complex dtypes, boolean-mask
indices, more than three index tensors or six dims). Same request -> same text. The kernels
are sections of kernels/map_tile.py, map_flat.py, map_ops.py, index.py, scatter.py and
embedding_*.py, after the tile helpers (`codegen.tiles_prelude`).

How the generated kernels work:
- one "map" kernel serves constant_pad_nd, slice_backward, select_backward, repeat, roll and
  strided (casting) copies: every output dim maps its coordinate c to an input coordinate, either
  placed (j = (c - off) / step, outside -> fill value) or wrapped (j = (c - off) mod n_in). The
  input is read through its own strides, so strided views need no copy. A contiguous output
  whose plan merges to at most four dims (all of these ops' usual cases) takes the flat form:
  programs own runs of consecutive output elements, split into coordinates by constexpr sizes
  once per vector of elements, so stores are full vectors even for odd row lengths. Other
  outputs are a [rows x last dim] tile whose five leading dims come from the row number;
- index / index_put: the indexed result shape is planned in Python exactly as ATen does (adjacent
  index tensors keep their place, separated ones go first); a [rows x last dim] tile reads each
  index tensor through its broadcast strides (negative indices wrap) and gathers, stores, or
  atomically adds (accumulate=True). f16/bf16 accumulation with one index tensor on dim 0 (up to
  8192 positions) adds in index order and rounds after every addition, as eager does; other
  f16/bf16 accumulations sum in an fp32 copy, rounded once at the end;
- scatter.src copies self, then one flat launch over the index writes src values;
- embedding_dense_backward, by the number of indices (no frequency scaling, not fp64): up to
  3072, CUDA eager's own arithmetic for few indices (per chunk of 32 rows, fp32 sums rounded to
  the dtype, added chunk after chunk), every chunk in parallel and each weight row's chunks
  folded along links; up to 16384, a stable counting sort of the rows by weight row, then per
  tile of sorted rows one small 0/1 matrix product sums the rows of each weight row (fp32,
  rounded once), whatever the distribution of the indices; beyond (and with frequency
  scaling), grad rows added into the weight-shaped gradient as int64 fixed point (grad * 2**S,
  S from max |grad| so that no row sum can overflow): integer atomics give the same sums in any
  order, so the result is deterministic (fp32 atomics were not, and the evaluator rejects a
  kernel whose repeated calls disagree); rows equal to padding_idx skipped, optionally scaled
  by 1/count; one pass converts to the output dtype. NaN/inf grads and fp64 take float atomic
  adds there.
  On sm_90+ the kernels after the first of the few-index and sorted paths are programmatic
  dependent launches (each launched while the one before it finishes).
Offsets are int64 (int32 in the flat map kernel where they fit); index tensors are read as int64.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import torch

from agent.providers.builtin import codegen, kernelsource
from agent.providers.builtin.copy import PIECES_SOURCE

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer

NUM_VARIANTS = 2  # 0: big tiles; 1: small tiles

MAX_DIMS = 6  # dims a map/index kernel addresses (five from the row number, one column dim)


def _joined(*sections: str) -> str:
    """Sections copied one after another, two blank lines between them."""
    return "\n\n\n".join(s.strip("\n") for s in sections) + "\n"


# the map kernels (pad, slices, copies): the tile form, then the flat form and the launch planning
MAP_SOURCE = _joined(
    kernelsource.emitted("map_tile", "map"), kernelsource.emitted("map_flat", "map_flat")
)
_MAP_OPS = kernelsource.emitted("map_ops", "map_ops")
INDEX_SOURCE = kernelsource.emitted("index", "index")
SCATTER_SOURCE = kernelsource.emitted("scatter", "scatter")
# embedding_dense_backward: the atomic, chunked and sorted paths, then the host code
EMBED_SOURCE = _joined(
    *(
        kernelsource.emitted(name, name)
        for name in (
            "embedding_atomic",
            "embedding_chunked",
            "embedding_sorted",
            "embedding_backward",
        )
    )
)


@dataclass(frozen=True)
class _Spec:
    summary: str
    sections: tuple[str, ...]
    body: str


_SPECS: dict[str, _Spec] = {
    "constant_pad_nd.default": _Spec(
        "constant padding (negative pads crop; no padding is a plain copy)",
        (MAP_SOURCE, PIECES_SOURCE, _MAP_OPS),
        "def _op(self, pad, value=0):\n    return _constant_pad_nd(self, pad, value)",
    ),
    "slice_backward.default": _Spec(
        "gradient of a slice: grad placed in zeros of the input's shape",
        (MAP_SOURCE, _MAP_OPS),
        "def _op(grad_output, input_sizes, dim, start, end, step):\n"
        "    return _slice_backward(grad_output, input_sizes, dim, start, end, step)",
    ),
    "select_backward.default": _Spec(
        "gradient of select: grad placed in zeros of the input's shape",
        (MAP_SOURCE, _MAP_OPS),
        "def _op(grad_output, input_sizes, dim, index):\n"
        "    return _select_backward(grad_output, input_sizes, dim, index)",
    ),
    "repeat.default": _Spec(
        "tiling of the input along each dim",
        (MAP_SOURCE, _MAP_OPS),
        "def _op(self, repeats):\n    return _repeat(self, repeats)",
    ),
    "roll.default": _Spec(
        "cyclic shift along dims (flattened when dims is empty)",
        (MAP_SOURCE, _MAP_OPS),
        "def _op(self, shifts, dims=()):\n    return _roll(self, shifts, dims)",
    ),
    "index.Tensor": _Spec(
        "advanced indexing with a list of optional index tensors",
        (INDEX_SOURCE,),
        "def _op(self, indices):\n    return _index(self, indices)",
    ),
    "index_put.default": _Spec(
        "advanced-index assignment into a copy of self (accumulate adds)",
        (MAP_SOURCE, INDEX_SOURCE),
        "def _op(self, indices, values, accumulate=False):\n"
        "    return _index_put(self, indices, values, accumulate, inplace=False)",
    ),
    "index_put_.default": _Spec(
        "advanced-index assignment into self (accumulate adds)",
        (MAP_SOURCE, INDEX_SOURCE),
        "def _op(self, indices, values, accumulate=False):\n"
        "    return _index_put(self, indices, values, accumulate, inplace=True)",
    ),
    "scatter.src": _Spec(
        "copy of self with src values written at index along dim",
        (MAP_SOURCE, SCATTER_SOURCE),
        "def _op(self, dim, index, src):\n    return _scatter(self, dim, index, src)",
    ),
    "embedding_dense_backward.default": _Spec(
        "embedding weight gradient: grad rows summed per index",
        (MAP_SOURCE, codegen.PDL_SOURCE, EMBED_SOURCE),
        "def _op(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):\n"
        "    return _embedding_dense_backward(grad_output, indices, num_weights, padding_idx,\n"
        "                                     scale_grad_by_freq)",
    ),
}

_PLAN = (
    "Plan: contiguous outputs of up to four merged dims are flat runs of vector-wide rows, "
    "other outputs [rows x last dim] tiles; each output coordinate maps to an input "
    "coordinate (placed, wrapped, or picked by index tensors read through their broadcast "
    "strides), the input is read through its own strides; accumulations are atomic adds in fp32 "
    "(fp64 for fp64). Offsets are int64 (int32 in flat runs where they fit), indices int64."
)


def _index_lists(cases: list[Any]) -> list[list[Any]]:
    """The `indices` argument of each index/index_put case (positional or keyword)."""
    lists = []
    for case in cases:
        value = case.args[1] if len(case.args) > 1 else case.kwargs.get("indices")
        if isinstance(value, list | tuple):
            lists.append(list(value))
    return lists


def _declines(op: str, cases: list[Any]) -> bool:
    """Cases outside the template: complex/fp8 dtypes, masks, too many index tensors or dims."""
    if codegen.unsupported_dtypes(cases):
        return True
    if any(len(spec.shape) > MAX_DIMS for case in cases for spec in case.tensor_specs()):
        return True
    if op.startswith("index"):
        for entries in _index_lists(cases):
            specs = [e for e in entries if e is not None]
            if len(specs) > 3 or any(
                getattr(e, "dtype", None) in (torch.bool, torch.uint8) for e in specs
            ):
                return True
    return False


def _write(request: KernelRequest) -> str | None:
    spec = _SPECS.get(request.op)
    if spec is None or _declines(request.op, request.cases):
        return None
    variant = min(max(request.variant, 0), NUM_VARIANTS - 1)
    return codegen.render_file(
        codegen.file_header(
            request.op, summary=spec.summary, plan=_PLAN, variant=variant, schema=request.schema
        ),
        codegen.tiles_prelude(variant),
        *spec.sections,
        codegen.entry_point(request.op, spec.body),
    )


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
