"""Convolution backward: the 1x1 weight-gradient knobs and split helpers, then (after
conv_backward_kernels.py) the 1x1 weight-gradient kernel and the plans for grad_input,
grad_weight and grad_bias."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.conv_common import _clamp_pow2, _direct_tiles
from agent.providers.builtin.kernels.conv_common import _empty_like_layout, _gemm_tiles, _geometry
from agent.providers.builtin.kernels.conv_common import _needs_int64, _precision, _staged
from agent.providers.builtin.kernels.conv_pointwise import _pixel_vec, _pointwise, _pw_gemm
from agent.providers.builtin.kernels.runtime import _INTERPRET, _OP, _cdiv, _num_sms
from agent.providers.builtin.kernels.conv_backward_kernels import _bwd_bias_kernel
from agent.providers.builtin.kernels.conv_backward_kernels import _bwd_input_direct_kernel
from agent.providers.builtin.kernels.conv_backward_kernels import _bwd_input_kernel
from agent.providers.builtin.kernels.conv_backward_kernels import _bwd_weight_direct_kernel
from agent.providers.builtin.kernels.conv_backward_kernels import _bwd_weight_kernel
from agent.providers.builtin.kernels.conv_backward_kernels import _row_sums_by_dot
from agent.providers.builtin.kernels.conv_backward_kernels import _sum_splits_kernel


# ---- emitted: knobs ----
import functools  # noqa: F401  (the inlined _num_sms uses it)

# The 1x1 weight gradient (`_pw_weight_kernel`): its tiles (BLOCK_I, BLOCK_J, BLOCK_K, warps,
# stages), None for `_pw_weight_tiles`' choice by shape; how many programs per SM its pixel
# splits aim for (1 or 2); whether it also sums grad_bias (one launch instead of two)
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


# ---- emitted: plans ----


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
