"""Convolution family of the builtin provider: aten::convolution (2-D and 1-D, not transposed).

Contract: `WRITERS` maps `convolution.default` (and `convolution_backward.default`, written by
`conv_backward.py` and imported lazily) to a Writer (KernelRequest -> text of a whole kernel
file, or None when a case is outside the template: transposed or 3-D convolution, dtypes other
than f16/bf16/f32). Same request -> same text. `case_is_supported` and `SHARED_SOURCE` are
shared with the backward writer.

How the generated forward kernel works:
- implicit GEMM, no im2col buffer: M = N*OH*OW output pixels, N = output channels of one group,
  K = C/groups * KH * KW; one program per BLOCK_M x BLOCK_N tile of one group (grouped launch
  order for L2 reuse), fp32 accumulation with `tl.dot` (fp32 operands in "ieee" precision, or
  "tf32" on CUDA when eager's cuDNN would use TF32: `torch.backends.cudnn.allow_tf32`);
- K order: with C/groups >= 16 a runtime loop over (kh, kw) computes the input row, column and
  padding mask once per M row and an inner loop walks channels BLOCK_K at a time; with fewer
  channels (first layers, C = 1 or 3) K is flattened over (c, kh, kw) so tiles are not mostly
  padding;
- input, weight, bias and output are addressed through their strides (the output takes the
  input's layout, as eager does); 1-D convolution is the 2-D one on a [N, C, 1, L] view. An NCHW
  input of the GEMM kernel with 16 channels or more (not the flattened-K path) is first copied
  to channels_last (`_NHWC_STAGE`): its K loads then run along contiguous, 16-byte aligned
  channels, which Triton vectorizes and pipelines (reading NCHW in place, with [channels, pixels]
  tiles, took 1.3-5x longer on the H200). The channel loop reads a channels-innermost copy of a
  KHxKW weight;
- 1x1 convolutions (stride 1, no padding, one group) on contiguous NCHW tensors whose H*W is a
  multiple of 4 are a GEMM per image instead, y[n] = W @ x[n] (`_PW_DIRECT`): pixel tiles stay
  inside one image, so pixel rows are read in place as vectors, with no staging copy;
- depthwise-like convolutions (one input channel per group, few outputs per group) use a direct
  kernel over [pixels x channels] tiles (`tl.dot` would be mostly padding there), its filter
  taps unrolled at compile time and its weights read from a tap-major copy;
- on an H200 a few tile configs are autotuned per shape (ranked by GPU time, the host's launch
  time hidden); in Triton's CPU interpreter a single
  small config is used (and tiles are widened to fp32: the interpreter multiplies bf16 wrongly);
- indices switch to int64 when a tensor spans 2**31 elements or more.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from agent.providers.builtin import codegen, kernelsource
from evaluator.cases.testcase import TensorSpec

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer

FLOATS = (torch.float16, torch.bfloat16, torch.float32)
NUM_VARIANTS = 2  # 0: autotuned tiles on the GPU; 1: one heuristic config per shape, no tuning

# Python helpers every convolution kernel file shares (argument checks, sizes, launch policy).

_FORWARD = kernelsource.emitted("conv", "forward")


_PLAN = (
    "Plan: implicit GEMM (no im2col buffer): M = N*OH*OW pixels, N = output channels of a "
    "group, K = (C/groups)*KH*KW, fp32 accumulation with tl.dot; a runtime loop over (kh, kw) "
    "computes pixel offsets and the padding mask once and walks channels BLOCK_K at a time "
    "(few channels: K flattened over (c, kh, kw)). Tensors are read through their strides (NCHW "
    "or channels_last in place; 1-D is 2-D on an [N, C, 1, L] view). One input channel per group "
    "(depthwise) uses a direct [pixels x channels] kernel; a 1x1 convolution of NCHW tensors "
    "is a GEMM per image. Tiles are autotuned on the GPU."
)


def _arg(case: Any, index: int, name: str) -> Any:
    if index < len(case.args):
        return case.args[index]
    return case.kwargs.get(name)


def case_is_supported(case: Any, *, input_index: int, transposed_index: int) -> bool:
    """1-D or 2-D, not transposed, float16/bfloat16/float32 tensors only."""
    spec = _arg(case, input_index, "input")
    if not isinstance(spec, TensorSpec) or len(spec.shape) not in (3, 4):
        return False
    if bool(_arg(case, transposed_index, "transposed")):
        return False
    return all(s.dtype in FLOATS for s in case.tensor_specs())


def header(request: KernelRequest, summary: str, plan: str) -> tuple[int, str, str]:
    """(variant, file header, shared helpers) for a convolution kernel file."""
    variant = min(max(request.variant, 0), NUM_VARIANTS - 1)
    head = codegen.file_header(
        request.op, summary=summary, plan=plan, variant=variant, schema=request.schema
    )
    shared = kernelsource.emitted(
        "conv_common", "shared", values={"_CONSERVATIVE": str(variant >= 1)}
    ) + kernelsource.emitted("conv_pointwise", "pointwise")
    return variant, head, shared


def entry(op: str) -> str:
    return codegen.entry_point(op)


def _write_forward(request: KernelRequest) -> str | None:
    if request.op != "convolution.default":
        return None
    if not all(case_is_supported(c, input_index=0, transposed_index=6) for c in request.cases):
        return None
    _, head, shared = header(request, "2-D and 1-D convolution as an implicit GEMM", _PLAN)
    return codegen.render_file(head, shared, _FORWARD, entry(request.op))


def _write_backward(request: KernelRequest) -> str | None:
    from agent.providers.builtin import conv_backward  # imports this module: load it lazily

    return conv_backward.write(request)


WRITERS: dict[str, Writer] = {
    "convolution.default": _write_forward,
    "convolution_backward.default": _write_backward,
}
