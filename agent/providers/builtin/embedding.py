"""Embedding backward family of the builtin provider: embedding_dense_backward (the forward,
`embedding.default`, is a row gather in the gather family).

Contract: `WRITERS` maps `embedding_dense_backward.default` to a Writer (KernelRequest -> text
of a whole kernel file, or None for complex/fp8 dtypes or more than six dims). Same request ->
same text. The file is written by the movement family's `tile_writer` with this family's plan:
the tile helpers, the programmatic dependent launch helpers and the sections of
kernels/embedding_atomic.py, embedding_chunked.py, embedding_sorted.py and embedding_backward.py,
in that order.

How the generated kernels work, by the number of indices (no frequency scaling, not fp64):
- up to 3072: CUDA eager's own arithmetic for few indices (per chunk of 32 rows, fp32 sums
  rounded to the dtype, added chunk after chunk), every chunk in parallel and each weight row's
  chunks folded along links;
- up to 16384: a stable counting sort of the rows by weight row, then per tile of sorted rows
  one small 0/1 matrix product sums the rows of each weight row (fp32, rounded once), whatever
  the distribution of the indices;
- beyond (and with frequency scaling): grad rows added into the weight-shaped gradient as int64
  fixed point (grad * 2**S, S from max |grad| so that no row sum can overflow): integer atomics
  give the same sums in any order, so the result is deterministic (fp32 atomics are not, and
  the evaluator rejects a kernel whose repeated calls disagree); rows equal to padding_idx
  skipped, optionally scaled by 1/count; one pass converts to the output dtype. NaN/inf grads
  and fp64 take float atomic adds there.
On sm_90+ the kernels after the first of the few-index and sorted paths are programmatic
dependent launches (each launched while the one before it finishes).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.providers.builtin import codegen, kernelsource
from agent.providers.builtin.movement import TileSpec, tile_writer

if TYPE_CHECKING:
    from agent.providers.builtin.request import Writer

OP = "embedding_dense_backward.default"

# the atomic, chunked and sorted paths, then the host code that picks one
EMBED_SOURCE = "\n\n\n".join(
    kernelsource.emitted(name, name).strip("\n")
    for name in ("embedding_atomic", "embedding_chunked", "embedding_sorted", "embedding_backward")
)

_SPECS: dict[str, TileSpec] = {
    OP: TileSpec(
        "embedding weight gradient: grad rows summed per index",
        (codegen.PDL_SOURCE, EMBED_SOURCE),
        "def _op(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):\n"
        "    return _embedding_dense_backward(grad_output, indices, num_weights, padding_idx,\n"
        "                                     scale_grad_by_freq)",
    ),
}

_PLAN = (
    "Plan: by the number of indices, eager's own chunked fp32 sums (few), a counting sort of the "
    "rows by weight row then one 0/1 matrix product per tile of sorted rows (middling), or int64 "
    "fixed-point atomic adds converted once to the output dtype (many, or frequency scaling); "
    "deterministic on every path. Offsets are int64, indices int64."
)

WRITERS: dict[str, Writer] = {OP: tile_writer(_SPECS, _PLAN)}
