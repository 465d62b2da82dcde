"""max_pool2d_with_indices and its backward: the windowed forward, the scatter backward and the
parameter checks and launch plans (the stride-2 backward lives in max_pool_backward_s2.py)."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _cdiv
from agent.providers.builtin.kernels.pooling_common import _acc, _coords, _dense_strides
from agent.providers.builtin.kernels.pooling_common import _is_cl, _key, _pair, _planes, _pool_out
from agent.providers.builtin.kernels.pooling_common import _planned, _strides4, _tiles, _wide
from agent.providers.builtin.kernels.max_pool_backward_s2 import _max_pool_bwd_s2_plan
from agent.providers.builtin.kernels.pooling_common import _MAX_POOL_BWD_ELEMS, _MAX_POOL_BWD_WARPS
from agent.providers.builtin.kernels.pooling_common import _MAX_POOL_ELEMS, _MAX_POOL_WARPS


# ---- emitted: kernels ----


@triton.jit
def _first_valid(start, D):
    """The first tap start + k*D that is >= 0 (eager's initial argmax position)."""
    return tl.where(start < 0, start + ((D - 1 - start) // D) * D, start)


@triton.jit
def _max_pool_kernel(x_ptr, out_ptr, idx_ptr, R, Q, C, H, W, OH, OW, sn, sc, sh, sw,
                     SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                     DH: tl.constexpr, DW: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                     CL: tl.constexpr, I64: tl.constexpr, ACC: tl.constexpr,
                     BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):
    n, c, oh, ow, o, ok = _coords(R, Q, C, OH, OW, CL, I64, BLOCK_R, BLOCK_Q)
    base = x_ptr + n * sn + c * sc
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    best = tl.full([BLOCK_R, BLOCK_Q], float("-inf"), ACC)
    bidx = tl.zeros([BLOCK_R, BLOCK_Q], tl.int32) + (
        _first_valid(h0, DH) * W + _first_valid(w0, DW))
    for kh in tl.static_range(KH):
        h = h0 + kh * DH
        row = base + h * sh
        h_ok = ok & (h >= 0) & (h < H)
        for kw in tl.static_range(KW):
            w = w0 + kw * DW
            m = h_ok & (w >= 0) & (w < W)
            v = tl.load(row + w * sw, mask=m, other=float("-inf")).to(ACC)
            take = (v > best) | (v != v)  # masked taps read -inf: never taken
            best = tl.where(take, v, best)
            bidx = tl.where(take, h * W + w, bidx)
    tl.store(out_ptr + o, best.to(out_ptr.dtype.element_ty), mask=ok)
    tl.store(idx_ptr + o, bidx.to(tl.int64), mask=ok)


@triton.jit
def _max_pool_bwd_kernel(go_ptr, idx_ptr, out_ptr, R, Q, C, H, W, OH, OW,
                         gn, gc, gh, gw, jn, jc, jh, jw, SH: tl.constexpr, SW: tl.constexpr,
                         PH: tl.constexpr, PW: tl.constexpr, EH: tl.constexpr, EW: tl.constexpr,
                         MAXH: tl.constexpr, MAXW: tl.constexpr, CL: tl.constexpr,
                         I64: tl.constexpr, ACC: tl.constexpr, BLOCK_R: tl.constexpr,
                         BLOCK_Q: tl.constexpr):
    """grad_input[h, w] = sum of grad_output over the windows whose argmax is (h, w)."""
    n, c, h, w, o, ok = _coords(R, Q, C, H, W, CL, I64, BLOCK_R, BLOCK_Q)
    ph0 = tl.where(h + PH < EH, 0, (h + PH - EH) // SH + 1)
    ph1 = tl.minimum((h + PH) // SH + 1, OH)
    pw0 = tl.where(w + PW < EW, 0, (w + PW - EW) // SW + 1)
    pw1 = tl.minimum((w + PW) // SW + 1, OW)
    target = h * W + w
    gbase = go_ptr + n * gn + c * gc
    jbase = idx_ptr + n * jn + c * jc
    acc = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    for i in tl.static_range(MAXH):
        ph = ph0 + i
        h_ok = ok & (ph < ph1)
        for j in tl.static_range(MAXW):
            pw = pw0 + j
            m = h_ok & (pw < pw1)
            ind = tl.load(jbase + ph * jh + pw * jw, mask=m, other=-1)
            hit = m & (ind == target)
            acc += tl.load(gbase + ph * gh + pw * gw, mask=hit, other=0).to(ACC)
    tl.store(out_ptr + o, acc.to(out_ptr.dtype.element_ty), mask=ok)


# ---- emitted: plans ----


def _max_pool_params(kernel_size, stride, padding, dilation):
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = _pair(stride, "stride", default=(kh, kw))
    ph, pw = _pair(padding, "padding")
    dh, dw = _pair(dilation, "dilation")
    if ph > kh // 2 or pw > kw // 2:
        raise RuntimeError("pad should be at most half of effective kernel size")
    return kh, kw, sh, sw, ph, pw, dh, dw


def _max_pool_plan(self, kernel_size, stride, padding, dilation, ceil_mode):
    kh, kw, sh, sw, ph, pw, dh, dw = _max_pool_params(kernel_size, stride, padding, dilation)
    N, C, H, W, sn, sc, s_h, s_w = _planes(self)
    oh = _pool_out(H, kh, sh, ph, dh, ceil_mode)
    ow = _pool_out(W, kw, sw, pw, dw, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input size: ({C}x{H}x{W}). Calculated output size: ({C}x{oh}x{ow}). Output size is too small")
    cl = _is_cl(self)
    shape = tuple(self.shape[:-2]) + (oh, ow)
    strides = _dense_strides(shape, cl)
    if N * C * oh * ow == 0:
        return shape, strides, None, None, None
    grid, rq, meta = _tiles(N, C, oh, ow, cl, _MAX_POOL_ELEMS, _MAX_POOL_WARPS)
    wide = _wide(self) or N * C * oh * ow >= 2**31 - 2**20
    meta.update(KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, DH=dh, DW=dw, I64=wide,
                ACC=_acc(self.dtype))
    args = (*rq, C, H, W, oh, ow, sn, sc, s_h, s_w)
    return shape, strides, grid, args, meta


def _max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    key = ("fwd", self.shape, self.stride(), self.dtype, _key(kernel_size), _key(stride),
           _key(padding), _key(dilation), bool(ceil_mode))
    plan = _planned(key, _max_pool_plan, self, kernel_size, stride, padding, dilation, ceil_mode)
    shape, strides, grid, args, meta = plan
    out = torch.empty_strided(shape, strides, dtype=self.dtype, device=self.device)
    idx = torch.empty_strided(shape, strides, dtype=torch.int64, device=self.device)
    if grid is not None:
        _max_pool_kernel[grid](self, out, idx, *args, **meta)
    return out, idx


def _max_pool_bwd_plan(grad_output, self, kernel_size, stride, padding, dilation, indices):
    kh, kw, sh, sw, ph, pw, dh, dw = _max_pool_params(kernel_size, stride, padding, dilation)
    N, C, H, W, _, _, _, _ = _planes(self)
    oh, ow = grad_output.shape[-2], grad_output.shape[-1]
    cl = _is_cl(self)
    shape = tuple(self.shape)
    strides = _dense_strides(shape, cl)
    if N * C * H * W == 0:
        return shape, strides, None, None, None, None
    if sh == sw == 2:
        s2 = _max_pool_bwd_s2_plan(grad_output, self, indices, kh, kw, ph, pw, dh, dw)
        if s2 is not None:
            return (shape, strides, *s2)
    eh = (kh - 1) * dh + 1
    ew = (kw - 1) * dw + 1
    grid, rq, meta = _tiles(N, C, H, W, cl, _MAX_POOL_BWD_ELEMS, _MAX_POOL_BWD_WARPS)
    wide = _wide(self, grad_output, indices)
    meta.update(MAXH=_cdiv(eh, sh), MAXW=_cdiv(ew, sw), SH=sh, SW=sw, PH=ph, PW=pw, EH=eh, EW=ew,
                I64=wide, ACC=_acc(grad_output.dtype))
    args = (*rq, C, H, W, oh, ow, *_strides4(grad_output), *_strides4(indices))
    return shape, strides, _max_pool_bwd_kernel, grid, args, meta


def _max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
                                      ceil_mode, indices):
    key = ("bwd", self.shape, self.stride(), grad_output.shape, grad_output.stride(),
           grad_output.dtype, indices.stride(), _key(kernel_size), _key(stride), _key(padding), _key(dilation))
    plan = _planned(key, _max_pool_bwd_plan, grad_output, self, kernel_size, stride, padding,
                    dilation, indices)
    shape, strides, kernel, grid, args, meta = plan
    out = torch.empty_strided(shape, strides, dtype=grad_output.dtype, device=self.device)
    if grid is not None:
        kernel[grid](grad_output, indices, out, *args, **meta)
    return out
