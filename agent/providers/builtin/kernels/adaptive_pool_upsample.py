"""_adaptive_avg_pool2d and bilinear upsampling (upsample_bilinear2d, its .vec overload)."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _OP
from agent.providers.builtin.kernels.pooling_common import _acc, _coords, _dense_strides
from agent.providers.builtin.kernels.pooling_common import _is_cl, _key, _pair, _planes, _planned
from agent.providers.builtin.kernels.pooling_common import _tiles, _wide
from agent.providers.builtin.kernels.pooling_common import _ADAPTIVE_ELEMS, _ADAPTIVE_WARPS
from agent.providers.builtin.kernels.pooling_common import _UPSAMPLE_ELEMS, _UPSAMPLE_WARPS


# ---- emitted: adaptive ----


@triton.jit
def _adaptive_kernel(x_ptr, out_ptr, R, Q, C, H, W, OH, OW, sn, sc, sh, sw,
                     MAXH: tl.constexpr, MAXW: tl.constexpr, CL: tl.constexpr,
                     I64: tl.constexpr, ACC: tl.constexpr, BLOCK_R: tl.constexpr,
                     BLOCK_Q: tl.constexpr):
    n, c, oh, ow, o, ok = _coords(R, Q, C, OH, OW, CL, I64, BLOCK_R, BLOCK_Q)
    hs = (oh * H) // OH
    he = ((oh + 1) * H + OH - 1) // OH
    ws = (ow * W) // OW
    we = ((ow + 1) * W + OW - 1) // OW
    base = x_ptr + n * sn + c * sc
    acc = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    for i in range(0, MAXH):
        h = hs + i
        row = base + h * sh
        h_ok = ok & (h < he)
        for j in range(0, MAXW):
            w = ws + j
            m = h_ok & (w < we)
            acc += tl.load(row + w * sw, mask=m, other=0).to(ACC)
    res = acc / (he - hs).to(ACC) / (we - ws).to(ACC)
    tl.store(out_ptr + o, res.to(out_ptr.dtype.element_ty), mask=ok)


def _max_window(size, out_size):
    return max(-(-((o + 1) * size) // out_size) - (o * size) // out_size for o in range(out_size))


def _adaptive_plan(self, output_size):
    oh, ow = _pair(output_size, "output_size")
    N, C, H, W, sn, sc, sh, sw = _planes(self)
    if oh < 0 or ow < 0 or (oh == 0 and H) or (ow == 0 and W):
        raise RuntimeError("adaptive_avg_pool2d(): output_size must be positive")
    cl = _is_cl(self)
    shape = tuple(self.shape[:-2]) + (oh, ow)
    strides = _dense_strides(shape, cl)
    if N * C * oh * ow == 0:
        return shape, strides, None, None, None
    grid, rq, meta = _tiles(N, C, oh, ow, cl, _ADAPTIVE_ELEMS, _ADAPTIVE_WARPS)
    meta.update(MAXH=_max_window(H, oh), MAXW=_max_window(W, ow),
                I64=_wide(self) or N * C * oh * ow >= 2**31 - 2**20, ACC=_acc(self.dtype))
    return shape, strides, grid, (*rq, C, H, W, oh, ow, sn, sc, sh, sw), meta


def _adaptive_avg_pool2d(self, output_size):
    key = (self.shape, self.stride(), self.dtype, _key(output_size))
    plan = _planned(key, _adaptive_plan, self, output_size)
    shape, strides, grid, args, meta = plan
    out = torch.empty_strided(shape, strides, dtype=self.dtype, device=self.device)
    if grid is not None:
        _adaptive_kernel[grid](self, out, *args, **meta)
    return out


# ---- emitted: upsample ----


@triton.jit
def _src_index(o, scale, size, ALIGN: tl.constexpr, ACC: tl.constexpr):
    """ATen's area_pixel_compute_source_index: (low index, step to the high one, high weight)."""
    if ALIGN:
        src = scale * o.to(ACC)
    else:
        src = scale * (o.to(ACC) + 0.5) - 0.5
        src = tl.maximum(src, 0.0)
    i0 = src.to(o.dtype)  # src >= 0: truncation is floor (int64 only for int64 offsets)
    step = tl.where(i0 < size - 1, 1, 0)
    return i0, step, src - i0.to(ACC)


@triton.jit
def _bilinear_kernel(x_ptr, out_ptr, R, Q, C, H, W, OH, OW, sn, sc, sh, sw, rh: tl.float64,
                     rw: tl.float64,
                     ALIGN: tl.constexpr, CL: tl.constexpr, I64: tl.constexpr,
                     ACC: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr,
                     SAME: tl.constexpr):
    """A [BLOCK_R, BLOCK_Q] tile of the output in memory order (like the pools): channels-last
    rows are output pixels and columns channels, so the four taps are contiguous loads along C
    and the source positions are computed once per row. (One element per lane with int64
    divisions by C, OW and OH per element ran at 24% of HBM bandwidth on the H200, eager 89%.)
    SAME (output size = input size) copies, as ATen's kernels do for that size whatever the
    scales; the suite's largest case is one."""
    n, c, oh, ow, o, ok = _coords(R, Q, C, OH, OW, CL, I64, BLOCK_R, BLOCK_Q)
    if SAME:
        x = tl.load(x_ptr + n * sn + c * sc + oh * sh + ow * sw, mask=ok, other=0)
        tl.store(out_ptr + o, x.to(out_ptr.dtype.element_ty), mask=ok)
        return
    # the scales arrive as doubles (a float argument would be packed as fp32): one rounding to ACC
    h1, hp, lh1 = _src_index(oh, tl.full([1, 1], rh, ACC), H, ALIGN, ACC)
    w1, wp, lw1 = _src_index(ow, tl.full([1, 1], rw, ACC), W, ALIGN, ACC)
    lh0 = 1.0 - lh1
    lw0 = 1.0 - lw1
    base = x_ptr + n * sn + c * sc
    top = base + h1 * sh
    bot = top + hp * sh
    x00 = tl.load(top + w1 * sw, mask=ok, other=0).to(ACC)
    x01 = tl.load(top + (w1 + wp) * sw, mask=ok, other=0).to(ACC)
    x10 = tl.load(bot + w1 * sw, mask=ok, other=0).to(ACC)
    x11 = tl.load(bot + (w1 + wp) * sw, mask=ok, other=0).to(ACC)
    res = lh0 * (lw0 * x00 + lw1 * x01) + lh1 * (lw0 * x10 + lw1 * x11)
    tl.store(out_ptr + o, res.to(out_ptr.dtype.element_ty), mask=ok)


def _area_scale(in_size, out_size, align_corners, scale):
    """ATen's area_pixel_compute_scale."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if scale is not None and scale > 0:
        return 1.0 / scale
    return in_size / out_size


def _upsample_bilinear2d(self, output_size, align_corners, scales_h=None, scales_w=None):
    key = ("up", self.shape, self.stride(), self.dtype, self.device, _key(output_size),
           bool(align_corners), scales_h, scales_w)
    plan = _planned(key, _upsample_plan, self, output_size, align_corners, scales_h, scales_w)
    shape, fmt, grid, args, meta = plan
    out = torch.empty(shape, dtype=self.dtype, device=self.device, memory_format=fmt)
    if grid is not None:
        _bilinear_kernel[grid](self, out, *args, **meta)
    return out


def _upsample_plan(self, output_size, align_corners, scales_h, scales_w):
    """(output shape, memory format, grid or None for an empty output, launch args, meta)."""
    if self.dim() != 4:
        raise RuntimeError(f"{_OP}: expected a 4D input, got {self.dim()}D")
    oh, ow = _pair(output_size, "output_size")
    N, C, H, W = self.shape
    if oh <= 0 or ow <= 0 or H <= 0 or W <= 0:
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input (H: {H}, W: {W}) output (H: {oh}, W: {ow})")
    cl = self.is_contiguous(memory_format=torch.channels_last) and not self.is_contiguous()
    fmt = torch.channels_last if cl else torch.contiguous_format
    shape = (N, C, oh, ow)
    if N * C * oh * ow == 0:
        return shape, fmt, None, None, None
    rh = _area_scale(H, oh, align_corners, scales_h)
    rw = _area_scale(W, ow, align_corners, scales_w)
    grid, rq, meta = _tiles(N, C, oh, ow, cl, _UPSAMPLE_ELEMS, _UPSAMPLE_WARPS)
    wide = _wide(self) or N * C * oh * ow >= 2**31 - 2**20  # the dense output's extent
    meta.update(ALIGN=bool(align_corners), I64=wide, ACC=_acc(self.dtype))
    meta.update(SAME=(oh, ow) == (H, W))  # ATen copies whatever the scales (CPU and CUDA alike)
    return shape, fmt, grid, (*rq, C, H, W, oh, ow, *self.stride(), float(rh), float(rw)), meta


def _upsample_bilinear2d_vec(input, output_size, align_corners, scale_factors):
    if output_size is not None and scale_factors is not None:
        raise RuntimeError("Must specify exactly one of output_size and scale_factors")
    if output_size is not None:
        return _upsample_bilinear2d(input, output_size, align_corners)
    if scale_factors is None or len(scale_factors) != 2:
        raise RuntimeError("Must specify exactly one of output_size and scale_factors")
    sh, sw = float(scale_factors[0]), float(scale_factors[1])
    size = [int(input.shape[-2] * sh), int(input.shape[-1] * sw)]
    return _upsample_bilinear2d(input, size, align_corners, sh, sw)
