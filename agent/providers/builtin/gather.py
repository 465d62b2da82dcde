"""Data-movement family of the builtin provider: cat, stack, embedding, index_select, gather.

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template, e.g. complex tensors).
Same request -> same text.

How the generated kernels work:
- cat/stack: the output is allocated once (dtype promoted as eager does, channels-last kept when
  every input is channels-last) and one launch of the copy family's piece kernel copies up to
  four inputs into their places (each input's dims merged with its slice's, read through its own
  strides); the plan (geometry, launch arguments) is cached per input shapes/strides/dtypes;
- stack of 2..4 inputs on a new last dim (`_STACK_INTERLEAVE_MAX`): one launch of `_stack_last`,
  each program loading a [rows x columns] tile of every input (their dims merged, each read
  through its own strides) and interleaving them in registers, so it stores one contiguous span
  of the output: the piece kernel would write every output sector half (a quarter) from each of
  several programs, through stride-n stores;
- embedding: a [rows x embedding_dim] tile per program, each row reading `weight[index]`
  through the weight's strides;
- index_select: the input (made contiguous) is read as [outer, size, inner]; a tile of
  (outer, selected) rows x inner columns reads `self[o, index[l], i]`;
- gather: one flat launch over the index's elements, the position decomposed over up to six
  dims, the source addressed through its strides with the gathered dim replaced by the index.
Indices are loaded as int64, offsets are int64.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.providers.builtin import kernelsource
from agent.providers.builtin.copy import PIECES_SOURCE, write_copy_family

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer


_INDEX_SOURCE = kernelsource.emitted("gather", "index")

_STACK_SOURCE = kernelsource.emitted("gather", "stack")


_SPECS: dict[str, tuple[str, str]] = {
    "cat.default": (
        "concatenation along a dim (dtype promoted)",
        "def _op(tensors, dim=0):\n    return _cat(tensors, dim)",
    ),
    "stack.default": (
        "stack along a new dim (dtype promoted)",
        "def _op(tensors, dim=0):\n    return _stack(tensors, dim)",
    ),
    "embedding.default": (
        "rows of weight picked by indices",
        "def _op(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):\n"
        "    return _embedding(weight, indices)",
    ),
    "index_select.default": (
        "slices of self along dim picked by a 1-D index",
        "def _op(self, dim, index):\n    return _index_select(self, dim, index)",
    ),
    "gather.default": (
        "values of self along dim picked by an index tensor",
        "def _op(self, dim, index, *, sparse_grad=False):\n    return _gather(self, dim, index)",
    ),
}

_PLAN = (
    "Plan: cat/stack copy up to four inputs into their slices of one output in one launch of a "
    "strided, casting piece-copy kernel (a stack of 2-4 inputs on a new last dim: one kernel whose "
    "programs interleave a tile of every input in registers and store a contiguous span); embedding and index_select read whole rows picked by the index in 2-D tiles; gather "
    "is one flat launch over the index, the source addressed through its strides. Indices and "
    "offsets are int64."
)


def _write(request: KernelRequest) -> str | None:
    stack = _STACK_SOURCE if request.op == "stack.default" else ""
    return write_copy_family(request, _SPECS, _PLAN, PIECES_SOURCE, _INDEX_SOURCE, stack)


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
