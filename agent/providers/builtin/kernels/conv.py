"""Convolution forward: the implicit-GEMM kernel (tensor cores, autotuned on a GPU), the direct
kernel for depthwise convolutions, and the plan that picks one."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _OP, _cdiv, _pow2
from agent.providers.builtin.kernels.conv_common import _INTERPRET, _col, _direct_tiles
from agent.providers.builtin.kernels.conv_common import _empty_like_layout, _gemm_tiles, _geometry
from agent.providers.builtin.kernels.conv_common import _launch_tuned, _needs_int64, _precision
from agent.providers.builtin.kernels.conv_common import _quick_bench, _row, _staged, _tuned
from agent.providers.builtin.kernels.conv_pointwise import _pointwise, _pw_gemm
from agent.providers.builtin.kernels.conv_common import _mma


# ---- emitted: forward ----
def _gemm_prune(configs, named_args, **kwargs):
    """Fit the configs to the problem: drop tiles narrower than min(64, N), clamp BLOCK_M/N/K
    to the problem (powers of two, at least 16) and drop duplicates. Never empty: the widest
    config always stays."""
    args = {**named_args, **kwargs}
    m, n, k = (max(16, _pow2(args[name])) for name in ("TILE_M", "TILE_N", "TILE_K"))
    kept, seen = [], set()
    for c in configs:
        if c.kwargs["BLOCK_N"] < min(64, n):
            continue
        bm, bn, bk = min(c.kwargs["BLOCK_M"], m), min(c.kwargs["BLOCK_N"], n), min(c.kwargs["BLOCK_K"], k)
        warps = c.num_warps if bm * bn >= 128 * 64 else 4  # 8 warps only on large tiles
        if (bm, bn, bk, warps, c.num_stages) not in seen:
            seen.add((bm, bn, bk, warps, c.num_stages))
            kept.append(triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk},
                                      num_warps=warps, num_stages=c.num_stages))
    return kept


def _gemm_configs(half):
    """Tile configs for an H200 (sm_90): (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages); narrow
    BLOCK_N ones serve the many convolutions with few output channels per group."""
    if half:
        shapes = [(128, 256, 64, 8, 3), (128, 128, 64, 8, 3), (128, 64, 64, 4, 4),
                  (64, 128, 64, 4, 4), (64, 64, 32, 4, 4), (128, 32, 64, 4, 4),
                  (128, 16, 64, 4, 4)]
    else:
        shapes = [(128, 128, 32, 8, 3), (128, 64, 32, 4, 3), (64, 128, 32, 4, 3),
                  (64, 64, 32, 4, 3), (128, 32, 32, 4, 3), (128, 16, 32, 4, 3)]
    return [triton.Config({"BLOCK_M": bm, "BLOCK_N": bn, "BLOCK_K": bk}, num_warps=w, num_stages=s)
            for bm, bn, bk, w, s in shapes]


@triton.jit
def _conv_gemm_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    M, OHW, OW, H, W, CG, OCG, KW, KHW, TILE_M, TILE_N, TILE_K,
    sxn, sxc, sxh, sxw, swo, swc, swh, sww, sb, syn, syc, syh, syw,
    str_h, str_w, pad_h, pad_w, dil_h, dil_w,
    HAS_BIAS: tl.constexpr, FLAT: tl.constexpr, T: tl.constexpr, EVEN_C: tl.constexpr,
    WIDEN: tl.constexpr, PREC: tl.constexpr, IDX64: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
):
    """y[n, g*OCG + j, oh, ow] = bias + sum over (c, kh, kw) of x[n, g*CG + c, ih, iw] * w[...].

    Not T: acc[pixels, out channels] = x tile [BLOCK_M, BLOCK_K] @ w tile [BLOCK_K, BLOCK_N].
    T (pixels contiguous, NCHW): acc[out channels, pixels] = w tile [BLOCK_N, BLOCK_K] @ x tile
    [BLOCK_K, BLOCK_M], so loads and stores run along the contiguous pixel axis.
    """
    pid = tl.program_id(0)
    g = tl.program_id(1)
    num_m = tl.cdiv(M, BLOCK_M)
    num_n = tl.cdiv(OCG, BLOCK_N)
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
    m = rm % M  # wrapped rows read valid memory; their results are masked at the store
    img = m // OHW
    pix = m % OHW
    oh = pix // OW
    ow = pix % OW
    oc = g * OCG + rn % OCG
    ih0 = oh * str_h - pad_h
    iw0 = ow * str_w - pad_w
    x_row = img * sxn + (g * CG) * sxc
    w_col = oc * swo
    if T:
        acc = tl.zeros((BLOCK_N, BLOCK_M), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if FLAT:
        # few channels: K runs over (c, kh, kw) flattened, so tiles are not mostly padding
        K = CG * KHW
        for k0 in range(0, K, BLOCK_K):
            kk = k0 + rk
            kin = kk < K
            c = kk // KHW
            r = kk % KHW
            kh = r // KW
            kw = r % KW
            ih = _row(ih0, T) + _col(kh * dil_h, T)
            iw = _row(iw0, T) + _col(kw * dil_w, T)
            ok = _col(kin, T) & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            a = tl.load(x_ptr + _row(x_row, T) + _col(c * sxc, T) + ih * sxh + iw * sxw,
                        mask=ok, other=0.0)
            b = tl.load(w_ptr + _row(c * swc + kh * swh + kw * sww, T) + _col(w_col, T),
                        mask=_row(kin, T), other=0.0)
            acc = _mma(acc, a, b, WIDEN, PREC, T)
    else:
        # many channels: the pixel offsets and padding mask are computed once per (kh, kw)
        for r in range(0, KHW):
            kh = r // KW
            kw = r % KW
            ih = ih0 + kh * dil_h
            iw = iw0 + kw * dil_w
            ok = _row((ih >= 0) & (ih < H) & (iw >= 0) & (iw < W), T)
            a_base = x_ptr + _row(x_row + ih * sxh + iw * sxw, T)
            b_base = w_ptr + kh * swh + kw * sww + _col(w_col, T)
            for c0 in range(0, CG, BLOCK_K):
                cc = c0 + rk
                a_ptrs = a_base + _col(cc * sxc, T)
                b_ptrs = b_base + _row(cc * swc, T)
                if EVEN_C:
                    a = tl.load(a_ptrs, mask=ok, other=0.0)
                    b = tl.load(b_ptrs)
                else:
                    cin = cc < CG
                    a = tl.load(a_ptrs, mask=ok & _col(cin, T), other=0.0)
                    b = tl.load(b_ptrs, mask=_row(cin, T), other=0.0)
                acc = _mma(acc, a, b, WIDEN, PREC, T)
    if HAS_BIAS:
        acc += _col(tl.load(b_ptr + oc * sb).to(tl.float32), T)
    y_ptrs = y_ptr + _row(img * syn + oh * syh + ow * syw, T) + _col(oc * syc, T)
    mask = _row(rm < M, T) & _col(rn < OCG, T)
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _direct_tap(acc, x_img, w_col, kh, kw, ih0, iw0, H, W, sxh, sxw, swh, sww, dil_h, dil_w,
                T: tl.constexpr):
    """acc + one filter tap (kh, kw) of the direct kernel: input pixels (zero outside the image)
    times the tap's weight per channel."""
    ih = ih0 + kh * dil_h
    iw = iw0 + kw * dil_w
    ok = (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
    xv = tl.load(x_img + _row(ih * sxh + iw * sxw, T), mask=_row(ok, T), other=0.0)
    wv = tl.load(w_col + kh * swh + kw * sww)
    return acc + xv.to(tl.float32) * _col(wv.to(tl.float32), T)


@triton.jit
def _conv_direct_kernel(
    x_ptr, w_ptr, b_ptr, y_ptr,
    P, OHW, OW, H, W, OC, OCG, KW, KHW,
    sxn, sxc, sxh, sxw, swo, swh, sww, sb, syn, syc, syh, syw,
    str_h, str_w, pad_h, pad_w, dil_h, dil_w,
    HAS_BIAS: tl.constexpr, T: tl.constexpr, IDX64: tl.constexpr,
    BLOCK_P: tl.constexpr, BLOCK_C: tl.constexpr, KW_C: tl.constexpr, KHW_C: tl.constexpr,
):
    """One input channel per group (depthwise): y[n, oc, oh, ow] = sum over (kh, kw) of
    x[n, oc // OCG, ih, iw] * w[oc, 0, kh, kw], on [pixels x channels] tiles (transposed: T).
    KHW_C > 0 (`_DIRECT_STATIC_TAPS`): the KHW_C taps of a KW_C-wide filter unrolled at compile
    time, so every tap's loads can be in flight at once; else a runtime loop over KHW taps."""
    if IDX64:
        rp = tl.program_id(0).to(tl.int64) * BLOCK_P + tl.arange(0, BLOCK_P)
        rc = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    else:
        rp = tl.program_id(0) * BLOCK_P + tl.arange(0, BLOCK_P)
        rc = tl.program_id(1) * BLOCK_C + tl.arange(0, BLOCK_C)
    p = rp % P
    c = rc % OC
    img = p // OHW
    pix = p % OHW
    oh = pix // OW
    ow = pix % OW
    ih0 = oh * str_h - pad_h
    iw0 = ow * str_w - pad_w
    x_col = _col((c // OCG) * sxc, T)
    w_col = w_ptr + c * swo
    if T:
        acc = tl.zeros((BLOCK_C, BLOCK_P), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_P, BLOCK_C), dtype=tl.float32)
    x_img = x_ptr + _row(img * sxn, T) + x_col
    if KHW_C > 0:
        for r in tl.static_range(KHW_C):
            acc = _direct_tap(acc, x_img, w_col, r // KW_C, r % KW_C, ih0, iw0, H, W, sxh, sxw,
                              swh, sww, dil_h, dil_w, T)
    else:
        for r in range(0, KHW):
            acc = _direct_tap(acc, x_img, w_col, r // KW, r % KW, ih0, iw0, H, W, sxh, sxw,
                              swh, sww, dil_h, dil_w, T)
    if HAS_BIAS:
        acc += _col(tl.load(b_ptr + c * sb).to(tl.float32), T)
    y_ptrs = y_ptr + _row(img * syn + oh * syh + ow * syw, T) + _col(c * syc, T)
    mask = _row(rp < P, T) & _col(rc < OC, T)
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=mask)


_conv_gemm = triton.heuristics({"EVEN_C": lambda a: a["CG"] % a["BLOCK_K"] == 0})(_conv_gemm_kernel)
_GEMM_KEY = ["TILE_M", "TILE_N", "TILE_K", "KHW", "FLAT", "T"]
# (BLOCK_P, BLOCK_C, num_warps): channel-wide tiles suit channels_last, pixel-long ones NCHW
_DIRECT_CONFIGS = [(32, 64, 4), (64, 32, 4), (128, 16, 4), (256, 8, 4), (64, 64, 8)]
# The direct kernel's filter taps are unrolled at compile time up to this many (7x7), else a
# runtime loop; it reads a tap-major weight copy (each tap's channel weights contiguous, one
# small copy per call) instead of gathering them with a stride of KH*KW.
_DIRECT_STATIC_TAPS = 49
_DIRECT_TAP_MAJOR_W = True


if not _INTERPRET:
    _conv_gemm_tuned = {
        half: triton.autotune(configs=_gemm_configs(half), key=_GEMM_KEY, do_bench=_quick_bench,
                              prune_configs_by={"early_config_prune": _gemm_prune})(_conv_gemm)
        for half in (True, False)
    }
    _conv_direct_tuned = triton.autotune(
        configs=[triton.Config({"BLOCK_P": bp, "BLOCK_C": bc}, num_warps=w)
                 for bp, bc, w in _DIRECT_CONFIGS],
        key=["P", "OC", "KHW", "T"], do_bench=_quick_bench,
    )(_conv_direct_kernel)


def _op(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups):
    x, w, one_d, stride, padding, dilation, G, (OH, OW) = _geometry(
        input, weight, stride, padding, dilation, transposed, groups, "convolution"
    )
    N, C, H, W = x.shape
    OC, CG, KH, KW = w.shape
    OCG = OC // G
    if bias is not None:
        if bias.dim() != 1 or bias.shape[0] != OC:
            raise RuntimeError(f"{_OP}: expected bias of shape [{OC}], got {tuple(bias.shape)}")
        if bias.dtype != x.dtype:
            raise RuntimeError(f"{_OP}: bias type ({bias.dtype}) should be {x.dtype}")
    y = _empty_like_layout((N, OC, OH, OW), x, x.dtype)
    if y.numel() == 0:
        return y.squeeze(2) if one_d else y
    if G > 65535:
        raise NotImplementedError(f"{_OP}: more than 65535 groups")
    if _pointwise(w, stride, padding, G, x, y):
        _pw_gemm(w, w.stride(0), w.stride(1), x, bias, y)
        return y.squeeze(2) if one_d else y
    b = bias if bias is not None else y
    M = N * OH * OW
    direct = CG == 1 and OCG <= 4
    flat = not direct and CG < 16 and KH * KW > 1
    if not direct and not flat:  # few channels (K flattened over taps) stay NCHW, as measured
        x = _staged(x)
    T = x.stride(1) != 1  # pixels, not channels, are the input's contiguous axis (NCHW)
    if not direct and not flat and KH * KW > 1 and w.stride(1) != 1:
        # the K loop walks channels: a channels-innermost weight copy keeps its loads coalesced
        w = w.contiguous(memory_format=torch.channels_last)
    if direct and _DIRECT_TAP_MAJOR_W:
        w = w.permute(2, 3, 1, 0).contiguous().permute(3, 2, 0, 1)  # [OC] contiguous per tap
    common = dict(
        sxn=x.stride(0), sxc=x.stride(1), sxh=x.stride(2), sxw=x.stride(3),
        swo=w.stride(0), swh=w.stride(2), sww=w.stride(3), sb=b.stride(0),
        syn=y.stride(0), syc=y.stride(1), syh=y.stride(2), syw=y.stride(3),
        str_h=stride[0], str_w=stride[1], pad_h=padding[0], pad_w=padding[1],
        dil_h=dilation[0], dil_w=dilation[1],
        HAS_BIAS=bias is not None, T=T, IDX64=_needs_int64(x, w, y),
    )
    if direct:
        args = (x, w, b, y, M, OH * OW, OW, H, W, OC, OCG, KW, KH * KW)
        static = KH * KW <= _DIRECT_STATIC_TAPS
        common.update(KW_C=KW if static else 0, KHW_C=KH * KW if static else 0)
        if _tuned(x.device):
            grid = lambda meta: (_cdiv(M, meta["BLOCK_P"]), _cdiv(OC, meta["BLOCK_C"]))
            key = ("direct", x.device, x.dtype, *args[4:], *common.values())
            _launch_tuned(_conv_direct_tuned, _conv_direct_kernel, key, grid, args, common)
        else:
            bp, bc, warps = _direct_tiles(M, OC, T)
            _conv_direct_kernel[(_cdiv(M, bp), _cdiv(OC, bc))](
                *args, **common, BLOCK_P=bp, BLOCK_C=bc, num_warps=warps)
    else:
        tile_k = CG * KH * KW if flat else CG
        args = (x, w, b, y, M, OH * OW, OW, H, W, CG, OCG, KW, KH * KW, M, OCG, tile_k)
        flags = dict(swc=w.stride(1), FLAT=flat, WIDEN=_INTERPRET,
                     PREC=_precision(x.dtype, x.device), GROUP_M=8)
        if _tuned(x.device):
            half = x.dtype != torch.float32
            grid = lambda meta: (
                _cdiv(M, meta["BLOCK_M"]) * _cdiv(OCG, meta["BLOCK_N"]), G)
            key = ("gemm", x.device, x.dtype, *args[4:], *common.values(), *flags.values())
            _launch_tuned(_conv_gemm_tuned[half], _conv_gemm_kernel, key, grid, args,
                          {**common, **flags}, lambda meta: {"EVEN_C": CG % meta["BLOCK_K"] == 0})
        else:
            bm, bn, bk, warps, stages = _gemm_tiles(M, OCG, tile_k, x.dtype, x.device)
            grid = (_cdiv(M, bm) * _cdiv(OCG, bn), G)
            _conv_gemm_kernel[grid](*args, **common, **flags, BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk,
                                    EVEN_C=CG % bk == 0, num_warps=warps, num_stages=stages)
    return y.squeeze(2) if one_d else y
