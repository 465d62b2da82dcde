"""Matrix product kernels (mm, addmm, bmm, split-K): the text the builtin writer copies into the
files it emits.
"""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _cdiv, _num_sms, _pdl_enter, _pdl_launch
from agent.providers.builtin.kernels.runtime import _pdl_ok, _pow2


# ---- emitted: main ----
import functools
import os

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CONSERVATIVE = False  # variant >= 1: 64x64 tiles, no split-K


# inline: _cdiv, _pow2, _num_sms


@triton.jit
def _tile_origin(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                 GROUP_M: tl.constexpr):
    """(first row, first column) of output tile `tile`, GROUP_M row tiles at a time (L2 reuse)."""
    num_m = tl.cdiv(M, BLOCK_M)
    per_group = GROUP_M * tl.cdiv(N, BLOCK_N)
    first_m = (tile // per_group) * GROUP_M
    group_m = tl.minimum(num_m - first_m, GROUP_M)
    return ((first_m + (tile % per_group) % group_m) * BLOCK_M,
            ((tile % per_group) // group_m) * BLOCK_N)


@triton.jit
def _mm_kernel(a_ptr, b_ptr, c_ptr, bias_ptr, ws_ptr, M, N, K, K_PER,
               s_ab, s_am, s_ak, s_bb, s_bk, s_bn, s_cb, s_cm, s_cn, s_xb, s_xm, s_xn,
               alpha: tl.float64, beta: tl.float64,
               HAS_BIAS: tl.constexpr, SCALE: tl.constexpr, SPLIT: tl.constexpr,
               EVEN_K: tl.constexpr, WIDEN: tl.constexpr, PREC: tl.constexpr, ACC: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr,
               GROUP_M: tl.constexpr, PDL_NEXT: tl.constexpr):
    _pdl_enter(False, PDL_NEXT)
    pid = tl.program_id(0)
    batch = tl.program_id(1).to(tl.int64)
    pid_k = tl.program_id(2)
    om, on = _tile_origin(pid, M, N, BLOCK_M, BLOCK_N, GROUP_M)
    rm = om + tl.arange(0, BLOCK_M)
    rn = on + tl.arange(0, BLOCK_N)
    am = (rm % M).to(tl.int64)
    bn = (rn % N).to(tl.int64)
    k_start = pid_k * K_PER
    rk = k_start + tl.arange(0, BLOCK_K)
    a_ptrs = a_ptr + batch * s_ab + am[:, None] * s_am + rk[None, :].to(tl.int64) * s_ak
    b_ptrs = b_ptr + batch * s_bb + rk[:, None].to(tl.int64) * s_bk + bn[None, :] * s_bn
    k_end = tl.minimum(k_start + K_PER, K)
    acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=ACC)
    for k0 in range(k_start, k_end, BLOCK_K):
        if EVEN_K:
            a = tl.load(a_ptrs)
            b = tl.load(b_ptrs)
        else:
            kk = k0 + tl.arange(0, BLOCK_K)
            a = tl.load(a_ptrs, mask=kk[None, :] < k_end, other=0.0)
            b = tl.load(b_ptrs, mask=kk[:, None] < k_end, other=0.0)
        if WIDEN:
            a = a.to(ACC)
            b = b.to(ACC)
        acc = tl.dot(a, b, acc, input_precision=PREC, out_dtype=acc.dtype)
        a_ptrs += BLOCK_K * s_ak
        b_ptrs += BLOCK_K * s_bk
    mask = (rm[:, None] < M) & (rn[None, :] < N)
    if SPLIT:
        ws = ws_ptr + (pid_k * tl.num_programs(1) + batch) * M * N
        tl.store(ws + rm[:, None].to(tl.int64) * N + rn[None, :], acc, mask=mask)
    else:
        if SCALE:
            acc = acc * tl.full([1, 1], alpha, ACC)  # f64 argument: exact for f64 results
        if HAS_BIAS:
            bias = tl.load(bias_ptr + batch * s_xb + rm[:, None].to(tl.int64) * s_xm + rn[None, :] * s_xn,
                           mask=mask, other=0.0)
            acc = acc + tl.full([1, 1], beta, ACC) * bias.to(ACC)
        c_ptrs = c_ptr + batch * s_cb + rm[:, None].to(tl.int64) * s_cm + rn[None, :] * s_cn
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


@triton.jit
def _splitk_reduce(ws_ptr, c_ptr, bias_ptr, M, N, BATCH, S, s_cb, s_cm, s_cn, s_xb, s_xm, s_xn,
                   alpha: tl.float64, beta: tl.float64, HAS_BIAS: tl.constexpr, SCALE: tl.constexpr,
                   BLOCK: tl.constexpr, PDL_WAIT: tl.constexpr):
    _pdl_enter(PDL_WAIT, False)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    total = BATCH * M * N
    ok = offs < total
    acc = tl.zeros([BLOCK], dtype=tl.float32)
    ptrs = ws_ptr + offs
    for _ in range(0, S):
        acc += tl.load(ptrs, mask=ok, other=0.0)
        ptrs += total  # pointer steps: no int32 overflow of s * total
    batch = offs // (M * N)
    m = (offs // N) % M
    n = offs % N
    if SCALE:
        acc = acc * tl.full([1], alpha, tl.float32)
    if HAS_BIAS:
        bias = tl.load(bias_ptr + batch * s_xb + m * s_xm + n * s_xn, mask=ok, other=0.0)
        acc = acc + tl.full([1], beta, tl.float32) * bias.to(tl.float32)
    tl.store(c_ptr + batch * s_cb + m * s_cm + n * s_cn, acc.to(c_ptr.dtype.element_ty), mask=ok)


# Tile choice on the GPU (module constants: benchmarks/knob_sweep.py re-measures them).
# Tiles are (BLOCK_M, BLOCK_N, num_warps, num_stages);
# BLOCK_K is at most _HALF_BLOCK_K (fp16/bf16), _F32_BLOCK_K (fp32) or 32 (fp64). Half precision:
# - a problem of at least _HALF_MANY_WAVES waves of _HALF_BIG tiles takes those (the largest
#   tile: the least operand traffic per flop, and the tail wave is a small part);
# - else the largest of _HALF_ONE_WAVE whose tile count fills between _HALF_FILL of the SMs and
#   all of them, in one wave (a 128x256 tile is swapped for 256x128 when B is K-contiguous, as an
#   nn.Linear weight is): more, smaller tiles beat fewer, larger ones there;
# - else the first of _HALF_TILES that fills every SM, or the last (split over K when few tiles
#   meet a long K).
# fp32 picks from _F32_TILES the same way (one wave, else the first that fills every SM) and
# multiplies with `tl.dot(input_precision=_F32_PRECISION)` unless allow_tf32 is set. "tf32x3"
# is three TF32 tensor-core products per step (operands split into TF32 high and low parts):
# as accurate as eager's fp32 GEMM on the suite and faster; "ieee" (the FMA product) stays where
# A is M-contiguous (_F32_IEEE_A_COLUMN_MAJOR), which the tensor-core path loads slowly.
_HALF_TILES = ((128, 256, 8, 3), (128, 128, 8, 4), (64, 128, 4, 4), (64, 64, 4, 4))
_HALF_BIG = (256, 128, 8, 3)
_HALF_MANY_WAVES = 4
_HALF_ONE_WAVE = ((128, 256, 8, 3), (128, 128, 4, 4), (64, 128, 4, 4), (64, 64, 4, 4))
_HALF_FILL = 0.5
_HALF_BLOCK_K = 64
# M * batch <= 16 (decode): (BLOCK_M, widest BLOCK_N, BLOCK_K, warps, stages); BLOCK_N halves
# (down to 32) until the programs cover _GEMV_FILL of the SMs (wide tiles are the fastest)
_GEMV_TILE = (16, 128, 128, 4, 4)
_GEMV_FILL = 0.75
# split-K: the reduction launch as a programmatic dependent of the partial products (sm_90+)
_SPLITK_PDL = True
_F32_TILES = ((128, 128, 8, 3), (64, 128, 4, 3), (64, 64, 4, 3))
_F32_BLOCK_K = 64
_F32_PRECISION = "tf32x3"
_F32_IEEE_A_COLUMN_MAJOR = True


def _fit(M, N, bm, bn):
    """The tile shrunk to the problem (powers of two, at least 16: tl.dot's minimum)."""
    return max(16, min(bm, _pow2(M))), max(16, min(bn, _pow2(N)))


def _tiles(M, N, batch, bm, bn):
    bm, bn = _fit(M, N, bm, bn)
    return _cdiv(M, bm) * _cdiv(N, bn) * batch


_INTERPRET_MAX_TILES = 64  # CPU / interpreter: tiles per call before they widen


@functools.lru_cache(maxsize=4096)
def _config(M, N, K, batch, dtype, device, b_k_contiguous=False):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages, splits) for this problem (cached: calls
    repeat the same shapes, and the wrapper's host time is part of every measured call)."""
    if _INTERPRET or device.type != "cuda":
        bm = max(16, min(32, _pow2(M)))
        bn = max(16, min(32, _pow2(N)))
        bk = max(16, min(32, _pow2(K)))
        # the interpreter pays per program: wider tiles (up to 128) once there are more than
        # _INTERPRET_MAX_TILES of them ([1000, 32] @ [32, 2304] bf16: 2304 programs of 32 x 32
        # took 37 s per call, over the sandbox's 60 s per test on a slow CPU)
        while _cdiv(M, bm) * _cdiv(N, bn) * batch > _INTERPRET_MAX_TILES:
            grow_m, grow_n = bm < min(128, _pow2(M)), bn < min(128, _pow2(N))
            if grow_m and (bm <= bn or not grow_n):
                bm *= 2
            elif grow_n:
                bn *= 2
            else:
                break
        tiles = _cdiv(M, bm) * _cdiv(N, bn) * batch
        splits = 2 if (not _CONSERVATIVE and tiles < 4 and K >= 4 * bk) else 1
        return bm, bn, bk, 4, 1, splits
    half = dtype in (torch.float16, torch.bfloat16)
    index = device.index if device.index is not None else torch.cuda.current_device()
    sms = _num_sms(index)
    bk_max = _HALF_BLOCK_K if half else (_F32_BLOCK_K if dtype == torch.float32 else 32)
    bk = max(16, min(bk_max, _pow2(K)))
    if _CONSERVATIVE:
        return max(16, min(64, _pow2(M))), max(16, min(64, _pow2(N))), bk, 4, 3, 1
    if M * batch <= 16 and N >= 32 * sms // 2:
        # GEMV-like (decode): memory-bound on B; narrow N tiles give every SM a slice of B and
        # long K steps keep loads in flight; one launch (a split-K second launch costs more host
        # time than it saves on the GPU)
        bm, bn, bk_gemv, warps, stages = _GEMV_TILE
        while bn > 32 and _cdiv(N, bn) < _GEMV_FILL * sms:  # wide tiles while they fill the SMs
            bn //= 2
        return bm, bn, max(16, min(bk_gemv, _pow2(K))), warps, stages, 1
    candidates = _HALF_TILES if half else _F32_TILES
    big = _HALF_BIG
    if half and _HALF_MANY_WAVES and _tiles(M, N, batch, big[0], big[1]) >= _HALF_MANY_WAVES * sms:
        return *_fit(M, N, big[0], big[1]), bk, big[2], big[3], 1
    for bm, bn, warps, stages in _HALF_ONE_WAVE if half else _F32_TILES:
        if b_k_contiguous and (bm, bn) == (128, 256):
            bm, bn = 256, 128
        if _HALF_FILL * sms <= _tiles(M, N, batch, bm, bn) <= sms:
            return *_fit(M, N, bm, bn), bk, warps, stages, 1
    for bm, bn, warps, stages in candidates:
        if _tiles(M, N, batch, bm, bn) >= sms:
            return *_fit(M, N, bm, bn), bk, warps, stages, 1
    bm, bn, warps, stages = candidates[-1]
    tiles = _tiles(M, N, batch, bm, bn)
    bm, bn = _fit(M, N, bm, bn)
    splits = 1
    if tiles * 2 <= sms and K >= 1024:  # a second launch only pays for long K on an idle GPU
        splits = max(1, min(_cdiv(sms, tiles), K // (4 * bk), 16))
    return bm, bn, bk, warps, stages, splits


_PLANS = {}  # call geometry -> launch plan (see _plan); bounded


def _batched(t):
    """(B, rows, cols, batch stride, row stride, col stride) of a 2-D or 3-D operand."""
    if t.dim() == 2:
        return (1,) + tuple(t.shape) + (0,) + t.stride()
    return tuple(t.shape) + t.stride()


def _bias_strides(bias, B, M, N):
    """Strides of `bias` broadcast to [B, M, N] (0 along broadcast dims), without a view."""
    shape = (1,) * (3 - bias.dim()) + tuple(bias.shape)
    stride = (0,) * (3 - bias.dim()) + bias.stride()
    out = []
    for size, st, full in zip(shape, stride, (B, M, N)):
        if size == full and size != 1:
            out.append(st)
        elif size == 1:
            out.append(0)
        else:
            raise RuntimeError(f"addmm: self of shape {tuple(bias.shape)} does not broadcast to {(M, N)}")
    return tuple(out)


def _plan(a, b, bias, scale, has_bias, out_3d):
    """Everything a call of this geometry needs except the tensors themselves (cached: calls
    repeat the same shapes, and the wrapper's host time is part of every measured call)."""
    if not (a.is_floating_point() and b.is_floating_point()):
        raise RuntimeError(f"matmul kernel supports floating point only, got {a.dtype} and {b.dtype}")
    if a.dtype != b.dtype:
        raise RuntimeError(f"expected both matrices to have the same dtype, got {a.dtype} and {b.dtype}")
    B, M, K, sab, sam, sak = _batched(a)
    Bb, Kb, N, sbb, sbk, sbn = _batched(b)
    if Bb != B or Kb != K:
        raise RuntimeError(f"mat1 and mat2 shapes cannot be multiplied ({M}x{K} and {Kb}x{N})")
    out_shape = (B, M, N) if out_3d else (M, N)
    cstrides = (M * N, N, 1)
    xstrides = _bias_strides(bias, B, M, N) if has_bias else cstrides
    device = a.device
    if a.dtype == torch.float32 and device.type == "cuda" and torch.backends.cuda.matmul.allow_tf32:
        prec = "tf32"
    elif a.dtype == torch.float32:
        prec = _F32_PRECISION
        if _F32_IEEE_A_COLUMN_MAJOR and sak != 1 and sam == 1 and M > 1:
            prec = "ieee"
    else:
        prec = "ieee"
    bm, bn, bk, warps, stages, splits = _config(M, N, K, B, a.dtype, device, sbk == 1 and N > 1)
    if a.dtype == torch.float64:
        splits = 1  # the split-K workspace is fp32
    k_per = _cdiv(_cdiv(max(K, 1), splits), bk) * bk
    splits = max(1, _cdiv(K, k_per))
    even_k = K % bk == 0 and k_per % bk == 0
    grid = (_cdiv(M, bm) * _cdiv(N, bn), B, splits)
    ints = (M, N, K, k_per, sab, sam, sak, sbb, sbk, sbn) + cstrides + xstrides
    meta = dict(
        HAS_BIAS=has_bias, SCALE=scale, SPLIT=splits > 1, EVEN_K=even_k,
        WIDEN=_INTERPRET, PREC=prec, ACC=tl.float64 if a.dtype == torch.float64 else tl.float32,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, GROUP_M=8, num_warps=warps, num_stages=stages,
        PDL_NEXT=splits > 1 and _SPLITK_PDL and _pdl_ok(device))
    reduce = None
    if splits > 1:
        block = 1024
        reduce = ((_cdiv(B * M * N, block),), (M, N, B, splits) + cstrides + xstrides,
                  dict(HAS_BIAS=has_bias, SCALE=scale, BLOCK=block))
    return out_shape, B * M * N, grid, ints, meta, splits, reduce


def _matmul(a, b, bias, alpha, beta, out_3d):
    """a: [B, M, K] or [M, K], b: [B, K, N] or [K, N] (any strides, read in place); bias
    broadcastable to [B, M, N] or None. Returns [B, M, N] when out_3d else [M, N]."""
    has_bias = bias is not None and beta != 0
    scale = alpha != 1
    key = (a.shape, a.stride(), a.dtype, b.shape, b.stride(), b.dtype, a.device, out_3d, scale,
           (bias.shape, bias.stride()) if has_bias else None,
           torch.backends.cuda.matmul.allow_tf32)
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) > 1024:
            _PLANS.clear()
        plan = _PLANS[key] = _plan(a, b, bias, scale, has_bias, out_3d)
    out_shape, numel, grid, ints, meta, splits, reduce = plan
    c = torch.empty(out_shape, dtype=a.dtype, device=a.device)
    if numel == 0:
        return c
    x = bias if has_bias else c
    ws = torch.empty((splits * numel,), dtype=torch.float32, device=a.device) if splits > 1 else c
    _mm_kernel[grid](a, b, c, x, ws, *ints, float(alpha), float(beta), **meta)
    if reduce is not None:
        rgrid, rints, rmeta = reduce
        _splitk_reduce[rgrid](ws, c, x, *rints, float(alpha), float(beta), **rmeta,
                              **_pdl_launch(meta["PDL_NEXT"]))
    return c
