"""Grouped matmul family of the builtin provider: `_grouped_mm` (the mixture-of-experts GEMM).

Contract: `WRITERS` maps `_grouped_mm.default` to a Writer (KernelRequest -> text of a whole kernel
file, or None outside this template: integer matrices, a bias, an `out_dtype` other than the
inputs'). Same request -> same text.

The four layouts of `_grouped_mm(self, mat2, offs)`, with `offs` the cumulative end of each group
along the dimension it splits (int32, read on the device: no host synchronisation):
- 2d x 3d, [M, K] x [G, K, N] -> [M, N]: rows offs[g-1]..offs[g] of self times mat2[g];
- 3d x 2d, [G, M, K] x [K, N] -> [M, N]: columns offs[g-1]..offs[g] of mat2 with self[g];
- 2d x 2d, [M, K] x [K, N] -> [G, M, N]: out[g] = self[:, k] @ mat2[k, :] over K slice g (an empty
  slice gives zeros, as eager);
- 3d x 3d, [G, M, K] x [G, K, N] -> [G, M, N]: a batched product, no offs.

One program per (output tile, group): a tile outside its group's rows (or columns) returns at once;
a K loop of `tl.dot` on operands addressed through their strides (transposed views are read in
place), fp32 accumulation, one rounding on the store. Places of the output no group covers (rows
after the last offset) are left as they are, as eager leaves them (uninitialised).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from agent.providers.builtin import codegen, kernelsource

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer

_FLOATS = (torch.float16, torch.bfloat16, torch.float32)


_PLAN = (
    "Plan: one program per (output tile, group); the group's range along the split dimension is "
    "read from offs on the device and tiles outside it return at once; a K loop of tl.dot on "
    "operands addressed through their strides, fp32 accumulation, one rounding on the store."
)
NUM_VARIANTS = 2  # 0: 128x128x64 tiles for half precision; 1: 64x64x32 tiles


def _write(request: KernelRequest) -> str | None:
    if request.op != "_grouped_mm.default":
        return None
    dtypes = codegen.case_dtypes(request.cases) - {torch.int32}
    if any(dt not in _FLOATS for dt in dtypes):
        return None
    variant = min(max(request.variant, 0), NUM_VARIANTS - 1)
    return codegen.render_file(
        codegen.file_header(
            request.op,
            summary="grouped matrix product (mixture-of-experts GEMM), groups from offs",
            plan=_PLAN,
            variant=variant,
            schema=request.schema,
        ),
        kernelsource.emitted("grouped_mm", "main", values={"_CONSERVATIVE": str(variant >= 1)}),
        codegen.entry_point(request.op),
    )


WRITERS: dict[str, Writer] = {"_grouped_mm.default": _write}
