"""Safe softmax, group norm and weight norm kernels: the text the builtin writer copies into the
files it emits.
"""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.pooling_common import _acc
from agent.providers.builtin.kernels.runtime import _INTERPRET, _cdiv, _num_sms, _pow2
from agent.providers.builtin.kernels.tiles import (
    _CONSERVATIVE,
    _block1,
    _prod,
    _tile_cap,
    _wrap_dim,
)


# ---- emitted: safe_softmax ----


@triton.jit
def _safe_softmax_kernel(x_ptr, out_ptr, ROWS, R, INNER, ACC: tl.constexpr,
                         ONE_PASS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Row r = (o, i) holds elements o * R * INNER + i + k * INNER, k < R."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < ROWS
    base = (rows // INNER) * R * INNER + rows % INNER
    if ONE_PASS:
        cols = tl.arange(0, BLOCK_N)
        m = row_ok[:, None] & (cols[None, :] < R)
        offs = base[:, None] + cols[None, :].to(tl.int64) * INNER
        a = tl.load(x_ptr + offs, mask=m, other=float("-inf")).to(ACC)
        mx = tl.max(a, axis=1)
        safe = tl.where(mx == float("-inf"), 0.0, mx)
        e = tl.exp(a - safe[:, None])
        dead = mx == float("-inf")
        s = tl.where(dead, 1.0, tl.sum(e, axis=1))  # dead rows: no 0/0
        y = tl.where(dead[:, None], 0.0, e / s[:, None])
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)
    else:
        mx = tl.full([BLOCK_M], float("-inf"), ACC)
        s = tl.zeros([BLOCK_M], ACC)
        for c0 in range(0, R, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            m = row_ok[:, None] & (cols[None, :] < R)
            a = tl.load(x_ptr + base[:, None] + cols[None, :].to(tl.int64) * INNER, mask=m,
                        other=float("-inf")).to(ACC)
            new_mx = tl.maximum(mx, tl.max(a, axis=1))
            safe = tl.where(new_mx == float("-inf"), 0.0, new_mx)
            s = s * tl.exp(mx - safe) + tl.sum(tl.exp(a - safe[:, None]), axis=1)
            mx = new_mx
        dead = mx == float("-inf")
        safe = tl.where(dead, 0.0, mx)
        s = tl.where(dead, 1.0, s)
        for c0 in range(0, R, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            m = row_ok[:, None] & (cols[None, :] < R)
            offs = base[:, None] + cols[None, :].to(tl.int64) * INNER
            a = tl.load(x_ptr + offs, mask=m, other=float("-inf")).to(ACC)
            y = tl.where(dead[:, None], 0.0, tl.exp(a - safe[:, None]) / s[:, None])
            tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)


def _safe_softmax(self, dim, dtype=None):
    if not self.is_floating_point():
        raise RuntimeError(f"_safe_softmax: expected a floating point tensor, got {self.dtype}")
    dim = _wrap_dim(dim, self.dim())
    out_dtype = dtype if dtype is not None else self.dtype
    x = self.contiguous()
    out = torch.empty(self.shape, dtype=out_dtype, device=self.device)
    if out.numel() == 0:
        return out
    shape = list(x.shape) if x.dim() else [1]
    red = shape[dim]
    inner = _prod(shape[dim + 1:])
    rows = _prod(shape) // red
    acc = tl.float64 if torch.float64 in (self.dtype, out_dtype) else tl.float32
    cap = _tile_cap()
    one_pass = _pow2(red) <= (256 if _CONSERVATIVE else (4096 if _INTERPRET else 8192))
    block_n = max(2, _pow2(red)) if one_pass else min(cap, 1024)
    block_m = max(1, min(_pow2(rows), cap // block_n))
    if inner > 1:
        block_m = max(1, min(block_m, 64))
    warps = 4 if block_m * block_n <= 1024 else (8 if block_m * block_n <= 4096 else 16)
    _safe_softmax_kernel[(_cdiv(rows, block_m),)](
        x, out, rows, red, inner, ACC=acc, ONE_PASS=one_pass, BLOCK_M=block_m, BLOCK_N=block_n,
        num_warps=warps)
    return out


# ---- emitted: group_norm ----
import functools  # noqa: F401, I001  (the inlined _num_sms uses it)


# Programs to aim for on a GPU (each (sample, group) is split into chunks until there are about
# this many), elements per loop step and warps per program: module constants so that
# benchmarks/knob_sweep.py can re-measure them. One program per group left 32 programs for the
# G=1 cases (12.8 MB at 1/13 of the bandwidth floor on the H200).
_GN_TARGET_PROGRAMS = 8 if _INTERPRET else 1024
_GN_BLOCK = 2048
_GN_WARPS = 8
# Many groups ([4, 512, 31999]: 2048 groups of 64 KB, about two chunks each): 16 warps per program
# (H200: 146 us against 166 with 8), where the G=1 cases lose with 16 (18.8 -> 24.4 us). Tried
# and dropped on the H200: a persistent kernel taking whole groups so
# that the second read hits L2 (301-554 us), and 16-byte-aligned chunk bodies (no gain).
_GN_WARPS_MANY_GROUPS, _GN_MANY_GROUPS = 16, 256
_GN_STAGES = 1  # > 1: Triton pipelines the loops' loads (prefetch into shared memory)
# Whole groups in registers (one launch, x read once): groups of at most _GN_WHOLE_MAX elements
# (_GN_WHOLE_MAX_MULTI when C/G > 1) when there are at least _GN_WHOLE_MIN_GROUPS of them (fewer
# leave SMs idle; the suite's G=1 cases have 32 groups of 25K-200K elements and keep the split
# path). [4, 512, 31999] (2048 groups of 64 KB): the split path reads x twice (145 us on the H200,
# floor 61.5). ptxas for sm_90 at 16 warps: 32768 elements, one channel: 128 registers, no spill;
# 65536 at 32 warps, 32768 with per-element channels (the gathered weight and bias) or in fp64
# spill. Short groups share a program (at most _GN_WHOLE_TILE elements), keeping about
# _GN_WHOLE_PROGRAMS programs. H200 on [4, 512, 31999] f16: 146 us split, 123/128/132 us whole at
# 8/16/32 warps (one program per SM at a time: load, reduce and store do not overlap).
_GN_WHOLE = True
_GN_WHOLE_MAX, _GN_WHOLE_MAX_MULTI = 32768, 16384
_GN_WHOLE_MIN_GROUPS = 256
_GN_WHOLE_WARPS = 8  # upper bound; a program gets at most one warp per 256 elements
_GN_WHOLE_TILE, _GN_WHOLE_PROGRAMS = 4096, 512
# Persistent whole-group kernel (_GN_PIPE; f16/bf16 one-channel groups of at least
# _GN_PIPE_MIN_D elements): about _GN_PIPE_PER_SM programs per SM (_GN_PIPE_CPU_PROGRAMS off a
# GPU), each walking groups pid, pid + P, ... and fetching the NEXT group before it reduces and
# stores the current one, so that a group's DRAM latency hides behind the previous group's work
# (the plain kernel runs one program per SM at a time, ~185 registers at 8 warps: load, reduce
# and store one after the other per wave). Groups are held as 32-bit words (two elements a
# register) and moved as _GN_PIPE_VEC-element chunks (8: 16-byte loads and stores) although
# they start anywhere; _GN_PIPE_WARPS caps warps (one per 256 elements at most). H200 on
# [4, 512, 31999] f16: 122 us without it, 74.6 us (82% of HBM bandwidth) with it at 16 warps,
# 73.2 us with 2 programs per SM (one runs at a time: the second balances the last wave), 75.6
# at 8 warps, 83-86 us with 4-element chunks. Later, Triton 3.6 on the lent
# H200: 16 warps had slipped to 79.9-82.0 us (75-77%) with the same SASS, 8 warps 73.0-74.3 us
# at 1-4 programs per SM; the four other suite cases equal either way.
_GN_PIPE = True
_GN_PIPE_PER_SM = 2
_GN_PIPE_WARPS = 8
_GN_PIPE_VEC = 8
_GN_PIPE_MIN_D = 1024
_GN_PIPE_CPU_PROGRAMS = 3  # odd and small: every program walks several groups, one the last


@triton.jit
def _gn_range(s, D, HW, CHUNK, SPC, PER_CHANNEL: tl.constexpr):
    """[lo, hi) of chunk s inside its group, and its channel (PER_CHANNEL: chunks never cross a
    channel, SPC of them per channel)."""
    if PER_CHANNEL:
        ci = s // SPC
        lo = ci * HW + (s % SPC) * CHUNK
        hi = tl.minimum(lo + CHUNK, ci * HW + HW)
    else:
        ci = 0
        lo = s * CHUNK
        hi = tl.minimum(lo + CHUNK, D)
    return lo, hi, ci


@triton.jit
def _gn_partials_kernel(x_ptr, part_ptr, D, HW, CHUNK, SPC, S, PER_CHANNEL: tl.constexpr,
                        ACC: tl.constexpr, STAGES: tl.constexpr, BLOCK: tl.constexpr):
    """Sums of one chunk of a group, shifted by the group's first element (every chunk of the
    group uses the same shift, so the sums add up; no catastrophic cancellation)."""
    g = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    base = g * D
    shift = tl.load(x_ptr + base).to(ACC)
    lo, hi, _ = _gn_range(s, D, HW, CHUNK, SPC, PER_CHANNEL)
    s1 = tl.zeros([BLOCK], ACC)
    s2 = tl.zeros([BLOCK], ACC)
    for k0 in tl.range(lo, hi, BLOCK, num_stages=STAGES):
        k = k0 + tl.arange(0, BLOCK)
        m = k < hi
        v = tl.load(x_ptr + base + k, mask=m, other=0).to(ACC)
        v = tl.where(m, v - shift, 0.0)
        s1 += v
        s2 += v * v
    slot = (g * S + s) * 2
    tl.store(part_ptr + slot, tl.sum(s1, axis=0))
    tl.store(part_ptr + slot + 1, tl.sum(s2, axis=0))


@triton.jit
def _gn_apply_kernel(x_ptr, w_ptr, b_ptr, out_ptr, part_ptr, mean_ptr, rstd_ptr, G, CPG, HW, D,
                     CHUNK, SPC, S, n_f: tl.float64, eps: tl.float64, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                     ACC: tl.constexpr, ROUND_STATS: tl.constexpr, PER_CHANNEL: tl.constexpr,
                     SP: tl.constexpr, STAGES: tl.constexpr, BLOCK: tl.constexpr):
    """Statistics of the group from its S partial sums (every program of the group computes the
    same values in the same order; chunk 0 stores them), then one chunk normalised.

    ROUND_STATS (CUDA, f16/bf16): normalise with the mean and rstd rounded to the input dtype,
    as y = x*a + b with a = rstd*w and b = beta - a*mean, which is how CUDA eager computes it
    from the statistics it stored; with unrounded ones, elements whose x*a nearly cancels the
    bias came out several f16 ulps from eager on the H200."""
    n_f = tl.full([], n_f, ACC)  # double arguments (a plain float is packed as fp32)
    eps = tl.full([], eps, ACC)
    g = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    base = g * D
    shift = tl.load(x_ptr + base).to(ACC)
    j = tl.arange(0, SP)
    t1 = tl.sum(tl.load(part_ptr + (g * S + j) * 2, mask=j < S, other=0), axis=0)
    t2 = tl.sum(tl.load(part_ptr + (g * S + j) * 2 + 1, mask=j < S, other=0), axis=0)
    mean_s = t1 / n_f
    var = (t2 - t1 * mean_s) / n_f
    var = tl.maximum(var, 0.0)
    mean = shift + mean_s
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(mean_ptr + g, mean.to(mean_ptr.dtype.element_ty), mask=s == 0)
    tl.store(rstd_ptr + g, rstd.to(rstd_ptr.dtype.element_ty), mask=s == 0)
    if ROUND_STATS:
        mean = mean.to(mean_ptr.dtype.element_ty).to(ACC)
        rstd = rstd.to(rstd_ptr.dtype.element_ty).to(ACC)
    c_base = (g % G) * CPG
    lo, hi, ci = _gn_range(s, D, HW, CHUNK, SPC, PER_CHANNEL)
    if PER_CHANNEL:
        # the chunk is inside one channel: its weight and bias are scalars (a per-element
        # channel number k // HW and two gathers cost more than the bytes)
        wv, bv = _gn_affine(w_ptr, b_ptr, c_base + ci, ci < CPG, HAS_W, HAS_B, ACC)
    for k0 in tl.range(lo, hi, BLOCK, num_stages=STAGES):
        k = k0 + tl.arange(0, BLOCK)
        m = k < hi
        v = tl.load(x_ptr + base + k, mask=m, other=0).to(ACC)
        if not PER_CHANNEL:
            wv, bv = _gn_affine(w_ptr, b_ptr, c_base + k // HW, m, HAS_W, HAS_B, ACC)
        y = _gn_apply(v, wv, bv, mean, rstd, ROUND_STATS)
        tl.store(out_ptr + base + k, y.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def _gn_whole_kernel(x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, rstd_ptr, NG, G, CPG, HW, D,
                     n_f: tl.float64, eps: tl.float64, HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr,
                     ROUND_STATS: tl.constexpr, ONE_CHANNEL: tl.constexpr, ROWS: tl.constexpr,
                     BLOCK: tl.constexpr):
    """ROWS whole groups, each loaded once into registers: mean, then the variance as the mean
    of (x - mean)^2 over the same registers (two passes without a second read), normalised and
    stored. ONE_CHANNEL (C/G == 1): one weight and bias per group, no per-element channel."""
    n_f = tl.full([], n_f, ACC)  # double arguments (a plain float is packed as fp32)
    eps = tl.full([], eps, ACC)
    g = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    k = tl.arange(0, BLOCK)
    g_ok = g < NG
    m = g_ok[:, None] & (k[None, :] < D)
    # 64-bit group bases, 32-bit offsets inside a group (one wide multiply-add per element)
    x_row = x_ptr + (g * D)[:, None]
    v = tl.load(x_row + k[None, :], mask=m, other=0).to(ACC)
    mean = tl.sum(v, axis=1) / n_f
    dev = tl.where(m, v - mean[:, None], 0.0)
    var = tl.sum(dev * dev, axis=1) / n_f
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(mean_ptr + g, mean.to(mean_ptr.dtype.element_ty), mask=g_ok)
    tl.store(rstd_ptr + g, rstd.to(rstd_ptr.dtype.element_ty), mask=g_ok)
    if ROUND_STATS:
        mean = mean.to(mean_ptr.dtype.element_ty).to(ACC)
        rstd = rstd.to(rstd_ptr.dtype.element_ty).to(ACC)
    c_base = (g % G) * CPG
    if ONE_CHANNEL:
        wv, bv = _gn_affine(w_ptr, b_ptr, c_base[:, None], g_ok[:, None], HAS_W, HAS_B, ACC)
    else:
        wv, bv = _gn_affine(w_ptr, b_ptr, c_base[:, None] + k[None, :] // HW, m, HAS_W, HAS_B,
                            ACC)
    y = _gn_apply(v, wv, bv, mean[:, None], rstd[:, None], ROUND_STATS)
    tl.store(out_ptr + (g * D)[:, None] + k[None, :], y.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def _gn_pipe_fetch(x_ptr, g, NG, D, k, e, VEC: tl.constexpr):
    """Group g's (nothing when g >= NG) whole VEC-element chunks, as 32-bit words of two
    elements each (16-byte loads for VEC 8), and its head and tail outside them (e < VEC: the
    elements before the first whole chunk; e >= VEC: those after the last)."""
    base = tl.cast(g, tl.int64) * D
    ok = g < NG  # else every bound below is 0: nothing loaded
    cb = tl.cdiv(base, VEC)
    cf = (base + D) // VEC
    n_w = tl.where(ok, (cf - cb) * (VEC // 2), 0)
    words = tl.load(x_ptr.to(tl.pointer_type(tl.int32)) + cb * (VEC // 2) + k, mask=k < n_w,
                    other=0)
    p = tl.where(e < VEC, base + e, cf * VEC + e - VEC)
    pm = p < tl.where(ok, tl.where(e < VEC, cb * VEC, base + D), 0)
    edge = tl.load(x_ptr + p, mask=pm, other=0)
    return words, edge


@triton.jit
def _gn_pipe_kernel(x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, rstd_ptr, NG, G, D, n_f: tl.float64,
                    eps: tl.float64,
                    HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr,
                    ROUND_STATS: tl.constexpr, VEC: tl.constexpr, BLOCK_W: tl.constexpr):
    """Persistent whole-group kernel for 16-bit one-channel groups: program pid takes groups
    pid, pid + P, ... and fetches the next group before it reduces and stores the current one:
    those loads are in flight during that work (a load stalls only at its first use, one
    iteration later). A group is held as 32-bit words of two elements (one register per two
    elements; a 16-bit load takes a whole register), loaded and stored as whole VEC-element
    chunks (16 bytes for VEC 8) although groups start anywhere: the (< VEC) elements before the
    group's first whole chunk and after its last go through a 2*VEC-element side tensor.
    Statistics as _gn_whole_kernel's: mean, then the mean of squared deviations."""
    n_f = tl.full([], n_f, ACC)  # double arguments (a plain float is packed as fp32)
    eps = tl.full([], eps, ACC)
    P = tl.num_programs(0)
    pid = tl.program_id(0)
    DT: tl.constexpr = x_ptr.dtype.element_ty
    k = tl.arange(0, BLOCK_W)
    e = tl.arange(0, 2 * VEC)
    words, edge = _gn_pipe_fetch(x_ptr, pid, NG, D, k, e, VEC)
    for g in range(pid, NG, P):
        cur_w = words
        cur_e = edge
        words, edge = _gn_pipe_fetch(x_ptr, g + P, NG, D, k, e, VEC)
        wv, bv = _gn_affine(w_ptr, b_ptr, g % G, g < NG, HAS_W, HAS_B, ACC)
        base = tl.cast(g, tl.int64) * D
        cb = tl.cdiv(base, VEC)
        cf = (base + D) // VEC
        wm = k < (cf - cb) * (VEC // 2)
        p = tl.where(e < VEC, base + e, cf * VEC + e - VEC)
        pm = tl.where(e < VEC, p < cb * VEC, p < base + D)
        lo = (cur_w & 0xFFFF).to(tl.int16).to(DT, bitcast=True).to(ACC)
        hi = (cur_w >> 16).to(tl.int16).to(DT, bitcast=True).to(ACC)
        ve = cur_e.to(ACC)
        mean = (tl.sum(lo + hi, axis=0) + tl.sum(ve, axis=0)) / n_f
        dl = tl.where(wm, lo - mean, 0.0)
        dh = tl.where(wm, hi - mean, 0.0)
        de = tl.where(pm, ve - mean, 0.0)
        var = (tl.sum(dl * dl + dh * dh, axis=0) + tl.sum(de * de, axis=0)) / n_f
        rstd = 1.0 / tl.sqrt(var + eps)
        tl.store(mean_ptr + g, mean.to(mean_ptr.dtype.element_ty))
        tl.store(rstd_ptr + g, rstd.to(rstd_ptr.dtype.element_ty))
        if ROUND_STATS:
            mean = mean.to(mean_ptr.dtype.element_ty).to(ACC)
            rstd = rstd.to(rstd_ptr.dtype.element_ty).to(ACC)
        y_lo = _gn_apply(lo, wv, bv, mean, rstd, ROUND_STATS).to(DT).to(tl.int16, bitcast=True)
        y_hi = _gn_apply(hi, wv, bv, mean, rstd, ROUND_STATS).to(DT).to(tl.int16, bitcast=True)
        y_w = (y_lo.to(tl.int32) & 0xFFFF) | (y_hi.to(tl.int32) << 16)
        tl.store(out_ptr.to(tl.pointer_type(tl.int32)) + cb * (VEC // 2) + k, y_w, mask=wm)
        y_e = _gn_apply(ve, wv, bv, mean, rstd, ROUND_STATS)
        tl.store(out_ptr + p, y_e.to(DT), mask=pm)


@triton.jit
def _gn_affine(w_ptr, b_ptr, c, m, HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr):
    """(weight, bias) of channel(s) c; 1 and 0 where the op has none (exact in either form)."""
    wv = 1.0
    bv = 0.0
    if HAS_W:
        wv = tl.load(w_ptr + c, mask=m, other=1).to(ACC)
    if HAS_B:
        bv = tl.load(b_ptr + c, mask=m, other=0).to(ACC)
    return wv, bv


@triton.jit
def _gn_apply(v, wv, bv, mean, rstd, ROUND_STATS: tl.constexpr):
    """ROUND_STATS: y = v*a + (b - a*mean) with a = rstd*w, CUDA eager's form from its stored
    statistics; otherwise ((v - mean) * rstd) * w + b."""
    if ROUND_STATS:
        a = rstd * wv
        return v * a + (-a * mean + bv)
    return ((v - mean) * rstd) * wv + bv


_ROUND_STATS_DEVICES = ("cuda",)  # where eager normalises with statistics in the input dtype


def _gn_split(NG, CPG, HW, D, block):
    """(per_channel, chunk, chunks per channel, chunks per group) for about
    _GN_TARGET_PROGRAMS programs; chunks are whole loop steps."""
    per_channel = HW >= block
    if per_channel:
        spc = max(1, min(_cdiv(_GN_TARGET_PROGRAMS, NG * CPG), _cdiv(HW, block)))
        chunk = _cdiv(_cdiv(HW, spc), block) * block
        spc = _cdiv(HW, chunk)
        return True, chunk, spc, CPG * spc
    s = max(1, min(_cdiv(_GN_TARGET_PROGRAMS, NG), _cdiv(D, block)))
    chunk = _cdiv(_cdiv(D, s), block) * block
    return False, chunk, 1, _cdiv(D, chunk)


def _gn_whole_plan(NG, CPG, D, acc_bytes=4):
    """(groups per program, BLOCK, warps) for the whole-group kernel, or None: the split path.
    fp64 arithmetic (acc_bytes 8) takes two registers an element: half the group size."""
    limit = (_GN_WHOLE_MAX if CPG == 1 else _GN_WHOLE_MAX_MULTI) * 4 // acc_bytes
    if not _GN_WHOLE or _CONSERVATIVE or D > limit or NG < _GN_WHOLE_MIN_GROUPS:
        return None
    block = max(2, _pow2(D))
    packed = 1 << max(0, (NG // _GN_WHOLE_PROGRAMS).bit_length() - 1)  # a power of two <= NG/P
    rows = max(1, min(_GN_WHOLE_TILE // block, packed))
    return rows, block, max(1, min(_GN_WHOLE_WARPS, rows * block // 256))


# inline: _num_sms


def _gn_pipe_plan(NG, CPG, D, x):
    """(words per program, VEC, warps, programs) for the persistent kernel, or None: the plain
    whole-group kernel. f16/bf16 one-channel groups of at least _GN_PIPE_MIN_D elements whose
    plain plan takes one group per program, a 16-byte aligned x (its 32-bit word loads), and at
    least two groups per program (else nothing to overlap)."""
    if (not _GN_PIPE or CPG != 1 or D < max(_GN_PIPE_MIN_D, 2 * _GN_PIPE_VEC)
            or x.dtype not in (torch.float16, torch.bfloat16) or x.data_ptr() % 16 != 0):
        return None
    whole = _gn_whole_plan(NG, CPG, D)
    if whole is None or whole[0] != 1:
        return None
    if _INTERPRET or x.device.type != "cuda":
        programs = _GN_PIPE_CPU_PROGRAMS
    else:
        index = x.device.index if x.device.index is not None else torch.cuda.current_device()
        programs = _GN_PIPE_PER_SM * _num_sms(index)
    if NG < 2 * programs:
        return None
    block = whole[1]
    return block // 2, _GN_PIPE_VEC, max(1, min(_GN_PIPE_WARPS, block // 256)), programs


def _native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    if group <= 0 or C % group != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of shape {list(input.shape)} and num_groups={group}")
    if input.numel() != N * C * HxW:
        raise RuntimeError("Expected the input to hold N * C * HxW elements")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != C:
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in input, but got {name} of shape {list(t.shape)} and input of shape {list(input.shape)}")
    # the pipelined kernel's word loads need x 16-byte aligned (a non-contiguous input is
    # copied, into an aligned allocation)
    aligned = not input.is_contiguous() or input.data_ptr() % 16 == 0
    key = (input.shape, input.dtype, input.device, N, C, HxW, group, weight is None,
           bias is None, aligned)
    run = _GN_RUNS.get(key)
    if run is None:
        if len(_GN_RUNS) >= 256:
            _GN_RUNS.clear()
        run = _GN_RUNS[key] = _group_norm_plan(input, weight is not None, bias is not None, N,
                                               C, HxW, group)
    return run(input, weight, bias, float(eps))


_GN_RUNS = {}  # (geometry, which of weight/bias are given) -> run(...), planned once


def _group_norm_plan(input, has_w, has_b, N, C, HxW, group):
    """run(input, weight, bias, eps): the one kernel (a whole group in registers, pipelined or
    not) or the two (split partial sums, then the normalization) this geometry takes."""
    shape, dtype, device = input.shape, input.dtype, input.device
    CPG = C // group
    D = CPG * HxW
    NG = N * group
    acc = _acc(dtype)
    round_stats = device.type in _ROUND_STATS_DEVICES and dtype in (torch.float16, torch.bfloat16)
    launch = None
    if NG > 0 and D > 0:
        launch = _group_norm_launch(input.contiguous(), has_w, has_b, NG, group, CPG, HxW, D,
                                    acc, round_stats)

    def run(input, weight, bias, eps):
        x = input.contiguous()
        out = torch.empty(shape, dtype=dtype, device=device)
        mean = torch.empty((N, group), dtype=dtype, device=device)
        rstd = torch.empty((N, group), dtype=dtype, device=device)
        if launch is not None:
            launch(x, weight if has_w else x, bias if has_b else x, out, mean, rstd, eps)
        return out, mean, rstd

    return run


def _group_norm_launch(x, has_w, has_b, NG, group, CPG, HxW, D, acc, round_stats):
    """launch(x, w, b, out, mean, rstd, eps) for a non-empty geometry (w, b contiguous or x)."""
    flags = dict(HAS_W=has_w, HAS_B=has_b, ACC=acc, ROUND_STATS=round_stats)
    whole = _gn_whole_plan(NG, CPG, D, 8 if acc == tl.float64 else 4)
    pipe = _gn_pipe_plan(NG, CPG, D, x) if whole is not None else None
    if pipe is not None:
        block_w, vec, warps, programs = pipe
        kernel = _gn_pipe_kernel[(programs,)]

        def launch(x, w, b, out, mean, rstd, eps):
            kernel(x, w.contiguous(), b.contiguous(), out, mean, rstd, NG, group, D, float(D),
                   eps, VEC=vec, BLOCK_W=block_w, num_warps=warps, num_stages=1, **flags)

        return launch
    if whole is not None:
        rows, block, warps = whole
        kernel = _gn_whole_kernel[(_cdiv(NG, rows),)]

        def launch(x, w, b, out, mean, rstd, eps):
            kernel(x, w.contiguous(), b.contiguous(), out, mean, rstd, NG, group, CPG, HxW, D,
                   float(D), eps, ONE_CHANNEL=CPG == 1, ROWS=rows, BLOCK=block, num_warps=warps,
                   **flags)

        return launch
    cap = _tile_cap() if _INTERPRET else (1024 if _CONSERVATIVE else _GN_BLOCK)
    block = max(32, min(_pow2(D), cap))
    per_channel, chunk, spc, S = _gn_split(NG, CPG, HxW, D, block)
    part_dtype = torch.float64 if acc == tl.float64 else torch.float32
    warps = 4 if block <= 1024 else (_GN_WARPS_MANY_GROUPS if NG >= _GN_MANY_GROUPS else _GN_WARPS)
    stages = 1 if _INTERPRET or _CONSERVATIVE else _GN_STAGES
    partials = _gn_partials_kernel[(NG, S)]
    apply = _gn_apply_kernel[(NG, S)]

    def launch(x, w, b, out, mean, rstd, eps):
        part = torch.empty((NG * S * 2,), dtype=part_dtype, device=x.device)
        partials(x, part, D, HxW, chunk, spc, S, PER_CHANNEL=per_channel, ACC=acc, STAGES=stages,
                 BLOCK=block, num_warps=warps)
        apply(x, w.contiguous(), b.contiguous(), out, part, mean, rstd, group, CPG, HxW, D, chunk,
              spc, S, float(D), eps, PER_CHANNEL=per_channel, SP=_pow2(S), STAGES=stages,
              BLOCK=block, num_warps=warps, **flags)

    return launch


# ---- emitted: weight_norm ----


@triton.jit
def _sumsq_cols_kernel(v_ptr, ss_ptr, A, D, CHUNK, NDB, BLOCK_A: tl.constexpr,
                       BLOCK_D: tl.constexpr):
    """B == 1: ss[d] += sum over a chunk of rows of v[a, d]^2 (tiles along d, in memory order)."""
    pid = tl.program_id(0)
    d = (pid % NDB).to(tl.int64) * BLOCK_D + tl.arange(0, BLOCK_D)
    a_start = (pid // NDB).to(tl.int64) * CHUNK
    d_ok = d < D
    acc = tl.zeros([BLOCK_A, BLOCK_D], tl.float32)
    for a0 in range(a_start, tl.minimum(a_start + CHUNK, A), BLOCK_A):
        a = a0 + tl.arange(0, BLOCK_A)
        m = (a[:, None] < tl.minimum(a_start + CHUNK, A)) & d_ok[None, :]
        v = tl.load(v_ptr + a[:, None] * D + d[None, :], mask=m, other=0).to(tl.float32)
        acc += v * v
    tl.atomic_add(ss_ptr + d, tl.sum(acc, axis=0), mask=d_ok)


@triton.jit
def _sumsq_rows_kernel(v_ptr, ss_ptr, D, B, AB, CHUNK, BLOCK: tl.constexpr):
    """B > 1: ss[d] += sum over a chunk of the (a, b) positions of v[a, d, b]^2."""
    d = tl.program_id(0).to(tl.int64)
    start = tl.program_id(1).to(tl.int64) * CHUNK
    end = tl.minimum(start + CHUNK, AB)
    acc = tl.zeros([BLOCK], tl.float32)
    for r0 in range(start, end, BLOCK):
        r = r0 + tl.arange(0, BLOCK)
        m = r < end
        v = tl.load(v_ptr + (r // B) * D * B + d * B + r % B, mask=m, other=0).to(tl.float32)
        acc += v * v
    tl.atomic_add(ss_ptr + d, tl.sum(acc, axis=0))


@triton.jit
def _weight_norm_scale_kernel(v_ptr, g_ptr, ss_ptr, w_ptr, norm_ptr, n, D, B, sg,
                              BLOCK: tl.constexpr):
    """w = v * g[d] / sqrt(ss[d]); the first D lanes also write norm[d] = sqrt(ss[d])."""
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = p < n
    d = (p // B) % D
    nrm = tl.sqrt(tl.load(ss_ptr + d, mask=ok, other=1))
    g = tl.load(g_ptr + d * sg, mask=ok, other=0).to(tl.float32)
    v = tl.load(v_ptr + p, mask=ok, other=0).to(tl.float32)
    tl.store(w_ptr + p, (v * (g / nrm)).to(w_ptr.dtype.element_ty), mask=ok)
    first = p < D
    tl.store(norm_ptr + p, tl.sqrt(tl.load(ss_ptr + p, mask=first, other=0)).to(norm_ptr.dtype.element_ty), mask=first)


def _weight_norm_interface(v, g, dim=0):
    if v.dim() == 0:
        raise RuntimeError("_weight_norm_interface: expected a tensor with at least 1 dim")
    dim = _wrap_dim(dim, v.dim())
    if dim not in (0, v.dim() - 1):
        raise RuntimeError("fused kernels can only be applied for first or last dim")
    x = v.contiguous()
    D = x.shape[dim]
    A = _prod(x.shape[:dim])
    B = _prod(x.shape[dim + 1:])
    if g.numel() != D:
        raise RuntimeError("_weight_norm_interface: g must hold one value per slice of v along dim")
    norm_dtype = torch.float32 if v.dtype in (torch.float16, torch.bfloat16) else v.dtype
    w = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    norm_shape = [D if i == dim else 1 for i in range(v.dim())]
    norm = torch.empty(norm_shape, dtype=norm_dtype, device=v.device)
    if w.numel() == 0:
        return w, norm
    ss = torch.zeros((D,), dtype=torch.float32, device=v.device)
    cap = _tile_cap()
    if B == 1:
        block_d = max(2, min(_pow2(D), 128))
        block_a = max(1, min(_pow2(A), cap // block_d))
        chunk = max(block_a, 16 * block_a if _INTERPRET else 4 * block_a)
        ndb = _cdiv(D, block_d)
        _sumsq_cols_kernel[(_cdiv(A, chunk) * ndb,)](x, ss, A, D, chunk, ndb,
                                                    BLOCK_A=block_a, BLOCK_D=block_d)
    else:
        block = max(32, min(_pow2(A * B), cap if _INTERPRET else 1024))
        chunk = 16 * block
        _sumsq_rows_kernel[(D, _cdiv(A * B, chunk))](x, ss, D, B, A * B, chunk, BLOCK=block)
    n = w.numel()
    block, warps = _block1(n)
    sg = g.stride(dim) if g.dim() == v.dim() else 1
    _weight_norm_scale_kernel[(_cdiv(n, block),)](x, g, ss, w, norm, n, D, B, sg,
                                                 BLOCK=block, num_warps=warps)
    return w, norm
