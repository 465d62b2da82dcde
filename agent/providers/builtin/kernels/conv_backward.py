"""Convolution backward kernels: the text the builtin writer copies into the files it emits."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.conv import (
    _clamp_pow2,
    _col,
    _direct_tiles,
    _empty_like_layout,
    _gemm_tiles,
    _geometry,
    _needs_int64,
    _pixel_vec,
    _pointwise,
    _precision,
    _pw_gemm,
    _row,
    _staged,
)
from agent.providers.builtin.kernels.runtime import _INTERPRET, _OP, _cdiv, _num_sms


# ---- emitted: backward ----
import functools  # noqa: F401  (the inlined _num_sms uses it)

# The 1x1 weight gradient (`_pw_weight_kernel`): its tiles (BLOCK_I, BLOCK_J, BLOCK_K, warps,
# stages), None for `_pw_weight_tiles`' choice by shape (on the H200 within a few us of the best
# of 9 forced tiles on every suite case); how many programs per SM its pixel splits aim for (1
# or 2: within 8% either way, 2 better on the [32,1024,14,14] pair); whether it also sums
# grad_bias ([32,1536,14,14] -> 384: 100.7 us with it, 137.6 with the separate bias kernels)
_PW_WEIGHT_TILES = None
_PW_WEIGHT_WAVES = 2
_PW_WEIGHT_BIAS = True


# inline: _num_sms


def _splits(tiles, P, block, device, waves=2):
    """How many programs share the pixel axis of one output tile: enough for `waves` programs
    per SM."""
    if _INTERPRET or device.type != "cuda":
        return 2 if P > 2 * block else 1  # exercise the split path on small cases too
    index = device.index if device.index is not None else torch.cuda.current_device()
    want = _cdiv(waves * _num_sms(index), max(tiles, 1))
    return max(1, min(want, P // (4 * block), 128))


def _split_range(P, splits, block):
    """(pixels per split, rounded to whole blocks; number of non-empty splits)."""
    per = _cdiv(_cdiv(max(P, 1), splits), block) * block
    return per, max(1, _cdiv(P, per))


def _weight_tiles(M, N, dtype, device):
    """(BLOCK_M over out channels, BLOCK_N over in channels/taps, BLOCK_K over pixels, warps)."""
    if _INTERPRET:
        return _clamp_pow2(M, 16, 64), _clamp_pow2(N, 16, 64), 64, 4
    half = dtype in (torch.float16, torch.bfloat16)
    bm = _clamp_pow2(M, 16, 128)
    bn = _clamp_pow2(N, 16, 128)
    return bm, bn, 64 if half else 32, 8 if bm * bn >= 128 * 128 else 4


def _bias_tiles(P, OC, T):
    if _INTERPRET:
        return _clamp_pow2(P, 16, 256), _clamp_pow2(OC, 16, 64), 4
    if T:
        return 256, _clamp_pow2(OC, 1, 16), 4
    return 64, _clamp_pow2(OC, 4, 64), 4


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
            if WIDEN:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            if T:
                acc = tl.dot(b, a, acc, input_precision=PREC, out_dtype=acc.dtype)
            else:
                acc = tl.dot(a, b, acc, input_precision=PREC, out_dtype=acc.dtype)
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


# grad_bias summed by the weight-gradient GEMM kernel from the grad_output tiles it loads anyway
# (two launches fewer: the bias kernel and its split sum); a knob for knob_sweep, unmeasured, off.
# Its sums go through `_row_sums_by_dot` (register sums raced with the dot in the 1x1 kernel);
# this kernel's bias path has not run on a GPU since
_BIAS_IN_WEIGHT = False


def _partials(out, splits):
    """Where split programs write: an fp32 workspace of `splits` slices, or `out` itself."""
    if splits == 1:
        return out
    return torch.empty((splits * out.numel(),), dtype=torch.float32, device=out.device)


def _finish_splits(ws, out, splits, taps=1, out2=None):
    """Sum the fp32 partials of `splits` programs into `out` (contiguous), in a fixed order
    (`taps` > 1: the partials are tap-major, see _sum_splits_kernel); with `out2`, each split's
    partials of out2 follow those of out."""
    # enough programs to have many loads in flight (1024-wide blocks over a [256, 64] weight
    # gradient's 128 splits: 16 programs, 20 us on the H200)
    n = out.numel() + (out2.numel() if out2 is not None else 0)
    block = _clamp_pow2(_cdiv(n, 256), 64, 1024)
    _sum_splits_kernel[(_cdiv(n, block),)](ws, out, out if out2 is None else out2, n,
                                           out.numel(), splits, taps, BLOCK=block)


@triton.jit
def _pw_weight_kernel(
    g_ptr, x_ptr, out_ptr, gb_ptr, I, J, HWV, PB, NB, B_PER, NW, WS,
    VEC: tl.constexpr, SPLIT: tl.constexpr, BIAS: tl.constexpr, WIDEN: tl.constexpr,
    PREC: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_J: tl.constexpr, BLOCK_K: tl.constexpr,
):
    """gw[i, j] = sum over images n and pixels p of g[n, i, p] * x[n, j, p] (1x1 weight
    gradient of contiguous NCHW g [N, I, HW] and x [N, J, HW], HW = HWV * VEC), over this
    program's blocks of BLOCK_K pixels: blocks are numbered image by image (PB per image, NB in
    all) and split s sums blocks [s * B_PER, (s + 1) * B_PER). SPLIT: fp32 partials go to
    out_ptr[split * WS + index], grad_bias's (BIAS: the first column tile also sums g's rows)
    after the weight's NW."""
    HW = HWV * VEC
    num_j = tl.cdiv(J, BLOCK_J)
    pid_i = tl.program_id(0) // num_j
    pid_j = tl.program_id(0) % num_j
    split = tl.program_id(1)
    ri = pid_i * BLOCK_I + tl.arange(0, BLOCK_I)
    rj = pid_j * BLOCK_J + tl.arange(0, BLOCK_J)
    rk = tl.arange(0, BLOCK_K)
    g_rows = (ri % I)[:, None] * HW  # wrapped rows read valid memory; masked at the store
    x_rows = (rj % J)[:, None] * HW
    b_end = tl.minimum(split * B_PER + B_PER, NB)
    acc = tl.zeros((BLOCK_I, BLOCK_J), dtype=tl.float32)
    bacc = tl.zeros((BLOCK_I, 16), dtype=tl.float32)
    for blk in range(split * B_PER, b_end):
        n = (blk // PB).to(tl.int64)
        p = (blk % PB) * BLOCK_K + rk
        pin = (p < HW)[None, :]
        a = tl.load(g_ptr + n * I * HW + g_rows + p[None, :], mask=pin, other=0.0)
        # x's tile is loaded [columns, pixels] (pixel-major, as in memory); the dot wants it
        # [pixels, columns]
        b = tl.trans(tl.load(x_ptr + n * J * HW + x_rows + p[None, :], mask=pin, other=0.0))
        if WIDEN:
            a = a.to(tl.float32)
            b = b.to(tl.float32)
        acc = tl.dot(a, b, acc, input_precision=PREC, out_dtype=acc.dtype)
        if BIAS:
            bacc = _row_sums_by_dot(a, bacc, WIDEN)
    offs = ri[:, None] * J + rj[None, :]
    mask = (ri < I)[:, None] & (rj < J)[None, :]
    if BIAS:
        bsum = tl.max(bacc, axis=1)  # its 16 columns are equal
        bmask = ri < tl.where(pid_j == 0, I, 0)  # one column tile stores them
        if SPLIT:
            tl.store(out_ptr + split.to(tl.int64) * WS + NW + ri, bsum, mask=bmask)
        else:
            tl.store(gb_ptr + ri, bsum.to(gb_ptr.dtype.element_ty), mask=bmask)
    if SPLIT:
        tl.store(out_ptr + split.to(tl.int64) * WS + offs, acc, mask=mask)
    else:
        tl.store(out_ptr + offs, acc.to(out_ptr.dtype.element_ty), mask=mask)


def _pw_weight_tiles(I, J, hw, dtype, device):
    """(BLOCK_I, BLOCK_J, BLOCK_K over pixels, warps, stages) of the 1x1 weight gradient."""
    if _PW_WEIGHT_TILES is not None and not _INTERPRET:
        return _PW_WEIGHT_TILES
    bi, bj, bk, warps = _weight_tiles(I, J, dtype, device)
    if bk == 64 and (_cdiv(hw, 64) * 64 - hw) * 8 > hw:
        bk = 32  # the last block of each image's pixels would be mostly padding
    return bi, bj, bk, warps, 3


def _pw_grad_weight(go, x, w, want_bias):
    """(grad_weight, grad_bias or None) of a 1x1 convolution on contiguous NCHW tensors (see
    `_pointwise`): a GEMM whose K axis is every image's pixels, split over programs when the
    weight's tiles alone cannot fill the GPU; grad_bias summed on the way."""
    N, I, H, W = go.shape
    J = x.shape[1]
    hw = H * W
    vec = _pixel_vec(hw)
    gw = torch.empty(w.shape, dtype=w.dtype, device=w.device)
    if gw.numel() == 0:
        return gw, None  # grad_bias, if wanted, from the bias kernel
    gb = torch.empty((I,), dtype=go.dtype, device=go.device) if want_bias else None
    bi, bj, bk, warps, stages = _pw_weight_tiles(I, J, hw, x.dtype, x.device)
    PB = _cdiv(hw, bk)
    tiles = _cdiv(I, bi) * _cdiv(J, bj)
    splits = _splits(tiles, N * PB * bk, bk, x.device, _PW_WEIGHT_WAVES)
    per, splits = _split_range(N * PB, splits, 1)
    NW = gw.numel()
    WS = NW + (I if want_bias else 0)
    out = gw if splits == 1 else torch.empty((splits * WS,), dtype=torch.float32, device=gw.device)
    _pw_weight_kernel[(tiles, splits)](
        go, x, out, gb if gb is not None else gw, I, J, hw // vec, PB, N * PB, per, NW, WS,
        VEC=vec, SPLIT=splits > 1, BIAS=want_bias, WIDEN=_INTERPRET,
        PREC=_precision(x.dtype, x.device), BLOCK_I=bi, BLOCK_J=bj, BLOCK_K=bk,
        num_warps=warps, num_stages=stages)
    if splits > 1:
        _finish_splits(out, gw, splits, 1, gb)
    return gw, gb


def _grad_input(go, x, w, stride, padding, dilation, G, idx64):
    N, C, H, W = x.shape
    OC, CG, KH, KW = w.shape
    OCG = OC // G
    OH, OW = go.shape[2], go.shape[3]
    gi = _empty_like_layout((N, C, H, W), x, x.dtype)
    if gi.numel() == 0:
        return gi
    M = N * H * W
    T = go.stride(1) != 1  # pixels are grad_output's contiguous axis (NCHW)
    geometry = dict(
        sgn=go.stride(0), sgc=go.stride(1), sgh=go.stride(2), sgw=go.stride(3),
        swo=w.stride(0), swh=w.stride(2), sww=w.stride(3),
        sin=gi.stride(0), sic=gi.stride(1), sih=gi.stride(2), siw=gi.stride(3),
        str_h=stride[0], str_w=stride[1], pad_h=padding[0], pad_w=padding[1],
        dil_h=dilation[0], dil_w=dilation[1], T=T, IDX64=idx64,
    )
    if CG == 1 and OCG <= 4:
        bp, bc, warps = _direct_tiles(M, C, T)
        _bwd_input_direct_kernel[(_cdiv(M, bp), _cdiv(C, bc))](
            go, w, gi, M, H * W, W, OH, OW, C, OCG, KW, KH * KW, **geometry,
            BLOCK_P=bp, BLOCK_C=bc, num_warps=warps)
        return gi
    if KH * KW > 1 and w.stride(1) != 1:
        # tiles walk input channels: a channels-innermost weight copy keeps loads coalesced
        w = w.contiguous(memory_format=torch.channels_last)
        geometry.update(swo=w.stride(0), swh=w.stride(2), sww=w.stride(3))
    bm, bn, bk, warps, stages = _gemm_tiles(M, CG, OCG, x.dtype, x.device)
    _bwd_input_kernel[(_cdiv(M, bm) * _cdiv(CG, bn), G)](
        go, w, gi, M, H * W, W, OH, OW, CG, OCG, KW, KH * KW, swc=w.stride(1), **geometry,
        EVEN_K=OCG % bk == 0, WIDEN=_INTERPRET, PREC=_precision(x.dtype, x.device),
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages)
    return gi


def _grad_weight(go, x, w, stride, padding, dilation, G, idx64, want_bias=False):
    """(grad_weight, grad_bias or None): with want_bias the GEMM kernel also sums grad_bias
    (`_BIAS_IN_WEIGHT`); the depthwise kernels leave it to `_grad_bias`."""
    N, C, H, W = x.shape
    OC, CG, KH, KW = w.shape
    OCG = OC // G
    OH, OW = go.shape[2], go.shape[3]
    gw = torch.empty((OC, CG, KH, KW), dtype=w.dtype, device=w.device)
    gb = None
    if gw.numel() == 0:
        return gw, gb
    P = N * OH * OW
    NW = gw.numel()
    geometry = dict(
        sgn=go.stride(0), sgc=go.stride(1), sgh=go.stride(2), sgw=go.stride(3),
        sxn=x.stride(0), sxc=x.stride(1), sxh=x.stride(2), sxw=x.stride(3),
        str_h=stride[0], str_w=stride[1], pad_h=padding[0], pad_w=padding[1],
        dil_h=dilation[0], dil_w=dilation[1], IDX64=idx64,
    )
    if CG == 1 and OCG <= 4:
        T = go.stride(1) != 1
        bp, bc, warps = _direct_tiles(P, OC, T)
        splits = _splits(_cdiv(OC, bc) * KH * KW, P, bp, x.device)
        per, splits = _split_range(P, splits, bp)
        out = _partials(gw, splits)
        taps = KH * KW
        _bwd_weight_direct_kernel[(_cdiv(OC, bc), KH * KW, splits)](
            go, x, out, P, per, OH * OW, OW, H, W, OC, OCG, NW, KW, KH * KW, **geometry,
            SPLIT=splits > 1, T=T, BLOCK_P=bp, BLOCK_C=bc, num_warps=warps)
    else:
        flat = CG < 16 and KH * KW > 1
        NJ = CG * KH * KW if flat else CG
        R = 1 if flat else KH * KW
        bm, bn, bk, warps = _weight_tiles(OCG, NJ, x.dtype, x.device)
        tiles = _cdiv(OCG, bm) * _cdiv(NJ, bn)
        splits = _splits(tiles * G * R, P, bk, x.device)
        per, splits = _split_range(P, splits, bk)
        if want_bias:
            gb = torch.empty((OC,), dtype=go.dtype, device=go.device)
        WS = NW + (OC if want_bias else 0)  # each split's partials: the weight's, then the bias's
        out = gw if splits == 1 else torch.empty((splits * WS,), dtype=torch.float32,
                                                 device=gw.device)
        taps = R
        _bwd_weight_kernel[(tiles, G * R, splits)](
            go, x, out, gw if gb is None else gb, P, per, OH * OW, OW, H, W, CG, OCG, NW, WS, KW,
            KH * KW, NJ, **geometry, FLAT=flat, SPLIT=splits > 1, BIAS=want_bias,
            WIDEN=_INTERPRET, PREC=_precision(x.dtype, x.device), BLOCK_M=bm, BLOCK_N=bn,
            BLOCK_K=bk, num_warps=warps, num_stages=3)
    if splits > 1:
        _finish_splits(out, gw, splits, taps, gb)
    return gw, gb


def _grad_bias(go, idx64):
    N, OC, OH, OW = go.shape
    gb = torch.empty((OC,), dtype=go.dtype, device=go.device)
    if OC == 0:
        return gb
    P = N * OH * OW
    T = go.stride(1) != 1
    bp, bc, warps = _bias_tiles(P, OC, T)
    splits = _splits(_cdiv(OC, bc), P, bp, go.device)
    per, splits = _split_range(P, splits, bp)
    out = _partials(gb, splits)
    _bwd_bias_kernel[(_cdiv(OC, bc), splits)](
        go, out, P, per, OH * OW, OW, OC, go.stride(0), go.stride(1), go.stride(2), go.stride(3),
        SPLIT=splits > 1, T=T, IDX64=idx64, BLOCK_P=bp, BLOCK_C=bc, num_warps=warps)
    if splits > 1:
        _finish_splits(out, gb, splits)
    return gb


def _pointwise_grads(go, x, w, mask, idx64):
    """(grad_input, grad_weight, grad_bias) of a 1x1 convolution on contiguous NCHW tensors: the
    per-image GEMMs, read in place (see `_pointwise`)."""
    gi = gw = gb = None
    if mask[0]:
        gi = _pw_gemm(w, w.stride(1), w.stride(0), go, None, torch.empty_like(x))
    if mask[1]:
        gw, gb = _pw_grad_weight(go, x, w, want_bias=mask[2] and _PW_WEIGHT_BIAS)
    if mask[2] and gb is None:
        gb = _grad_bias(go, idx64)
    return gi, gw, gb


def _implicit_gemm_grads(go, x, w, stride, padding, dilation, G, mask, idx64):
    """(grad_input, grad_weight, grad_bias) through the implicit-GEMM (or depthwise) kernels."""
    gs = go
    if not (w.shape[1] == 1 and w.shape[0] // G <= 4) and (mask[0] or mask[1]):
        gs = _staged(go)  # GEMM kernels (not depthwise): channels_last operands when the knob says so
    gi = _grad_input(gs, x, w, stride, padding, dilation, G, idx64) if mask[0] else None
    gw = gb = None
    if mask[1]:
        flat = w.shape[1] < 16 and w.shape[2] * w.shape[3] > 1  # K over (c, kh, kw): x in place
        xs = _staged(x) if gs is not go and not flat else x
        gw, gb = _grad_weight(gs, xs, w, stride, padding, dilation, G, idx64,
                              want_bias=mask[2] and _BIAS_IN_WEIGHT)
    if mask[2] and gb is None:
        gb = _grad_bias(gs, idx64)  # staged: loads along channels
    return gi, gw, gb


def _op(grad_output, input, weight, bias_sizes, stride, padding, dilation, transposed,
        output_padding, groups, output_mask):
    x, w, one_d, stride, padding, dilation, G, (OH, OW) = _geometry(
        input, weight, stride, padding, dilation, transposed, groups, "convolution_backward"
    )
    go = grad_output.unsqueeze(2) if one_d and grad_output.dim() == 3 else grad_output
    N, OC = x.shape[0], w.shape[0]
    if go.dim() != 4 or tuple(go.shape) != (N, OC, OH, OW):
        raise RuntimeError(
            f"{_OP}: expected grad_output of shape {(N, OC, OH, OW)}, "
            f"got {tuple(grad_output.shape)}"
        )
    if go.dtype != x.dtype:
        raise RuntimeError(f"{_OP}: grad_output type ({go.dtype}) should be {x.dtype}")
    mask = [bool(v) for v in output_mask]
    if len(mask) != 3:
        raise RuntimeError(f"{_OP}: output_mask must have 3 entries, got {output_mask}")
    idx64 = _needs_int64(go, x, w)
    if _pointwise(w, stride, padding, G, go, x):
        gi, gw, gb = _pointwise_grads(go, x, w, mask, idx64)
    else:
        gi, gw, gb = _implicit_gemm_grads(go, x, w, stride, padding, dilation, G, mask, idx64)
    if one_d:
        gi = gi.squeeze(2) if gi is not None else None
        gw = gw.squeeze(2) if gw is not None else None
    return gi, gw, gb
