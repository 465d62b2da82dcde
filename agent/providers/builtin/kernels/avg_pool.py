"""avg_pool2d and its backward: the general windowed kernels and the fast paths for windows that
tile the plane (tile and flat kernels)."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _INTERPRET, _cdiv, _pow2
from agent.providers.builtin.kernels.pooling_common import _AVG_POOL_BWD_TILE, _AVG_POOL_FLAT
from agent.providers.builtin.kernels.pooling_common import _AVG_POOL_TILE, _acc
from agent.providers.builtin.kernels.pooling_common import _avg_of_window, _coords, _dense_strides
from agent.providers.builtin.kernels.pooling_common import _floor_pow2, _is_cl, _key, _pair
from agent.providers.builtin.kernels.pooling_common import _planes, _pool_out, _planned, _strides4
from agent.providers.builtin.kernels.pooling_common import _tile_rq, _tiles, _wide
from agent.providers.builtin.kernels.pooling_common import _AVG_POOL_BWD_ELEMS
from agent.providers.builtin.kernels.pooling_common import _AVG_POOL_BWD_TILE_ELEMS
from agent.providers.builtin.kernels.pooling_common import _AVG_POOL_BWD_TILE_WARPS
from agent.providers.builtin.kernels.pooling_common import _AVG_POOL_BWD_WARPS, _AVG_POOL_ELEMS
from agent.providers.builtin.kernels.pooling_common import _AVG_POOL_FLAT_ELEMS
from agent.providers.builtin.kernels.pooling_common import _AVG_POOL_FLAT_WARPS
from agent.providers.builtin.kernels.pooling_common import _AVG_POOL_TILE_ELEMS
from agent.providers.builtin.kernels.pooling_common import _AVG_POOL_TILE_WARPS, _AVG_POOL_WARPS


# ---- emitted: avg_pool ----


@triton.jit
def _avg_window(o, S, P, K, size):
    """(start, clipped start, clipped end, padded window length) of output o along one dim."""
    start = o * S - P
    end = tl.minimum(start + K, size + P)
    length = end - start
    return start, tl.maximum(start, 0), tl.minimum(end, size), length


@triton.jit
def _avg_pool_kernel(x_ptr, out_ptr, R, Q, C, H, W, OH, OW, sn, sc, sh, sw, divisor,
                     SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                     KH: tl.constexpr, KW: tl.constexpr,
                     COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr, CL: tl.constexpr,
                     I64: tl.constexpr, ACC: tl.constexpr, BLOCK_R: tl.constexpr,
                     BLOCK_Q: tl.constexpr):
    n, c, oh, ow, o, ok = _coords(R, Q, C, OH, OW, CL, I64, BLOCK_R, BLOCK_Q)
    base = x_ptr + n * sn + c * sc
    h0, hs, he, lh = _avg_window(oh, SH, PH, KH, H)
    w0, ws, we, lw = _avg_window(ow, SW, PW, KW, W)
    acc = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    for kh in tl.static_range(KH):
        h = h0 + kh
        row = base + h * sh
        h_ok = ok & (h >= 0) & (h < H)
        for kw in tl.static_range(KW):
            w = w0 + kw
            m = h_ok & (w >= 0) & (w < W)
            acc += tl.load(row + w * sw, mask=m, other=0).to(ACC)
    res = _avg_of_window(acc, divisor, lh, lw, hs, he, ws, we, HAS_DIV, COUNT_PAD)
    tl.store(out_ptr + o, res.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _avg_pool_tile_kernel(x_ptr, out_ptr, R, divisor, H: tl.constexpr, W: tl.constexpr,
                          OH: tl.constexpr, OW: tl.constexpr, KH: tl.constexpr,
                          KW: tl.constexpr, I64: tl.constexpr, ACC: tl.constexpr,
                          BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):
    """Windows that tile the plane (kernel == stride, no padding, all windows inside the plane)
    of a dense NCHW input: every window is full, so the divisor is one number. A program owns
    [BLOCK_R, BLOCK_Q] outputs, rows (n, c, oh); for each kh it loads the matching input rows
    as one [BLOCK_R, KW * BLOCK_Q] vector load and splits column pairs apart in registers
    (reshape + tl.split, the reverse of the backward tile kernel's join), summing taps in
    eager's (kh, kw) order. H, W, OH, OW are constexpr: row offsets are multiples the compiler
    sees (aligned vector loads) and the plane split is a division by a constant. (The generic
    kernel read each tap with a scalar strided load: 50% of HBM bandwidth on the H200.)"""
    r, q = _tile_rq(I64, BLOCK_R, BLOCK_Q)
    w = (tl.program_id(1) * (BLOCK_Q * KW) + tl.arange(0, BLOCK_Q * KW))[None, :]
    if H == OH * KH:
        src = x_ptr + r * (KH * W) + w
    else:
        src = x_ptr + (r // OH) * (H * W) + (r % OH) * (KH * W) + w
    m = (r < R) & (w < OW * KW)
    acc = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    for kh in tl.static_range(KH):
        v = tl.load(src + kh * W, mask=m, other=0).to(ACC)
        if KW == 1:
            acc += v
        else:
            v0, v1 = tl.split(tl.reshape(v, [BLOCK_R, BLOCK_Q, 2]))
            acc += v0
            acc += v1
    res = acc / divisor
    tl.store(out_ptr + r * OW + q, res.to(out_ptr.dtype.element_ty), mask=(r < R) & (q < OW))


@triton.jit
def _avg_pool_flat_kernel(x_ptr, out_ptr, total, divisor, H: tl.constexpr, W: tl.constexpr,
                          OH: tl.constexpr, OW: tl.constexpr, SH: tl.constexpr,
                          SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                          KH: tl.constexpr, KW: tl.constexpr, COUNT_PAD: tl.constexpr,
                          HAS_DIV: tl.constexpr, EVEN: tl.constexpr, I64: tl.constexpr,
                          ACC: tl.constexpr, BLOCK: tl.constexpr):
    """Any window shape on a dense NCHW input, walked flat over the dense output: every lane
    holds a real output (a row tile pads a 35-wide plane row to 64 lanes, 17 to 32), the
    (plane, oh, ow) split divides by constexpr sizes (multiply-shift, no div.s32), and each tap
    is one load at a constant offset from the window's corner (a 64-bit corner pointer, so the
    offsets become load immediates). Taps that cannot leave the plane (known from the constexpr
    sizes) skip their bounds checks, and EVEN (BLOCK divides the output) drops the tail mask. Sums and divisors as the generic
    kernel (and eager) compute them. (The generic kernel spent ~100 instructions per output
    incl. 8 runtime divisions per thread on 3x3/1 windows: 11% of HBM bandwidth on the H200.)"""
    pid = tl.program_id(0)
    if I64:
        pid = pid.to(tl.int64)
    o = pid * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        ok = tl.full([BLOCK], True, tl.int1)
    else:
        ok = o < total
    ow = o % OW
    t = o // OW
    oh = t % OH
    h0, hs, he, lh = _avg_window(oh, SH, PH, KH, H)
    w0, ws, we, lw = _avg_window(ow, SW, PW, KW, W)
    corner = x_ptr + ((t // OH) * (H * W) + h0 * W + w0).to(tl.int64)
    acc = tl.zeros([BLOCK], ACC)
    for kh in tl.static_range(KH):
        h_ok = ok
        if kh < PH:  # oh >= 0, so h = oh * SH - PH + kh >= 0 once kh >= PH
            h_ok = h_ok & (h0 + kh >= 0)
        if (OH - 1) * SH - PH + kh >= H:
            h_ok = h_ok & (h0 + kh < H)
        for kw in tl.static_range(KW):
            m = h_ok
            if kw < PW:
                m = m & (w0 + kw >= 0)
            if (OW - 1) * SW - PW + kw >= W:
                m = m & (w0 + kw < W)
            acc += tl.load(corner + (kh * W + kw), mask=m, other=0).to(ACC)
    res = _avg_of_window(acc, divisor, lh, lw, hs, he, ws, we, HAS_DIV, COUNT_PAD)
    if EVEN:
        tl.store(out_ptr + o, res.to(out_ptr.dtype.element_ty))
    else:
        tl.store(out_ptr + o, res.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _avg_pool_bwd_kernel(go_ptr, out_ptr, R, Q, C, H, W, OH, OW, gn, gc, gh, gw, divisor,
                         SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                         KH: tl.constexpr, KW: tl.constexpr,
                         MAXH: tl.constexpr, MAXW: tl.constexpr, COUNT_PAD: tl.constexpr,
                         HAS_DIV: tl.constexpr, CL: tl.constexpr, I64: tl.constexpr,
                         ACC: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):
    """grad_input[h, w] = sum over windows containing (h, w) of grad_output / divisor."""
    n, c, h, w, o, ok = _coords(R, Q, C, H, W, CL, I64, BLOCK_R, BLOCK_Q)
    hp = h + PH
    wp = w + PW
    ph0 = tl.where(hp < KH, 0, (hp - KH) // SH + 1)
    ph1 = tl.minimum(hp // SH + 1, OH)
    pw0 = tl.where(wp < KW, 0, (wp - KW) // SW + 1)
    pw1 = tl.minimum(wp // SW + 1, OW)
    gbase = go_ptr + n * gn + c * gc
    acc = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    for i in tl.static_range(MAXH):
        ph = ph0 + i
        _, hs, he, lh = _avg_window(ph, SH, PH, KH, H)
        h_ok = ok & (ph < ph1) & (hs < he)
        for j in tl.static_range(MAXW):
            pw = pw0 + j
            _, ws, we, lw = _avg_window(pw, SW, PW, KW, W)
            m = h_ok & (pw < pw1) & (ws < we)
            g = tl.load(gbase + ph * gh + pw * gw, mask=m, other=0).to(ACC)
            if HAS_DIV:
                acc += g / divisor
            else:
                if COUNT_PAD:
                    div = (lh * lw).to(ACC)
                else:
                    div = ((he - hs) * (we - ws)).to(ACC)
                acc += g / tl.where(m, div, 1.0)
    tl.store(out_ptr + o, acc.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _avg_pool_bwd_tile_kernel(go_ptr, out_ptr, R, Q, divisor, W: tl.constexpr,
                              OW: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                              CL: tl.constexpr, I64: tl.constexpr, ACC: tl.constexpr,
                              BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):
    """Windows that tile the plane exactly (kernel == stride, no padding, H = OH*KH, W = OW*KW):
    every grad_input element is one grad_output element / divisor, a broadcast copy. A program
    loads a [BLOCK_R, BLOCK_Q] tile of the dense grad_output in memory order (vector loads),
    divides once per grad_output element and writes its KH*KW copies with vector stores: NCHW
    rows (n, c, oh) are widened KW-fold in registers (tl.join interleaves, no shared memory) and
    stored to grad_input rows oh*KH + kh; channels-last rows are pixels, each copy a shifted
    store of the whole channel run. W and OW are constexpr: row offsets are multiples the
    compiler can see (aligned vector stores) and the pixel split is a division by a constant.
    (The gather kernel spent ~50 instructions and two runtime divisions per element: 29% of
    HBM bandwidth on the H200.)"""
    r, q = _tile_rq(I64, BLOCK_R, BLOCK_Q)
    if CL:
        ok = (r < R) & (q < Q)
        src = go_ptr + r * Q + q
    else:  # Q == OW, constexpr here: aligned vector loads
        ok = (r < R) & (q < OW)
        src = go_ptr + r * OW + q
    # 0 + g / divisor as eager sums it (a -0 gradient gives +0)
    g = 0.0 + tl.load(src, mask=ok, other=0).to(ACC) / divisor
    g = g.to(out_ptr.dtype.element_ty)
    if CL:
        t = r // OW
        pix = t * (KH * W) + (r - t * OW) * KW
        for kh in tl.static_range(KH):
            for kw in tl.static_range(KW):
                tl.store(out_ptr + (pix + (kh * W + kw)) * Q + q, g, mask=ok)
    else:
        for _ in tl.static_range(KW.bit_length() - 1):
            g = tl.reshape(tl.join(g, g), [g.shape[0], 2 * g.shape[1]])
        w = (tl.program_id(1) * (BLOCK_Q * KW) + tl.arange(0, BLOCK_Q * KW))[None, :]
        m = (r < R) & (w < W)
        for kh in tl.static_range(KH):
            tl.store(out_ptr + (r * KH + kh) * W + w, g, mask=m)


def _avg_pool_bwd_tile_plan(grad_output, self, kh, kw, divisor):
    """(grid, args, meta) of `_avg_pool_bwd_tile_kernel`, or None when the windows do not tile
    the plane exactly or grad_output is not dense in grad_input's layout (the gather kernel
    serves those). NCHW widens rows with tl.join, so KW must be a power of two there."""
    N, C, H, W, _, _, _, _ = _planes(self)
    oh, ow = grad_output.shape[-2], grad_output.shape[-1]
    cl = _is_cl(self)
    if not _AVG_POOL_BWD_TILE or H != oh * kh or W != ow * kw:
        return None
    if cl:
        if not grad_output.is_contiguous(memory_format=torch.channels_last):
            return None
        rows, cols = N * oh * ow, C
    else:
        if not grad_output.is_contiguous() or kw & (kw - 1):
            return None
        rows, cols = N * C * oh, ow
    elems = 16384 if _INTERPRET else _AVG_POOL_BWD_TILE_ELEMS
    block_q = max(1, min(_pow2(cols), 128 if cl else 1024))
    block_r = max(1, min(_pow2(rows), _floor_pow2(elems // (block_q * kh * kw))))
    grid = (_cdiv(rows, block_r), _cdiv(cols, block_q))
    meta = dict(W=W, OW=ow, KH=kh, KW=kw, CL=cl, I64=_wide(self, grad_output),
                ACC=_acc(grad_output.dtype), BLOCK_R=block_r, BLOCK_Q=block_q,
                num_warps=_AVG_POOL_BWD_TILE_WARPS)
    return grid, (rows, cols, int(divisor)), meta


def _avg_pool_params(kernel_size, stride, padding, divisor_override):
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = _pair(stride, "stride", default=(kh, kw))
    ph, pw = _pair(padding, "padding")
    if ph > kh // 2 or pw > kw // 2:
        raise RuntimeError("pad should be at most half of effective kernel size")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    return kh, kw, sh, sw, ph, pw


def _avg_pool_fast_plan(self, kh, kw, sh, sw, ph, pw, oh, ow, count_include_pad,
                        divisor_override):
    """(kernel, grid, args, meta) of the dense-NCHW kernels (`_avg_pool_tile_kernel` for windows
    that tile the plane with KW 1 or 2, else `_avg_pool_flat_kernel`), or None when the input is
    not dense NCHW or both switches are off (the generic kernel serves those)."""
    N, C, H, W, _, _, _, _ = _planes(self)
    if _is_cl(self) or not self.is_contiguous():
        return None
    wide = _wide(self) or N * C * oh * ow >= 2**31 - 2**20
    acc = _acc(self.dtype)
    tiled = (kh, kw, ph, pw) == (sh, sw, 0, 0) and oh * kh <= H and ow * kw <= W
    if _AVG_POOL_TILE and tiled and kw in (1, 2):
        rows = N * C * oh
        elems = 16384 if _INTERPRET else _AVG_POOL_TILE_ELEMS
        block_q = max(1, min(_pow2(ow), 1024))
        block_r = max(1, min(_pow2(rows), _floor_pow2(elems // (block_q * kh * kw))))
        grid = (_cdiv(rows, block_r), _cdiv(ow, block_q))
        meta = dict(H=H, W=W, OH=oh, OW=ow, KH=kh, KW=kw, I64=wide, ACC=acc, BLOCK_R=block_r,
                    BLOCK_Q=block_q, num_warps=_AVG_POOL_TILE_WARPS)
        return _avg_pool_tile_kernel, grid, (rows, int(divisor_override or kh * kw)), meta
    if not _AVG_POOL_FLAT:
        return None
    total = N * C * oh * ow
    elems = 16384 if _INTERPRET else _AVG_POOL_FLAT_ELEMS
    block = max(32, min(_pow2(total), elems))
    meta = dict(H=H, W=W, OH=oh, OW=ow, SH=sh, SW=sw, PH=ph, PW=pw, KH=kh, KW=kw,
                COUNT_PAD=bool(count_include_pad), HAS_DIV=divisor_override is not None,
                EVEN=total % block == 0, I64=wide, ACC=acc, BLOCK=block,
                num_warps=_AVG_POOL_FLAT_WARPS)
    args = (total, int(divisor_override or 1))
    return _avg_pool_flat_kernel, (_cdiv(total, block),), args, meta


def _avg_pool_plan(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                   divisor_override):
    kh, kw, sh, sw, ph, pw = _avg_pool_params(kernel_size, stride, padding, divisor_override)
    N, C, H, W, sn, sc, s_h, s_w = _planes(self)
    oh = _pool_out(H, kh, sh, ph, 1, ceil_mode)
    ow = _pool_out(W, kw, sw, pw, 1, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input size: ({C}x{H}x{W}). Calculated output size: ({C}x{oh}x{ow}). Output size is too small")
    cl = _is_cl(self)
    shape = tuple(self.shape[:-2]) + (oh, ow)
    strides = _dense_strides(shape, cl)
    if N * C * oh * ow == 0:
        return shape, strides, None, None, None, None
    fast = _avg_pool_fast_plan(self, kh, kw, sh, sw, ph, pw, oh, ow, count_include_pad,
                               divisor_override)
    if fast is not None:
        return (shape, strides, *fast)
    grid, rq, meta = _tiles(N, C, oh, ow, cl, _AVG_POOL_ELEMS, _AVG_POOL_WARPS)
    wide = _wide(self) or N * C * oh * ow >= 2**31 - 2**20
    meta.update(KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, COUNT_PAD=bool(count_include_pad),
                HAS_DIV=divisor_override is not None, I64=wide, ACC=_acc(self.dtype))
    args = (*rq, C, H, W, oh, ow, sn, sc, s_h, s_w, int(divisor_override or 1))
    return shape, strides, _avg_pool_kernel, grid, args, meta


def _avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    key = ("fwd", self.shape, self.stride(), self.dtype, _key(kernel_size), _key(stride),
           _key(padding), bool(ceil_mode), bool(count_include_pad), divisor_override)
    plan = _planned(key, _avg_pool_plan, self, kernel_size, stride, padding, ceil_mode,
                    count_include_pad, divisor_override)
    shape, strides, kernel, grid, args, meta = plan
    out = torch.empty_strided(shape, strides, dtype=self.dtype, device=self.device)
    if grid is not None:
        kernel[grid](self, out, *args, **meta)
    return out


def _avg_pool_bwd_plan(grad_output, self, kernel_size, stride, padding, count_include_pad,
                       divisor_override):
    kh, kw, sh, sw, ph, pw = _avg_pool_params(kernel_size, stride, padding, divisor_override)
    N, C, H, W, _, _, _, _ = _planes(self)
    oh, ow = grad_output.shape[-2], grad_output.shape[-1]
    cl = _is_cl(self)
    shape = tuple(self.shape)
    strides = _dense_strides(shape, cl)
    if N * C * H * W == 0:
        return shape, strides, None, None, None, None
    if (kh, kw, ph, pw) == (sh, sw, 0, 0):
        tile = _avg_pool_bwd_tile_plan(grad_output, self, kh, kw, divisor_override or kh * kw)
        if tile is not None:
            return (shape, strides, _avg_pool_bwd_tile_kernel, *tile)
    grid, rq, meta = _tiles(N, C, H, W, cl, _AVG_POOL_BWD_ELEMS, _AVG_POOL_BWD_WARPS)
    meta.update(KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, MAXH=_cdiv(kh, sh), MAXW=_cdiv(kw, sw),
                COUNT_PAD=bool(count_include_pad), HAS_DIV=divisor_override is not None,
                I64=_wide(self, grad_output), ACC=_acc(grad_output.dtype))
    args = (*rq, C, H, W, oh, ow, *_strides4(grad_output), int(divisor_override or 1))
    return shape, strides, _avg_pool_bwd_kernel, grid, args, meta


def _avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
                         count_include_pad, divisor_override):
    key = ("bwd", self.shape, self.stride(), grad_output.shape, grad_output.stride(),
           grad_output.dtype, _key(kernel_size), _key(stride), _key(padding), bool(count_include_pad),
           divisor_override)
    plan = _planned(key, _avg_pool_bwd_plan, grad_output, self, kernel_size, stride, padding,
                    count_include_pad, divisor_override)
    shape, strides, kernel, grid, args, meta = plan
    out = torch.empty_strided(shape, strides, dtype=grad_output.dtype, device=self.device)
    if grid is not None:
        kernel[grid](grad_output, out, *args, **meta)
    return out
