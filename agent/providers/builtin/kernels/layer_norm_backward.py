"""Layer norm backward kernels: grad_input per row, per-program partial column sums for
grad_weight/grad_bias reduced in a fixed order by a second kernel."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _cdiv, _pdl_enter, _pdl_launch, _pdl_ok, _pow2
from agent.providers.builtin.kernels.norm_shared import _CONSERVATIVE, _INTERPRET, _acc
from agent.providers.builtin.kernels.norm_shared import _target_programs, _warps
from agent.providers.builtin.kernels.layer_norm import _contiguous_strides, _ln_blocks
from agent.providers.builtin.kernels.layer_norm import _split_shape


# ---- emitted: backward ----


@triton.jit
def _ln_bwd_cols(w_ptr, first: tl.constexpr, N, HAS_W: tl.constexpr, ACC: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """A one-pass row tile's columns [first, first + BLOCK_N): indices, mask, weights (1 without
    a weight) and zeroed [BLOCK_M, BLOCK_N] column-sum accumulators for g*xhat and g."""
    cols = first + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    w = tl.full([BLOCK_N], 1.0, ACC)
    if HAS_W:
        w = tl.load(w_ptr + cols, mask=col_ok, other=0).to(ACC)
    return (cols, col_ok, w, tl.zeros([BLOCK_M, BLOCK_N], ACC),
            tl.zeros([BLOCK_M, BLOCK_N], ACC))


@triton.jit
def _ln_bwd_tile(g_ptr, x_ptr, rows, row_ok, cols, col_ok, N, mean, rstd, ACC: tl.constexpr):
    """A [rows, cols] tile of the one-pass backward: offsets, mask, g and xhat (0 outside)."""
    m = row_ok[:, None] & col_ok[None, :]
    offs = rows[:, None] * N + cols[None, :]
    x = tl.load(x_ptr + offs, mask=m, other=0).to(ACC)
    g = tl.load(g_ptr + offs, mask=m, other=0).to(ACC)
    return offs, m, g, tl.where(m, (x - mean[:, None]) * rstd[:, None], 0.0)


@triton.jit
def _ln_bwd_step(g_ptr, x_ptr, w_ptr, rows, row_ok, first, N, mean, rstd, HAS_W: tl.constexpr,
                 ACC: tl.constexpr, BLOCK_N: tl.constexpr):
    """A two-pass row step's tile at columns [first, first + BLOCK_N): offsets, mask, g times
    the weight, and xhat (0 outside)."""
    cols = first + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    offs, m, g, xhat = _ln_bwd_tile(g_ptr, x_ptr, rows, row_ok, cols, col_ok, N, mean, rstd, ACC)
    if HAS_W:
        g = g * tl.load(w_ptr + cols, mask=col_ok, other=0).to(ACC)[None, :]
    return offs, m, g, xhat


@triton.jit
def _ln_bwd(g_ptr, x_ptr, w_ptr, mean_ptr, rstd_ptr, dx_ptr, part_ptr, M, N, RPP,
            HAS_W: tl.constexpr, WANT_DX: tl.constexpr, WANT_DW: tl.constexpr,
            WANT_DB: tl.constexpr, ACC: tl.constexpr, ONE_PASS: tl.constexpr,
            STAGES: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
            PDL_NEXT: tl.constexpr, BLOCK_N2: tl.constexpr = 0):
    """Rows [p*RPP, (p+1)*RPP): grad_input, and this program's column sums of g*xhat and g:
    rows p and P + p of the [2P, N] fp32 workspace (P programs; each element written once, so
    the second kernel sums them in a fixed order: no atomics, no read-after-write races).
    PDL_NEXT: the column-sum launch may start now (it waits for this grid's results itself).
    ONE_PASS with BLOCK_N2 > 0: the row is two tiles, columns [0, BLOCK_N) and [BLOCK_N,
    BLOCK_N + BLOCK_N2) (768 = 512 + 256: no padded lanes holding registers and doing math,
    where one tile pads 768 to 1024)."""
    _pdl_enter(False, PDL_NEXT)
    p = tl.program_id(0).to(tl.int64)
    row_start = p * RPP
    row_end = tl.minimum(row_start + RPP, M)
    pw_ptr = part_ptr + p * N
    pb_ptr = part_ptr + (tl.num_programs(0).to(tl.int64) + p) * N
    if ONE_PASS:
        # tile-shaped column sums, reduced over rows once after the loop: a reduction over the
        # rows of each step cost ~20 barriers and shared-memory round trips per step
        cols, col_ok, w, acc_w, acc_b = _ln_bwd_cols(w_ptr, 0, N, HAS_W, ACC, BLOCK_M, BLOCK_N)
        if BLOCK_N2 > 0:
            cols2, col_ok2, w2, acc_w2, acc_b2 = _ln_bwd_cols(w_ptr, BLOCK_N, N, HAS_W, ACC,
                                                              BLOCK_M, BLOCK_N2)
        for r0 in tl.range(row_start, row_end, BLOCK_M, num_stages=STAGES):
            rows = r0 + tl.arange(0, BLOCK_M)
            row_ok = rows < row_end
            mean = tl.load(mean_ptr + rows, mask=row_ok, other=0).to(ACC)
            rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0).to(ACC)
            offs, m, g, xhat = _ln_bwd_tile(g_ptr, x_ptr, rows, row_ok, cols, col_ok, N, mean,
                                            rstd, ACC)
            if BLOCK_N2 > 0:
                offs2, m2, g2, xhat2 = _ln_bwd_tile(g_ptr, x_ptr, rows, row_ok, cols2, col_ok2,
                                                    N, mean, rstd, ACC)
            if WANT_DX:
                wg = g * w[None, :]
                c1 = tl.sum(wg * xhat, axis=1)
                c2 = tl.sum(wg, axis=1)
                if BLOCK_N2 > 0:
                    wg2 = g2 * w2[None, :]
                    c1 += tl.sum(wg2 * xhat2, axis=1)
                    c2 += tl.sum(wg2, axis=1)
                c1 = c1 / N
                c2 = c2 / N
                dx = (wg - c2[:, None] - xhat * c1[:, None]) * rstd[:, None]
                tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=m)
                if BLOCK_N2 > 0:
                    dx2 = (wg2 - c2[:, None] - xhat2 * c1[:, None]) * rstd[:, None]
                    tl.store(dx_ptr + offs2, dx2.to(dx_ptr.dtype.element_ty), mask=m2)
            acc_w += g * xhat
            acc_b += g
            if BLOCK_N2 > 0:
                acc_w2 += g2 * xhat2
                acc_b2 += g2
        if WANT_DW:
            tl.store(pw_ptr + cols, tl.sum(acc_w, axis=0), mask=col_ok)
            if BLOCK_N2 > 0:
                tl.store(pw_ptr + cols2, tl.sum(acc_w2, axis=0), mask=col_ok2)
        if WANT_DB:
            tl.store(pb_ptr + cols, tl.sum(acc_b, axis=0), mask=col_ok)
            if BLOCK_N2 > 0:
                tl.store(pb_ptr + cols2, tl.sum(acc_b2, axis=0), mask=col_ok2)
    else:
        if WANT_DX:
            for r0 in range(row_start, row_end, BLOCK_M):
                rows = r0 + tl.arange(0, BLOCK_M)
                row_ok = rows < row_end
                mean = tl.load(mean_ptr + rows, mask=row_ok, other=0).to(ACC)
                rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0).to(ACC)
                a1 = tl.zeros([BLOCK_M, BLOCK_N], ACC)
                a2 = tl.zeros([BLOCK_M, BLOCK_N], ACC)
                for c0 in range(0, N, BLOCK_N):
                    offs, m, g, xhat = _ln_bwd_step(g_ptr, x_ptr, w_ptr, rows, row_ok, c0, N,
                                                    mean, rstd, HAS_W, ACC, BLOCK_N)
                    a1 += g * xhat
                    a2 += g
                c1 = tl.sum(a1, axis=1) / N
                c2 = tl.sum(a2, axis=1) / N
                for c0 in range(0, N, BLOCK_N):
                    offs, m, g, xhat = _ln_bwd_step(g_ptr, x_ptr, w_ptr, rows, row_ok, c0, N,
                                                    mean, rstd, HAS_W, ACC, BLOCK_N)
                    dx = (g - c2[:, None] - xhat * c1[:, None]) * rstd[:, None]
                    tl.store(dx_ptr + offs, dx.to(dx_ptr.dtype.element_ty), mask=m)
        if WANT_DW or WANT_DB:
            for c0 in range(0, N, BLOCK_N):
                cols = c0 + tl.arange(0, BLOCK_N)
                col_ok = cols < N
                acc_w = tl.zeros([BLOCK_N], ACC)
                acc_b = tl.zeros([BLOCK_N], ACC)
                for r0 in range(row_start, row_end, BLOCK_M):
                    rows = r0 + tl.arange(0, BLOCK_M)
                    row_ok = rows < row_end
                    m = row_ok[:, None] & col_ok[None, :]
                    offs = rows[:, None] * N + cols[None, :]
                    mean = tl.load(mean_ptr + rows, mask=row_ok, other=0).to(ACC)
                    rstd = tl.load(rstd_ptr + rows, mask=row_ok, other=0).to(ACC)
                    x = tl.load(x_ptr + offs, mask=m, other=0).to(ACC)
                    g = tl.load(g_ptr + offs, mask=m, other=0).to(ACC)
                    xhat = tl.where(m, (x - mean[:, None]) * rstd[:, None], 0.0)
                    acc_w += tl.sum(g * xhat, axis=0)
                    acc_b += tl.sum(g, axis=0)
                if WANT_DW:
                    tl.store(pw_ptr + cols, acc_w, mask=col_ok)
                if WANT_DB:
                    tl.store(pb_ptr + cols, acc_b, mask=col_ok)


@triton.jit
def _colsum(part_ptr, dw_ptr, db_ptr, P, N, WANT_DW: tl.constexpr, WANT_DB: tl.constexpr,
            ACC: tl.constexpr, BLOCK_P: tl.constexpr, BLOCK_N: tl.constexpr,
            PDL_WAIT: tl.constexpr):
    """grad_weight and grad_bias for BLOCK_N columns: the P partial rows of each, in order.
    PDL_WAIT (a programmatic dependent launch): launched while the row kernel still runs, it
    waits here until that grid has finished and its partial rows are visible."""
    _pdl_enter(PDL_WAIT, False)
    cols = tl.program_id(0).to(tl.int64) * BLOCK_N + tl.arange(0, BLOCK_N)
    col_ok = cols < N
    acc_w = tl.zeros([BLOCK_P, BLOCK_N], ACC)
    acc_b = tl.zeros([BLOCK_P, BLOCK_N], ACC)
    for p0 in range(0, P, BLOCK_P):
        ps = p0 + tl.arange(0, BLOCK_P)
        m = (ps[:, None] < P) & col_ok[None, :]
        offs = ps[:, None].to(tl.int64) * N + cols[None, :]
        if WANT_DW:
            acc_w += tl.load(part_ptr + offs, mask=m, other=0)
        if WANT_DB:
            acc_b += tl.load(part_ptr + P * N + offs, mask=m, other=0)
    if WANT_DW:
        tl.store(dw_ptr + cols, tl.sum(acc_w, axis=0).to(dw_ptr.dtype.element_ty), mask=col_ok)
    if WANT_DB:
        tl.store(db_ptr + cols, tl.sum(acc_b, axis=0).to(db_ptr.dtype.element_ty), mask=col_ok)


# Backward knobs (module constants read when a geometry is first planned; knob_sweep re-measures
# them; measurements in benchmarks/data/builtin_knob_measurements.json). One-pass rows of up to
# _LNB_WARP_ROW (padded) elements run as one-warp programs stepping a row at a time, with many
# steps in flight: loads stay in flight while a row is computed. 0 turns it off.
_LNB_WARP_ROW = 1024
_LNB_WARP_PROGRAMS_PER_SM = 4
# rows of more than _LNB_WIDE_ROW_BYTES take fewer programs per SM (fewer bytes in flight per SM)
_LNB_WIDE_ROW_BYTES = 2048
_LNB_WIDE_PROGRAMS_PER_SM = 3
_LNB_STAGES = 4  # row-kernel loop steps whose loads are in flight at once (Triton pipelining)
# steps in flight of one-warp programs of rows up to _LNB_WIDE_ROW_BYTES (narrow rows want more)
_LNB_NARROW_STAGES = 5
# one-pass rows as two power-of-two tiles when they pad less than one (768 = 512 + 256, not 1024):
# a quarter of the lanes' registers and math saved
_LNB_SPLIT_ROW = True
# longer rows: rows per loop step of the one-pass row kernel (0: about 4096 elements a step),
# warps (0: by the step's elements), programs per SM (each writes one partial row to reduce)
_LNB_ROWS = 0
_LNB_WARPS = 4
_LNB_PROGRAMS_PER_SM = 2
_LNB_SUM_COLS = 16  # columns per program of the partial-row reduction
_LNB_SUM_ROWS = 512  # partial rows per loop step of that reduction (all of them when fewer)
# its warps (4 is the fastest measured)
_LNB_SUM_WARPS = 4
# the reduction as a programmatic dependent launch (sm_90+): its launch overlaps the row
# kernel's last programs instead of following the row kernel's exit
_LNB_PDL = True

_BWD_RUNS = {}  # (geometry, arguments) -> run(...): the launches, planned once


def _layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):
    key = (input.shape, input.dtype, input.device, tuple(normalized_shape), tuple(output_mask),
           None if weight is None else weight.dtype, None if bias is None else bias.dtype)
    run = _BWD_RUNS.get(key)
    if run is None:
        run = _BWD_RUNS[key] = _layer_norm_backward_plan(input, normalized_shape, weight, bias,
                                                         output_mask)
    return run(grad_out, input, mean, rstd, weight)


def _layer_norm_backward_plan(input, normalized_shape, weight, bias, output_mask):
    """Two launches: grad_input and per-program partial column sums (rows of P programs), then
    the fixed-order reduction of the partials into grad_weight/grad_bias."""
    lead, k, M, N = _split_shape(input, normalized_shape)
    want_dx, want_dw, want_db = (bool(v) for v in output_mask)
    dtype, device = input.dtype, input.device
    param = weight if weight is not None else bias
    pdtype = param.dtype if param is not None else dtype
    pshape = tuple(normalized_shape)
    pstrides = _contiguous_strides(pshape)
    has_w = weight is not None
    wdt = torch.float64 if dtype == torch.float64 else torch.float32
    acc = _acc(dtype)
    small = _INTERPRET or _CONSERVATIVE
    target = _target_programs(input)  # 4 per SM
    # a few programs per SM, each over several row tiles: few partial rows to reduce
    one_pass, block_m, block_n = _ln_blocks(max(M, 1), max(N, 1), max(1, target // 4))
    block_n2 = 0
    if one_pass and _LNB_SPLIT_ROW and N > 2:  # two tiles where they pad less than one
        low = 1 << (N.bit_length() - 1)
        rest = max(2, _pow2(N - low)) if N > low else 0
        if rest and low + rest < block_n:
            block_n, block_n2 = low, rest
    stages = 1 if small else _LNB_STAGES
    # (fp64 accumulators take twice the registers)
    if (one_pass and not small
            and (block_n + block_n2) * (2 if acc == tl.float64 else 1) <= _LNB_WARP_ROW):
        wide = N * input.element_size() > _LNB_WIDE_ROW_BYTES
        per_sm = _LNB_WIDE_PROGRAMS_PER_SM if wide else _LNB_WARP_PROGRAMS_PER_SM
        block_m, warps = 1, 1
        if not wide:
            stages = _LNB_NARROW_STAGES
    else:
        if one_pass and _LNB_ROWS and not small:
            block_m = _LNB_ROWS
        per_sm = 2 if small else _LNB_PROGRAMS_PER_SM
        warps = _LNB_WARPS if _LNB_WARPS and not small else _warps(block_m * block_n)
    programs = max(1, min(_cdiv(M, block_m), target * per_sm // 4))
    rpp = max(1, _cdiv(_cdiv(M, programs), block_m)) * block_m
    programs = max(1, _cdiv(M, rpp))
    nothing = N == 0 or not (want_dx or want_dw or want_db)
    sums = (want_dw or want_db) and not nothing
    rows_launch = _ln_bwd[(programs,)] if M > 0 and not nothing else None
    pdl = bool(sums and _LNB_PDL and _pdl_ok(device))
    rows_consts = dict(HAS_W=has_w, WANT_DX=want_dx, WANT_DW=want_dw, WANT_DB=want_db, ACC=acc,
                       ONE_PASS=one_pass, STAGES=stages, BLOCK_M=block_m,
                       BLOCK_N=block_n, PDL_NEXT=pdl, BLOCK_N2=block_n2, num_warps=warps)
    parts = programs if M > 0 else 0  # M == 0: the sums are zeros
    # one loop step over all partial rows where they fit: the loads of a step are all in flight
    block_c = max(2, min(_pow2(N), 32 if small else _LNB_SUM_COLS))
    block_p = max(2, min(_pow2(parts), 16 if small else _LNB_SUM_ROWS))
    sum_launch = _colsum[(_cdiv(N, block_c),)] if sums else None
    sum_consts = dict(WANT_DW=want_dw, WANT_DB=want_db, ACC=acc, BLOCK_P=block_p,
                      BLOCK_N=block_c, num_warps=4 if small else _LNB_SUM_WARPS)
    work_numel = max(1, 2 * parts * N)

    def run(grad_out, input, mean, rstd, weight):
        x = input.contiguous()
        dx = torch.empty_like(x) if want_dx else None  # x is contiguous, so is dx
        dw = torch.empty_strided(pshape, pstrides, dtype=pdtype, device=device) if want_dw else None
        db = torch.empty_strided(pshape, pstrides, dtype=pdtype, device=device) if want_db else None
        if nothing:
            return dx, dw, db
        part = torch.empty((work_numel,), dtype=wdt, device=device) if sums else x
        if rows_launch is not None:
            rows_launch(grad_out.contiguous(), x, weight.contiguous() if has_w else x,
                        mean.contiguous(), rstd.contiguous(), x if dx is None else dx, part,
                        M, N, rpp, **rows_consts)
        if sum_launch is not None:
            sum_launch(part, part if dw is None else dw, part if db is None else db, parts, N,
                       **sum_consts, **_pdl_launch(pdl))
        return dx, dw, db

    return run
