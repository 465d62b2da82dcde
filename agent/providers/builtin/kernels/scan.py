"""Scan kernels (cumsum, predicates, rank, histc): the text the builtin writer copies into the
files it emits.
"""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _INTERPRET, _OP, _cdiv, _pow2
from agent.providers.builtin.kernels.tiles import (
    _CONSERVATIVE,
    _block1,
    _prod,
    _tile_cap,
    _wrap_dim,
)


# ---- emitted: common ----


def _acc_tl(dtype):
    if dtype == torch.float64:
        return tl.float64
    if dtype.is_floating_point:
        return tl.float32
    return tl.int64


def _as_outer_r_inner(x, dim):
    shape = list(x.shape) if x.dim() else [1]
    return _prod(shape[:dim]), shape[dim], _prod(shape[dim + 1:])


# ---- emitted: cumsum ----


@triton.jit
def _cumsum_rows(x_ptr, out_ptr, ROWS, R, ACC: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < ROWS
    carry = tl.zeros([BLOCK_M], ACC)
    for c0 in range(0, R, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        m = row_ok[:, None] & (cols[None, :] < R)
        offs = rows[:, None] * R + cols[None, :]
        v = tl.load(x_ptr + offs, mask=m, other=0).to(ACC)
        s = tl.cumsum(v, axis=1) + carry[:, None]
        tl.store(out_ptr + offs, s.to(out_ptr.dtype.element_ty), mask=m)
        carry += tl.sum(v, axis=1)


@triton.jit
def _cumsum_cols(x_ptr, out_ptr, INNER, R, NIB, ACC: tl.constexpr,
                 BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    pid = tl.program_id(0)
    o = (pid // NIB).to(tl.int64)
    i = (pid % NIB).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < INNER
    base = o * R * INNER
    carry = tl.zeros([BLOCK_I], ACC)
    for r0 in range(0, R, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        m = (r[:, None] < R) & i_ok[None, :]
        offs = base + r[:, None] * INNER + i[None, :]
        v = tl.load(x_ptr + offs, mask=m, other=0).to(ACC)
        s = tl.cumsum(v, axis=0) + carry[None, :]
        tl.store(out_ptr + offs, s.to(out_ptr.dtype.element_ty), mask=m)
        carry += tl.sum(v, axis=0)


def _cumsum(self, dim, dtype=None):
    dim = _wrap_dim(dim, self.dim())
    if dtype is None:
        dtype = self.dtype if self.is_floating_point() else torch.int64
    x = self.contiguous()
    out = torch.empty(self.shape, dtype=dtype, device=self.device)
    if out.numel() == 0:
        return out
    outer, red, inner = _as_outer_r_inner(x, dim)
    acc = tl.float64 if torch.float64 in (dtype, self.dtype) else _acc_tl(dtype)
    cap = _tile_cap()
    if inner == 1:
        block_n = max(2, min(_pow2(red), 1024 if not _CONSERVATIVE else 256))
        block_m = max(1, min(_pow2(outer), cap // block_n))
        _cumsum_rows[(_cdiv(outer, block_m),)](x, out, outer, red, ACC=acc,
                                               BLOCK_M=block_m, BLOCK_N=block_n)
    else:
        block_i = max(2, min(_pow2(inner), 64 if not _INTERPRET else 1024))
        block_r = max(2, min(_pow2(red), cap // block_i))
        nib = _cdiv(inner, block_i)
        _cumsum_cols[(outer * nib,)](x, out, inner, red, nib, ACC=acc,
                                     BLOCK_R=block_r, BLOCK_I=block_i)
    return out


# ---- emitted: predicate ----


@triton.jit
def _decide_kernel(x_ptr, out_ptr, n, IS_ALL: tl.constexpr, BLOCK: tl.constexpr):
    """all: store False if this block holds a zero; any: store True if it holds a non-zero."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m, other=0)
    nonzero = (v != 0) & m
    if IS_ALL:
        hit = tl.max(((v == 0) & m).to(tl.int32), axis=0) > 0
        tl.store(out_ptr, hit == 0, mask=hit)
    else:
        hit = tl.max(nonzero.to(tl.int32), axis=0) > 0
        tl.store(out_ptr, hit, mask=hit)


def _decide(self, is_all):
    x = self.contiguous()
    n = x.numel()
    fill = torch.ones if is_all else torch.zeros
    out = fill((), dtype=torch.bool, device=self.device)
    block, warps = _block1(n)
    if not _INTERPRET and not _CONSERVATIVE:
        block, warps = max(block, min(_pow2(n), 4096)), 8
    _decide_kernel[(max(1, _cdiv(n, block)),)](x, out, n, IS_ALL=is_all, BLOCK=block,
                                              num_warps=warps)
    return out


# ---- emitted: rank ----


@triton.jit
def _before(vj, jj, vi, ii, DESC: tl.constexpr, IS_FLOAT: tl.constexpr):
    """Whether element (vj, jj) comes before (vi, ii) in a stable sort (NaN is the largest)."""
    if DESC:
        first = vj > vi
    else:
        first = vj < vi
    same = vj == vi
    if IS_FLOAT:
        nan_j = vj != vj
        nan_i = vi != vi
        if DESC:
            first = first | (nan_j & ~nan_i)
        else:
            first = first | (nan_i & ~nan_j)
        same = same | (nan_j & nan_i)
    return first | (same & (jj < ii))


@triton.jit
def _rank_kernel(x_ptr, val_ptr, idx_ptr, ROWS, R, INNER, K, NIB,
                 DESC: tl.constexpr, IS_FLOAT: tl.constexpr, ACC: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_I: tl.constexpr, BLOCK_J: tl.constexpr):
    """BLOCK_M rows x BLOCK_I elements per program; element i of a row goes to position
    rank(i) when rank(i) < K (rank counted against the row in BLOCK_J chunks)."""
    pid = tl.program_id(0).to(tl.int64)
    rows = (pid // NIB) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < ROWS
    o = rows // INNER
    inner = rows % INNER
    base = o * R * INNER + inner
    ii = (pid % NIB) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = row_ok[:, None] & (ii[None, :] < R)
    vi = tl.load(x_ptr + base[:, None] + ii[None, :] * INNER, mask=i_ok, other=0).to(ACC)
    rank = tl.zeros([BLOCK_M, BLOCK_I], tl.int64)
    for j0 in range(0, R, BLOCK_J):
        jj = j0 + tl.arange(0, BLOCK_J).to(tl.int64)
        j_ok = row_ok[:, None] & (jj[None, :] < R)
        vj = tl.load(x_ptr + base[:, None] + jj[None, :] * INNER, mask=j_ok, other=0).to(ACC)
        b = _before(vj[:, None, :], jj[None, None, :], vi[:, :, None], ii[None, :, None],
                    DESC, IS_FLOAT)
        rank += tl.sum((b & j_ok[:, None, :]).to(tl.int64), axis=2)
    keep = i_ok & (rank < K)
    out = (o * K * INNER + inner)[:, None] + rank * INNER
    tl.store(val_ptr + out, vi.to(val_ptr.dtype.element_ty), mask=keep)
    tl.store(idx_ptr + out, (ii[None, :] + rank * 0), mask=keep)


def _rank_sort(self, dim, k, descending):
    dim = _wrap_dim(dim, self.dim())
    x = self.contiguous()
    outer, red, inner = _as_outer_r_inner(x, dim)
    if not 0 <= k <= red:
        raise RuntimeError("selected index k out of range")
    shape = list(self.shape)
    if shape:
        shape[dim] = k
    values = torch.empty(shape, dtype=self.dtype, device=self.device)
    indices = torch.empty(shape, dtype=torch.int64, device=self.device)
    if values.numel() == 0:
        return values, indices
    if red > 16384:
        raise NotImplementedError(f"{_OP}: rows longer than 16384 are not supported by this kernel")
    rows = outer * inner
    if _INTERPRET:  # few, large programs
        cap, block_i, block_j = 16384, 128, 64
    else:  # 2-4K compares per step, many programs even for one long row
        cap, block_i, block_j = (2048, 32, 64) if _CONSERVATIVE else (4096, 32, 128)
    block_i = max(2, min(_pow2(red), block_i))
    block_j = max(2, min(_pow2(red), block_j))
    block_m = max(1, min(_pow2(rows), cap // (block_i * block_j)))
    nib = _cdiv(red, block_i)
    _rank_kernel[(_cdiv(rows, block_m) * nib,)](
        x, values, indices, rows, red, inner, k, nib,
        DESC=bool(descending), IS_FLOAT=self.is_floating_point(), ACC=_acc_tl(self.dtype),
        BLOCK_M=block_m, BLOCK_I=block_i, BLOCK_J=block_j, num_warps=4)
    return values, indices


# ---- emitted: histc ----


# histc in one program (no zero fill, no atomics, no cast kernel) when n <= _HISTC_ONE_PROGRAM_MAX
# elements and bins <= _HISTC_ONE_PROGRAM_BINS; a _HISTC_ONE_PROGRAM_MAX of 0 turns it off. Read at
# call time. One SM does all the work: on sm_90 (Triton 3.6, 8 warps) an element costs ~70 SASS
# instructions up to 32 bins (ballots of tl.histogram, int32 division) and ~175 at 1024 bins, so
# 8192 elements at few bins take ~2 us, the 2048 of the suite's case ~0.6 us, while the atomic
# path's two or three launches cost several. H200, the suite's case (2048 i32, 8 bins): 9.5 us on
# the atomic path, 5.3 / 4.6 / 4.1 us in one program of 4 / 8 / 16 warps; eager 5.5.
_HISTC_ONE_PROGRAM_MAX = 8192
_HISTC_ONE_PROGRAM_BINS = 256
_HISTC_ONE_PROGRAM_BLOCK = 4096  # elements per loop step of the one program
_HISTC_ONE_PROGRAM_WARPS = 16


@triton.jit
def _data_range(x_ptr, n, ACC: tl.constexpr, BLOCK: tl.constexpr):
    """(min(x), max(x)), widened by one on each side when they are equal (eager's rule)."""
    first = tl.load(x_ptr).to(ACC)
    lo = tl.zeros([BLOCK], ACC) + first
    hi = tl.zeros([BLOCK], ACC) + first
    for s in range(0, n, BLOCK):
        offs = s + tl.arange(0, BLOCK).to(tl.int64)
        m = offs < n
        v = tl.load(x_ptr + offs, mask=m, other=0).to(ACC)
        lo = tl.where(m, tl.minimum(lo, v), lo)
        hi = tl.where(m, tl.maximum(hi, v), hi)
    a = tl.min(lo, axis=0)
    b = tl.max(hi, axis=0)
    same = a == b
    return tl.where(same, a - 1, a), tl.where(same, b + 1, b)


@triton.jit
def _histc_bin(x_ptr, v, a, b, bins, INT_MATH: tl.constexpr, INT32: tl.constexpr,
               HALF: tl.constexpr):
    """Bin of each v in [a, b] (garbage outside: the callers mask those), shared by both paths.
    INT32: the caller proved (b - a) * bins < 2**31, so the exact quotient fits 32-bit division
    (a 64-bit one is a ~70-instruction subroutine call per element on the GPU)."""
    if INT32:
        bin_ = ((v - a).to(tl.int32) * bins) // (b - a).to(tl.int32)
    elif INT_MATH:  # b - a in int64: min and max may come as int32 scalars
        bin_ = ((v - a) * bins) // (b.to(tl.int64) - a)
    elif HALF:  # eager computes in the 16-bit type: each step rounds to it
        t = (v - a).to(x_ptr.dtype.element_ty).to(tl.float32)
        t = (t * bins).to(x_ptr.dtype.element_ty).to(tl.float32)
        w = (b - a).to(x_ptr.dtype.element_ty).to(tl.float32)
        bin_ = (t / w).to(x_ptr.dtype.element_ty).to(tl.float32).to(tl.int64)
    else:
        bin_ = ((v - a) * bins / (b - a)).to(tl.int64)
    return tl.where(bin_ == bins, bins - 1, bin_).to(tl.int64)


@triton.jit
def _histc_range(lo, hi, lo_f, hi_f, INT_MATH: tl.constexpr, ACC: tl.constexpr):
    """The given range: integers in lo, hi; floats as doubles in lo_f, hi_f (a plain float
    argument is packed as fp32), rounded once to ACC."""
    if INT_MATH:
        return lo, hi
    else:
        return tl.full([], lo_f, ACC), tl.full([], hi_f, ACC)


@triton.jit
def _range_kernel(x_ptr, rng_ptr, n, ACC: tl.constexpr, BLOCK: tl.constexpr):
    """rng = the histogram range from the data (only when histc's min == max)."""
    a, b = _data_range(x_ptr, n, ACC, BLOCK)
    tl.store(rng_ptr, a)
    tl.store(rng_ptr + 1, b)


@triton.jit
def _histc_kernel(x_ptr, out_ptr, rng_ptr, n, bins, lo, hi, lo_f: tl.float64, hi_f: tl.float64,
                  FROM_DATA: tl.constexpr,
                  INT_MATH: tl.constexpr, INT32: tl.constexpr, HALF: tl.constexpr,
                  ACC: tl.constexpr, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    v = tl.load(x_ptr + offs, mask=m, other=0).to(ACC)
    if FROM_DATA:
        a = tl.load(rng_ptr)
        b = tl.load(rng_ptr + 1)
    else:
        a, b = _histc_range(lo, hi, lo_f, hi_f, INT_MATH, ACC)
    inside = m & (v >= a) & (v <= b)
    bin_ = _histc_bin(x_ptr, v, a, b, bins, INT_MATH, INT32, HALF)
    ones = tl.full([BLOCK], 1, out_ptr.dtype.element_ty)
    tl.atomic_add(out_ptr + bin_, ones, mask=inside)


@triton.jit
def _histc_one_kernel(x_ptr, out_ptr, n, bins, lo, hi, lo_f: tl.float64, hi_f: tl.float64,
                      FROM_DATA: tl.constexpr,
                      INT_MATH: tl.constexpr, INT32: tl.constexpr, HALF: tl.constexpr,
                      ACC: tl.constexpr, OUT_FLOAT: tl.constexpr, BINS_P2: tl.constexpr,
                      BLOCK: tl.constexpr):
    """The whole histogram in one program: the range (when min == max), then `tl.histogram` of
    each block's bins (elements outside the range masked out) summed in registers, then one
    store of every bin: the output needs no zero fill and the counts are deterministic."""
    if FROM_DATA:
        a, b = _data_range(x_ptr, n, ACC, BLOCK)
    else:
        a, b = _histc_range(lo, hi, lo_f, hi_f, INT_MATH, ACC)
    counts = tl.zeros([BINS_P2], tl.int32)
    for s in range(0, n, BLOCK):
        offs = s + tl.arange(0, BLOCK).to(tl.int64)
        m = offs < n
        v = tl.load(x_ptr + offs, mask=m, other=0).to(ACC)
        inside = m & (v >= a) & (v <= b)
        bin_ = _histc_bin(x_ptr, v, a, b, bins, INT_MATH, INT32, HALF)
        # the GPU's histogram reads only the low log2(BINS_P2) bits of masked-out values
        counts += tl.histogram(tl.where(inside, bin_, 0).to(tl.int32), BINS_P2, mask=inside)
    if OUT_FLOAT:  # exact in fp32 (n < 2**24), then one rounding, as the atomic path's fp32 counts
        res = counts.to(tl.float32).to(out_ptr.dtype.element_ty)
    else:
        res = counts.to(out_ptr.dtype.element_ty)
    k = tl.arange(0, BINS_P2)
    tl.store(out_ptr + k, res, mask=k < bins)


def _histc(self, bins, low, high):
    if bins <= 0:
        raise RuntimeError(f"torch.histc(): bins must be > 0, but got {bins} for dimension 0")
    x = self.contiguous()
    n = x.numel()
    is_float = self.is_floating_point()
    acc = _acc_tl(self.dtype)
    lo = float(low) if is_float else int(low)
    hi = float(high) if is_float else int(high)
    if lo > hi:
        raise RuntimeError(f"torch.histc(): max must be larger than min, but got min {lo} max {hi}")
    from_data = lo == hi
    if from_data and n == 0:
        lo, hi = lo - 1, hi + 1
        from_data = False
    half = self.dtype in (torch.float16, torch.bfloat16)
    int32 = not is_float and not from_data and -2**31 <= lo and hi < 2**31 and (hi - lo) * bins < 2**31
    range_args = (0, 0, float(lo), float(hi)) if is_float else (lo, hi, 0.0, 0.0)
    # int32 counts, exact in fp32 below 2**24
    if 0 < _HISTC_ONE_PROGRAM_MAX and n <= min(_HISTC_ONE_PROGRAM_MAX, 1 << 24) and bins <= _HISTC_ONE_PROGRAM_BINS:
        out = torch.empty((bins,), dtype=self.dtype, device=self.device)
        block = max(32, min(_pow2(max(n, 1)), _HISTC_ONE_PROGRAM_BLOCK))
        _histc_one_kernel[(1,)](
            x, out, n, bins, *range_args, FROM_DATA=from_data, INT_MATH=not is_float, INT32=int32,
            HALF=half, ACC=acc, OUT_FLOAT=is_float, BINS_P2=_pow2(bins), BLOCK=block,
            num_warps=_HISTC_ONE_PROGRAM_WARPS)
        return out
    counts_dtype = torch.float32 if half else self.dtype
    out = torch.zeros((bins,), dtype=self.dtype, device=self.device)
    counts = out if counts_dtype == self.dtype else torch.zeros((bins,), dtype=counts_dtype, device=self.device)
    rng = torch.empty((2,), dtype=torch.float64 if acc == tl.float64 else (torch.float32 if is_float else torch.int64), device=self.device)
    if from_data:
        _range_kernel[(1,)](x, rng, n, ACC=acc, BLOCK=1024)
    block, warps = _block1(n)
    _histc_kernel[(max(1, _cdiv(n, block)),)](
        x, counts, rng, n, bins, *range_args, FROM_DATA=from_data, INT_MATH=not is_float, INT32=int32,
        HALF=half, ACC=acc, BLOCK=block, num_warps=warps)
    if counts is not out:
        _cast_kernel[(_cdiv(bins, 1024),)](counts, out, bins, BLOCK=1024)
    return out


@triton.jit
def _cast_kernel(src_ptr, dst_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    m = offs < n
    tl.store(dst_ptr + offs, tl.load(src_ptr + offs, mask=m).to(dst_ptr.dtype.element_ty), mask=m)
