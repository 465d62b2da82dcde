"""amax/amin, max/min(dim) and argmax/argmin kernels: first index among ties, NaN wins, split
chunks folded by a combine kernel."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _cdiv, _pdl_enter, _pdl_launch, _pdl_ok, _pow2
from agent.providers.builtin.kernels.reduction import _SPLIT_PDL, _as_outer_r_inner, _col_blocks
from agent.providers.builtin.kernels.reduction import _out_shape, _prod, _row_blocks, _split
from agent.providers.builtin.kernels.reduction import _target_programs, _tl_dtype, _warps


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
