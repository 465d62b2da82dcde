"""Reduction kernels (sums, means, moments, extremes): the text the builtin writer copies into the
files it emits.
"""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import (
    _cdiv,
    _num_sms,
    _pdl_enter,
    _pdl_launch,
    _pdl_ok,
    _pow2,
)


# ---- emitted: prelude ----
import functools  # noqa: F401  (the inlined _num_sms uses it)
import os

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CONSERVATIVE = False  # variant >= 1: no split reductions, smaller tiles


# inline: _cdiv, _pow2, _num_sms


def _target_programs(x):
    """Programs that keep the device busy; tiny on the interpreter so splits still get used."""
    if _INTERPRET or x.device.type != "cuda":
        return 4
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    return 4 * _num_sms(index)


def _norm_dims(dim, ndim):
    """None, [] -> every dim (ATen's rule for these overloads); negative dims wrapped."""
    if dim is None:
        return list(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    dim = list(dim)
    if len(dim) == 0:
        return list(range(ndim))
    rank = max(ndim, 1)
    out = []
    for d in dim:
        if not -rank <= d < rank:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {d})")
        d = d % rank
        if ndim == 0:
            continue
        if d in out:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        out.append(d)
    return sorted(out)


def _out_shape(shape, dims, keepdim):
    if keepdim:
        return [1 if d in dims else s for d, s in enumerate(shape)]
    return [s for d, s in enumerate(shape) if d not in dims]


def _prod(values):
    p = 1
    for v in values:
        p *= v
    return p


def _strided_outer(x, dims):
    """(outer, R, inner, outer stride) when the reduced dims and the dims after them form one
    dense row-major block and the dims before them step through memory with one stride (e.g. the
    last position of a [batch, seq, vocab] slice); None otherwise."""
    shape, strides = x.shape, x.stride()
    eff = [d for d in range(x.dim()) if shape[d] != 1]
    pos = [i for i, d in enumerate(eff) if d in dims]
    if not pos or pos != list(range(pos[0], pos[-1] + 1)):
        return None
    expect = 1
    for d in reversed(eff[pos[0]:]):
        if strides[d] != expect:
            return None
        expect *= shape[d]
    before = eff[: pos[0]]
    for a, b in zip(before, before[1:]):
        if strides[a] != strides[b] * shape[b]:
            return None
    red = _prod(shape[d] for d in eff[pos[0] : pos[-1] + 1])
    inner = _prod(shape[d] for d in eff[pos[-1] + 1 :])
    outer = _prod(shape[d] for d in before)
    return outer, red, inner, strides[before[-1]] if before else red * inner


def _as_outer_r_inner(x, dims, logical_order):
    """(perm, outer, R, inner, outer stride): the tensor's memory read as [outer, R, inner], the
    [R, inner] blocks dense and `outer stride` apart.

    perm None: the input itself when the layout allows it; otherwise the caller reads
    `x.permute(perm).contiguous()` (a copy, reduced dims last).
    `logical_order` (flat indices over several dims) accepts only the input's own order.
    """
    shape = list(x.shape)
    eff = [d for d in range(x.dim()) if shape[d] != 1]
    orders = []
    if x.is_contiguous():
        orders.append(list(range(x.dim())))
    if not logical_order and x.dim() > 1:
        perm = sorted(range(x.dim()), key=lambda d: -x.stride(d))
        if x.permute(perm).is_contiguous():
            orders.append(perm)
    for order in orders:
        seq = [d for d in order if d in eff]
        pos = [i for i, d in enumerate(seq) if d in dims]
        kept = [d for d in seq if d not in dims]
        if pos and pos != list(range(pos[0], pos[-1] + 1)):
            continue
        if kept != sorted(kept):
            continue
        first = pos[0] if pos else len(seq)
        last = pos[-1] + 1 if pos else len(seq)
        outer = _prod(shape[d] for d in seq[:first])
        red = _prod(shape[d] for d in seq[first:last])
        inner = _prod(shape[d] for d in seq[last:])
        return None, outer, red, inner, red * inner
    strided = _strided_outer(x, dims)
    if strided is not None:
        return (None, *strided)
    kept = [d for d in range(x.dim()) if d not in dims]
    red = _prod(shape[d] for d in dims)
    return kept + list(dims), _prod(shape[d] for d in kept), red, 1, red


# GPU tile limits (elements): module constants so benchmarks/knob_sweep.py can re-measure them
# split reductions: the combine launch as a programmatic dependent of the partial sums (sm_90+;
# H200: sum.dim_IntList [4096,768] f32 over dim 0 16.2 -> 14.9 us, argmax [1,1,32064] f16
# 8.0 -> 6.7; one-kernel cases unchanged)
_SPLIT_PDL = True
_ROW_CAP_N, _ROW_CAP_TILE = 4096, 4096  # rows kernel: elements of a row per step, per program
_COL_CAP_I, _COL_CAP_TILE = 128, 4096  # columns kernel: inner elements, elements per program
_WARPS_SMALL, _WARPS_BIG = 4, 8  # tiles below / from 4096 elements


def _row_blocks(rows, red, acc_bytes, target):
    if _INTERPRET or _CONSERVATIVE:
        cap_n, cap_tile = 256, 1024
    else:
        cap_n, cap_tile = (_ROW_CAP_N // 2 if acc_bytes == 8 else _ROW_CAP_N), _ROW_CAP_TILE
    block_n = max(2, min(_pow2(red), cap_n))
    block_m = max(1, min(_pow2(rows), cap_tile // block_n))
    while block_m > 1 and _cdiv(rows, block_m) < target:  # short rows: more programs
        block_m //= 2
    return block_m, block_n


def _col_blocks(inner, red, acc_bytes):
    if _INTERPRET or _CONSERVATIVE:
        cap_i, cap_tile = 32, 1024
    else:
        cap_i, cap_tile = _COL_CAP_I, (_COL_CAP_TILE // 2 if acc_bytes == 8 else _COL_CAP_TILE)
    block_i = max(2, min(_pow2(inner), cap_i))
    block_r = max(2, min(_pow2(red), cap_tile // block_i))
    return block_r, block_i


def _split(tiles, red, block, target):
    """(num_splits, chunk): split R over programs when `tiles` alone would leave the GPU idle."""
    splits = 1
    if not _CONSERVATIVE and tiles < target and red >= 4 * block:
        splits = min(_cdiv(target, tiles), red // (2 * block), 1024)
    chunk = _cdiv(_cdiv(red, max(splits, 1)), block) * block
    chunk = max(chunk, block)
    return max(1, _cdiv(red, chunk)), chunk


def _warps(tile):
    return _WARPS_BIG if tile >= 4096 else _WARPS_SMALL


def _tl_dtype(dt):
    return {
        torch.float16: tl.float16,
        torch.bfloat16: tl.bfloat16,
        torch.float32: tl.float32,
        torch.float64: tl.float64,
        torch.int64: tl.int64,
    }[dt]


def _acc_dtype(in_dtype, out_dtype):
    if torch.float64 in (in_dtype, out_dtype):
        return torch.float64
    if in_dtype.is_floating_point or out_dtype.is_floating_point:
        return torch.float32
    return torch.int64


# ---- emitted: moments ----


@triton.jit
def _moments_finish(t1, t2, shift, offs, ok, out_ptr, out2_ptr, n_f, denom, KIND: tl.constexpr):
    # KIND: 0 sum, 1 mean, 2 var, 3 std, 4 var (+mean in out2), 5 std (+mean in out2).
    # n_f and denom arrive as doubles (tl.float64 parameters): rounded once, to the sums' dtype
    n_f = tl.full([1], n_f, t1.dtype)
    denom = tl.full([1], denom, t1.dtype)
    if KIND == 0:
        tl.store(out_ptr + offs, t1.to(out_ptr.dtype.element_ty), mask=ok)
    elif KIND == 1:
        tl.store(out_ptr + offs, (t1 / n_f).to(out_ptr.dtype.element_ty), mask=ok)
    else:
        mean_s = t1 / n_f
        var = (t2 - t1 * mean_s) / denom
        var = tl.where(var < 0, 0.0, var)  # rounding; keeps NaN
        if KIND == 3 or KIND == 5:
            var = tl.sqrt(var)
        tl.store(out_ptr + offs, var.to(out_ptr.dtype.element_ty), mask=ok)
        if KIND >= 4:
            tl.store(out2_ptr + offs, (shift + mean_s).to(out2_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _moments_rows(x_ptr, out_ptr, out2_ptr, part_ptr, ROWS, R, SO, CHUNK, NSPLIT, n_f: tl.float64,
                  denom: tl.float64,
                  KIND: tl.constexpr, SHIFTED: tl.constexpr, ACC: tl.constexpr, SPLIT: tl.constexpr,
                  BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PDL_NEXT: tl.constexpr):
    _pdl_enter(False, PDL_NEXT)
    pid_m = tl.program_id(0)
    pid_s = tl.program_id(1)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < ROWS
    start = pid_s.to(tl.int64) * CHUNK
    end = tl.minimum(start + CHUNK, R)
    shift = tl.zeros([BLOCK_M], ACC)
    if SHIFTED:
        shift = tl.load(x_ptr + rows * SO, mask=row_ok, other=0).to(ACC)
    s1 = tl.zeros([BLOCK_M, BLOCK_N], ACC)
    s2 = tl.zeros([BLOCK_M, BLOCK_N], ACC)
    for c0 in range(start, end, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        m = row_ok[:, None] & (cols[None, :] < end)
        v = tl.load(x_ptr + rows[:, None] * SO + cols[None, :], mask=m, other=0).to(ACC)
        if KIND >= 2:
            v = tl.where(m, v - shift[:, None], 0)
            s2 += v * v
        s1 += v
    t1 = tl.sum(s1, axis=1)
    t2 = tl.sum(s2, axis=1)
    if SPLIT:
        slot = (rows * NSPLIT + pid_s) * 2
        tl.store(part_ptr + slot, t1, mask=row_ok)
        tl.store(part_ptr + slot + 1, t2, mask=row_ok)
    else:
        _moments_finish(t1, t2, shift, rows, row_ok, out_ptr, out2_ptr, n_f, denom, KIND)


@triton.jit
def _moments_cols(x_ptr, out_ptr, out2_ptr, part_ptr, INNER, R, SO, CHUNK, NSPLIT, NIB,
                  n_f: tl.float64, denom: tl.float64,
                  KIND: tl.constexpr, SHIFTED: tl.constexpr, ACC: tl.constexpr, SPLIT: tl.constexpr,
                  BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr, PDL_NEXT: tl.constexpr):
    _pdl_enter(False, PDL_NEXT)
    pid = tl.program_id(0)
    pid_s = tl.program_id(1)
    o = (pid // NIB).to(tl.int64)
    i = (pid % NIB).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < INNER
    base = x_ptr + o * SO
    start = pid_s.to(tl.int64) * CHUNK
    end = tl.minimum(start + CHUNK, R)
    shift = tl.zeros([BLOCK_I], ACC)
    if SHIFTED:
        shift = tl.load(base + i, mask=i_ok, other=0).to(ACC)
    s1 = tl.zeros([BLOCK_R, BLOCK_I], ACC)
    s2 = tl.zeros([BLOCK_R, BLOCK_I], ACC)
    for r0 in range(start, end, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        m = (r[:, None] < end) & i_ok[None, :]
        v = tl.load(base + r[:, None] * INNER + i[None, :], mask=m, other=0).to(ACC)
        if KIND >= 2:
            v = tl.where(m, v - shift[None, :], 0)
            s2 += v * v
        s1 += v
    t1 = tl.sum(s1, axis=0)
    t2 = tl.sum(s2, axis=0)
    outs = o * INNER + i
    if SPLIT:
        slot = (outs * NSPLIT + pid_s) * 2
        tl.store(part_ptr + slot, t1, mask=i_ok)
        tl.store(part_ptr + slot + 1, t2, mask=i_ok)
    else:
        _moments_finish(t1, t2, shift, outs, i_ok, out_ptr, out2_ptr, n_f, denom, KIND)


@triton.jit
def _moments_combine(x_ptr, out_ptr, out2_ptr, part_ptr, ROWS, SO, INNER, NSPLIT,
                     n_f: tl.float64, denom: tl.float64,
                     KIND: tl.constexpr, SHIFTED: tl.constexpr, ACC: tl.constexpr,
                     BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr, PDL_WAIT: tl.constexpr):
    _pdl_enter(PDL_WAIT, False)
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    ok = rows < ROWS
    s = tl.arange(0, BLOCK_S)
    m = ok[:, None] & (s[None, :] < NSPLIT)
    slot = (rows[:, None] * NSPLIT + s[None, :]) * 2
    t1 = tl.sum(tl.load(part_ptr + slot, mask=m, other=0), axis=1)
    t2 = tl.sum(tl.load(part_ptr + slot + 1, mask=m, other=0), axis=1)
    shift = tl.zeros([BLOCK_M], ACC)
    if SHIFTED:
        first = (rows // INNER) * SO + rows % INNER
        shift = tl.load(x_ptr + first, mask=ok, other=0).to(ACC)
    _moments_finish(t1, t2, shift, rows, ok, out_ptr, out2_ptr, n_f, denom, KIND)


_RUNS = {}  # (geometry, arguments) -> run(x): the launches, planned once


def _moments(x, dims, keepdim, out_dtype, kind, correction=1):
    """Reduce `x` over `dims`; returns out (and the mean when kind >= 4)."""
    key = (x.shape, x.stride(), x.dtype, x.device, tuple(dims), keepdim, out_dtype, kind, correction)
    run = _RUNS.get(key)
    if run is None:
        run = _RUNS[key] = _moments_plan(x, dims, keepdim, out_dtype, kind, correction)
    return run(x)


def _moments_plan(x, dims, keepdim, out_dtype, kind, correction):
    """Everything about the launches that depends only on the geometry, as a `run(x)`."""
    acc = _acc_dtype(x.dtype, out_dtype)
    shape = _out_shape(list(x.shape), dims, keepdim)
    device = x.device
    numel = _prod(shape)
    two = kind >= 4
    if numel == 0:
        def empty_run(x):
            out = torch.empty(shape, dtype=out_dtype, device=device)
            return (out, torch.empty(shape, dtype=out_dtype, device=device)) if two else out

        return empty_run
    perm, outer, red, inner, so = _as_outer_r_inner(x, dims, logical_order=False)
    n_f = float(red)
    denom = float(max(red - correction, 0))
    acc_tl = _tl_dtype(acc)
    size = acc.itemsize
    target = _target_programs(x)
    shifted = kind >= 2 and red > 0  # var/std: sums shifted by the first element of each row
    if inner == 1:
        block_m, block_n = _row_blocks(outer, red, size, target)
        tiles = _cdiv(outer, block_m)
        nsplit, chunk = _split(tiles, red, block_n, target)
        ints = (outer, red, so, chunk, nsplit, n_f, denom)
        consts = dict(KIND=kind, SHIFTED=shifted, ACC=acc_tl, SPLIT=nsplit > 1,
                      BLOCK_M=block_m, BLOCK_N=block_n, num_warps=_warps(block_m * block_n))
        rows_total = outer
    else:
        block_r, block_i = _col_blocks(inner, red, size)
        nib = _cdiv(inner, block_i)
        tiles = outer * nib
        nsplit, chunk = _split(tiles, red, block_r, target)
        ints = (inner, red, so, chunk, nsplit, nib, n_f, denom)
        consts = dict(KIND=kind, SHIFTED=shifted, ACC=acc_tl, SPLIT=nsplit > 1,
                      BLOCK_R=block_r, BLOCK_I=block_i, num_warps=_warps(block_r * block_i))
        rows_total = outer * inner
    grid = (tiles, nsplit)
    rows_kernel = inner == 1
    n_part = rows_total * nsplit * 2 if nsplit > 1 else 1
    if nsplit > 1:
        block_s = max(2, _pow2(nsplit))
        block_m = max(1, min(_pow2(rows_total), 4096 // block_s))
        grid2 = (_cdiv(rows_total, block_m),)
        ints2 = (rows_total, so, inner, nsplit, n_f, denom)
        consts2 = dict(KIND=kind, SHIFTED=shifted, ACC=acc_tl, BLOCK_M=block_m, BLOCK_S=block_s)
    pdl = nsplit > 1 and _SPLIT_PDL and _pdl_ok(device)
    consts["PDL_NEXT"] = pdl

    def run(x):
        out = torch.empty(shape, dtype=out_dtype, device=device)
        out2 = torch.empty(shape, dtype=out_dtype, device=device) if two else out
        xv = x if perm is None else x.permute(perm).contiguous()
        part = torch.empty((n_part,), dtype=acc, device=device) if n_part > 1 else out
        if rows_kernel:
            _moments_rows[grid](xv, out, out2, part, *ints, **consts)
        else:
            _moments_cols[grid](xv, out, out2, part, *ints, **consts)
        if n_part > 1:
            _moments_combine[grid2](xv, out, out2, part, *ints2, **consts2, **_pdl_launch(pdl))
        return (out, out2) if two else out

    return run


# ---- emitted: extremes ----


@triton.jit
def _better(v, best, IS_MAX: tl.constexpr):
    # strictly better, or the first NaN (NaN wins, as in ATen)
    if IS_MAX:
        return (v > best) | ((v != v) & (best == best))
    else:
        return (v < best) | ((v != v) & (best == best))


@triton.jit
def _pick(best, bidx, big, AXIS: tl.constexpr, IS_MAX: tl.constexpr, IS_FLOAT: tl.constexpr):
    """Extreme along AXIS and the smallest index reaching it (first NaN if any)."""
    if IS_MAX:
        val = tl.max(best, axis=AXIS)
    else:
        val = tl.min(best, axis=AXIS)
    hit = best == tl.expand_dims(val, AXIS)
    if IS_FLOAT:
        nan_lane = best != best
        has_nan = tl.max(nan_lane.to(tl.int32), axis=AXIS) > 0
        hit = tl.where(tl.expand_dims(has_nan, AXIS), nan_lane, hit)
        val = tl.where(has_nan, float("nan"), val)
    idx = tl.min(tl.where(hit, bidx, big), axis=AXIS)
    return val, idx


@triton.jit
def _extremes_store(val, idx, offs, ok, out_ptr, idx_ptr, part_v, part_i, pid_s, NSPLIT,
                    SPLIT: tl.constexpr, WANT_VAL: tl.constexpr, WANT_IDX: tl.constexpr):
    if SPLIT:
        slot = offs * NSPLIT + pid_s
        tl.store(part_v + slot, val, mask=ok)
        tl.store(part_i + slot, idx, mask=ok)
    else:
        if WANT_VAL:
            tl.store(out_ptr + offs, val.to(out_ptr.dtype.element_ty), mask=ok)
        if WANT_IDX:
            tl.store(idx_ptr + offs, idx, mask=ok)


@triton.jit
def _extremes_rows(x_ptr, out_ptr, idx_ptr, part_v, part_i, ROWS, R, SO, CHUNK, NSPLIT,
                   INIT: tl.constexpr, IS_MAX: tl.constexpr, IS_FLOAT: tl.constexpr,
                   ACC: tl.constexpr, SPLIT: tl.constexpr, WANT_VAL: tl.constexpr,
                   WANT_IDX: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                   PDL_NEXT: tl.constexpr):
    _pdl_enter(False, PDL_NEXT)
    pid_m = tl.program_id(0)
    pid_s = tl.program_id(1)
    rows = pid_m.to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < ROWS
    start = pid_s.to(tl.int64) * CHUNK
    end = tl.minimum(start + CHUNK, R)
    best = tl.full([BLOCK_M, BLOCK_N], INIT, ACC)
    bidx = tl.zeros([BLOCK_M, BLOCK_N], tl.int64)
    for c0 in range(start, end, BLOCK_N):
        cols = c0 + tl.arange(0, BLOCK_N)
        m = row_ok[:, None] & (cols[None, :] < end)
        v = tl.load(x_ptr + rows[:, None] * SO + cols[None, :], mask=m, other=0).to(ACC)
        take = _better(v, best, IS_MAX) & m
        best = tl.where(take, v, best)
        bidx = tl.where(take, cols[None, :], bidx)
    val, idx = _pick(best, bidx, R, 1, IS_MAX, IS_FLOAT)
    _extremes_store(val, idx, rows, row_ok, out_ptr, idx_ptr, part_v, part_i, pid_s, NSPLIT,
                    SPLIT, WANT_VAL, WANT_IDX)


@triton.jit
def _extremes_cols(x_ptr, out_ptr, idx_ptr, part_v, part_i, INNER, R, SO, CHUNK, NSPLIT, NIB,
                   INIT: tl.constexpr, IS_MAX: tl.constexpr, IS_FLOAT: tl.constexpr,
                   ACC: tl.constexpr, SPLIT: tl.constexpr, WANT_VAL: tl.constexpr,
                   WANT_IDX: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr,
                   PDL_NEXT: tl.constexpr):
    _pdl_enter(False, PDL_NEXT)
    pid = tl.program_id(0)
    pid_s = tl.program_id(1)
    o = (pid // NIB).to(tl.int64)
    i = (pid % NIB).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < INNER
    base = x_ptr + o * SO
    start = pid_s.to(tl.int64) * CHUNK
    end = tl.minimum(start + CHUNK, R)
    best = tl.full([BLOCK_R, BLOCK_I], INIT, ACC)
    bidx = tl.zeros([BLOCK_R, BLOCK_I], tl.int64)
    for r0 in range(start, end, BLOCK_R):
        r = r0 + tl.arange(0, BLOCK_R)
        m = (r[:, None] < end) & i_ok[None, :]
        v = tl.load(base + r[:, None] * INNER + i[None, :], mask=m, other=0).to(ACC)
        take = _better(v, best, IS_MAX) & m
        best = tl.where(take, v, best)
        bidx = tl.where(take, r[:, None], bidx)
    val, idx = _pick(best, bidx, R, 0, IS_MAX, IS_FLOAT)
    _extremes_store(val, idx, o * INNER + i, i_ok, out_ptr, idx_ptr, part_v, part_i, pid_s,
                    NSPLIT, SPLIT, WANT_VAL, WANT_IDX)


@triton.jit
def _extremes_combine(out_ptr, idx_ptr, part_v, part_i, ROWS, R, NSPLIT,
                      INIT: tl.constexpr, IS_MAX: tl.constexpr, IS_FLOAT: tl.constexpr,
                      ACC: tl.constexpr, WANT_VAL: tl.constexpr, WANT_IDX: tl.constexpr,
                      BLOCK_M: tl.constexpr, BLOCK_S: tl.constexpr, PDL_WAIT: tl.constexpr):
    _pdl_enter(PDL_WAIT, False)
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    ok = rows < ROWS
    s = tl.arange(0, BLOCK_S)
    m = ok[:, None] & (s[None, :] < NSPLIT)
    slot = rows[:, None] * NSPLIT + s[None, :]
    best = tl.load(part_v + slot, mask=m, other=0)
    best = tl.where(m, best, INIT).to(ACC)
    bidx = tl.load(part_i + slot, mask=m, other=0)
    val, idx = _pick(best, bidx, R, 1, IS_MAX, IS_FLOAT)
    if WANT_VAL:
        tl.store(out_ptr + rows, val.to(out_ptr.dtype.element_ty), mask=ok)
    if WANT_IDX:
        tl.store(idx_ptr + rows, idx, mask=ok)


_EXTREME_RUNS = {}  # (geometry, arguments) -> run(x): the launches, planned once


def _extremes(x, dims, keepdim, is_max, want_val, want_idx, logical_order=False):
    """Max/min of `x` over `dims`: returns (values or None, indices or None)."""
    key = (x.shape, x.stride(), x.dtype, x.device, tuple(dims), keepdim, is_max, want_val,
           want_idx, logical_order)
    run = _EXTREME_RUNS.get(key)
    if run is None:
        if len(_EXTREME_RUNS) >= 256:
            _EXTREME_RUNS.clear()
        run = _EXTREME_RUNS[key] = _extremes_plan(x, dims, keepdim, is_max, want_val, want_idx,
                                                  logical_order)
    return run(x)


def _extremes_plan(x, dims, keepdim, is_max, want_val, want_idx, logical_order):
    """Everything about the launches that depends only on the geometry, as a `run(x)`."""
    if x.is_complex():
        raise RuntimeError("max/min are not defined for complex tensors")
    shape = _out_shape(list(x.shape), dims, keepdim)
    device = x.device
    red_numel = _prod(x.shape[d] for d in dims)
    if red_numel == 0:
        raise IndexError("max(): Expected reduction dim to have non-zero size")
    if _prod(shape) == 0:
        def empty_run(x):
            out = torch.empty(shape, dtype=x.dtype, device=device) if want_val else None
            idx = torch.empty(shape, dtype=torch.int64, device=device) if want_idx else None
            return out, idx

        return empty_run
    is_float = x.dtype.is_floating_point
    acc = x.dtype if x.dtype == torch.float64 else (torch.float32 if is_float else torch.int64)
    acc_tl = _tl_dtype(acc)
    if is_float:
        init = float("-inf") if is_max else float("inf")
    else:
        init = -(2**63) if is_max else 2**63 - 1
    perm, outer, red, inner, so = _as_outer_r_inner(x, dims, logical_order)
    size = acc.itemsize + 8
    target = _target_programs(x)
    flags = dict(INIT=init, IS_MAX=is_max, IS_FLOAT=is_float, ACC=acc_tl,
                 WANT_VAL=want_val, WANT_IDX=want_idx)
    if inner == 1:
        block_m, block_n = _row_blocks(outer, red, size, target)
        tiles = _cdiv(outer, block_m)
        nsplit, chunk = _split(tiles, red, block_n, target)
        rows_total = outer
        ints = (outer, red, so, chunk, nsplit)
        consts = dict(SPLIT=nsplit > 1, BLOCK_M=block_m, BLOCK_N=block_n,
                      num_warps=_warps(block_m * block_n), **flags)
    else:
        block_r, block_i = _col_blocks(inner, red, size)
        nib = _cdiv(inner, block_i)
        tiles = outer * nib
        nsplit, chunk = _split(tiles, red, block_r, target)
        rows_total = outer * inner
        ints = (inner, red, so, chunk, nsplit, nib)
        consts = dict(SPLIT=nsplit > 1, BLOCK_R=block_r, BLOCK_I=block_i,
                      num_warps=_warps(block_r * block_i), **flags)
    grid = (tiles, nsplit)
    rows_kernel = inner == 1
    n_part = rows_total * nsplit if nsplit > 1 else 0
    if n_part:
        block_s = max(2, _pow2(nsplit))
        block_m = max(1, min(_pow2(rows_total), 4096 // block_s))
        grid2 = (_cdiv(rows_total, block_m),)
        ints2 = (rows_total, red, nsplit)
        consts2 = dict(BLOCK_M=block_m, BLOCK_S=block_s, **flags)
    out_dtype = x.dtype
    pdl = bool(n_part) and _SPLIT_PDL and _pdl_ok(device)
    consts["PDL_NEXT"] = pdl

    def run(x):
        out = torch.empty(shape, dtype=out_dtype, device=device) if want_val else None
        idx = torch.empty(shape, dtype=torch.int64, device=device) if want_idx else None
        out_arg = out if want_val else idx
        idx_arg = idx if want_idx else out_arg
        xv = x if perm is None else x.permute(perm).contiguous()
        if n_part:
            part_v = torch.empty((n_part,), dtype=acc, device=device)
            part_i = torch.empty((n_part,), dtype=torch.int64, device=device)
        else:
            part_v = part_i = out_arg
        if rows_kernel:
            _extremes_rows[grid](xv, out_arg, idx_arg, part_v, part_i, *ints, **consts)
        else:
            _extremes_cols[grid](xv, out_arg, idx_arg, part_v, part_i, *ints, **consts)
        if n_part:
            _extremes_combine[grid2](out_arg, idx_arg, part_v, part_i, *ints2, **consts2,
                                     **_pdl_launch(pdl))
        return out, idx

    return run
