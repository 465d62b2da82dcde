"""Layer norm and batch norm kernels: the text the builtin writer copies into the files it emits."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import (
    _cdiv,
    _gl_barrier,
    _gl_copy,
    _num_sms,
    _pdl_enter,
    _pdl_launch,
    _pdl_ok,
    _pow2,
    async_copy,
    gl,
    gluon,
)


# ---- emitted: header ----
import functools  # noqa: F401  (the inlined _num_sms uses it)
import os

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CONSERVATIVE = False  # variant >= 1: smaller tiles, no split statistics


# inline: _cdiv, _pow2, _num_sms


def _target_programs(x):
    if _INTERPRET or x.device.type != "cuda":
        return 4
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    return 4 * _num_sms(index)


def _stat_dtype(x):
    """ATen keeps statistics in the accumulate type on CUDA, in the input dtype on the CPU."""
    if x.device.type == "cuda" and x.dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    return x.dtype


def _acc(*dtypes):
    return tl.float64 if torch.float64 in dtypes else tl.float32


def _warps(tile):
    return 4 if tile <= 1024 else (8 if tile <= 4096 else 16)


# ---- emitted: ln_common ----


def _ln_blocks(M, N, target):
    small = _INTERPRET or _CONSERVATIVE
    one_pass_max = 256 if small else 8192
    tile = 1024 if small else 4096
    one_pass = _pow2(N) <= one_pass_max
    block_n = max(2, _pow2(N)) if one_pass else min(tile, one_pass_max)
    block_m = max(1, min(_pow2(M), tile // block_n))
    while block_m > 1 and _cdiv(M, block_m) < target:  # short rows: more programs
        block_m //= 2
    return one_pass, block_m, block_n


def _contiguous_strides(shape):
    strides, step = [], 1
    for s in reversed(shape):
        strides.append(step)
        step *= max(s, 1)
    return tuple(reversed(strides))


def _split_shape(x, normalized_shape):
    k = len(normalized_shape)
    if k == 0 or list(x.shape[x.dim() - k:]) != list(normalized_shape):
        raise RuntimeError(f"normalized_shape {list(normalized_shape)} does not match the input's trailing dims {list(x.shape)}")
    lead = list(x.shape[: x.dim() - k])
    M = 1
    for s in lead:
        M *= s
    N = 1
    for s in normalized_shape:
        N *= s
    return lead, k, M, N


# ---- emitted: ln_forward ----


@triton.jit
def _ln_fwd(x_ptr, w_ptr, b_ptr, y_ptr, mean_ptr, rstd_ptr, M, N, eps: tl.float64,
            HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr, ONE_PASS: tl.constexpr,
            BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    eps = tl.full([], eps, ACC)  # a double argument (a plain float is packed as fp32)
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < M
    row_off = rows[:, None] * N
    if ONE_PASS:
        cols = tl.arange(0, BLOCK_N)
        col_ok = cols < N
        m = row_ok[:, None] & col_ok[None, :]
        x = tl.load(x_ptr + row_off + cols[None, :], mask=m, other=0).to(ACC)
        mean = tl.sum(x, axis=1) / N
        d = tl.where(m, x - mean[:, None], 0.0)
        var = tl.sum(d * d, axis=1) / N
        rstd = 1.0 / tl.sqrt(var + eps)
        y = d * rstd[:, None]
        if HAS_W:
            y = y * tl.load(w_ptr + cols, mask=col_ok, other=0).to(ACC)[None, :]
        if HAS_B:
            y = y + tl.load(b_ptr + cols, mask=col_ok, other=0).to(ACC)[None, :]
        tl.store(y_ptr + row_off + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=m)
    else:
        shift = tl.load(x_ptr + rows * N, mask=row_ok, other=0).to(ACC)
        s1 = tl.zeros([BLOCK_M, BLOCK_N], ACC)
        s2 = tl.zeros([BLOCK_M, BLOCK_N], ACC)
        for c0 in range(0, N, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            m = row_ok[:, None] & (cols[None, :] < N)
            x = tl.load(x_ptr + row_off + cols[None, :], mask=m, other=0).to(ACC)
            d = tl.where(m, x - shift[:, None], 0.0)
            s1 += d
            s2 += d * d
        t1 = tl.sum(s1, axis=1) / N
        var = tl.sum(s2, axis=1) / N - t1 * t1
        var = tl.where(var < 0, 0.0, var)
        mean = shift + t1
        rstd = 1.0 / tl.sqrt(var + eps)
        for c0 in range(0, N, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            col_ok = cols < N
            m = row_ok[:, None] & col_ok[None, :]
            x = tl.load(x_ptr + row_off + cols[None, :], mask=m, other=0).to(ACC)
            y = (x - mean[:, None]) * rstd[:, None]
            if HAS_W:
                y = y * tl.load(w_ptr + cols, mask=col_ok, other=0).to(ACC)[None, :]
            if HAS_B:
                y = y + tl.load(b_ptr + cols, mask=col_ok, other=0).to(ACC)[None, :]
            tl.store(y_ptr + row_off + cols[None, :], y.to(y_ptr.dtype.element_ty), mask=m)
    rstd = tl.where(row_ok, rstd, 0.0)  # padding rows: keep the (unstored) cast finite
    tl.store(mean_ptr + rows, mean.to(mean_ptr.dtype.element_ty), mask=row_ok)
    tl.store(rstd_ptr + rows, rstd.to(rstd_ptr.dtype.element_ty), mask=row_ok)


_RUNS = {}  # (geometry, arguments) -> run(...): the launch, planned once


def _layer_norm(input, normalized_shape, weight, bias, eps):
    key = (input.shape, input.dtype, input.device, tuple(normalized_shape), weight is None,
           bias is None)
    run = _RUNS.get(key)
    if run is None:
        run = _RUNS[key] = _layer_norm_plan(input, normalized_shape, weight, bias)
    return run(input, weight, bias, eps)


def _layer_norm_plan(input, normalized_shape, weight, bias):
    # the launch and the allocation shapes of one geometry; run() is what each call pays
    lead, k, M, N = _split_shape(input, normalized_shape)
    stat_shape = tuple(lead + [1] * k)
    stat_strides = _contiguous_strides(stat_shape)
    stat_dtype = _stat_dtype(input)
    device = input.device
    has_w, has_b = weight is not None, bias is not None
    empty = M == 0 or N == 0
    one_pass, block_m, block_n = _ln_blocks(max(M, 1), max(N, 1), _target_programs(input))
    launch = _ln_fwd[(_cdiv(M, block_m),)]
    consts = dict(HAS_W=has_w, HAS_B=has_b, ACC=_acc(input.dtype), ONE_PASS=one_pass,
                  BLOCK_M=block_m, BLOCK_N=block_n, num_warps=_warps(block_m * block_n))

    def run(input, weight, bias, eps):
        x = input.contiguous()
        y = torch.empty_like(x)  # the cheapest allocation call; x is contiguous, so is y
        mean = torch.empty_strided(stat_shape, stat_strides, dtype=stat_dtype, device=device)
        rstd = torch.empty_strided(stat_shape, stat_strides, dtype=stat_dtype, device=device)
        if empty:
            return y, mean, rstd
        launch(x, weight.contiguous() if has_w else x, bias.contiguous() if has_b else x, y,
               mean, rstd, M, N, float(eps), **consts)
        return y, mean, rstd

    return run


# ---- emitted: ln_backward ----


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
                    cols = c0 + tl.arange(0, BLOCK_N)
                    col_ok = cols < N
                    m = row_ok[:, None] & col_ok[None, :]
                    offs = rows[:, None] * N + cols[None, :]
                    x = tl.load(x_ptr + offs, mask=m, other=0).to(ACC)
                    g = tl.load(g_ptr + offs, mask=m, other=0).to(ACC)
                    if HAS_W:
                        g = g * tl.load(w_ptr + cols, mask=col_ok, other=0).to(ACC)[None, :]
                    a1 += g * tl.where(m, (x - mean[:, None]) * rstd[:, None], 0.0)
                    a2 += g
                c1 = tl.sum(a1, axis=1) / N
                c2 = tl.sum(a2, axis=1) / N
                for c0 in range(0, N, BLOCK_N):
                    cols = c0 + tl.arange(0, BLOCK_N)
                    col_ok = cols < N
                    m = row_ok[:, None] & col_ok[None, :]
                    offs = rows[:, None] * N + cols[None, :]
                    x = tl.load(x_ptr + offs, mask=m, other=0).to(ACC)
                    g = tl.load(g_ptr + offs, mask=m, other=0).to(ACC)
                    if HAS_W:
                        g = g * tl.load(w_ptr + cols, mask=col_ok, other=0).to(ACC)[None, :]
                    xhat = (x - mean[:, None]) * rstd[:, None]
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


# Backward knobs (module constants read when a geometry is first planned, so that
# benchmarks/knob_sweep.py can re-measure them). H200, [8192, 768] bf16 before these: 59 us for
# an 8.9 us floor; per loop step a program held 4 rows (12 KB of loads) and then computed with
# no load in flight, about 2 programs per SM, so most of the time nothing was read.
# One-pass rows of up to _LNB_WARP_ROW (padded) elements: programs of one warp that step one
# row at a time, _LNB_WARP_PROGRAMS_PER_SM per SM, _LNB_STAGES steps in flight. H200, evaluator
# timing, against 4-row steps of 4 warps (2 programs per SM, 3-4 stages): [32,197,768] f32 22.0
# vs 22.4 us, [8,1024,768] bf16 18.0 vs 19.9, [8,512,768] f32 16.6 vs 16.9, [8,512,128] f32 8.1 vs
# 10.8, [8,128,128] f32 6.5 vs 7.7 (2-row steps of 2 warps: 24.1 / 17.4 / 18.1 / 8.8 / 7.4;
# 6 stages 22.9 / 17.5 / 17.8 / 8.2 / 6.4). 0 turns it off.
_LNB_WARP_ROW = 1024
_LNB_WARP_PROGRAMS_PER_SM = 4
# rows of more than _LNB_WIDE_ROW_BYTES take _LNB_WIDE_PROGRAMS_PER_SM (fewer bytes in flight per
# SM). H200, evaluator timing, 3 / 4 programs per SM (two runs each): [32,197,768] f32 21.2, 21.0
# / 21.9, 21.7 us, [8,512,768] f32 16.1, 15.9 / 16.5, 16.3; slower at 3: 128-wide f32 rows ([8,512,
# 128] 8.6, 9.0 / 8.1, 8.5) and 768-wide bf16 ones ([8,1024,768] 18.4 / 17.2, one run)
_LNB_WIDE_ROW_BYTES = 2048
_LNB_WIDE_PROGRAMS_PER_SM = 3
_LNB_STAGES = 4  # row-kernel loop steps whose loads are in flight at once (Triton pipelining)
# steps in flight of one-warp programs of rows up to _LNB_WIDE_ROW_BYTES. H200, evaluator
# timing, 4 / 5 (two runs each): [8,1024,768] bf16 17.2, 17.3 / 16.5, 16.8 us, [8,512,128] f32
# 8.5, 8.7 / 8.3, 8.3, [8,128,128] f32 6.3, 6.4 / 6.3, 6.4; the wider f32 rows slower at 5
# ([8,512,768] 15.9 / 16.5)
_LNB_NARROW_STAGES = 5
# one-pass rows of N elements as two power-of-two tiles when they pad less than one (768 = 512 +
# 256 instead of 1024: a quarter of the lanes' registers and math saved; the one-warp row kernel
# 238 -> 168 registers for sm_90). H200, evaluator timing, one tile / two: [32,197,768] f32 22.1
# / 21.8 us, [8,1024,768] bf16 17.9 / 17.4, [8,512,768] f32 16.9 / 16.5
_LNB_SPLIT_ROW = True
# longer rows: rows per loop step of the one-pass row kernel (0: about 4096 elements a step),
# warps (0: by the step's elements; H200 bf16 [8192, 768]: 20 us vs 26 for 4 warps against 8),
# programs per SM (each writes one partial row to reduce)
_LNB_ROWS = 0
_LNB_WARPS = 4
_LNB_PROGRAMS_PER_SM = 2
_LNB_SUM_COLS = 16  # columns per program of the partial-row reduction
_LNB_SUM_ROWS = 512  # partial rows per loop step of that reduction (all of them when fewer)
# its warps (H200, [32,197,768] f32 / [8,1024,768] bf16: 4 warps 21.8 / 17.1 us, 8 22.9 / 18.6,
# 16 22.7 / 18.8)
_LNB_SUM_WARPS = 4
# the reduction as a programmatic dependent launch (sm_90+): its launch overlaps the row
# kernel's last programs instead of following the row kernel's exit (H200: [8,512,128] f32
# 12.4 -> 11.2 us, [8,128,128] 9.7 -> 8.8; the large cases unchanged)
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


# ---- emitted: bn ----


@triton.jit
def _bn_partials(x_ptr, g_ptr, mean_ptr, part_ptr, N, C, HW, NB_PER, J_PER, SJ, S,
                 BACKWARD: tl.constexpr, ACC: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_J: tl.constexpr, PDL_NEXT: tl.constexpr):
    """Per (channel, slice): forward -> sums of x-x0 and (x-x0)^2 (x0 = the channel's first
    element); backward -> sums of g and g*(x-mean). PDL_NEXT: the channel launch may start now."""
    _pdl_enter(False, PDL_NEXT)
    c = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    n_start = (s // SJ).to(tl.int64) * NB_PER
    n_end = tl.minimum(n_start + NB_PER, N)
    j_start = (s % SJ).to(tl.int64) * J_PER
    j_end = tl.minimum(j_start + J_PER, HW)
    chan = c * HW
    if BACKWARD:
        shift = tl.load(mean_ptr + c).to(ACC)
    else:
        shift = tl.load(x_ptr + chan).to(ACC)
    a1 = tl.zeros([BLOCK_N, BLOCK_J], ACC)
    a2 = tl.zeros([BLOCK_N, BLOCK_J], ACC)
    for n0 in range(n_start, n_end, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        row = n[:, None] * C * HW + chan
        for j0 in range(j_start, j_end, BLOCK_J):
            j = j0 + tl.arange(0, BLOCK_J)
            m = (n[:, None] < n_end) & (j[None, :] < j_end)
            x = tl.load(x_ptr + row + j[None, :], mask=m, other=0).to(ACC)
            d = tl.where(m, x - shift, 0.0)
            if BACKWARD:
                g = tl.load(g_ptr + row + j[None, :], mask=m, other=0).to(ACC)
                a1 += g
                a2 += g * d
            else:
                a1 += d
                a2 += d * d
    slot = (c * S + s) * 2
    tl.store(part_ptr + slot, tl.sum(tl.sum(a1, axis=1), axis=0))
    tl.store(part_ptr + slot + 1, tl.sum(tl.sum(a2, axis=1), axis=0))


@triton.jit
def _bn_halve(v, DT: tl.constexpr, W: tl.constexpr, L: tl.constexpr):
    """One shuffle-down step of a warp reduction over v [W warps, L lanes]: lane i < L/2 gets
    v[i] + v[i + L/2], the received value passed through DT first (see _bn_eager_partials)."""
    lo, hi = tl.split(tl.permute(tl.reshape(v, [W, 2, L // 2]), [0, 2, 1]))
    return lo + hi.to(DT).to(tl.float32)


@triton.jit
def _bn_warp_sums(v, DT: tl.constexpr, W: tl.constexpr):
    """[W, 32] -> [W, 1]: each warp's shuffle-down reduction, lane 0's result."""
    v = _bn_halve(_bn_halve(v, DT, W, 32), DT, W, 16)
    v = _bn_halve(_bn_halve(v, DT, W, 8), DT, W, 4)
    return _bn_halve(v, DT, W, 2)


@triton.jit
def _bn_block_sum(a, DT: tl.constexpr, W: tl.constexpr):
    """The block's reduction of per-thread sums a [TY, TX] (thread id tx + ty * TX, W warps):
    each warp's shuffle tree, then warp 0's over the W results (its lanes past W hold zeros,
    and adding them changes nothing)."""
    v = tl.reshape(_bn_warp_sums(tl.reshape(a, [W, 32]), DT, W), [1, W])
    if W >= 16:
        v = _bn_halve(v, DT, 1, 16)
    if W >= 8:
        v = _bn_halve(v, DT, 1, 8)
    if W >= 4:
        v = _bn_halve(v, DT, 1, 4)
    if W >= 2:
        v = _bn_halve(v, DT, 1, 2)
    return tl.sum(tl.sum(v, axis=1), axis=0)


@triton.jit
def _bn_warp_tree(v, DT: tl.constexpr, R: tl.constexpr, L: tl.constexpr):
    """[R, L] -> [R]: each row's L warp results (L a power of two up to 32, zeros past the
    channel's warps) reduced as `_bn_block_sum`'s warp 0 does. (`_bn_block_sum` written with
    it compiles the fused kernel differently for sm_90: 32 of its 64 loads read early, not 0.)"""
    if L >= 32:
        v = _bn_halve(v, DT, R, 32)
    if L >= 16:
        v = _bn_halve(v, DT, R, 16)
    if L >= 8:
        v = _bn_halve(v, DT, R, 8)
    if L >= 4:
        v = _bn_halve(v, DT, R, 4)
    if L >= 2:
        v = _bn_halve(v, DT, R, 2)
    return tl.sum(v, axis=1)


@triton.jit
def _bn_block_tile(b0, x0, c, N, C, HW, TX: tl.constexpr, TY: tl.constexpr):
    """Offsets and mask of channel c's [TY batches from b0, TX positions from x0] tile: what
    eager's TX x TY thread block (or a TX x TY part of it) reads in one step of its loops."""
    b = b0 + tl.arange(0, TY)
    j = x0 + tl.arange(0, TX)
    offs = ((b.to(tl.int64) * C + c) * HW)[:, None] + j[None, :]
    return offs, (b[:, None] < N) & (j[None, :] < HW)


@triton.jit
def _bn_step_tile(s, nx, c, N, C, HW, TX: tl.constexpr, TY: tl.constexpr, ty0, tx0,
                  TXS: tl.constexpr, TYS: tl.constexpr):
    """`_bn_block_tile` of eager's step s (batch outer, nx position steps inner) for the block's
    threads (ty0.., tx0..) of a TXS x TYS part; past the last step, the batch index reaches N
    and masks the whole tile."""
    bi = s // nx
    return _bn_block_tile(bi * TY + ty0, (s - bi * nx) * TX + tx0, c, N, C, HW, TXS, TYS)


@triton.jit
def _bn_eager_partials(x_ptr, g_ptr, mean_ptr, part_ptr, istd_ptr, rv_ptr, w_ptr, dx_ptr, dw_ptr,
                       db_ptr, N, C, HW, inv_count: tl.float64, eps: tl.float64,
                       TX: tl.constexpr, TY: tl.constexpr, FUSED: tl.constexpr,
                       TRAIN: tl.constexpr, HAS_W: tl.constexpr, WANT_DW: tl.constexpr,
                       WANT_DB: tl.constexpr, PDL_NEXT: tl.constexpr, UNROLL: tl.constexpr,
                       SPLIT: tl.constexpr, TXS: tl.constexpr, TYS: tl.constexpr,
                       INCR: tl.constexpr):
    """Per channel, CUDA eager's backward sums of g and g*(x-mean) for NCHW inputs, step by
    step (one program per channel, as eager's one block per plane):
    - thread (tx, ty) of a TX x TY block sums, in fp32, the elements of batches ty, ty+TY, ...
      and positions tx, tx+TX, ... (batch outer, position inner), each term passed through the
      input dtype first (eager builds each pair with `Float2(input_t, input_t)`);
    - the block's reduction then halves each warp's 32 lanes five times, and the warps' results
      the same way in one warp, every value received by a shuffle again passing through the
      input dtype (its `warp_shfl_down` rebuilds the pair with the same constructor).
    For f16/bf16 these roundings move grad_weight and grad_bias by a few units (H200,
    [32,128,28,28] bf16: eager off float64 by 6.1); only the same steps agree with eager. For
    fp32 they are no-ops.
    Not FUSED: the two sums go to part[c]. FUSED (grad_input wanted): the rest of eager's
    kernel too, in the same program: grad_weight, grad_bias, and grad_input from the channel's
    data read again, with eager's formula (one launch instead of three).

    The block's steps (its tile at batch b0, position x0, in eager's order) are walked UNROLL
    at a time, so that a program has UNROLL tiles' loads in flight rather than one (one tile of
    a few KB per step left most of the HBM bandwidth unused).

    SPLIT > 1 (not FUSED): SPLIT programs per channel, each with W / SPLIT of the block's warps
    (its threads TXS x TYS, consecutive in thread order), so that few channels of many elements
    still fill the GPU. Each thread's sums keep eager's order; each program does its warps'
    shuffle trees and leaves their results in part[(c * W + warp) * 2 + {0, 1}], for
    `_bn_channel` (TREE) to do warp 0's tree over them."""
    _pdl_enter(False, PDL_NEXT)
    inv_count = tl.full([], inv_count, tl.float32)  # eager's float math, from double arguments
    eps = tl.full([], eps, tl.float32)
    DT: tl.constexpr = x_ptr.dtype.element_ty
    W: tl.constexpr = TX * TY // 32
    c = tl.program_id(0).to(tl.int64) // SPLIT
    k = tl.program_id(0) % SPLIT
    first = k * (TXS * TYS)  # the program's first thread
    ty0 = first // TX
    tx0 = first - ty0 * TX
    mean = tl.load(mean_ptr + c).to(tl.float32)
    a1 = tl.zeros([TYS, TXS], tl.float32)
    a2 = tl.zeros([TYS, TXS], tl.float32)
    nx = tl.cdiv(HW, TX)
    steps = tl.cdiv(N, TY) * nx
    bi = 0  # INCR: the step's batch block and position block, counted up (no divisions)
    xi = 0
    for s0 in range(0, steps, UNROLL):
        for u in tl.static_range(UNROLL):
            if INCR:
                offs, m = _bn_block_tile(bi * TY + ty0, xi * TX + tx0, c, N, C, HW, TXS, TYS)
                xi += 1
                bi = tl.where(xi == nx, bi + 1, bi)
                xi = tl.where(xi == nx, 0, xi)
            else:
                offs, m = _bn_step_tile(s0 + u, nx, c, N, C, HW, TX, TY, ty0, tx0, TXS, TYS)
            g = tl.load(g_ptr + offs, mask=m, other=0).to(tl.float32)
            x = tl.load(x_ptr + offs, mask=m, other=0).to(tl.float32)
            a1 += g
            a2 += (g * (x - mean)).to(DT).to(tl.float32)
    if SPLIT > 1:
        WS: tl.constexpr = TXS * TYS // 32
        warp = c * W + k * WS + tl.arange(0, WS)
        w1 = _bn_warp_sums(tl.reshape(a1, [WS, 32]), DT, WS)
        w2 = _bn_warp_sums(tl.reshape(a2, [WS, 32]), DT, WS)
        tl.store(part_ptr + warp * 2, tl.reshape(w1, [WS]))
        tl.store(part_ptr + warp * 2 + 1, tl.reshape(w2, [WS]))
    else:
        gsum = _bn_block_sum(a1, DT, W)
        dot = _bn_block_sum(a2, DT, W)
        if not FUSED:
            tl.store(part_ptr + c * 2, gsum)
            tl.store(part_ptr + c * 2 + 1, dot)
        else:
            if TRAIN:
                istd = tl.load(istd_ptr + c).to(tl.float32)
            else:
                istd = tl.div_rn(1.0, tl.sqrt_rn(tl.load(rv_ptr + c).to(tl.float32) + eps))
            w = 1.0
            if HAS_W:
                w = tl.load(w_ptr + c).to(tl.float32)
            grad_mean = gsum * inv_count
            proj_scale = dot * inv_count * istd * istd
            grad_scale = istd * w
            if WANT_DW:
                tl.store(dw_ptr + c, (dot * istd).to(dw_ptr.dtype.element_ty))
            if WANT_DB:
                tl.store(db_ptr + c, gsum.to(db_ptr.dtype.element_ty))
            for s0 in range(0, steps, UNROLL):
                for u in tl.static_range(UNROLL):
                    offs, m = _bn_step_tile(s0 + u, nx, c, N, C, HW, TX, TY, 0, 0, TX, TY)
                    go = tl.load(g_ptr + offs, mask=m, other=0).to(tl.float32)
                    if TRAIN:
                        x = tl.load(x_ptr + offs, mask=m, other=0).to(tl.float32)
                        dx = (go - (x - mean) * proj_scale - grad_mean) * grad_scale
                    else:
                        dx = go * grad_scale
                    tl.store(dx_ptr + offs, dx.to(DT), mask=m)


@triton.jit
def _bn_channel(x_ptr, part_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, mean_ptr, istd_ptr,
                save_mean_ptr, save_istd_ptr, dw_ptr, db_ptr, ca_ptr, cb_ptr, cc_ptr, cm_ptr,
                C, HW, S, count: tl.float64, momentum: tl.float64, eps: tl.float64,
                MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                UPDATE: tl.constexpr, WANT_DW: tl.constexpr, WANT_DB: tl.constexpr,
                ACC: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr,
                SAVE_EVAL: tl.constexpr, PDL_WAIT: tl.constexpr, PDL_NEXT: tl.constexpr,
                TREE: tl.constexpr):
    """Per channel: MODE 0 train forward, 1 eval forward, 2 train backward, 3 eval backward.
    TREE: the S partials of a channel are the per-warp sums of `_bn_eager_partials` (SPLIT),
    added as eager's warp 0 adds them (`_bn_warp_tree`), not as a plain sum.
    SAVE_EVAL (MODE 1): also write the running mean and its invstd as the saved statistics.
    PDL_WAIT: launched as a dependent of the partial sums; PDL_NEXT: the elementwise launch may
    start now.

    Writes the coefficients of the elementwise pass: forward y = x*A + B; backward
    dx = g*A + (x - M)*B + Cc."""
    _pdl_enter(PDL_WAIT, PDL_NEXT)
    count = tl.full([], count, ACC)  # double arguments (a plain float is packed as fp32)
    momentum = tl.full([], momentum, ACC)
    eps = tl.full([], eps, ACC)
    c = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    ok = c < C
    w = tl.full([BLOCK_C], 1.0, ACC)
    if HAS_W:
        w = tl.load(w_ptr + c, mask=ok, other=1).to(ACC)
    if MODE == 0 or MODE == 2 or MODE == 3:
        s = tl.arange(0, BLOCK_S)
        m = ok[:, None] & (s[None, :] < S)
        slot = (c[:, None] * S + s[None, :]) * 2
        if TREE:
            DT: tl.constexpr = x_ptr.dtype.element_ty
            t1 = _bn_warp_tree(tl.load(part_ptr + slot, mask=m, other=0), DT, BLOCK_C, BLOCK_S)
            t2 = _bn_warp_tree(tl.load(part_ptr + slot + 1, mask=m, other=0), DT, BLOCK_C,
                               BLOCK_S)
        else:
            t1 = tl.sum(tl.load(part_ptr + slot, mask=m, other=0), axis=1)
            t2 = tl.sum(tl.load(part_ptr + slot + 1, mask=m, other=0), axis=1)
    if MODE == 0:
        shift = tl.load(x_ptr + c * HW, mask=ok, other=0).to(ACC)
        mean_s = t1 / count
        var = t2 / count - mean_s * mean_s
        var = tl.where(var < 0, 0.0, var)
        mean = shift + mean_s
        istd = 1.0 / tl.sqrt(var + eps)
        tl.store(save_mean_ptr + c, mean.to(save_mean_ptr.dtype.element_ty), mask=ok)
        tl.store(save_istd_ptr + c, istd.to(save_istd_ptr.dtype.element_ty), mask=ok)
        if UPDATE:
            rm = tl.load(rm_ptr + c, mask=ok, other=0).to(ACC)
            rv = tl.load(rv_ptr + c, mask=ok, other=0).to(ACC)
            unbiased = var * count / (count - 1)
            tl.store(rm_ptr + c, ((1 - momentum) * rm + momentum * mean).to(rm_ptr.dtype.element_ty), mask=ok)
            tl.store(rv_ptr + c, ((1 - momentum) * rv + momentum * unbiased).to(rv_ptr.dtype.element_ty), mask=ok)
    elif MODE == 1:
        mean = tl.load(rm_ptr + c, mask=ok, other=0).to(ACC)
        istd = 1.0 / tl.sqrt(tl.load(rv_ptr + c, mask=ok, other=1).to(ACC) + eps)
        if SAVE_EVAL:
            tl.store(save_mean_ptr + c, mean.to(save_mean_ptr.dtype.element_ty), mask=ok)
            tl.store(save_istd_ptr + c, istd.to(save_istd_ptr.dtype.element_ty), mask=ok)
    elif MODE == 2:
        mean = tl.load(mean_ptr + c, mask=ok, other=0).to(ACC)
        istd = tl.load(istd_ptr + c, mask=ok, other=0).to(ACC)
    else:
        mean = tl.load(rm_ptr + c, mask=ok, other=0).to(ACC)
        istd = 1.0 / tl.sqrt(tl.load(rv_ptr + c, mask=ok, other=1).to(ACC) + eps)
    if MODE < 2:
        a = w * istd
        b = -mean * a
        if HAS_B:
            b = b + tl.load(b_ptr + c, mask=ok, other=0).to(ACC)
        tl.store(ca_ptr + c, a, mask=ok)
        tl.store(cb_ptr + c, b, mask=ok)
    else:
        a = w * istd
        if MODE == 2:
            k = -a * istd * istd * t2 / count
            cc = -a * t1 / count
        else:
            k = tl.zeros([BLOCK_C], ACC)
            cc = tl.zeros([BLOCK_C], ACC)
        tl.store(ca_ptr + c, a, mask=ok)
        tl.store(cb_ptr + c, k, mask=ok)
        tl.store(cc_ptr + c, cc, mask=ok)
        tl.store(cm_ptr + c, mean, mask=ok)
        if WANT_DW:
            tl.store(dw_ptr + c, (t2 * istd).to(dw_ptr.dtype.element_ty), mask=ok)
        if WANT_DB:
            tl.store(db_ptr + c, t1.to(db_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _bn_apply(x_ptr, g_ptr, out_ptr, ca_ptr, cb_ptr, cc_ptr, cm_ptr, ROWS, C, HW,
              BACKWARD: tl.constexpr, ACC: tl.constexpr,
              BLOCK_R: tl.constexpr, BLOCK_J: tl.constexpr, PDL_WAIT: tl.constexpr,
              REVERSE: tl.constexpr):
    """Tile [BLOCK_R (n, c) rows, BLOCK_J spatial]: y = x*A + B, or dx = g*A + (x-M)*B + Cc.
    PDL_WAIT: launched as a dependent of the channel kernel, whose coefficients it waits for.
    REVERSE (a 1-D grid): the first programs take the last tiles in memory, which the sums
    before this pass read last (every channel's program walks the batch in order, all at once),
    so they may still be in L2."""
    _pdl_enter(PDL_WAIT, False)
    if REVERSE:
        nj = tl.cdiv(HW, BLOCK_J)
        rev = tl.num_programs(0) - 1 - tl.program_id(0)
        rb = rev // nj
        jb = rev - rb * nj
    else:
        rb = tl.program_id(0)
        jb = tl.program_id(1)
    rows = rb.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    j = jb.to(tl.int64) * BLOCK_J + tl.arange(0, BLOCK_J)
    row_ok = rows < ROWS
    c = rows % C
    a = tl.load(ca_ptr + c, mask=row_ok, other=0)[:, None]
    b = tl.load(cb_ptr + c, mask=row_ok, other=0)[:, None]
    m = row_ok[:, None] & (j[None, :] < HW)
    offs = rows[:, None] * HW + j[None, :]
    x = tl.load(x_ptr + offs, mask=m, other=0).to(ACC)
    if BACKWARD:
        cc = tl.load(cc_ptr + c, mask=row_ok, other=0)[:, None]
        mu = tl.load(cm_ptr + c, mask=row_ok, other=0)[:, None]
        g = tl.load(g_ptr + offs, mask=m, other=0).to(ACC)
        y = g * a + (x - mu) * b + cc
    else:
        y = x * a + b
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)


def _bn_geometry(x):
    if x.dim() < 2:
        raise RuntimeError(f"batch norm expects an input of at least 2 dims, got {list(x.shape)}")
    N, C = x.shape[0], x.shape[1]
    HW = 1
    for s in x.shape[2:]:
        HW *= s
    return N, C, HW


def _eager_nchw(x):
    """Whether CUDA eager's batch norm backward takes its NCHW kernels (one block per channel)
    for x, rather than its channels-last ones."""
    channels_last = (
        (x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last))
        or (x.dim() == 5 and x.is_contiguous(memory_format=torch.channels_last_3d))
        or (x.is_contiguous() and x.dim() > 1 and x.stride(1) == 1)
    )
    return not channels_last


def _eager_block(N, HW, fused):
    """(TX, TY): the thread block CUDA eager reduces one channel with. The fused backward
    (grad_input wanted): getNumThreads(HW) x 512/that; the reduce-only kernel: min(lastPow2(N),
    16) rows and min(getNumThreads(HW), 512/rows) columns."""
    tx = next((t for t in (32, 64, 128, 256) if HW <= t), 512)
    if fused:
        return tx, max(1, 512 // tx)
    ty = min(1 << (max(N, 1).bit_length() - 1), 16)
    return min(tx, 512 // ty), ty


def _bn_plan(x, N, C, HW):
    """Split each channel's (N, HW) plane over programs so that the GPU is busy."""
    small = _INTERPRET or _CONSERVATIVE
    block_j = max(2, min(_pow2(HW), 128 if small else 1024))
    want = 1 if _CONSERVATIVE else max(1, _cdiv(_target_programs(x), C))
    want = min(want, max(1, (N * HW) // 4096) if not _INTERPRET else want, 1024)
    sn = max(1, min(want, N))
    nb_per = _cdiv(N, sn)
    sn = _cdiv(N, nb_per)
    sj = max(1, min(_cdiv(want, sn), _cdiv(HW, block_j)))
    j_per = _cdiv(_cdiv(HW, sj), block_j) * block_j
    sj = max(1, _cdiv(HW, j_per))
    block_n = max(1, min(_pow2(nb_per), (1024 if small else 4096) // block_j))
    return sn * sj, nb_per, j_per, sj, block_n, block_j


def _bn_apply_plan(N, C, HW, backward, acc, pdl, reverse=False):
    """`launch(x, g, out, coefs)` of the elementwise pass; pdl: launched as a dependent of the
    channel kernel; reverse: last tiles first (`_bn_apply`'s REVERSE)."""
    small = _INTERPRET or _CONSERVATIVE
    block_j = max(2, min(_pow2(HW), 256 if small else 1024))
    block_r = max(1, min(_pow2(N * C), (1024 if small else 4096) // block_j))
    grid = (_cdiv(N * C, block_r), _cdiv(HW, block_j))
    kernel = _bn_apply[(grid[0] * grid[1],) if reverse else grid]
    consts = dict(BACKWARD=backward, ACC=acc, BLOCK_R=block_r, BLOCK_J=block_j,
                  num_warps=_warps(block_r * block_j), REVERSE=reverse, **_pdl_launch(pdl))

    def launch(x, g, out, coefs):
        kernel(x, g, out, *coefs, N * C, C, HW, **consts)

    return launch


# Programmatic dependent launches (sm_90+): 0 none, 1 the channel kernel after the partial sums,
# 2 also the elementwise pass after the channel kernel. Off: on the H200 level 2 cost eval-mode
# [32,128,28,28] f16 9.3 -> 19.6 us (and gave [16,128,32,32] 8.3 -> 7.3); level 1 is unmeasured
# outside host-bound cases
_BN_PDL = 0
# warps per `_bn_eager_partials` program (0: by channel count). H200, bf16 suite cases, whole op
# (knob_sweep, 1/2/4/8 warps): [32,64,56,56] 161/146/135/79 us, [32,128,28,28] 60/57/53/42,
# [32,512,28,28] 79/78/83/102, [32,1152,7,7] 38/48/61/99, [32,256,14,14] 37/30/31/40; a
# pipelined batch loop (num_stages 3) changed nothing. Re-swept with 8 steps (1/2/4/8
# warps): [32,64,56,56] 116/68/53/56, [32,128,28,28] 45/32/27/30: 4 warps up to 128
# channels
_BN_EAGER_WARPS = 0
# `_bn_eager_partials` steps walked per loop iteration (tiles whose loads are in flight at once;
# 0: 8, or 2 with one warp, whose lanes hold 16 elements per tile). H200, bf16, whole op, 1/2/4/8
# steps: [32,512,28,28] 78/64/57/55 us (eager 81), [32,64,56,56] 134/92/67/55 (155),
# [32,128,28,28] 54/41/34/30 (46), [32,256,14,14] 24/21/19/18 (18); one warp: [32,1024,14,14]
# 44/35/33-36/41, [32,1152,7,7] 26/25/28-30/46 (20)
_BN_EAGER_UNROLL = 0
# up to this many elements per channel, grad_input is written by the channel's program too (one
# launch instead of three; H200 bf16 [32,1152,7,7] 38 -> 27 us, [32,1024,14,14] 53 -> 38);
# beyond, a separate elementwise pass
_BN_FUSED_MAX = 8192
# programs per channel of the eager-order sums when grad_input is not fused (a power of two, at
# most the block's warps); each takes a part of eager's block, whole warps, their per-thread sums
# in eager's order. H200, bf16, whole op, 1/2/4/8/16 programs: [32,512,28,28]
# 53.0/43.4/48.2/84.2/111.3 us, [32,64,56,56] 52.5/45.8/108/109/114, [32,128,28,28]
# 27.4/23.4/41.1/42.7/65.5
_BN_EAGER_SPLIT = 2
# unfused sums: their steps walked by counters (batch block, position block), not by dividing a
# flat step number (944 -> 872 SASS instructions for [32,512,28,28]). H200, bf16, whole op,
# off/on: [32,512,28,28] 43.8/42.8 us, [32,64,56,56] 46.2/42.6, [32,128,28,28] 23.7/22.2; the
# fused kernel got slower with it ([32,1024,14,14] 34.7/38.4) and keeps the divisions
_BN_EAGER_INCR = True
# the backward's elementwise pass after eager-order sums walks the tensor from its end (what the
# sums read last, perhaps still in L2). H200, bf16, whole op: [32,512,28,28] 55.4 -> 53.3 us
# (its pass 17.9 -> 16.5), other cases within +-0.7 us
_BN_APPLY_REVERSE = True
_EVAL_SAVE_DEVICES = ("cuda",)  # where eager's eval mode returns [C] saved statistics


_BN_RUNS = {}  # (geometry, arguments) -> run(...): the launches, planned once


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    key = (input.shape, input.dtype, input.device, bool(training), weight is None, bias is None,
           running_mean is None, running_var is None)
    run = _BN_RUNS.get(key)
    if run is None:
        run = _BN_RUNS[key] = _batch_norm_plan(input, weight, bias, running_mean, running_var,
                                               training)
    return run(input, weight, bias, running_mean, running_var, momentum, eps)


def _batch_norm_plan(input, weight, bias, running_mean, running_var, training):
    """Everything that depends only on the geometry and on which arguments are None, as a
    `run(...)`: per call, the allocations and two or three launches."""
    N, C, HW = _bn_geometry(input)
    acc = _acc(input.dtype)
    dev = input.device
    shape = tuple(input.shape)
    sdt = _stat_dtype(input)
    # Eval mode: CUDA eager returns the running mean and its invstd as the saved statistics
    # (shape [C], the H200 evaluation showed the shape), the CPU returns empty tensors.
    eval_saves = not training and dev.type in _EVAL_SAVE_DEVICES
    saved = (C,) if training or eval_saves else (0,)
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError("batch norm in eval mode needs running_mean and running_var")
    update = training and running_mean is not None and running_var is not None
    wd = torch.float64 if acc == tl.float64 else torch.float32
    empty = N * C * HW == 0
    pdl1, pdl2 = (_BN_PDL >= level and _pdl_ok(dev) for level in (1, 2))
    S = 1
    partials = None
    if training and not empty:
        S, nb_per, j_per, sj, block_n, block_j = _bn_plan(input, N, C, HW)
        partials = (_bn_partials[(C, S)], (N, C, HW, nb_per, j_per, sj, S),
                    dict(BACKWARD=False, ACC=acc, BLOCK_N=block_n, BLOCK_J=block_j,
                         PDL_NEXT=pdl1, num_warps=_warps(block_n * block_j)))
    block_c = max(2, min(_pow2(C), 64))
    channel = _bn_channel[(_cdiv(C, block_c),)]
    channel_consts = dict(
        MODE=0 if training else 1, HAS_W=weight is not None, HAS_B=bias is not None,
        UPDATE=update, WANT_DW=False, WANT_DB=False, ACC=acc, BLOCK_C=block_c,
        BLOCK_S=max(2, _pow2(S)), SAVE_EVAL=eval_saves, PDL_NEXT=pdl2, TREE=False,
        **_pdl_launch(pdl1 and training))
    count = float(N * HW)
    apply = None if empty else _bn_apply_plan(N, C, HW, False, acc, pdl2)

    def run(input, weight, bias, running_mean, running_var, momentum, eps):
        x = input.contiguous()
        out = torch.empty(shape, dtype=x.dtype, device=dev)
        save_mean = torch.empty(saved, dtype=sdt, device=dev)
        save_istd = torch.empty(saved, dtype=sdt, device=dev)
        if update and not (running_mean.is_contiguous() and running_var.is_contiguous()):
            raise RuntimeError("running statistics must be contiguous")
        if empty:
            return out, save_mean, save_istd
        ca = torch.empty((C,), dtype=wd, device=dev)
        cb = torch.empty((C,), dtype=wd, device=dev)
        w = weight.contiguous() if weight is not None else ca
        b = bias.contiguous() if bias is not None else ca
        rm = running_mean if running_mean is not None else ca
        rv = running_var if running_var is not None else ca
        part = ca
        if partials is not None:
            kernel, ints, consts = partials
            part = torch.empty((C * S * 2,), dtype=wd, device=dev)
            kernel(x, x, ca, part, *ints, **consts)
        channel(x, part, w, b, rm, rv, ca, ca, save_mean, save_istd, ca, ca, ca, cb, ca, ca,
                C, HW, S, count, float(momentum), float(eps), **channel_consts)
        apply(x, x, out, (ca, cb, ca, ca))
        return out, save_mean, save_istd

    return run


# ---- emitted: bn_smem ----

# Batch norm backward with each channel held in shared memory (Gluon; GPU only): its inputs read
# from HBM once, where the eager-order sums and the elementwise pass read them twice.
if gluon is not None:

    @gluon.jit
    def _bn_reg_halve(v, DT: gl.constexpr, R: gl.constexpr, L: gl.constexpr):
        """`_bn_halve` on values a thread holds: v [R, L] -> [R, L/2], column i getting
        v[:, i] + v[:, i + L/2], the received value passed through DT first."""
        lo, hi = gl.split(gl.permute(gl.reshape(v, [R, 2, L // 2]), [0, 2, 1]))
        return lo + hi.to(DT).to(gl.float32)

    @gluon.jit
    def _bn_shfl_down(v, DT: gl.constexpr, OFF: gl.constexpr):
        """One step of eager's warp reduction (`warp_shfl_down`): each lane adds the value of
        lane + OFF, passed through DT first; lane 0 ends with eager's warp sum."""
        b = v.to(gl.int32, bitcast=True)
        b = gl.inline_asm_elementwise("shfl.sync.down.b32 $0, $1, $2, 0x1f, -1;", "=r,r,r",
                                      [b, b * 0 + OFF], dtype=gl.int32, is_pure=False, pack=1)
        return v + b.to(gl.float32, bitcast=True).to(DT).to(gl.float32)

    @gluon.jit
    def _bn_block_sums(a1, a2, sc, DT: gl.constexpr, W: gl.constexpr, WL: gl.constexpr):
        """eager's block reductions of the per-thread sums a1, a2 ([W, 32], thread w * 32 + l
        at [w, l]): each warp's shuffle-down tree (`_bn_shfl_down`), lane 0's results through
        shared memory sc [2, W, 32], then warp 0's tree over the W warp results, which every
        thread computes on its own copy (WL: a thread holds all of them; lanes past W would
        add zeros, which changes nothing)."""
        for h in gl.static_range(5):
            a1 = _bn_shfl_down(a1, DT, 16 >> h)
            a2 = _bn_shfl_down(a2, DT, 16 >> h)
        sc.index(0).store(a1)
        sc.index(1).store(a2)
        _gl_barrier()
        v1 = gl.permute(sc.index(0).slice(0, 1, 1).load(WL), [1, 0])
        v2 = gl.permute(sc.index(1).slice(0, 1, 1).load(WL), [1, 0])
        for h in gl.static_range(5):
            if (32 >> h) <= W:
                v1 = _bn_reg_halve(v1, DT, 1, 32 >> h)
                v2 = _bn_reg_halve(v2, DT, 1, 32 >> h)
        return gl.sum(gl.sum(v1, axis=1), axis=0), gl.sum(gl.sum(v2, axis=1), axis=0)

    @gluon.jit
    def _bn_smem_group(c, j: gl.constexpr, r8, col, C, N: gl.constexpr, HW: gl.constexpr,
                       NX: gl.constexpr):
        """Offsets and mask of channel c's rows j*8 .. j*8+7 (row = batch * NX + position
        block of 512), the [8, W, 32] tile a group of shared memory holds."""
        row = j * 8 + r8
        b = row // NX
        p = (row - b * NX) * 512 + col
        return (b.to(gl.int64) * C + c) * HW + p, (p < HW) & (b < N)

    @gluon.jit
    def _bn_smem_copy(xd, gd, x_ptr, g_ptr, c, C, J: gl.constexpr, r8, col8, N: gl.constexpr,
                      HW: gl.constexpr, NX: gl.constexpr):
        """Copy group J of channel c's x and grad_out into xd, gd (cp.async, 16 bytes a
        thread) as one commit group: zeros past the channel's positions, and for c >= C."""
        offs, ok = _bn_smem_group(c, J, r8, col8, C, N, HW, NX)
        ok = ok & (c < C)
        _gl_copy(xd, x_ptr + offs, mask=ok)
        _gl_copy(gd, g_ptr + offs, mask=ok)
        async_copy.commit_group()

    @gluon.jit
    def _bn_smem_kernel(x_ptr, g_ptr, mean_ptr, istd_ptr, rv_ptr, w_ptr, dx_ptr, dw_ptr, db_ptr,
                        C, inv_count, eps, N: gl.constexpr, HW: gl.constexpr,
                        TRAIN: gl.constexpr, HAS_W: gl.constexpr, WANT_DW: gl.constexpr,
                        WANT_DB: gl.constexpr, G: gl.constexpr, WAIT: gl.constexpr,
                        REFILL_EACH: gl.constexpr, CL: gl.constexpr, B3: gl.constexpr,
                        WL: gl.constexpr, SL3: gl.constexpr, SL2: gl.constexpr):
        """CUDA eager's NCHW batch norm backward for channels of more than 256 positions
        (its block: 512 threads in a row, thread t summing positions t, t + 512, ... of batch
        0, then of batch 1, ...), with each channel's x and grad_out held in shared memory:
        channels pid, pid + grid, ... (one program per SM, 16 warps as eager's 16).

        A channel is G groups of 8 rows of 512 (row = batch * NX + position block), copied in
        by cp.async (16-byte vectors). Its sums take each row as it arrives, thread t adding
        its element of the row in eager's order, each g*(x-mean) through the input dtype; the
        block's shuffle tree follows eager's (`_bn_block_sums`), then grad_weight,
        grad_bias and grad_input with eager's formula, each group read back from shared
        memory; the groups are refilled with the next channel's rows (each as soon as it is
        written with REFILL_EACH, else all after the channel's last), so that those bytes are
        in flight while this channel is finished. Past the channel's positions a group holds
        zeros (masked copies fill them), which add nothing to the sums."""
        W: gl.constexpr = 16
        NX: gl.constexpr = (HW + 511) // 512
        ROWS: gl.constexpr = N * NX
        DT: gl.constexpr = x_ptr.dtype.element_ty
        pid = gl.program_id(0)
        P = gl.num_programs(0)
        xs = gl.allocate_shared_memory(DT, [G, 8, W, 32], SL3)
        gs = gl.allocate_shared_memory(DT, [G, 8, W, 32], SL3)
        sc = gl.allocate_shared_memory(gl.float32, [2, W, 32], SL2)
        r8 = gl.arange(0, 8, layout=gl.SliceLayout(1, gl.SliceLayout(2, CL)))[:, None, None]
        w8 = gl.arange(0, W, layout=gl.SliceLayout(0, gl.SliceLayout(2, CL)))[None, :, None]
        l8 = gl.arange(0, 32, layout=gl.SliceLayout(0, gl.SliceLayout(1, CL)))[None, None, :]
        col8 = w8 * 32 + l8
        c = pid
        for j in gl.static_range(G):
            _bn_smem_copy(xs.index(j), gs.index(j), x_ptr, g_ptr, c, C, j, r8, col8, N, HW, NX)
        while c < C:
            mean = gl.load(mean_ptr + c).to(gl.float32)  # all three in flight during the sums
            if TRAIN:
                istd = gl.load(istd_ptr + c).to(gl.float32)
            else:
                istd = gl.div_rn(1.0, gl.sqrt_rn(gl.load(rv_ptr + c).to(gl.float32) + eps))
            w = 1.0
            if HAS_W:
                w = gl.load(w_ptr + c).to(gl.float32)
            a1 = gl.zeros([1, W, 32], gl.float32, B3)
            a2 = gl.zeros([1, W, 32], gl.float32, B3)
            for j in gl.static_range(G):
                if j % WAIT == 0:  # WAIT groups at a time
                    async_copy.wait_group(G - 1 - j - WAIT + 1 if j + WAIT <= G else 0)
                    _gl_barrier()  # rows copied by other threads are read below
                for k in gl.static_range(8):
                    if j * 8 + k < ROWS:
                        # lanes past the batch's positions hold zeros (masked copies fill
                        # them): their terms add nothing
                        gv = gs.index(j).slice(k, 1, 0).load(B3).to(gl.float32)
                        xv = xs.index(j).slice(k, 1, 0).load(B3).to(gl.float32)
                        a1 += gv
                        a2 += (gv * (xv - mean)).to(DT).to(gl.float32)
            gsum, dot = _bn_block_sums(gl.reshape(a1, [W, 32]), gl.reshape(a2, [W, 32]), sc,
                                       DT, W, WL)
            grad_mean = gsum * inv_count
            proj_scale = dot * inv_count * istd * istd
            grad_scale = istd * w
            if WANT_DW:
                gl.store(dw_ptr + c, (dot * istd).to(dw_ptr.dtype.element_ty))
            if WANT_DB:
                gl.store(db_ptr + c, gsum.to(db_ptr.dtype.element_ty))
            nc = c + P
            for j in gl.static_range(G):
                offs, ok = _bn_smem_group(c, j, r8, col8, C, N, HW, NX)
                go = gs.index(j).load(CL).to(gl.float32)
                if TRAIN:  # eager's formula, and so its inf and NaN too
                    xv = xs.index(j).load(CL).to(gl.float32)
                    dx = (go - (xv - mean) * proj_scale - grad_mean) * grad_scale
                else:
                    dx = go * grad_scale
                gl.store(dx_ptr + offs, dx.to(DT), mask=ok)
                if REFILL_EACH:  # the group's slot refilled at once
                    _gl_barrier()
                    _bn_smem_copy(xs.index(j), gs.index(j), x_ptr, g_ptr, nc, C, j, r8, col8,
                                  N, HW, NX)
            if not REFILL_EACH:  # all of them after the channel's last group
                _gl_barrier()
                for j in gl.static_range(G):
                    _bn_smem_copy(xs.index(j), gs.index(j), x_ptr, g_ptr, nc, C, j, r8, col8,
                                  N, HW, NX)
            c = nc
        async_copy.wait_group(0)


# ---- emitted: bn_backward ----

# grad_input wanted, f16/bf16/f32 NCHW, channels of more than 256 positions: each channel held in
# shared memory by `_bn_smem_kernel` (Gluon; NVIDIA sm_80+), its inputs read from HBM once, when
# both of its planes fit a block's shared memory; else the plain kernels: sums, the channel kernel
# and the elementwise pass, which read them twice
_BN_SMEM = True
_BN_SMEM_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# channels per program at most: each costs a copy's latency and the sums' barriers, which many
# small channels do not repay. H200, f32, whole op, us, plain kernels / this one: [1,384,576]
# (3 channels per program) 11.9 / 8.5, [1,384,1536] 12.2 / 9.3, [1,1536,384] (12) 13.2 / 22.0
_BN_SMEM_MAX_ROUNDS = 4
_BN_SMEM_SCRATCH = 4096  # bytes of shared memory besides the channel's planes (the sums' tree)
# groups the sums wait for at a time (a barrier each time), and whether a group's slot is refilled
# with the next channel's as soon as it is written (a barrier each) or all at the channel's end.
# H200, bf16, whole op, us, [32,512,28,28] / [32,128,28,28]: wait 1
# 36.1 / 12.5, 2 35.3 / 12.4, 4 34.5 / 12.3 refilling each; at the end 35.6 / 11.9, 35.0 / 11.7,
# 34.7 / 11.7. A ring of slots, the next channel's first 5-8 groups copied in while one is summed,
# measured 37.0 (36.1 without)
_BN_SMEM_WAIT = 4
_BN_SMEM_REFILL_EACH = False


def _bn_smem_plan(x, N, C, HW, want_dx):
    """(grid, constexprs) of `_bn_smem_kernel` for this input, or None where it does not apply:
    f16/bf16/f32 NCHW, grad_input wanted, more than 256 positions per channel (eager's one-row
    block of 512 threads) and a multiple of 8 of them (16-byte copies), on an NVIDIA GPU of
    compute capability 8.0 or more whose shared memory per block holds the channel, at most
    _BN_SMEM_MAX_ROUNDS channels per program."""
    if not (_BN_SMEM and gluon is not None and not _INTERPRET and want_dx
            and x.device.type == "cuda" and torch.version.hip is None
            and x.dtype in _BN_SMEM_DTYPES and _eager_nchw(x)
            and HW > 256 and HW % 8 == 0 and N * C * HW > 0):
        return None
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    if torch.cuda.get_device_capability(index)[0] < 8:
        return None
    consts, planes = _bn_smem_consts(N, HW, x.element_size())
    shared = triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"]
    if planes + _BN_SMEM_SCRATCH > shared or _cdiv(C, _num_sms(index)) > _BN_SMEM_MAX_ROUNDS:
        return None
    return min(C, _num_sms(index)), consts


def _bn_smem_consts(N, HW, element_size):
    """`_bn_smem_kernel`'s constexprs for channels of N x HW elements, and the shared memory its
    two planes take (bytes): groups of 8 rows of 512, a row per batch and block of positions."""
    groups = _cdiv(N * _cdiv(HW, 512), 8)
    consts = dict(N=N, HW=HW, G=groups, WAIT=max(1, _BN_SMEM_WAIT),
                  REFILL_EACH=_BN_SMEM_REFILL_EACH,
                  CL=gl.BlockedLayout([1, 1, 8], [1, 8, 4], [8, 2, 1], [2, 1, 0]),
                  B3=gl.BlockedLayout([1, 1, 1], [1, 1, 32], [1, 16, 1], [2, 1, 0]),
                  WL=gl.BlockedLayout([16, 1], [1, 32], [1, 16], [0, 1]),
                  SL3=gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0]),
                  SL2=gl.SwizzledSharedLayout(1, 1, 1, [1, 0]), num_warps=16)
    return consts, 2 * groups * 8 * 512 * element_size


_BN_BWD_RUNS = {}  # (geometry, arguments) -> run(...): the launches, planned once


def _batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
                         save_invstd, train, eps, output_mask):
    key = (input.shape, input.dtype, input.device, _eager_nchw(input), bool(train),
           tuple(bool(v) for v in output_mask),
           weight is None, None if weight is None else weight.dtype, running_mean is None,
           running_var is None, save_mean is None, save_invstd is None)
    run = _BN_BWD_RUNS.get(key)
    if run is None:
        run = _BN_BWD_RUNS[key] = _batch_norm_backward_plan(
            input, weight, running_mean, running_var, save_mean, save_invstd, train, output_mask)
    return run(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, eps)


def _batch_norm_backward_plan(input, weight, running_mean, running_var, save_mean, save_invstd,
                              train, output_mask):
    """The backward's `run(...)`: partial sums of g and g*(x-mean), the per-channel kernel
    (grad_weight, grad_bias and the coefficients), the elementwise grad_input."""
    N, C, HW = _bn_geometry(input)
    want_dx, want_dw, want_db = (bool(v) for v in output_mask)
    acc = _acc(input.dtype)
    dev = input.device
    shape = tuple(input.shape)
    pdt = weight.dtype if weight is not None else input.dtype
    if train:
        if save_mean is None or save_invstd is None:
            raise RuntimeError("batch norm backward in train mode needs save_mean and save_invstd")
    elif running_mean is None or running_var is None:
        raise RuntimeError("batch norm backward in eval mode needs running_mean and running_var")
    wd = torch.float64 if acc == tl.float64 else torch.float32
    empty = N * C * HW == 0
    pdl1, pdl2 = (_BN_PDL >= level and _pdl_ok(dev) for level in (1, 2))
    if not empty:
        # f16/bf16 NCHW: eager's summation order, which its roundings make part of the result
        # (f32 keeps the split partial sums: fused, its N=1 suite cases took 43-133 us on the
        # H200 against 11-13, unexplained)
        eager_order = _eager_nchw(input) and input.dtype in (torch.float16, torch.bfloat16)
        fused = eager_order and want_dx and N * HW <= _BN_FUSED_MAX and input.numel() < 2**31
        if eager_order:
            tx, ty = _eager_block(N, HW, want_dx)
            split = 1 if fused else max(1, min(_BN_EAGER_SPLIT, tx * ty // 32))
            split = 1 << (split.bit_length() - 1)  # a power of two: whole warps per program
            # split: the channel kernel reduces each channel's warp sums (S of them)
            S = tx * ty // 32 if split > 1 else 1
            ts = tx * ty // split
            partials = _bn_eager_partials[(C * split,)]
            # an fp64 quotient rounded to the fp32 argument is the fp32 quotient eager divides
            partials_ints = (N, C, HW, 1.0 / (N * HW))
            warps = _BN_EAGER_WARPS or (4 if C <= 128 else 2 if C <= 512 else 1)
            warps = max(1, min(warps, tx * ty // 32))
            unroll = _BN_EAGER_UNROLL or (2 if warps == 1 else 8)
            partials_consts = dict(TX=tx, TY=ty, FUSED=fused, TRAIN=bool(train),
                                   HAS_W=weight is not None, WANT_DW=want_dw, WANT_DB=want_db,
                                   PDL_NEXT=pdl1 and not fused, UNROLL=unroll,
                                   SPLIT=split, TXS=min(tx, ts), TYS=max(1, ts // tx),
                                   INCR=_BN_EAGER_INCR and not fused, num_warps=warps)
        else:
            S, nb_per, j_per, sj, block_n, block_j = _bn_plan(input, N, C, HW)
            partials = _bn_partials[(C, S)]
            partials_ints = (N, C, HW, nb_per, j_per, sj, S)
            partials_consts = dict(BACKWARD=True, ACC=acc, BLOCK_N=block_n, BLOCK_J=block_j,
                                   PDL_NEXT=pdl1, num_warps=_warps(block_n * block_j))
        block_c = max(2, min(_pow2(C), 64))
        channel = _bn_channel[(_cdiv(C, block_c),)]
        channel_consts = dict(
            MODE=2 if train else 3, HAS_W=weight is not None, HAS_B=False, UPDATE=False,
            WANT_DW=want_dw, WANT_DB=want_db, ACC=acc, BLOCK_C=block_c,
            BLOCK_S=max(2, _pow2(S)), SAVE_EVAL=False, PDL_NEXT=pdl2 and want_dx,
            TREE=eager_order and S > 1,
            **_pdl_launch(pdl1))
        count = float(N * HW)
        reverse = _BN_APPLY_REVERSE and eager_order
        apply = _bn_apply_plan(N, C, HW, True, acc, pdl2, reverse) if want_dx else None

    smem = _bn_smem_plan(input, N, C, HW, want_dx)

    def run(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, eps):
        x = input.contiguous()
        g = grad_out.contiguous()
        dx = torch.empty(shape, dtype=x.dtype, device=dev) if want_dx else None
        dw = torch.empty((C,), dtype=pdt, device=dev) if want_dw else None
        db = torch.empty((C,), dtype=pdt, device=dev) if want_db else None
        if empty:
            return dx, dw, db
        mean_src = (save_mean if train else running_mean).contiguous()
        if smem is not None and x.data_ptr() % 16 == 0 and g.data_ptr() % 16 == 0:
            grid, consts = smem  # absent tensors are never read (x stands in for them)
            _bn_smem_kernel[(grid,)](
                x, g, mean_src, x if save_invstd is None else save_invstd.contiguous(),
                x if running_var is None else running_var.contiguous(),
                x if weight is None else weight.contiguous(), dx, x if dw is None else dw,
                x if db is None else db, C, 1.0 / (N * HW), float(eps), TRAIN=bool(train),
                HAS_W=weight is not None, WANT_DW=want_dw, WANT_DB=want_db, **consts)
            return dx, dw, db
        if fused:  # one launch; absent tensors are never read (x stands in for them)
            partials(x, g, mean_src, x, x if save_invstd is None else save_invstd.contiguous(),
                     x if running_var is None else running_var.contiguous(),
                     x if weight is None else weight.contiguous(), dx,
                     x if dw is None else dw, x if db is None else db, *partials_ints,
                     float(eps), **partials_consts)
            return dx, dw, db
        coefs = tuple(torch.empty((C,), dtype=wd, device=dev) for _ in range(4))
        w = weight.contiguous() if weight is not None else coefs[0]
        rm = running_mean.contiguous() if running_mean is not None else coefs[0]
        rv = running_var.contiguous() if running_var is not None else coefs[0]
        istd = save_invstd.contiguous() if save_invstd is not None else coefs[0]
        if eager_order:
            part = torch.empty((C * S * 2,), dtype=torch.float32, device=dev)
            partials(x, g, mean_src, part, istd, rv, w, part, part, part, *partials_ints,
                     float(eps), **partials_consts)
        else:
            part = torch.empty((C * S * 2,), dtype=wd, device=dev)
            partials(x, g, mean_src, part, *partials_ints, **partials_consts)
        channel(x, part, w, coefs[0], rm, rv, mean_src, istd, coefs[0], coefs[0],
                dw if want_dw else coefs[0], db if want_db else coefs[0], *coefs,
                C, HW, S, count, 0.0, float(eps), **channel_consts)
        if apply is not None:
            apply(x, g, dx, coefs)
        return dx, dw, db

    return run
