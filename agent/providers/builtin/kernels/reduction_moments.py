"""Sum, mean, var/std (and var_mean) kernels: rows or columns of shifted sums, split into chunks
whose partials a combine kernel folds in a fixed order."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _cdiv, _pdl_enter, _pdl_launch, _pdl_ok, _pow2
from agent.providers.builtin.kernels.reduction import _SPLIT_PDL, _acc_dtype, _as_outer_r_inner
from agent.providers.builtin.kernels.reduction import _col_blocks, _out_shape, _prod, _row_blocks
from agent.providers.builtin.kernels.reduction import _split, _target_programs, _tl_dtype, _warps


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
