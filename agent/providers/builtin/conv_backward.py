"""Convolution backward for the builtin provider: aten::convolution_backward (1-D and 2-D).

Contract: `write(request)` returns the text of a whole kernel file for
`convolution_backward.default`, or None when a case is outside the template (transposed or 3-D
convolution, dtypes other than f16/bf16/f32). `conv.WRITERS` routes to it. Same request -> same
text. The shared helpers (argument checks, layouts, tiles) come from `conv.SHARED_SOURCE`.

How the generated kernels work (fp32 accumulation; outputs in `output_mask` order, None where
the mask is False, as eager returns them):
- grad_input is a convolution of grad_output with the weight, as an implicit GEMM over input
  pixels: M = N*H*W, N = input channels of a group, K = output channels of the group, with a
  runtime loop over (kh, kw) in which an input pixel takes the output pixel
  oh = (ih + ph - kh*dh) / sh only when that division is exact and in range;
- grad_weight is a GEMM whose K axis is the N*OH*OW output pixels: one program per
  [out channels x in channels] tile and per tap (kh, kw) (with few input channels the columns run
  over (c, kh, kw) flattened instead), the x tile loaded pixel-major and transposed for `tl.dot`;
  the pixel axis is split over programs when the tiles alone cannot fill the GPU, and a second
  kernel sums the fp32 partials in a fixed order (deterministic, no atomics);
- grad_bias sums grad_output over pixels per channel, split the same way;
- depthwise-like convolutions (one input channel per group, few outputs per group) use direct
  [pixels x channels] kernels for grad_input and grad_weight (tl.dot would be mostly padding);
- 1x1 convolutions (stride 1, no padding, one group) on contiguous NCHW tensors with H*W a
  multiple of 4 are GEMMs per image, read in place (`_PW_DIRECT`, see `conv._pointwise`):
  grad_input[n] = W^T @ grad_output[n] by the forward's per-image kernel (autotuned on the GPU
  in variant 0), grad_weight = sum over n of grad_output[n] @ x[n]^T by `_pw_weight_kernel`
  (pixel blocks of every image split over programs, partials summed as above), grad_bias summed
  on the way through the tensor cores;
- tensors are addressed through their strides; NCHW grad_output and input of the other GEMM
  kernels are first copied to channels_last (`_NHWC_STAGE`, as in the forward); their tiles are
  chosen per shape (not autotuned); int64 indices for tensors past 2**31; in Triton's CPU
  interpreter tiles are widened to fp32.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.providers.builtin import codegen, conv, kernelsource

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest

_BACKWARD = (
    kernelsource.emitted("conv_backward", "knobs")
    + kernelsource.emitted("conv_backward_kernels", "kernels")
    + kernelsource.emitted("conv_backward", "plans")
)

_PLAN = (
    "Plan: grad_input is an implicit GEMM over input pixels (K = output channels of a group, a "
    "runtime loop over taps keeps only output pixels on the stride grid); grad_weight is a GEMM "
    "whose K axis is the N*OH*OW output pixels, split over programs when the tiles cannot fill "
    "the GPU, with fp32 partials summed in a fixed order by a second kernel; grad_bias is a "
    "split per-channel sum. Depthwise-like convolutions use direct [pixels x channels] kernels; "
    "1x1 convolutions of NCHW tensors are GEMMs per image. "
    "fp32 accumulation; tensors read through their strides (NCHW or channels_last in place)."
)


def write(request: KernelRequest) -> str | None:
    """The kernel file for `convolution_backward.default`, or None outside the template."""
    if request.op != "convolution_backward.default":
        return None
    if not all(conv.case_is_supported(c, input_index=1, transposed_index=7) for c in request.cases):
        return None
    _, head, shared = conv.header(
        request, "gradients of 2-D and 1-D convolution (input, weight, bias)", _PLAN
    )
    return codegen.render_file(head, shared, _BACKWARD, conv.entry(request.op))
