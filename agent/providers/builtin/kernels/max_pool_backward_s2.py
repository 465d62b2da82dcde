"""max_pool2d backward for stride-2 windows that tile the plane: each program owns whole output
blocks and reads window pairs as aligned vectors, no atomics."""

import triton  # noqa: I001  (one line per import, lint-only)
import triton.language as tl

from agent.providers.builtin.kernels.pooling_common import _MAX_POOL_BWD_S2, _MAX_POOL_BWD_S2_ELEMS
from agent.providers.builtin.kernels.pooling_common import _MAX_POOL_BWD_S2_VEC
from agent.providers.builtin.kernels.pooling_common import _MAX_POOL_BWD_S2_VEC_ELEMS
from agent.providers.builtin.kernels.pooling_common import _MAX_POOL_BWD_S2_VEC_ROWS
from agent.providers.builtin.kernels.pooling_common import _MAX_POOL_BWD_S2_VEC_WARPS
from agent.providers.builtin.kernels.pooling_common import _MAX_POOL_BWD_S2_WARPS, _acc
from agent.providers.builtin.kernels.pooling_common import _floor_pow2, _is_cl, _planes, _strides4
from agent.providers.builtin.kernels.pooling_common import _tile_rq, _wide
from agent.providers.builtin.kernels.runtime import _INTERPRET, _cdiv, _pow2
from agent.providers.builtin.kernels.tiles import _CONSERVATIVE

# ---- emitted: s2 ----


@triton.jit
def _max_pool_bwd_s2_kernel(go_ptr, idx_ptr, out_ptr, R, Q, gp, gh, gw, gc, jp, jh, jw, jc,
                            H: tl.constexpr, W: tl.constexpr, OH: tl.constexpr,
                            OW: tl.constexpr, MH: tl.constexpr, MW: tl.constexpr,
                            LH0: tl.constexpr, HH0: tl.constexpr, LH1: tl.constexpr,
                            HH1: tl.constexpr, LW0: tl.constexpr, HW0: tl.constexpr,
                            LW1: tl.constexpr, HW1: tl.constexpr, CL: tl.constexpr,
                            I64: tl.constexpr, ACC: tl.constexpr, BLOCK_R: tl.constexpr,
                            BLOCK_Q: tl.constexpr):
    """Stride-2 windows, walked in 2x2 blocks of grad_input: block (m, n) holds the positions
    (2m + a, 2n + b), and position a along a dim lies in the windows m + LO_a .. m + HI_a
    (constants of kernel size, pad and dilation). A program loads each distinct window offset's
    indices and gradients once for its blocks (contiguous along the columns) and adds a
    gradient to the positions whose flat index it saved, in eager's window order. NCHW tiles are
    [planes x block rows, block columns]: the two b positions of a row are interleaved in
    registers (tl.join) and stored as full rows; channels-last tiles are [blocks, channels]
    with four shifted stores. Plane sizes are constexpr: block coordinates come from divisions
    by constants, row offsets are visible multiples (aligned vector stores). (The per-element
    gather did four int64 index loads, two runtime divisions and ~40 index instructions per
    element: 27% of HBM bandwidth on the H200.)"""
    r, q = _tile_rq(I64, BLOCK_R, BLOCK_Q)
    ok = (r < R) & (q < Q)
    if CL:  # rows (image, m, n), columns channels
        n = r % MW
        t = r // MW
        m = t % MH
        img = t // MH
        gsrc = go_ptr + img * gp + q * gc
        jsrc = idx_ptr + img * jp + q * jc
    else:  # rows (plane, m), columns n
        m = r % MH
        img = r // MH
        n = q
        gsrc = go_ptr + img * gp
        jsrc = idx_ptr + img * jp
    t00 = (2 * m) * W + 2 * n
    a00 = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    a01 = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    a10 = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    a11 = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    for di in tl.static_range(min(LH0, LH1), max(HH0, HH1) + 1):
        ph = m + di
        h_ok = ok & (ph >= 0) & (ph < OH)
        for dj in tl.static_range(min(LW0, LW1), max(HW0, HW1) + 1):
            pw = n + dj
            msk = h_ok & (pw >= 0) & (pw < OW)
            ind = tl.load(jsrc + ph * jh + pw * jw, mask=msk, other=-1)
            g = tl.load(gsrc + ph * gh + pw * gw, mask=msk, other=0).to(ACC)
            if (LH0 <= di) & (di <= HH0):
                if (LW0 <= dj) & (dj <= HW0):
                    a00 += tl.where(ind == t00, g, 0.0)
                if (LW1 <= dj) & (dj <= HW1):
                    a01 += tl.where(ind == t00 + 1, g, 0.0)
            if (LH1 <= di) & (di <= HH1):
                if (LW0 <= dj) & (dj <= HW0):
                    a10 += tl.where(ind == t00 + W, g, 0.0)
                if (LW1 <= dj) & (dj <= HW1):
                    a11 += tl.where(ind == t00 + (W + 1), g, 0.0)
    ty = out_ptr.dtype.element_ty
    h_ok0 = ok & (2 * m < H)
    h_ok1 = ok & (2 * m + 1 < H)
    if CL:
        dst = out_ptr + ((img * H + 2 * m) * W + 2 * n) * Q + q
        w_ok1 = 2 * n + 1 < W
        tl.store(dst, a00.to(ty), mask=h_ok0)
        tl.store(dst + Q, a01.to(ty), mask=h_ok0 & w_ok1)
        tl.store(dst + W * Q, a10.to(ty), mask=h_ok1)
        tl.store(dst + (W + 1) * Q, a11.to(ty), mask=h_ok1 & w_ok1)
    else:
        w = (tl.program_id(1) * (2 * BLOCK_Q) + tl.arange(0, 2 * BLOCK_Q))[None, :]
        dst = out_ptr + (img * H + 2 * m) * W + w
        row0 = tl.reshape(tl.join(a00, a01), [BLOCK_R, 2 * BLOCK_Q]).to(ty)
        row1 = tl.reshape(tl.join(a10, a11), [BLOCK_R, 2 * BLOCK_Q]).to(ty)
        tl.store(dst, row0, mask=(r < R) & (2 * m < H) & (w < W))
        tl.store(dst + W, row1, mask=(r < R) & (2 * m + 1 < H) & (w < W))


@triton.jit
def _s2_window_pair(idx_ptr, go_ptr, src, base, row_ok, col, OW: tl.constexpr, KP: tl.constexpr,
                    S: tl.constexpr, ACC: tl.constexpr):
    """(saved index - base, gradient) of window columns col + 2S of the rows at `src`
    ([BLOCK, 2]; one aligned vector load each), the index difference in int32: an index with a
    nonzero high word equals no position (as in an int64 compare), and neither does a window off
    the plane: both give -1 (positions are >= base). Column bounds are checked only where a
    lane's columns can leave the plane (constexpr OW, KP lanes per row)."""
    msk = row_ok[:, None]
    if S < 0:
        msk = msk & (col + 2 * S >= 0)
    if 2 * KP + 2 * S > OW:
        msk = msk & (col + 2 * S < OW)
    ind = tl.load(idx_ptr + src + 2 * S, mask=msk, other=-1)
    lo, hi = ind.to(tl.int32), (ind >> 32).to(tl.int32)
    grd = tl.load(go_ptr + src + 2 * S, mask=msk, other=0).to(ACC)
    return tl.where(hi == 0, lo - base[:, None], -1), grd


@triton.jit
def _s2_shift(lo, hi):
    """[BLOCK, 2] pairs (lo[1], hi[0]): the window one column right of each of lo's."""
    _, lo1 = tl.split(lo)
    hi0, _ = tl.split(hi)
    return tl.join(lo1, hi0)


@triton.jit
def _max_pool_bwd_s2_vec_kernel(go_ptr, idx_ptr, out_ptr, total, H: tl.constexpr,
                                W: tl.constexpr, OH: tl.constexpr, OW: tl.constexpr,
                                MG: tl.constexpr, KP: tl.constexpr, LH0: tl.constexpr,
                                HH0: tl.constexpr, LH1: tl.constexpr, HH1: tl.constexpr,
                                LW0: tl.constexpr, HW0: tl.constexpr, LW1: tl.constexpr,
                                HW1: tl.constexpr, RB: tl.constexpr, I64: tl.constexpr,
                                ACC: tl.constexpr, BLOCK: tl.constexpr):
    """`_max_pool_bwd_s2_kernel` for dense NCHW grad_output and indices, walked flat over lanes
    of RB x 2 blocks: lane f owns block rows m0 .. m0 + RB - 1 (m0 = RB * (row group)) x block
    columns 2k, 2k + 1 (k = f % KP), i.e. grad_input rows 2 m0 .. 2 m0 + 2 RB - 1 x columns 4k
    .. 4k + 3. Each window row the lane needs (RB + window rows per block - 1 of them) is read
    once: window columns 2k + (0, 1) as one aligned vector (16-byte int64 pairs, 4-byte
    gradient pairs; the row offset is a multiple of the constexpr OW), plus the single columns
    2k - 1 / 2k + 2 when a window one column left / right covers the blocks (dj = -1 / +1; the
    pair shifted by dj is built in registers, tl.split + tl.join). Accumulators are [BLOCK, 2
    (block column c), 2 (position b)] per grad_input row, in grad_input order, so a row stores
    as one 4-wide vector. Per accumulator, terms come in window-row then dj order: eager's
    (ph, pw) order. The flat walk keeps every lane busy (a 56-wide plane row is 28 lanes, not
    32 padded ones), and the divisions by constexpr sizes run once per lane. (The block kernel
    loaded each window with a scalar ld.global.b64 / .b16, ~35 SASS instructions per element:
    70% of HBM bandwidth on the H200.)"""
    pid = tl.program_id(0)
    if I64:
        pid = pid.to(tl.int64)
    f = pid * BLOCK + tl.arange(0, BLOCK)
    ok = f < total
    k = f % KP
    r = f // KP
    m0 = (r % MG) * RB
    plane = r // MG
    two = tl.arange(0, 2)
    col = (2 * k)[:, None] + two[None, :]  # block / window columns 2k + c
    # flat position of block (m0 + u, 2k + c), position (a, b): base + rel(u, a) + 2c + b
    base = ((2 * m0) * W + 4 * k).to(tl.int32)  # < H * W
    rel = (2 * two)[None, :, None] + two[None, None, :]
    acc00 = tl.zeros([BLOCK, 2, 2], ACC)  # acc{u}{a}: grad_input row 2 (m0 + u) + a
    acc01 = tl.zeros([BLOCK, 2, 2], ACC)
    acc10 = tl.zeros([BLOCK, 2, 2], ACC)
    acc11 = tl.zeros([BLOCK, 2, 2], ACC)
    for w in tl.static_range(min(LH0, LH1), max(HH0, HH1) + RB):  # window row m0 + w
        mm = m0 + w
        row_ok = ok & (mm >= 0) & (mm < OH)
        src = ((plane * OH + mm) * OW)[:, None] + col
        i_c, g_c = _s2_window_pair(idx_ptr, go_ptr, src, base, row_ok, col, OW, KP,
                                       0, ACC)
        if min(LW0, LW1) < 0:
            i_l, g_l = _s2_window_pair(idx_ptr, go_ptr, src, base, row_ok, col, OW, KP,
                                       -1, ACC)
        if max(HW0, HW1) > 0:
            i_r, g_r = _s2_window_pair(idx_ptr, go_ptr, src, base, row_ok, col, OW, KP,
                                       1, ACC)
        for dj in tl.static_range(min(LW0, LW1), max(HW0, HW1) + 1):
            if dj == 0:
                iv, gv = i_c, g_c
            elif dj == 1:
                iv, gv = _s2_shift(i_c, i_r), _s2_shift(g_c, g_r)
            else:
                iv, gv = _s2_shift(i_l, i_c), _s2_shift(g_l, g_c)
            iv = iv[:, :, None]
            gv = gv[:, :, None]
            for u in tl.static_range(RB):
                for a in tl.static_range(2):
                    if a == 0:
                        in_h = (LH0 <= w - u) & (w - u <= HH0)
                    else:
                        in_h = (LH1 <= w - u) & (w - u <= HH1)
                    in0 = in_h & (LW0 <= dj) & (dj <= HW0)
                    in1 = in_h & (LW1 <= dj) & (dj <= HW1)
                    if in0 | in1:
                        hit = iv == rel + (2 * u + a) * W
                        if not (in0 & in1):
                            hit = hit & (two[None, None, :] == (0 if in0 else 1))
                        term = tl.where(hit, gv, 0.0)
                        if u == 0:
                            if a == 0:
                                acc00 += term
                            else:
                                acc01 += term
                        else:
                            if a == 0:
                                acc10 += term
                            else:
                                acc11 += term
    ty = out_ptr.dtype.element_ty
    quad = tl.arange(0, 4)[None, :]
    w_ok = ok[:, None] & (4 * k[:, None] + quad < W)
    dst = out_ptr + ((plane * H + 2 * m0) * W + 4 * k)[:, None] + quad
    tl.store(dst, tl.reshape(acc00.to(ty), [BLOCK, 4]), mask=w_ok & (2 * m0 < H)[:, None])
    tl.store(dst + W, tl.reshape(acc01.to(ty), [BLOCK, 4]),
             mask=w_ok & (2 * m0 + 1 < H)[:, None])
    if RB == 2:
        tl.store(dst + 2 * W, tl.reshape(acc10.to(ty), [BLOCK, 4]),
                 mask=w_ok & (2 * m0 + 2 < H)[:, None])
        tl.store(dst + 3 * W, tl.reshape(acc11.to(ty), [BLOCK, 4]),
                 mask=w_ok & (2 * m0 + 3 < H)[:, None])


def _max_pool_bwd_s2_plan(grad_output, self, indices, kh, kw, ph, pw, dh, dw):
    """(kernel, grid, args, meta) of the stride-2 kernels, or None when the switch is off or the
    planes of grad_output / indices are not evenly strided across images and channels: the pair
    kernel `_max_pool_bwd_s2_vec_kernel` for NCHW with dense grad_output and indices (switch
    `_MAX_POOL_BWD_S2_VEC`), else the block kernel `_max_pool_bwd_s2_kernel`."""
    N, C, H, W, _, _, _, _ = _planes(self)
    oh, ow = grad_output.shape[-2], grad_output.shape[-1]
    gn, gc, gh, gw = _strides4(grad_output)
    jn, jc, jh, jw = _strides4(indices)
    cl = _is_cl(self)
    if not _MAX_POOL_BWD_S2:
        return None
    if not cl and ((N > 1 and gn != C * gc) or (N > 1 and jn != C * jc)):
        return None
    eh = (kh - 1) * dh + 1
    ew = (kw - 1) * dw + 1
    bounds = {}
    for name, e, p in (("H", eh, ph), ("W", ew, pw)):
        for a in (0, 1):
            bounds[f"L{name}{a}"] = -((e - 1 - a - p) // 2)  # ceil((a + p - e + 1) / 2)
            bounds[f"H{name}{a}"] = (a + p) // 2
    mh, mw = _cdiv(H, 2), _cdiv(W, 2)
    wide = _wide(self, grad_output, indices)
    dj0 = min(bounds["LW0"], bounds["LW1"])
    dj1 = max(bounds["HW0"], bounds["HW1"])
    if (_MAX_POOL_BWD_S2_VEC and not cl and grad_output.is_contiguous()
            and indices.is_contiguous() and -1 <= dj0 and dj1 <= 1):
        rb = 2 if _MAX_POOL_BWD_S2_VEC_ROWS >= 2 and mh >= 2 else 1
        groups, pairs = _cdiv(mh, rb), _cdiv(mw, 2)
        total = N * C * groups * pairs
        if _INTERPRET:
            elems = 16384
        else:
            elems = _MAX_POOL_BWD_S2_VEC_ELEMS // (2 if _CONSERVATIVE else 1)
        block = max(1, min(_pow2(total), _floor_pow2(elems // (8 * rb))))
        meta = dict(H=H, W=W, OH=oh, OW=ow, MG=groups, KP=pairs, **bounds, RB=rb, I64=wide,
                    ACC=_acc(grad_output.dtype), BLOCK=block,
                    num_warps=_MAX_POOL_BWD_S2_VEC_WARPS)
        return _max_pool_bwd_s2_vec_kernel, (_cdiv(total, block),), (total,), meta
    rows, cols = (N * mh * mw, C) if cl else (N * C * mh, mw)
    if _INTERPRET:
        elems = 16384
    else:
        elems = _MAX_POOL_BWD_S2_ELEMS // (2 if _CONSERVATIVE else 1)
    block_q = max(1, min(_pow2(cols), 128))
    block_r = max(1, min(_pow2(rows), _floor_pow2(elems // (4 * block_q))))
    grid = (_cdiv(rows, block_r), _cdiv(cols, block_q))
    meta = dict(H=H, W=W, OH=oh, OW=ow, MH=mh, MW=mw, **bounds, CL=cl, I64=wide,
                ACC=_acc(grad_output.dtype), BLOCK_R=block_r, BLOCK_Q=block_q,
                num_warps=_MAX_POOL_BWD_S2_WARPS)
    planes = (gn, jn) if cl else (gc, jc)
    args = (rows, cols, planes[0], gh, gw, gc, planes[1], jh, jw, jc)
    return _max_pool_bwd_s2_kernel, grid, args, meta
