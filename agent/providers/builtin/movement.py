"""Movement family of the builtin provider: padding, slice/select backward, repeat, roll, advanced
indexing (index.Tensor, index_put, index_put_) and scatter.src.

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template: complex dtypes, boolean-mask
indices, more than three index tensors or six dims). Same request -> same text. The kernels
are sections of kernels/map_tile.py, map_flat.py, map_ops.py, index.py and scatter.py, after
the tile helpers (`codegen.tiles_prelude`). `tile_writer` makes such a writer for another
family's specs (the embedding backward family uses it with its own plan line and sections).

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
- scatter.src copies self, then one flat launch over the index writes src values.
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


@dataclass(frozen=True)
class TileSpec:
    """One operator's file: header summary, the sections after the tile helpers, `_op`."""

    summary: str
    sections: tuple[str, ...]
    body: str


_SPECS: dict[str, TileSpec] = {
    "constant_pad_nd.default": TileSpec(
        "constant padding (negative pads crop; no padding is a plain copy)",
        (MAP_SOURCE, PIECES_SOURCE, _MAP_OPS),
        "def _op(self, pad, value=0):\n    return _constant_pad_nd(self, pad, value)",
    ),
    "slice_backward.default": TileSpec(
        "gradient of a slice: grad placed in zeros of the input's shape",
        (MAP_SOURCE, _MAP_OPS),
        "def _op(grad_output, input_sizes, dim, start, end, step):\n"
        "    return _slice_backward(grad_output, input_sizes, dim, start, end, step)",
    ),
    "select_backward.default": TileSpec(
        "gradient of select: grad placed in zeros of the input's shape",
        (MAP_SOURCE, _MAP_OPS),
        "def _op(grad_output, input_sizes, dim, index):\n"
        "    return _select_backward(grad_output, input_sizes, dim, index)",
    ),
    "repeat.default": TileSpec(
        "tiling of the input along each dim",
        (MAP_SOURCE, _MAP_OPS),
        "def _op(self, repeats):\n    return _repeat(self, repeats)",
    ),
    "roll.default": TileSpec(
        "cyclic shift along dims (flattened when dims is empty)",
        (MAP_SOURCE, _MAP_OPS),
        "def _op(self, shifts, dims=()):\n    return _roll(self, shifts, dims)",
    ),
    "index.Tensor": TileSpec(
        "advanced indexing with a list of optional index tensors",
        (INDEX_SOURCE,),
        "def _op(self, indices):\n    return _index(self, indices)",
    ),
    "index_put.default": TileSpec(
        "advanced-index assignment into a copy of self (accumulate adds)",
        (MAP_SOURCE, INDEX_SOURCE),
        "def _op(self, indices, values, accumulate=False):\n"
        "    return _index_put(self, indices, values, accumulate, inplace=False)",
    ),
    "index_put_.default": TileSpec(
        "advanced-index assignment into self (accumulate adds)",
        (MAP_SOURCE, INDEX_SOURCE),
        "def _op(self, indices, values, accumulate=False):\n"
        "    return _index_put(self, indices, values, accumulate, inplace=True)",
    ),
    "scatter.src": TileSpec(
        "copy of self with src values written at index along dim",
        (MAP_SOURCE, SCATTER_SOURCE),
        "def _op(self, dim, index, src):\n    return _scatter(self, dim, index, src)",
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


def tile_writer(specs: dict[str, TileSpec], plan: str | None = None) -> Writer:
    """A writer for `specs`: each file is the header (`plan`, by default this family's), the tile
    helpers, the spec's sections and its entry point; None for an unknown op or a declined case."""

    def write(request: KernelRequest) -> str | None:
        picked = codegen.pick(request, specs, NUM_VARIANTS)
        if picked is None or _declines(request.op, request.cases):
            return None
        spec, variant = picked
        return codegen.render_family(
            request,
            variant,
            summary=spec.summary,
            plan=_PLAN if plan is None else plan,
            sections=(codegen.tiles_prelude(variant), *spec.sections),
            body=spec.body,
        )

    return write


_write = tile_writer(_SPECS)
WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
