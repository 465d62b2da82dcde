"""Pooling family of the builtin provider: max_pool2d_with_indices (+ backward), avg_pool2d
(+ backward), _adaptive_avg_pool2d and upsample_bilinear2d (default and .vec).

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template, e.g. non-float inputs).
Same request -> same text.

How the generated kernels work. Inputs are [N, C, H, W] (or [C, H, W]) read through their
strides (no copies); outputs get eager's memory format (channels-last in, channels-last out).
Each program owns a [BLOCK_R, BLOCK_Q] tile of the output (forward) or grad_input (backward)
walked in memory order: rows (n, c, h) x columns w for NCHW, rows (n, h, w) x columns c for
channels-last, so the columns are the contiguous dim (coalesced, vectorizable loads and stores)
and integer division runs once per row, not per element. Offsets are int32 unless a tensor spans
2**31 elements (int64 then). Launch plans (output strides, grid, arguments) are cached per call
geometry, so a repeated call only allocates and launches one kernel, with no host sync.
- forward pools loop over the window with compile-time bounds (kernel sizes are constexpr),
  comparing/summing in fp32 (fp64 for fp64). max_pool follows eager exactly: strict `>` (the first
  maximum wins ties), NaN wins, indices are flat positions h * W + w in the input plane;
  avg_pool applies ceil_mode, count_include_pad and divisor_override as eager's CUDA kernel does.
  Dense NCHW avg_pool inputs get kernels with constexpr plane sizes (module switches
  `_AVG_POOL_TILE`, `_AVG_POOL_FLAT`): windows that tile the plane with KW 1 or 2 read whole
  input rows with vector loads and split column pairs in registers; other windows walk the
  output flat (no lanes lost to padding odd row widths to a power of two, no runtime divisions);
- backward pools are gathers, not scatters: each input element computes the range of output
  windows that can contain it (at most ceil(kernel extent / stride) per dim) and sums their
  gradients in fp32 in eager's order (max_pool: only where the saved index equals the element's
  flat position), so no atomics and no zero fill are needed. Two common shapes get their own
  kernels, since the per-element gather is bound by index arithmetic there (under 30% of HBM
  bandwidth on the H200): avg_pool2d_backward whose windows tile the plane exactly (a broadcast
  copy: vector loads of grad_output, one division per grad_output element, vector stores of
  its copies) and max_pool2d backward with stride 2 (2x2 blocks of grad_input share their
  windows' index and gradient loads; with dense NCHW grad_output and indices, a lane takes
  2 (or 1) x 2 blocks and reads window pairs as aligned vectors: `_MAX_POOL_BWD_S2_VEC`).
  Both take constexpr plane sizes (one compile per shape) and have a module switch
  (`_AVG_POOL_BWD_TILE`, `_MAX_POOL_BWD_S2`);
- _adaptive_avg_pool2d uses ATen's window bounds floor(o*H/OH) .. ceil((o+1)*H/OH);
- upsample_bilinear2d computes source positions as ATen's area_pixel_compute_source_index does
  (align_corners or half-pixel with clamping at 0; explicit scales used when given); a
  channels-last input gives a channels-last output, each program walking output memory order.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from agent.providers.builtin import codegen, kernelsource

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer

NUM_VARIANTS = 2  # 0: big blocks; 1: small blocks

_INDEX = (torch.int64,)

_COMMON = kernelsource.emitted("pooling_common", "common")

_MAX_POOL = (
    kernelsource.emitted("max_pool", "kernels")
    + kernelsource.emitted("max_pool_backward_s2", "s2")
    + kernelsource.emitted("max_pool", "plans")
)

_AVG_POOL = kernelsource.emitted("avg_pool", "avg_pool")

_ADAPTIVE = kernelsource.emitted("adaptive_pool_upsample", "adaptive")

_UPSAMPLE = kernelsource.emitted("adaptive_pool_upsample", "upsample")


_SPECS: dict[str, tuple[str, str, str]] = {
    "max_pool2d_with_indices.default": (
        "2-D max pooling with argmax indices (flat positions in the input plane)",
        _MAX_POOL,
        "def _op(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):\n"
        "    return _max_pool2d_with_indices(self, kernel_size, stride, padding, dilation,\n"
        "                                    ceil_mode)",
    ),
    "max_pool2d_with_indices_backward.default": (
        "gradient of 2-D max pooling, gathered per input element",
        _MAX_POOL,
        "def _op(grad_output, self, kernel_size, stride, padding, dilation, ceil_mode, indices):\n"
        "    return _max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride,\n"
        "                                             padding, dilation, ceil_mode, indices)",
    ),
    "avg_pool2d.default": (
        "2-D average pooling (ceil_mode, count_include_pad, divisor_override)",
        _AVG_POOL,
        "def _op(self, kernel_size, stride=(), padding=0, ceil_mode=False,\n"
        "        count_include_pad=True, divisor_override=None):\n"
        "    return _avg_pool2d(self, kernel_size, stride, padding, ceil_mode, count_include_pad,\n"
        "                       divisor_override)",
    ),
    "avg_pool2d_backward.default": (
        "gradient of 2-D average pooling, gathered per input element",
        _AVG_POOL,
        "def _op(grad_output, self, kernel_size, stride, padding, ceil_mode, count_include_pad,\n"
        "        divisor_override):\n"
        "    return _avg_pool2d_backward(grad_output, self, kernel_size, stride, padding,\n"
        "                                ceil_mode, count_include_pad, divisor_override)",
    ),
    "_adaptive_avg_pool2d.default": (
        "adaptive 2-D average pooling to an output size",
        _ADAPTIVE,
        "def _op(self, output_size):\n    return _adaptive_avg_pool2d(self, output_size)",
    ),
    "upsample_bilinear2d.default": (
        "bilinear 2-D upsampling (align_corners, output size or scales)",
        _UPSAMPLE,
        "def _op(self, output_size, align_corners, scales_h=None, scales_w=None):\n"
        "    return _upsample_bilinear2d(self, output_size, align_corners, scales_h, scales_w)",
    ),
    "upsample_bilinear2d.vec": (
        "bilinear 2-D upsampling from an output size or scale factors",
        _UPSAMPLE,
        "def _op(input, output_size, align_corners, scale_factors):\n"
        "    return _upsample_bilinear2d_vec(input, output_size, align_corners, scale_factors)",
    ),
}

_PLAN = (
    "Plan: tiles of the output (forward) or grad_input (backward) in memory order, contiguous dim "
    "along the columns (W for NCHW, C for channels-last), inputs read through their strides; "
    "windows are compile-time loops, sums and comparisons in fp32; backward passes gather the "
    "gradients of the few windows covering each input element (no atomics); int32 offsets when "
    "sizes allow; launch plans cached per geometry."
)


def _write(request: KernelRequest) -> str | None:
    allowed = codegen.FLOATS + _INDEX
    return codegen.write_tiled(request, _SPECS, NUM_VARIANTS, _PLAN, allowed, common=(_COMMON,))


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
