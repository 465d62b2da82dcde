"""Matmul family of the builtin provider: mm, bmm and addmm (beta, alpha) with `tl.dot` tiling.

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template, e.g. integer matrices, which
eager does not multiply on CUDA either). Same request -> same text.

How the generated kernels work:
- one program per BLOCK_M x BLOCK_N output tile (grouped launch order for L2 reuse), a K loop of
  `tl.dot` on BLOCK_K slices accumulating in fp32; operands are addressed through their strides,
  so transposed (and other strided) inputs are read in place, never copied;
- M and N edges wrap (`% M`) so loads need no mask; K edges are masked unless K is a multiple of
  BLOCK_K; the store is masked;
- fp32 operands use `input_precision="tf32x3"` on the GPU: three TF32 tensor-core products per
  step, as accurate as eager's fp32 GEMM on the suite's cases (measured against float64; plain
  TF32 only when `torch.backends.cuda.matmul.allow_tf32` is set, which the wrapper honours, and
  the FMA product where A is M-contiguous); fp16/bf16 use the tensor cores with fp32 accumulation;
- tile sizes come from the shape and the SM count (one well-filled wave of the largest tile that
  gives one, 256x128x64 for big half-precision GEMMs on an H200); when the tiles cannot fill the
  GPU and K is long, K is split over programs that write fp32 partials, summed in a fixed order by
  a second kernel (deterministic);
- addmm's bias is read through a broadcast view (stride 0), scaled by beta (not read at all when
  beta == 0, as in eager) and added in the epilogue with alpha * (mat1 @ mat2);
- in Triton's CPU interpreter tiles are small and widened to fp32 before `tl.dot` (the
  interpreter multiplies bf16 tiles wrongly otherwise).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.providers.builtin import codegen, kernelsource

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer


_PLAN = (
    "Plan: one program per output tile (grouped order for L2 reuse), a K loop of tl.dot on "
    "operands addressed through their strides (transposed inputs are read in place), fp32 "
    "accumulation (ieee for fp32 operands, as eager without TF32); tile sizes follow the shape, "
    "and a long K with too few tiles is split over programs whose fp32 partials a second kernel "
    "sums in a fixed order. addmm adds beta * self (broadcast view) in the epilogue."
)
NUM_VARIANTS = 2  # 0: shape-tuned tiles and split-K; 1: 64x64 tiles, no split-K

_MM = """def _op(self, mat2):
    if self.dim() != 2 or mat2.dim() != 2:
        raise RuntimeError("mm: both arguments must be matrices")
    return _matmul(self, mat2, None, 1, 0, False)"""

_BMM = """def _op(self, mat2):
    if self.dim() != 3 or mat2.dim() != 3:
        raise RuntimeError("bmm: both arguments must be 3-D tensors")
    return _matmul(self, mat2, None, 1, 0, True)"""

_ADDMM = """def _op(self, mat1, mat2, *, beta=1, alpha=1):
    if mat1.dim() != 2 or mat2.dim() != 2:
        raise RuntimeError("addmm: mat1 and mat2 must be matrices")
    if self.dim() > 2:
        raise RuntimeError("addmm: self must be broadcastable to a matrix")
    return _matmul(mat1, mat2, self, alpha, beta, False)"""

_SPECS: dict[str, tuple[str, str]] = {
    "mm.default": ("matrix product of two matrices", _MM),
    "bmm.default": ("batched matrix product", _BMM),
    "addmm.default": ("beta * self + alpha * (mat1 @ mat2), self broadcast", _ADDMM),
}


def _write(request: KernelRequest) -> str | None:
    picked = codegen.pick(request, _SPECS, NUM_VARIANTS, codegen.FLOATS)
    if picked is None:
        return None
    (summary, body), variant = picked
    main = kernelsource.emitted("matmul", "main", values={"_CONSERVATIVE": str(variant >= 1)})
    return codegen.render_family(
        request,
        variant,
        summary=summary,
        plan=_PLAN,
        sections=(main,),
        body=body,
        after=(codegen.PDL_SOURCE,),
    )


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
