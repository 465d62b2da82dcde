"""Convolution backward kernels: implicit-GEMM grad_input and grad_weight (split over pixels),
grad_bias, the split sums, and the direct (depthwise) forms."""

import triton  # noqa: I001  (one line per import, lint-only)
import triton.language as tl

from agent.providers.builtin.kernels.conv_common import _col, _row
from agent.providers.builtin.kernels.conv_common import _mma

# ---- emitted: kernels ----


@triton.jit
def _bwd_input_kernel(
    g_ptr, w_ptr, gi_ptr,
    M, HW, W, OH, OW, CG, OCG, KW, KHW,
    sgn, sgc, sgh, sgw, swo, swc, swh, sww, sin, sic, sih, siw,
    str_h, str_w, pad_h, pad_w, dil_h, dil_w,
    T: tl.constexpr, EVEN_K: tl.constexpr, WIDEN: tl.constexpr, PREC: tl.constexpr,
    IDX64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
):
    """gi[n, g*CG + c, ih, iw] = sum over (j, kh, kw) of go[n, g*OCG + j, oh, ow] *
    w[g*OCG + j, c, kh, kw], where ih = oh*sh - ph + kh*dh and iw likewise."""
    pid = tl.program_id(0)
    g = tl.program_id(1)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(CG, BLOCK_N)
    per_group = GROUP_M * num_n
    first_m = (pid // per_group) * GROUP_M
    group_m = tl.minimum(num_m - first_m, GROUP_M)
    pid_m = first_m + (pid % per_group) % group_m
    pid_n = (pid % per_group) // group_m
    if IDX64:
        rm = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
        g = g.to(tl.int64)
        rk = tl.arange(0, BLOCK_K).to(tl.int64)
    else:
        rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
        rk = tl.arange(0, BLOCK_K)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    m = rm % M
    img = m // HW
    pix = m % HW
    ih = pix // W
    iw = pix % W
    cw = rn % CG  # input channel within the group (the weight's dim 1)
    c = g * CG + cw
    g_row = img * sgn + (g * OCG) * sgc
    w_col = cw * swc + (g * OCG) * swo
    if T:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for r in range(0, KHW):
        kh = r // KW
        kw = r % KW
        th = ih + pad_h - kh * dil_h
        tw = iw + pad_w - kw * dil_w
        oh = th // str_h
        ow = tw // str_w
        # an output pixel feeds this input pixel through tap (kh, kw) only on the stride grid
        ok = (th >= 0) & (tw >= 0) & (oh * str_h == th) & (ow * str_w == tw) & (oh < OH) & (ow < OW)
        a_base = g_ptr + _row(g_row + oh * sgh + ow * sgw, T)
        ok_row = _row(ok, T)
        b_base = w_ptr + kh * swh + kw * sww + _col(w_col, T)
        for j0 in range(0, OCG, BLOCK_K):
            jj = j0 + rk
            a_ptrs = a_base + _col(jj * sgc, T)
            b_ptrs = b_base + _row(jj * swo, T)
            if EVEN_K:
                a = tl.load(a_ptrs, mask=ok_row, other=0.0)
                b = tl.load(b_ptrs)
            else:
                jin = jj < OCG
                a = tl.load(a_ptrs, mask=ok_row & _col(jin, T), other=0.0)
                b = tl.load(b_ptrs, mask=_row(jin, T), other=0.0)
            acc = _mma(acc, a, b, WIDEN, PREC, T)
    ptrs = gi_ptr + _row(img * sin + ih * sih + iw * siw, T) + _col(c * sic, T)
    mask = _row(rm < M, T) & _col(rn < CG, T)
    tl.store(ptrs, acc.to(gi_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _row_sums_by_dot(a, acc, WIDEN: tl.constexpr):
    """acc + a @ ones([BLOCK_K, 16]): a's row sums (grad_bias; in each of acc's 16 equal
    columns) through the tensor cores, from the operand the weight gradient's dot reads anyway.
    Summing the same tile in registers (tl.sum) beside that pipelined dot gave wrong weight
    gradients on the H200 (Triton 3.6) with some tiles of the 1x1 kernel (128x256x64,
    128x128x128, 64x128x64 with 4 splits; relative errors up to 0.4, different on every call);
    through the dot, all of them matched. fp32 operands take 3xTF32 (grad_bias within 1.4e-7
    of fp64 there)."""
    ones = tl.full((a.shape[1], 16), 1.0, a.dtype)
    if a.dtype == tl.float32:
        prec: tl.constexpr = "ieee" if WIDEN else "tf32x3"
        return tl.dot(a, ones, acc, input_precision=prec, out_dtype=tl.float32)
    return tl.dot(a, ones, acc, out_dtype=tl.float32)


@triton.jit
def _bwd_weight_kernel(
    g_ptr, x_ptr, out_ptr, gb_ptr,
    P, P_PER, OHW, OW, H, W, CG, OCG, NW, WS, KW, KHW, NJ,
    sgn, sgc, sgh, sgw, sxn, sxc, sxh, sxw,
    str_h, str_w, pad_h, pad_w, dil_h, dil_w,
    FLAT: tl.constexpr, SPLIT: tl.constexpr, BIAS: tl.constexpr, WIDEN: tl.constexpr,
    PREC: tl.constexpr, IDX64: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
):
    """gw[g*OCG + i, c, kh, kw] = sum over pixels (n, oh, ow) of go[n, g*OCG + i, oh, ow] *
    x[n, g*CG + c, oh*sh - ph + kh*dh, ow*sw - pw + kw*dw], over this program's pixel range.

    Columns j are input channels of one tap (program_id(1) = group * KHW + tap), or (c, kh, kw)
    flattened when FLAT. SPLIT: fp32 partials go to out_ptr[split * WS + index]. BIAS: the
    programs of the first column tile and tap also sum grad_output's rows they load, for
    grad_bias (to gb_ptr, or as partials after the weight's in each split's WS elements).
    """
    pid = tl.program_id(0)
    gr = tl.program_id(1)
    split = tl.program_id(2)
    if FLAT:
        g = gr
        tap = 0
    else:
        g = gr // KHW
        tap = gr % KHW
    num_n = tl.cdiv(NJ, BLOCK_N)
    pid_m = pid // num_n
    pid_n = pid % num_n
    ri = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rj = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    oc = g * OCG + ri % OCG
    jw = rj % NJ
    if FLAT:
        c = jw // KHW
        r = jw % KHW
        kh = r // KW
        kw = r % KW
        col = jw  # (c, kh, kw) flattened is the weight's own inner order
    else:
        c = jw
        kh = tap // KW
        kw = tap % KW
        col = jw * KHW + tap
    if IDX64:
        rk = tl.arange(0, BLOCK_K).to(tl.int64)
        p_start = split.to(tl.int64) * P_PER
        oc = oc.to(tl.int64)
        c = c.to(tl.int64)
    else:
        rk = tl.arange(0, BLOCK_K)
        p_start = split * P_PER
    p_end = tl.minimum(p_start + P_PER, P)
    g_col = oc * sgc
    x_col = (g * CG + c) * sxc
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    bacc = tl.zeros((BLOCK_M, 16), dtype=tl.float32)
    for p0 in range(p_start, p_end, BLOCK_K):
        p = p0 + rk
        pin = p < p_end
        img = p // OHW
        pix = p % OHW
        oh = pix // OW
        ow = pix % OW
        a = tl.load(g_ptr + g_col[:, None] + (img * sgn + oh * sgh + ow * sgw)[None, :],
                    mask=pin[None, :], other=0.0)
        if FLAT:
            ih = (oh * str_h - pad_h)[None, :] + (kh * dil_h)[:, None]
            iw = (ow * str_w - pad_w)[None, :] + (kw * dil_w)[:, None]
            ok = pin[None, :] & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            b = tl.load(x_ptr + x_col[:, None] + (img * sxn)[None, :] + ih * sxh + iw * sxw,
                        mask=ok, other=0.0)
        else:
            ih = oh * str_h - pad_h + kh * dil_h
            iw = ow * str_w - pad_w + kw * dil_w
            ok = pin & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            b = tl.load(x_ptr + x_col[:, None] + (img * sxn + ih * sxh + iw * sxw)[None, :],
                        mask=ok[None, :], other=0.0)
        if WIDEN:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        # b is [columns, pixels] (pixel-major loads); the dot wants [pixels, columns]
        acc = tl.dot(a, tl.trans(b), acc, input_precision=PREC, out_dtype=acc.dtype)
        if BIAS:
            bacc = _row_sums_by_dot(a, bacc, WIDEN)
    offs = (oc * (CG * KHW))[:, None] + col[None, :]
    mask = (ri < OCG)[:, None] & (rj < NJ)[None, :]
    if BIAS:
        own = pid_n == 0  # one program per (rows, split) stores them: the first column tile
        if not FLAT:
            own = own & (tap == 0)  # ... of the first tap
        # (a row bound, not `& own`: the interpreter turns a vector & scalar mask into int32)
        bmask = ri < tl.where(own, OCG, 0)
        bsum = tl.max(bacc, axis=1)  # its 16 columns are equal
        if SPLIT:  # after the weight partials of this split
            tl.store(out_ptr + split.to(tl.int64) * WS + NW + oc, bsum, mask=bmask)
        else:
            tl.store(gb_ptr + oc, bsum.to(gb_ptr.dtype.element_ty), mask=bmask)
    if SPLIT:
        if not FLAT:  # tap-major partials: rows of contiguous input channels (_sum_splits_kernel)
            offs = tap * (NW // KHW) + (oc * CG)[:, None] + c[None, :]
        tl.store(out_ptr + split.to(tl.int64) * WS + offs, acc, mask=mask)
    else:
        tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _bwd_bias_kernel(
    g_ptr, out_ptr, P, P_PER, OHW, OW, OC, sgn, sgc, sgh, sgw,
    SPLIT: tl.constexpr, T: tl.constexpr, IDX64: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):
    """gb[oc] = sum over pixels (n, oh, ow) of go[n, oc, oh, ow], over this program's range."""
    rc = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    split = tl.program_id(1)
    c = rc % OC
    if IDX64:
        rp = tl.arange(0, BLOCK_P).to(tl.int64)
        p_start = split.to(tl.int64) * P_PER
        c = c.to(tl.int64)
    else:
        rp = tl.arange(0, BLOCK_P)
        p_start = split * P_PER
    p_end = tl.minimum(p_start + P_PER, P)
    g_col = _col(c * sgc, T)
    if T:
        acc = tl.zeros((BLOCK_C, BLOCK_P), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for p0 in range(p_start, p_end, BLOCK_P):
        p = p0 + rp
        pin = p < p_end
        img = p // OHW
        pix = p % OHW
        oh = pix // OW
        ow = pix % OW
        v = tl.load(g_ptr + _row(img * sgn + oh * sgh + ow * sgw, T) + g_col, mask=_row(pin, T),
                    other=0.0)
        acc += v.to(tl.float32)
    if T:
        total = tl.sum(acc, axis=1)
    else:
        total = tl.sum(acc, axis=0)
    if SPLIT:
        tl.store(out_ptr + split.to(tl.int64) * OC + rc, total, mask=rc < OC)
    else:
        tl.store(out_ptr + rc, total.to(out_ptr.dtype.element_ty), mask=rc < OC)


@triton.jit
def _sum_splits_kernel(ws_ptr, out_ptr, out2_ptr, L, NW, S, TAPS, BLOCK: tl.constexpr):
    """out[i] = sum over s of ws[s * L + i], in split order (deterministic), for i < NW; the
    rest of each split's L elements go to out2[i - NW] (grad_bias after grad_weight). TAPS > 1:
    the first NW partials are tap-major, ws[s * L + tap * (NW / TAPS) + r] for out[r * TAPS +
    tap] (weight gradient rows [out channel, in channel] per tap, which the weight kernels write
    along contiguous channels instead of with a stride of TAPS)."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = offs < L
    acc = tl.zeros((BLOCK,), dtype=tl.float32)
    ptrs = ws_ptr + offs
    for _ in range(0, S):
        acc += tl.load(ptrs, mask=ok, other=0.0)
        ptrs += L
    first = offs < NW
    dst = offs
    if TAPS > 1:
        rows = NW // TAPS
        dst = tl.where(first, (offs % rows) * TAPS + offs // rows, offs)
    tl.store(out_ptr + dst, acc.to(out_ptr.dtype.element_ty), mask=ok & first)
    tl.store(out2_ptr + (offs - NW), acc.to(out2_ptr.dtype.element_ty), mask=ok & (offs >= NW))


@triton.jit
def _bwd_input_direct_kernel(
    g_ptr, w_ptr, gi_ptr,
    P, HW, W, OH, OW, C, OCG, KW, KHW,
    sgn, sgc, sgh, sgw, swo, swh, sww, sin, sic, sih, siw,
    str_h, str_w, pad_h, pad_w, dil_h, dil_w,
    T: tl.constexpr, IDX64: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):
    """One input channel per group: gi[n, c, ih, iw] = sum over (j, kh, kw) of
    go[n, c*OCG + j, oh, ow] * w[c*OCG + j, 0, kh, kw] on [pixels x channels] tiles."""
    if IDX64:
        rp = tl.program_id(0).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)
        rc = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    else:
        rp = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
        rc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    p = rp % P
    c = rc % C
    img = p // HW
    pix = p % HW
    ih = pix // W
    iw = pix % W
    if T:
        acc = tl.zeros((BLOCK_C, BLOCK_P), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for r in range(0, KHW):
        kh = r // KW
        kw = r % KW
        th = ih + pad_h - kh * dil_h
        tw = iw + pad_w - kw * dil_w
        oh = th // str_h
        ow = tw // str_w
        ok = (th >= 0) & (tw >= 0) & (oh * str_h == th) & (ow * str_w == tw) & (oh < OH) & (ow < OW)
        g_row = _row(img * sgn + oh * sgh + ow * sgw, T)
        ok_row = _row(ok, T)
        for j in range(0, OCG):
            oc = c * OCG + j
            gv = tl.load(g_ptr + g_row + _col(oc * sgc, T), mask=ok_row, other=0.0)
            wv = tl.load(w_ptr + oc * swo + kh * swh + kw * sww)
            acc += gv.to(tl.float32) * _col(wv.to(tl.float32), T)
    ptrs = gi_ptr + _row(img * sin + ih * sih + iw * siw, T) + _col(c * sic, T)
    mask = _row(rp < P, T) & _col(rc < C, T)
    tl.store(ptrs, acc.to(gi_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _bwd_weight_direct_kernel(
    g_ptr, x_ptr, out_ptr,
    P, P_PER, OHW, OW, H, W, OC, OCG, NW, KW, KHW,
    sgn, sgc, sgh, sgw, sxn, sxc, sxh, sxw,
    str_h, str_w, pad_h, pad_w, dil_h, dil_w,
    SPLIT: tl.constexpr, T: tl.constexpr, IDX64: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr,
):
    """One input channel per group: gw[oc, 0, kh, kw] = sum over pixels of
    x[n, oc // OCG, ih, iw] * go[n, oc, oh, ow]; program_id(1) is the tap (kh, kw)."""
    rc = tl.program_id(0) * BLOCK_C + tl.arange(0, BLOCK_C)
    tap = tl.program_id(1)
    split = tl.program_id(2)
    kh = tap // KW
    kw = tap % KW
    oc = rc % OC
    if IDX64:
        rp = tl.arange(0, BLOCK_P).to(tl.int64)
        p_start = split.to(tl.int64) * P_PER
        oc = oc.to(tl.int64)
    else:
        rp = tl.arange(0, BLOCK_P)
        p_start = split * P_PER
    p_end = tl.minimum(p_start + P_PER, P)
    g_col = _col(oc * sgc, T)
    x_col = _col((oc // OCG) * sxc, T)
    if T:
        acc = tl.zeros((BLOCK_C, BLOCK_P), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    for p0 in range(p_start, p_end, BLOCK_P):
        p = p0 + rp
        pin = p < p_end
        img = p // OHW
        pix = p % OHW
        oh = pix // OW
        ow = pix % OW
        ih = oh * str_h - pad_h + kh * dil_h
        iw = ow * str_w - pad_w + kw * dil_w
        ok = pin & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
        gv = tl.load(g_ptr + _row(img * sgn + oh * sgh + ow * sgw, T) + g_col, mask=_row(pin, T),
                     other=0.0)
        xv = tl.load(x_ptr + _row(img * sxn + ih * sxh + iw * sxw, T) + x_col, mask=_row(ok, T),
                     other=0.0)
        acc += gv.to(tl.float32) * xv.to(tl.float32)
    if T:
        total = tl.sum(acc, axis=1)
    else:
        total = tl.sum(acc, axis=0)
    offs = oc * KHW + tap
    if SPLIT:  # tap-major partials (_sum_splits_kernel)
        tl.store(out_ptr + split.to(tl.int64) * NW + tap * OC + oc, total, mask=rc < OC)
    else:
        tl.store(out_ptr + offs, total.to(out_ptr.dtype.element_ty), mask=rc < OC)
