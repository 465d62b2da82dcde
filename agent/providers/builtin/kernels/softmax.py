"""Softmax family kernels (_softmax, _log_softmax and their backward), the text the builtin writer
copies into each emitted file.

Placeholders the writer sets: `_CONSERVATIVE` (variant >= 1: smaller tiles) and `_MODE` (0 softmax,
1 log_softmax, 2 softmax backward, 3 log_softmax backward). Above the first marker: what the emitted
file's header and the runtime module provide.
"""

import torch  # noqa: I001  (the emitted part's own imports follow the marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import (
    _cdiv,
    _gl_barrier,
    _gl_copy,
    _num_sms,
    _pow2,
    async_copy,
    gl,
    gluon,
)


# ---- emitted: main ----
import functools  # noqa: F401  (the inlined _num_sms uses it)
import os

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CONSERVATIVE = False  # variant >= 1: smaller tiles
_MODE = 0  # 0 softmax, 1 log_softmax, 2 softmax backward, 3 log_softmax backward


# inline: _cdiv, _num_sms


def _target_programs(x):
    """Programs that keep the device busy (a few per SM); irrelevant on the interpreter."""
    if _INTERPRET or x.device.type != "cuda":
        return 1
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    return 4 * _num_sms(index)


def _persistent_programs(x, per_sm):
    """Programs of a persistent grid: per_sm per SM on a GPU. The interpreter runs programs one
    after another, so any count costs the same there; a few make programs share the work as
    they do on a GPU."""
    if _INTERPRET or x.device.type != "cuda":
        return _INTERPRET_PROGRAMS
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    return max(1, int(per_sm * _num_sms(index)))


# inline: _pow2


@triton.jit
def _finish(a, b, mx, s, MODE: tl.constexpr):
    """The elementwise tail: a = input (fwd) or grad (bwd); b = output (bwd only)."""
    if MODE == 0:
        y = tl.exp(a - mx) / s
    elif MODE == 1:
        y = a - mx - tl.log(s)
    elif MODE == 2:
        y = b * (a - s)
    else:
        y = a - tl.exp(b) * s
    return y


@triton.jit
def _rows_tile(a_ptr, b_ptr, out_ptr, ROWS, R, MODE: tl.constexpr, ACC: tl.constexpr,
               BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Rows that fit one [BLOCK_M, BLOCK_N] tile: each element is loaded once. R is a runtime
    value or a constexpr, as the calling kernel passes it."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < ROWS
    row_off = rows[:, None] * R
    cols = tl.arange(0, BLOCK_N)
    m = row_ok[:, None] & (cols[None, :] < R)
    offs = row_off + cols[None, :]
    if MODE < 2:
        # -inf pads the row, from the load itself: a select after the load made ptxas wait for
        # each load before issuing the next (H200, [8192, 32000] f32 rows in one tile of 16
        # warps: 887 us against 505 with every load in flight first). Padding rows get a finite
        # max and a sum of 1, so that they stay -inf (exp: 0) and make no NaN.
        a = tl.load(a_ptr + offs, mask=m, other=float("-inf")).to(ACC)
        b = a
        mx = tl.where(row_ok, tl.max(a, axis=1), 0.0)
        s = tl.where(row_ok, tl.sum(tl.exp(a - mx[:, None]), axis=1), 1.0)
    else:
        a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
        mx = tl.zeros([BLOCK_M], ACC)
        if MODE == 2:
            b = tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
            s = tl.sum(a * b, axis=1)
        else:  # the output is needed only after the sum: fewer live registers
            s = tl.sum(a, axis=1)
            b = tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
    y = _finish(a, b, mx[:, None], s[:, None], MODE)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def _rows_kernel(a_ptr, b_ptr, out_ptr, ROWS, R, MODE: tl.constexpr, ACC: tl.constexpr,
                 BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    _rows_tile(a_ptr, b_ptr, out_ptr, ROWS, R, MODE, ACC, BLOCK_M, BLOCK_N)


@triton.jit
def _rows_const_kernel(a_ptr, b_ptr, out_ptr, ROWS, R: tl.constexpr, MODE: tl.constexpr,
                       ACC: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr,
                       SPLIT: tl.constexpr):
    """`_rows_kernel` with the row length a constexpr (one compile per length). A runtime R is
    specialized only as "a multiple of 16" or not, so a 196-long f16 row (392 bytes, 8-byte
    aligned starts) is loaded in scalar 2-byte accesses; as a constant, the alignment analysis
    sees row * 196 + col as a multiple of 4 elements over runs of 4 (the mask col < 196 too)
    and loads and stores 8-byte vectors, 4x fewer memory instructions.

    SPLIT holds the padded row as two [BLOCK_M, BLOCK_N // 2] halves combined elementwise
    before each reduction: a 256-wide tile in 4-element vectors spans 64 lanes, so Triton lays
    a row over two warps (shuffles, then an exchange through shared memory and a barrier); a
    128-wide half is one warp's 32 lanes, and the warps take rows (shuffles only)."""
    if SPLIT:
        H: tl.constexpr = BLOCK_N // 2
        rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
        row_ok = rows[:, None] < ROWS
        c0 = tl.arange(0, H)[None, :]
        c1 = c0 + H  # R > H: the second half has a valid column in every row
        m0 = row_ok & (c0 < R)
        m1 = row_ok & (c1 < R)
        o0 = rows[:, None] * R + c0
        o1 = o0 + H
        # (-inf padding from the loads themselves: see `_rows_tile`)
        pad = float("-inf") if MODE < 2 else 0.0
        a0 = tl.load(a_ptr + o0, mask=m0, other=pad).to(ACC)
        a1 = tl.load(a_ptr + o1, mask=m1, other=pad).to(ACC)
        if MODE < 2:
            b0 = a0
            b1 = a1
            mx = tl.where(row_ok, tl.max(tl.maximum(a0, a1), axis=1)[:, None], 0.0)
            s = tl.where(row_ok, tl.sum(tl.exp(a0 - mx) + tl.exp(a1 - mx), axis=1)[:, None], 1.0)
        else:
            b0 = tl.load(b_ptr + o0, mask=m0, other=0).to(ACC)
            b1 = tl.load(b_ptr + o1, mask=m1, other=0).to(ACC)
            mx = tl.zeros([BLOCK_M, 1], ACC)
            if MODE == 2:
                s = tl.sum(a0 * b0 + a1 * b1, axis=1)[:, None]
            else:
                s = tl.sum(a0 + a1, axis=1)[:, None]
        y0 = _finish(a0, b0, mx, s, MODE)
        tl.store(out_ptr + o0, y0.to(out_ptr.dtype.element_ty), mask=m0)
        y1 = _finish(a1, b1, mx, s, MODE)
        tl.store(out_ptr + o1, y1.to(out_ptr.dtype.element_ty), mask=m1)
    else:
        _rows_tile(a_ptr, b_ptr, out_ptr, ROWS, R, MODE, ACC, BLOCK_M, BLOCK_N)


@triton.jit
def _flat_tile(a_ptr, b_ptr, out_ptr, base, n, R: tl.constexpr, MODE: tl.constexpr,
               ACC: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr, FLAT: tl.constexpr,
               RECIP: tl.constexpr):
    """ROWS whole rows of R elements from flat offset `base` (n elements valid): loaded flat,
    viewed as a [BLOCK_N, ROWS] tile (one row per column) through a register gather, written
    flat. Rows along the tile's fast axis put a row in one lane's registers and a few warps
    (the row reductions: in-thread sums and one exchange through shared memory), where
    [ROWS, BLOCK_N] spreads a row over a warp's lanes (5 shuffles per row and reduction)."""
    i = tl.arange(0, FLAT)
    ok = i < n
    c2 = tl.arange(0, BLOCK_N)[:, None]
    r2 = tl.arange(0, ROWS)[None, :]
    # the tile's element (c, r) is flat element r * R + c (the last column repeats as padding)
    to_tile = tl.reshape(r2 * R + tl.minimum(c2, R - 1), [BLOCK_N * ROWS])
    a = tl.load(a_ptr + base + i, mask=ok, other=0)
    a = tl.reshape(tl.gather(a, to_tile, 0), [BLOCK_N, ROWS]).to(ACC)
    if MODE < 2:
        a = tl.where(c2 < R, a, float("-inf"))
        b = a
        mx = tl.max(a, axis=0)
        e = tl.exp(a - mx[None, :])
        s = tl.sum(e, axis=0)
    else:
        b = tl.load(b_ptr + base + i, mask=ok, other=0)
        b = tl.reshape(tl.gather(b, to_tile, 0), [BLOCK_N, ROWS]).to(ACC)
        mx = tl.zeros([ROWS], ACC)
        if MODE == 2:
            s = tl.sum(tl.where(c2 < R, a * b, 0), axis=0)
        else:
            s = tl.sum(tl.where(c2 < R, a, 0), axis=0)
    if RECIP and MODE == 0:
        # the exponentials of the sum, times 1/s per row: no second exp, no division per element
        y = (e * (1.0 / s)[None, :]).to(out_ptr.dtype.element_ty)
    else:
        y = _finish(a, b, mx[None, :], s[None, :], MODE).to(out_ptr.dtype.element_ty)
    # flat element i is the tile's (i % R, i // R); padding past ROWS * R reads a valid one
    row = tl.minimum(i // R, ROWS - 1)
    to_flat = tl.minimum(i - row * R, BLOCK_N - 1) * ROWS + row
    y = tl.gather(tl.reshape(y, [BLOCK_N * ROWS]), to_flat, 0)
    tl.store(out_ptr + base + i, y, mask=ok)


@triton.jit
def _flat_rows_kernel(a_ptr, b_ptr, out_ptr, TOTAL, FULL, R: tl.constexpr, MODE: tl.constexpr,
                      ACC: tl.constexpr, ROWS: tl.constexpr, BLOCK_N: tl.constexpr,
                      FLAT: tl.constexpr, RECIP: tl.constexpr):
    """Short rows whose length is not a multiple of 16 bytes (49 halves): a [ROWS, BLOCK_N] tile
    of them cannot load in vectors (each row starts at another alignment), and a warp's scalar
    loads straddle rows. Here a program's ROWS rows are one contiguous run of ROWS * R elements,
    16-byte aligned (ROWS a multiple of 8), loaded and stored flat in 16-byte vectors; a gather
    in registers (through shared memory) lays them out as the tile and back. The FULL programs
    before the last are unmasked but for the constant ROWS * R bound, which keeps the vectors
    whatever the row count; the last takes the rows left."""
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * (ROWS * R)
    if pid < FULL:
        _flat_tile(a_ptr, b_ptr, out_ptr, base, ROWS * R, R, MODE, ACC, ROWS, BLOCK_N, FLAT,
                   RECIP)
    else:
        _flat_tile(a_ptr, b_ptr, out_ptr, base, TOTAL - base, R, MODE, ACC, ROWS, BLOCK_N, FLAT,
                   RECIP)


@triton.jit
def _exp_fast(x, FTZ: tl.constexpr):
    """exp(x) in fp32; FTZ (GPU only): ex2.approx.ftz, without the denormal range check that
    tl.exp's ex2.approx costs (a compare and two multiplies per element; results below 2**-126
    become 0)."""
    if FTZ:
        return tl.inline_asm_elementwise("ex2.approx.ftz.f32 $0, $1;", "=f,f",
                                         [x * 1.4426950408889634], dtype=tl.float32,
                                         is_pure=True, pack=1)
    else:
        return tl.exp(x)


@triton.jit
def _window_geometry(R: tl.constexpr, RB: tl.constexpr, W: tl.constexpr, CH: tl.constexpr):
    """Per row of a window tile: its first vector (element offset from the tile's base), the
    elements up to the next row's first vector ([RB, 1]), its first element in its window
    ([RB, 1]); and the window's element index c ([1, W])."""
    r = tl.arange(0, RB)
    first = (r * R) // CH * CH
    owned = (((r + 1) * R) // CH * CH - first)[:, None]
    start = (r * R - first)[:, None]
    return first, owned, start, tl.arange(0, W)[None, :]


@triton.jit
def _opaque(x, GPU: tl.constexpr):
    """int32 x, out of the compiler's sight on the GPU (an inline-asm move): arithmetic on a
    0/1 mask made from it stays arithmetic, where LLVM turns a known 0/1 value back into a
    compare and a select. The interpreter takes x as it is."""
    if GPU:
        return tl.inline_asm_elementwise("mov.b32 $0, $1;", "=r,r", [x], dtype=tl.int32,
                                         is_pure=True, pack=1)
    else:
        return x


@triton.jit
def _window_masks(c, start, R: tl.constexpr, GPU: tl.constexpr):
    """`_window_math`'s ARITH masks, loop-invariant: 1 where a lane holds the row's own element
    (else 0), 1 where it holds the previous row's tail (else 0), and the bits of 0.0 for own
    lanes (else -inf), all int32."""
    own = (c >= start) & (c < start + R)
    return (_opaque(own.to(tl.int32), GPU), _opaque((c < start).to(tl.int32), GPU),
            _opaque(tl.where(own, 0, -8388608), GPU))  # 0xff800000: -inf


@triton.jit
def _row_pick(v, prev_v, tail):
    """Per lane, the previous row's value where tail is 1, else the row's own, by integer
    arithmetic on the bits (exact for every value, NaN and infinities included)."""
    own_bits = v.to(tl.int32, bitcast=True)[:, None]
    step = (prev_v.to(tl.int32, bitcast=True) - v.to(tl.int32, bitcast=True))[:, None]
    return (own_bits + tail * step).to(tl.float32, bitcast=True)


@triton.jit
def _window_math(a, b, c, start, R: tl.constexpr, MODE: tl.constexpr, ACC: tl.constexpr,
                 RB: tl.constexpr, FTZ: tl.constexpr, DEBUG: tl.constexpr, w_own=None,
                 t_tail=None, bias_own=None, ARITH: tl.constexpr = False):
    """The op on an [RB, W] window tile as loaded (a; b for the backward modes): statistics
    over each row's own elements (start <= c < start + R), the previous row's tail (c < start)
    finished with that row's statistics.

    ARITH (the forward modes, fp32 statistics): the masks as integer and float arithmetic with
    `_window_masks`' values instead of compares and selects, which make the kernel ALU-bound
    (Nsight Compute: ALU pipe 64%, DRAM 29%): the max over a + (0 or -inf) (a NaN it makes
    from a neighbour's +inf is ignored by the max, as a NaN of the row's own is: that row's
    sum makes it NaN), the sum over the bits of e times 0 or 1 (a neighbour's inf or NaN
    adds +0.0), the previous row's statistics picked by `_row_pick`."""
    a = a.to(ACC)
    rp = tl.maximum(tl.arange(0, RB) - 1, 0)
    own = (c >= start) & (c < start + R)
    if DEBUG:
        y = a
    elif ARITH and MODE < 2:
        mx = tl.max(a + bias_own.to(tl.float32, bitcast=True), axis=1)
        m_sel = _row_pick(mx, tl.gather(mx, rp, 0), t_tail)
        e = _exp_fast(a - m_sel, FTZ)
        s = tl.sum((e.to(tl.int32, bitcast=True) * w_own).to(tl.float32, bitcast=True), axis=1)
        if MODE == 0:
            inv = 1.0 / s
            y = e * _row_pick(inv, tl.gather(inv, rp, 0), t_tail)
        else:
            ls = tl.log(s)
            y = (a - m_sel) - _row_pick(ls, tl.gather(ls, rp, 0), t_tail)
    elif MODE < 2:
        mx = tl.max(tl.where(own, a, float("-inf")), axis=1)
        m_sel = tl.where(c < start, tl.gather(mx, rp, 0)[:, None], mx[:, None])
        e = _exp_fast(a - m_sel, FTZ)
        # the masks again, written differently: kept alive from above, 32 of them per lane spill
        # out of the 7 predicate registers into bit fields (two instructions each per use)
        d = c - start
        s = tl.sum(tl.where(d.to(tl.uint32) < R, e, 0.0), axis=1)
        if MODE == 0:
            inv = 1.0 / s
            y = e * tl.where(d < 0, tl.gather(inv, rp, 0)[:, None], inv[:, None])
        else:
            ls = tl.log(s)
            y = (a - m_sel) - tl.where(d < 0, tl.gather(ls, rp, 0)[:, None], ls[:, None])
    else:
        b = b.to(ACC)
        if MODE == 2:
            s = tl.sum(tl.where(own, a * b, 0.0), axis=1)
        else:
            s = tl.sum(tl.where(own, a, 0.0), axis=1)
        y = _finish(a, b, 0.0, tl.where(c < start, tl.gather(s, rp, 0)[:, None], s[:, None]),
                    MODE)
    return y


@triton.jit
def _window_tile(a_ptr, b_ptr, out_ptr, base, rows, TOTAL, R: tl.constexpr, MODE: tl.constexpr,
                 ACC: tl.constexpr, RB: tl.constexpr, W: tl.constexpr, CH: tl.constexpr,
                 MASKED: tl.constexpr, FTZ: tl.constexpr, DEBUG: tl.constexpr,
                 ARITH: tl.constexpr = False, GPU: tl.constexpr = False):
    """RB rows of R elements from flat offset `base` (16-byte aligned; `rows` of them valid),
    each read through an aligned window: W elements from the CH-element vector (16 bytes) that
    holds the row's first element, so that every access is a whole vector however the rows
    fall (49 halves: rows start at every even byte offset). Row r owns the vectors from its
    first up to the next row's first: the tail of row r - 1 that shares its first vector is
    written from row r's window with row r - 1's statistics (one [RB] gather), so each output
    vector is stored once, whole, by one lane. With R >= CH no vector holds a third row.
    MASKED: the last program, whose windows may reach past the tensor's end (per-element
    masks, and the last row owns its partial last vector)."""
    first, owned, start, c = _window_geometry(R, RB, W, CH)
    offs = base + first[:, None] + c
    if MASKED:
        r = tl.arange(0, RB)[:, None]
        ld_ok = offs < TOTAL
        own = (c >= start) & (c < start + R)
        st_ok = ((c < owned) | (own & (r == rows - 1))) & (r < rows) & ld_ok
    else:
        ld_ok = c < W
        st_ok = c < owned
    fill = float("-inf") if MODE < 2 else 0.0
    a = tl.load(a_ptr + offs, mask=ld_ok, other=fill)
    b = a
    if MODE >= 2:
        b = tl.load(b_ptr + offs, mask=ld_ok, other=0)
    w_own, t_tail, bias_own = _window_masks(c, start, R, GPU)
    y = _window_math(a, b, c, start, R, MODE, ACC, RB, FTZ, DEBUG, w_own, t_tail, bias_own,
                     ARITH)
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=st_ok)


@triton.jit
def _window_stream_kernel(a_ptr, b_ptr, out_ptr, ROWS, TOTAL, LAST, R: tl.constexpr,
                          MODE: tl.constexpr, ACC: tl.constexpr, RB: tl.constexpr,
                          W: tl.constexpr, CH: tl.constexpr, FTZ: tl.constexpr,
                          DEBUG: tl.constexpr, ARITH: tl.constexpr = False,
                          GPU: tl.constexpr = False):
    """`_window_rows_kernel` on a persistent grid: program p takes the unmasked tiles p,
    p + G, ... below LAST and loads its next tile before the math of the current one; the
    last program also takes tile LAST (masked)."""
    pid = tl.program_id(0)
    G = tl.num_programs(0)
    STEP: tl.constexpr = RB * R
    first, owned, start, c = _window_geometry(R, RB, W, CH)
    w_own, t_tail, bias_own = _window_masks(c, start, R, GPU)
    offs = first[:, None] + c
    more = (c < W) & (tl.full([1, W], 0, tl.int32) + pid < LAST)
    a_next = tl.load(a_ptr + pid.to(tl.int64) * STEP + offs, mask=more, other=0)
    b_next = a_next
    if MODE >= 2:
        b_next = tl.load(b_ptr + pid.to(tl.int64) * STEP + offs, mask=more, other=0)
    for t in range(pid, LAST, G):
        a = a_next
        b = b_next
        base = tl.cast(t, tl.int64) * STEP
        more = (c < W) & (tl.full([1, W], 0, tl.int32) + t + G < LAST)
        a_next = tl.load(a_ptr + base + G * STEP + offs, mask=more, other=0)
        if MODE >= 2:
            b_next = tl.load(b_ptr + base + G * STEP + offs, mask=more, other=0)
        y = _window_math(a, b, c, start, R, MODE, ACC, RB, FTZ, DEBUG, w_own, t_tail,
                         bias_own, ARITH)
        tl.store(out_ptr + base + offs, y.to(out_ptr.dtype.element_ty), mask=c < owned)
    if pid == G - 1:
        base = (pid.to(tl.int64) * 0 + LAST) * STEP
        _window_tile(a_ptr, b_ptr, out_ptr, base, ROWS - LAST * RB, TOTAL, R, MODE, ACC, RB, W,
                     CH, True, FTZ, DEBUG, ARITH, GPU)


@triton.jit
def _window_rows_kernel(a_ptr, b_ptr, out_ptr, ROWS, TOTAL, LAST, R: tl.constexpr,
                        MODE: tl.constexpr, ACC: tl.constexpr, RB: tl.constexpr, W: tl.constexpr,
                        CH: tl.constexpr, FTZ: tl.constexpr, DEBUG: tl.constexpr,
                        ARITH: tl.constexpr = False, GPU: tl.constexpr = False):
    """Short rows whose length is not a multiple of 16 bytes, RB (a multiple of 8) rows per
    program, read and written in whole 16-byte vectors through per-row windows
    (`_window_tile`): no gather of the data (`_flat_rows_kernel` moves every element through
    shared memory and back, with index arithmetic per element). Programs before LAST are
    unmasked; LAST, the final one, masks per element. TOTAL = ROWS * R comes from the host
    (an int64 argument past 2**31 elements, where the product in the kernel would wrap)."""
    pid = tl.program_id(0)
    base = pid.to(tl.int64) * (RB * R)
    if pid < LAST:
        _window_tile(a_ptr, b_ptr, out_ptr, base, RB, TOTAL, R, MODE, ACC, RB, W, CH, False, FTZ,
                     DEBUG, ARITH, GPU)
    else:
        _window_tile(a_ptr, b_ptr, out_ptr, base, ROWS - pid * RB, TOTAL, R, MODE, ACC, RB, W,
                     CH, True, FTZ, DEBUG, ARITH, GPU)


@triton.jit
def _row_body_kernel(a_ptr, b_ptr, out_ptr, ROWS, R, MODE: tl.constexpr, ACC: tl.constexpr,
                     BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    """Rows of up to BLOCK_N elements whose length is not a multiple of 16 bytes (the forward,
    MODE < 2, and the log_softmax backward's 16-bit rows, MODE 3), one program per row, loaded
    once: the row's whole ALIGN-element vectors (its body) in one tile of 16-byte loads and
    stores, and the < ALIGN elements before and after them
    (its edges) in a small masked tile, as in `_long_rows_kernel`. A row tile over the rows as
    they fall (`_rows_tile`) would move unaligned rows element by element (scalar 2-byte
    accesses for bf16), and the two-pass kernel reads the row twice. The loads come first,
    padded with -inf, before any math (see `_rows_tile`)."""
    k = tl.arange(0, BLOCK_N)
    e = tl.arange(0, 2 * ALIGN)
    start = tl.program_id(0).to(tl.int64) * R
    end = start + R
    lo = tl.multiple_of((start + ALIGN - 1) // ALIGN * ALIGN, ALIGN)
    hi = tl.multiple_of(end // ALIGN * ALIGN, ALIGN)
    n_body = tl.multiple_of(tl.maximum(hi - lo, 0).to(tl.int32), ALIGN)
    body_ok = k < n_body
    # edges: [start, min(lo, end)) and [max(hi, lo), end), disjoint from the body
    e_offs = tl.where(e < ALIGN, start + e, hi + e - ALIGN)
    e_ok = (e_offs < end) & ((e < ALIGN) == (e_offs < lo))
    pad = float("-inf") if MODE < 2 else 0.0
    a = tl.load(a_ptr + lo + k, mask=body_ok, other=pad).to(ACC)
    ea = tl.load(a_ptr + e_offs, mask=e_ok, other=pad).to(ACC)
    b = a
    eb = ea
    if MODE >= 2:
        b = tl.load(b_ptr + lo + k, mask=body_ok, other=0).to(ACC)
        eb = tl.load(b_ptr + e_offs, mask=e_ok, other=0).to(ACC)
    if MODE < 2:
        mx = tl.maximum(tl.max(a, axis=0), tl.max(ea, axis=0))
        s = tl.sum(tl.exp(a - mx), axis=0) + tl.sum(tl.exp(ea - mx), axis=0)
    else:  # MODE 3 (the softmax backward, MODE 2, spills here and is not planned on it)
        mx = tl.zeros([], ACC)
        s = tl.sum(a, axis=0) + tl.sum(ea, axis=0)
    tl.store(out_ptr + lo + k, _finish(a, b, mx, s, MODE).to(out_ptr.dtype.element_ty),
             mask=body_ok)
    tl.store(out_ptr + e_offs, _finish(ea, eb, mx, s, MODE).to(out_ptr.dtype.element_ty),
             mask=e_ok)


@triton.jit
def _long_rows_kernel(a_ptr, b_ptr, out_ptr, ROWS, R, MODE: tl.constexpr, ACC: tl.constexpr,
                      BLOCK_N: tl.constexpr, ALIGN: tl.constexpr, STAGES: tl.constexpr,
                      HEAD: tl.constexpr, REVERSE: tl.constexpr, EV_KEEP: tl.constexpr,
                      EV_DONE: tl.constexpr, ST_CACHE: tl.constexpr, ST_EV: tl.constexpr):
    """Rows longer than a register tile: a statistics pass, then a writing pass that reads the
    row again.

    The grid is persistent (a few programs per SM, each taking rows pid, pid + grid, ...) so that
    only about grid rows are live at a time: they fit in L2 and the second read of a row mostly
    hits there instead of HBM (with one program per row, every row of a 50k vocabulary is in
    flight at once and the row is read from HBM twice). The first pass loads with EV_KEEP
    (evict_last) and the writing pass with EV_DONE (evict_first; its stores with ST_EV, or the
    cache modifier ST_CACHE), so the streamed output and the finished rows leave L2 before the
    rows still to be re-read; with REVERSE it walks the row
    backwards, taking the most recently loaded (least likely evicted) chunks first. With few
    programs per SM, each must keep many bytes in flight: STAGES > 1 lets Triton's pipeliner
    prefetch STAGES - 1 chunks into shared memory (cp.async) while the current one is reduced
    (without it the compiler serializes each load with the math that uses it).

    HEAD > 0 keeps the first HEAD elements of the row body in registers from the first pass to
    the second: they are read from HBM once, whatever L2 keeps, and the bytes that must survive
    in L2 between the passes shrink by as much (132 rows of 201 KB in flight are more than L2
    holds for the f32 50257-long rows).

    Each row is split at ALIGN-element boundaries: a body of whole ALIGN groups, loaded and stored
    in 16-byte vectors even when the row length is odd (50257) and rows start unaligned, and
    two edges (the < ALIGN elements before and after it) in one small masked chunk. The forward
    statistics are kept per lane (running max and rescaled sum) and combined once per row, so the
    loop over the row has no cross-warp reduction.
    """
    cols = tl.arange(0, BLOCK_N)
    e = tl.arange(0, 2 * ALIGN)
    head = e < ALIGN
    for row in range(tl.program_id(0), ROWS, tl.num_programs(0)):
        start = tl.cast(row, tl.int64) * R
        end = start + R
        body = tl.multiple_of((start + ALIGN - 1) // ALIGN * ALIGN, ALIGN)
        body_end = tl.multiple_of(end // ALIGN * ALIGN, ALIGN)
        n_body = tl.multiple_of(tl.maximum(body_end - body, 0).to(tl.int32), ALIGN)
        # the register-resident head [0, HEAD) of the body, then the rest, chunk by chunk
        if HEAD > 0:
            h = tl.arange(0, HEAD)
            h_ok = h < n_body
        n_rest = tl.multiple_of(tl.maximum(n_body - HEAD, 0), ALIGN)
        n_chunks = tl.cdiv(n_rest, BLOCK_N)
        # head [start, min(body, end)), tail [max(body_end, body), end): disjoint from the body
        e_offs = tl.where(head, start + e, body_end + e - ALIGN)
        e_ok = (e_offs < end) & (head == (e_offs < body))
        a_rest = a_ptr + body + HEAD
        b_rest = b_ptr + body + HEAD
        if MODE < 2:
            ea = tl.load(a_ptr + e_offs, mask=e_ok, other=float("-inf")).to(ACC)
            e_mx = tl.max(ea, axis=0)
            e_s = tl.sum(tl.exp(ea - tl.where(e_mx == float("-inf"), 0.0, e_mx)), axis=0)
            if HEAD > 0:
                ha = tl.load(a_ptr + body + h, mask=h_ok, other=float("-inf"))
                hb = ha
                hv = ha.to(ACC)
                h_mx = tl.maximum(tl.max(hv, axis=0), e_mx)
                h_safe = tl.where(h_mx == float("-inf"), 0.0, h_mx)
                e_s = e_s * tl.exp(e_mx - h_safe) + tl.sum(tl.exp(hv - h_safe), axis=0)
                e_mx = h_mx
            lane_mx = tl.full([BLOCK_N], float("-inf"), ACC)
            lane_s = tl.zeros([BLOCK_N], ACC)
            for j in tl.range(0, n_chunks, num_stages=STAGES):
                c = j * BLOCK_N + cols
                a = tl.load(a_rest + c, mask=c < n_rest, other=float("-inf"),
                            eviction_policy=EV_KEEP).to(ACC)
                new_mx = tl.maximum(lane_mx, a)
                safe = tl.where(new_mx == float("-inf"), 0.0, new_mx)
                lane_s = lane_s * tl.exp(lane_mx - safe) + tl.exp(a - safe)
                lane_mx = new_mx
            mx = tl.maximum(tl.max(lane_mx, axis=0), e_mx)
            safe = tl.where(mx == float("-inf"), 0.0, mx)
            s = tl.sum(lane_s * tl.exp(lane_mx - safe), axis=0) + e_s * tl.exp(e_mx - safe)
        else:
            ea = tl.load(a_ptr + e_offs, mask=e_ok, other=0).to(ACC)
            if MODE == 2:
                ea = ea * tl.load(b_ptr + e_offs, mask=e_ok, other=0).to(ACC)
            s = tl.sum(ea, axis=0)
            if HEAD > 0:
                ha = tl.load(a_ptr + body + h, mask=h_ok, other=0)
                hb = tl.load(b_ptr + body + h, mask=h_ok, other=0)
                if MODE == 2:
                    s += tl.sum(ha.to(ACC) * hb.to(ACC), axis=0)
                else:
                    s += tl.sum(ha.to(ACC), axis=0)
            acc = tl.zeros([BLOCK_N], ACC)
            for j in tl.range(0, n_chunks, num_stages=STAGES):
                c = j * BLOCK_N + cols
                a = tl.load(a_rest + c, mask=c < n_rest, other=0,
                            eviction_policy=EV_KEEP).to(ACC)
                if MODE == 2:
                    a = a * tl.load(b_rest + c, mask=c < n_rest, other=0,
                                    eviction_policy=EV_KEEP).to(ACC)
                acc += a
            s += tl.sum(acc, axis=0)
            mx = tl.zeros([], ACC)
        out_rest = out_ptr + body + HEAD
        for j in tl.range(0, n_chunks, num_stages=STAGES):
            if REVERSE:
                c = (n_chunks - 1 - j) * BLOCK_N + cols
            else:
                c = j * BLOCK_N + cols
            ok = c < n_rest
            a = tl.load(a_rest + c, mask=ok, other=0, eviction_policy=EV_DONE).to(ACC)
            b = a
            if MODE >= 2:
                b = tl.load(b_rest + c, mask=ok, other=0, eviction_policy=EV_DONE).to(ACC)
            y = _finish(a, b, mx, s, MODE)
            tl.store(out_rest + c, y.to(out_ptr.dtype.element_ty), mask=ok,
                     cache_modifier=ST_CACHE, eviction_policy=ST_EV)
        if HEAD > 0:
            y = _finish(ha.to(ACC), hb.to(ACC), mx, s, MODE)
            tl.store(out_ptr + body + h, y.to(out_ptr.dtype.element_ty), mask=h_ok,
                     cache_modifier=ST_CACHE)
        a = tl.load(a_ptr + e_offs, mask=e_ok, other=0).to(ACC)
        b = a
        if MODE >= 2:
            b = tl.load(b_ptr + e_offs, mask=e_ok, other=0).to(ACC)
        y = _finish(a, b, mx, s, MODE)
        tl.store(out_ptr + e_offs, y.to(out_ptr.dtype.element_ty), mask=e_ok)


# Long f32 rows held in shared memory (Gluon; GPU only): each row read from HBM once, where
# `_long_rows_kernel` reads it twice (its second read partly from L2).
# inline: gluon

if gluon is not None:

    @gluon.jit
    def _smem_geometry(row, R):
        """A row's aligned superset: its first element rounded down to a 16-byte vector (base,
        in elements), the row's offset in it (shift) and the end of its whole vectors (full)."""
        start = row.to(gl.int64) * R
        base = start // 4 * 4
        shift = (start - base).to(gl.int32)
        full = (shift + R) // 4 * 4
        return base, shift, full

    @gluon.jit
    def _smem_fold(x, ok, mv, sv):
        """Per-lane running max and sum with one exp per element (exp(-|x - mv|) serves a new
        max and an old one); -inf elements and the lanes outside the row are skipped. NaN
        makes the lane's sum NaN; +inf becomes the lane's max, and the row's sum NaN when the
        lanes are combined (exp(inf - inf)): a NaN row either way, as eager gives."""
        e = gl.exp(-gl.abs(x - mv))
        up = x > mv
        ok = ok & (x != float("-inf"))
        sv = gl.where(ok, gl.where(up, sv * e + 1.0, sv + e), sv)
        mv = gl.where(ok & up, x, mv)
        return mv, sv

    @gluon.jit
    def _smem_out(x, m, s, ls, MODE: gl.constexpr):
        if MODE == 0:
            y = gl.exp(x - m) / s
        else:
            y = x - m - ls
        return y

    @gluon.jit
    def _smem_rows_kernel(a_ptr, out_ptr, ROWS, R, MODE: gl.constexpr, CHUNK: gl.constexpr,
                          NCHUNK: gl.constexpr, L: gl.constexpr, SL: gl.constexpr):
        """Softmax / log_softmax of f32 rows pid, pid + grid, ... (one program per SM), each
        held in NCHUNK shared-memory chunks of CHUNK elements.

        A row is copied in (cp.async, 16-byte vectors) as its aligned superset: from its first
        element rounded down to a vector up to its last whole vector, however the rows fall
        (50257-long rows start at every 4-byte offset); the superset's lanes outside the row
        are masked in the math, and the row's last partial vector comes from a plain load. Each
        chunk is folded into per-lane statistics as it arrives; then each chunk is read back,
        its output stored (the whole vectors the row owns, 16 bytes each; its first partial
        vector from a plain load and masked stores), and the chunk refilled with the next
        row's copy, so the next row's bytes are in flight while this one is written. Every
        thread reads back only the elements its own copies wrote (layout L for both), so a
        wait on its own copy groups suffices before a chunk is read; a barrier before a chunk
        is refilled."""
        pid = gl.program_id(0)
        P = gl.num_programs(0)
        smem = gl.allocate_shared_memory(a_ptr.dtype.element_ty, [NCHUNK, CHUNK], SL)
        offs = gl.arange(0, CHUNK, layout=L)
        row = pid
        base, shift, full = _smem_geometry(row, R)
        for c in gl.static_range(NCHUNK):
            i = c * CHUNK + offs
            _gl_copy(smem.index(c), a_ptr + base + i, mask=(i < full) & (row < ROWS))
            async_copy.commit_group()
        while row < ROWS:
            base, shift, full = _smem_geometry(row, R)
            t_ok = offs < shift + R - full
            xt = gl.load(a_ptr + base + full + offs, mask=t_ok, other=float("-inf"))
            h_ok = (offs >= shift) & (offs < 4)
            xh = gl.load(a_ptr + base + offs, mask=h_ok, other=float("-inf"))
            mv = gl.full([CHUNK], float("-inf"), gl.float32, L)
            sv = gl.zeros([CHUNK], gl.float32, L)
            for c in gl.static_range(NCHUNK):
                async_copy.wait_group(NCHUNK - 1 - c)
                i = c * CHUNK + offs
                mv, sv = _smem_fold(smem.index(c).load(L), (i >= shift) & (i < full), mv, sv)
            mv, sv = _smem_fold(xt, t_ok, mv, sv)
            m = gl.max(mv, axis=0)
            s = gl.sum(gl.where(mv == float("-inf"), 0.0, sv * gl.exp(mv - m)), axis=0)
            ls = gl.log(s)
            first = gl.where(shift > 0, 4, 0)  # a partial first vector is stored apart
            nxt = row + P
            n_base, n_shift, n_full = _smem_geometry(nxt, R)
            for c in gl.static_range(NCHUNK):
                i = c * CHUNK + offs
                y = _smem_out(smem.index(c).load(L), m, s, ls, MODE)
                gl.store(out_ptr + base + i, y, mask=(i >= first) & (i < full))
                _gl_barrier()
                _gl_copy(smem.index(c), a_ptr + n_base + i, mask=(i < n_full) & (nxt < ROWS))
                async_copy.commit_group()
            gl.store(out_ptr + base + offs, _smem_out(xh, m, s, ls, MODE), mask=h_ok)
            gl.store(out_ptr + base + full + offs, _smem_out(xt, m, s, ls, MODE), mask=t_ok)
            row = nxt
        async_copy.wait_group(0)

    def _smem_rows(a, b, out, ROWS, R, GRID, **consts):
        """`_smem_rows_kernel` with the call shape of the other plans' launchers."""
        _smem_rows_kernel[(GRID,)](a, out, ROWS, R, **consts)


@triton.jit
def _cols_kernel(a_ptr, b_ptr, out_ptr, INNER, R, NIB, MODE: tl.constexpr, ACC: tl.constexpr,
                 ONE_PASS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    pid = tl.program_id(0)
    o = (pid // NIB).to(tl.int64)
    i = (pid % NIB).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < INNER
    base = o * R * INNER + i[None, :]
    if ONE_PASS:
        r = tl.arange(0, BLOCK_R)
        m = (r[:, None] < R) & i_ok[None, :]
        offs = base + r[:, None] * INNER
        if MODE < 2:  # (-inf padding from the load itself: see `_rows_tile`)
            a = tl.load(a_ptr + offs, mask=m, other=float("-inf")).to(ACC)
            b = a
            mx = tl.where(i_ok, tl.max(a, axis=0), 0.0)
            s = tl.where(i_ok, tl.sum(tl.exp(a - mx[None, :]), axis=0), 1.0)
        else:
            a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
            b = tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
            mx = tl.zeros([BLOCK_I], ACC)
            if MODE == 2:
                s = tl.sum(a * b, axis=0)
            else:
                s = tl.sum(a, axis=0)
        y = _finish(a, b, mx[None, :], s[None, :], MODE)
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)
    else:
        mx = tl.full([BLOCK_I], float("-inf"), ACC)
        s = tl.zeros([BLOCK_I], ACC)
        acc = tl.zeros([BLOCK_R, BLOCK_I], ACC)
        for r0 in range(0, R, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            m = (r[:, None] < R) & i_ok[None, :]
            offs = base + r[:, None] * INNER
            if MODE < 2:
                a = tl.load(a_ptr + offs, mask=m, other=float("-inf")).to(ACC)
                new_mx = tl.maximum(mx, tl.max(a, axis=0))
                safe = tl.where(new_mx == float("-inf"), 0.0, new_mx)
                s = s * tl.exp(mx - safe) + tl.sum(tl.exp(a - safe[None, :]), axis=0)
                mx = new_mx
            else:
                a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
                if MODE == 2:
                    acc += a * tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
                else:
                    acc += a
        if MODE >= 2:
            s = tl.sum(acc, axis=0)
        else:  # padding columns: finite statistics (no NaN in lanes that store nothing)
            mx = tl.where(i_ok, mx, 0.0)
            s = tl.where(i_ok, s, 1.0)
        for r0 in range(0, R, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            m = (r[:, None] < R) & i_ok[None, :]
            offs = base + r[:, None] * INNER
            a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
            b = a
            if MODE >= 2:
                b = tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
            y = _finish(a, b, mx[None, :], s[None, :], MODE)
            tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)


# Tile limits (module constants so that a benchmark can sweep them; plans read them once).
# Measured on an H200: a whole row of up to 32768 elements held in registers (one program of 16
# warps per row) wins when rows are 16-element aligned, so that every load is a 16-byte vector:
# log_softmax backward f32 32000 799 vs 982 us (CUDA graphs); the forward with fp32 statistics,
# f32 [8192, 32000] 506 vs 689 us, [4096, 30000] 246 vs 351, [1024, 32000] 73 vs 97 (the
# evaluator's timing, L2 flushed). Such a row tile over rows that are not aligned loads them
# unvectorized (bf16 30522: forward 887 vs 252 us, backward 784 vs 309, measured before the
# load-order fix): long unaligned rows take `_row_body_kernel` (below), short ones small tiles
# (49-wide rows: 49 vs 63 us at 1024 vs 4096 elements); aligned rows like larger tiles.
_SMALL = _INTERPRET or _CONSERVATIVE
_ONE_PASS_MAX = 256 if _SMALL else 8192  # row held in registers
# 16-aligned rows held in registers: softmax and log_softmax with fp32 statistics, and the
# log_softmax backward (softmax backward holds two tensors: it stays at _ONE_PASS_MAX)
_ONE_PASS_MAX_ALIGNED = 256 if _SMALL else 32768
# Forward rows that are not 16-element aligned, longer than _ONE_PASS_MAX and up to
# _BODY_MAX (padded) elements, fp32 statistics: `_row_body_kernel`, one program of _BODY_WARPS
# warps per row (H200, log_softmax [4096, 30522] bf16: 175 us against 250 for the two-pass
# kernel and 235 for eager; 8 warps 234). 0 turns it off.
_BODY_MAX = 1024 if _SMALL else 32768
_BODY_WARPS = 16
# The log_softmax backward's 16-bit rows through the same kernel (grad and output held in
# registers: 128 registers at 16 warps, no spill for sm_90; fp32 rows and the softmax backward
# spill there and keep the two-pass kernel)
_BODY_BWD = True
_TILE = 1024 if _SMALL else 4096  # elements per loop step / short-row tile
_TILE_UNALIGNED = 1024  # short-row tile when rows are not a multiple of 16 long
_MIN_TILE = 64 if _SMALL else 1024  # short rows: at least this many elements per program
# Short rows that are not a multiple of 16 bytes long, up to _FLAT_MAX_N (padded) elements:
# `_flat_rows_kernel`, about _FLAT_ROWS_TILE tile elements (at least 8 rows) per program and
# _FLAT_WARPS warps; _FLAT_ROWS_TILE = 0 turns it off (`_rows_kernel` with _TILE_UNALIGNED).
_FLAT_ROWS_TILE = 256 if _SMALL else 2048
_FLAT_MAX_N = 128  # H200: 49-wide f16 rows 51.6 -> 31.9 us, but 196-wide 24.6 -> 43 (kept out)
_FLAT_WARPS = 2
# The same rows through aligned per-row windows (`_window_rows_kernel`), rows of at least one
# 16-byte vector and up to _WIN_MAX_N (padded) elements: about _WIN_TILE window elements (at
# least 8 rows) per program, _WIN_WARPS warps; _WIN_TILE = 0 leaves them to the kernels above.
_WIN_TILE = 256 if _SMALL else 1024
_WIN_MAX_N = 128
_WIN_WARPS = 4
_WIN_FTZ = True  # `_exp_fast`'s FTZ on the GPU
_WIN_PROGRAMS_PER_SM = 8  # > 0: `_window_stream_kernel`, persistent
_WIN_DEBUG_COPY = False  # diagnostic: the windows copied, no math (wrong results)
# the forward window math's masks as arithmetic on opaque 0/1 and 0/-inf values instead of
# compares and selects (`_window_math`'s ARITH; fp32 statistics only): sm_90 loop 164 -> 133
# SASS instructions, ALU-pipe ones ~81 -> 17. H200, evaluator timing, off / on: [2048,3,49,49]
# f16 23.3 / 21.5 us, [512,6,49,49] 14.1 / 12.8
_WIN_ARITH = True
# softmax: one exp per element, times 1/s per row, not exp again divided by s (H200, the five
# 49-wide f16 cases: 1-2% faster, 31.5 -> 31.2 us on [2048, 3, 49, 49]). A persistent grid that
# computes the gather indices once per program lost: 34-58 us at 8-2 programs per SM.
_FLAT_RECIP = True
# Short rows of an even length that is not a multiple of 16 elements, not taken by the flat
# kernel (196-wide f16: 392-byte rows, 8-byte aligned), go to `_rows_const_kernel` (the row
# length a constexpr: vector accesses of the rows' alignment), _ROWS_CONST_M rows per program
# (0: as `_rows_kernel` picks them) and _ROWS_CONST_WARPS warps (0: by tile size), the row held
# as two halves with _ROWS_CONST_SPLIT. H200, [64, 4, 196, 196] f16: 24.5 us on `_rows_kernel`
# (eager 23.0), 15.4 with this kernel, 14.9 with 2 warps; M 8/16 no better.
_ROWS_CONST_N = True
_ROWS_CONST_M = 0
_ROWS_CONST_WARPS = 2
_ROWS_CONST_SPLIT = True
# Long rows (`_long_rows_kernel`): programs per SM of the persistent grid (about that many rows
# per SM are live: keep grid * row bytes under the 50 MB L2; 1 for f32 50257-long rows, 26 MB),
# elements per loop step, warps, pipeline stages and their shared-memory budget, and the
# alignment of the vectorized row body in elements (1: no split, every access masked per element).
_LONG_PROGRAMS_PER_SM = 1
_LONG_TILE = 1024 if _SMALL else 8192
_LONG_WARPS = 4 if _SMALL else 16
_LONG_STAGES = 1 if _CONSERVATIVE else 3  # loop pipelining (fewer where the buffers pass the budget)
_LONG_SMEM_PER_SM = 192 * 1024  # of the H100/H200's 227 KB
_ROW_ALIGN = 16
# Long rows on the persistent grid, L2 reuse between the passes (switches to sweep on the GPU):
# bytes of each row kept in registers between the passes (forward: the input; backward: both
# inputs together; 0: none; rounded down to a power-of-two element count, at most the row),
# the writing pass walking the row backwards, the first pass's loads marked evict_last and the
# writing pass's loads and stores evict_first, and the writing pass's store cache modifier
# ("", ".cs" streaming, ".cg", ".wt").
_LONG_HEAD_BYTES = 1024 if _INTERPRET else 0  # H200: 64 KB gave 1154 vs 1164 us (50257), 760 vs 690 (32000)
_LONG_HEAD_BYTES_BWD = 1024 if _INTERPRET else 0
_LONG_REVERSE = True
_LONG_EVICT_LAST = True
_LONG_EVICT_FIRST = True
_LONG_STORE_CACHE = ""
# Rows shorter than this (bytes of input) skip the persistent grid: one program per row with
# _LONG_WARPS_SHORT warps. On the H200 the persistent grid won for f32 rows of 30000-50257
# (1466 -> 1160 us at [8192, 50257]) and lost for bf16 rows of 30522 and 32128 (253 -> 287 us,
# 55 -> 74 us), which stay in L2 between the passes without it.
# (Those bf16 rows, one program per row: 4 warps without pipelining 251 / 67 us, 8 warps 335 /
# 84, 16 warps 295 / 74; pipelining cost 10-20% at every width.)
_PERSIST_MIN_ROW_BYTES = 96 * 1024
_LONG_WARPS_SHORT = 4
_LONG_STAGES_SHORT = 1
# Long f32 forward rows held in shared memory (`_smem_rows_kernel`, Gluon; GPU only), when a
# row's chunks and _SMEM_SCRATCH bytes for the reductions fit a block's shared memory: one
# program of _SMEM_WARPS warps per SM, rows in chunks of _SMEM_CHUNK elements (a multiple of
# 128 * _SMEM_WARPS: one 16-byte vector per thread per chunk at the least). H200, evaluator
# timing, [8192, 50257] f32 log_softmax: 885 us against 1162 for `_long_rows_kernel`; 4096 x 32
# 896, 4096 x 16 910, 2048 x 8 1026.
_SMEM_ROWS = True
_SMEM_CHUNK = 2048
_SMEM_WARPS = 16
_SMEM_SCRATCH = 4096
_INTERPRET_PROGRAMS = 3  # interpreter grid for long rows: a few, so that programs take turns

_PLANS = {}  # (shape, dtypes, dim, device) -> (kernel launcher, constexprs, make output)


def _warps(tile):
    return 2 if tile <= 256 else (4 if tile <= 1024 else (8 if tile <= 4096 else 16))


def _long_pipeline(bytes_per_element, wide_acc):
    """(BLOCK_N, STAGES) for `_long_rows_kernel`: the pipeliner buffers STAGES - 1 chunks of every
    load of a loop step in shared memory, which must fit each program's share of an SM; fp64
    statistics take half the tile (the per-lane running max and sum spill otherwise)."""
    budget = _LONG_SMEM_PER_SM // max(1, int(_LONG_PROGRAMS_PER_SM))
    block_n = max(1024, _LONG_TILE // 2) if wide_acc else _LONG_TILE
    stages = max(1, _LONG_STAGES)
    while stages > 1 and (stages - 1) * block_n * bytes_per_element > budget:
        if block_n > 1024:
            block_n //= 2
        else:
            stages -= 1
    return block_n, stages


def _long_head(red, element_size, wide_acc):
    """Elements of a long row kept in registers between the passes (0: none): a power of two, a
    multiple of _ROW_ALIGN, no longer than the row rounded up to a power of two. The budget is
    in registers: a 2-byte element is held as 4 bytes. None with fp64 statistics, which take
    the whole register file already (a head spills)."""
    budget = _LONG_HEAD_BYTES_BWD if _MODE >= 2 else _LONG_HEAD_BYTES
    n = int(budget) // (max(element_size, 4) * (2 if _MODE >= 2 else 1))
    if wide_acc or n < max(16, _ROW_ALIGN):
        return 0
    return min(1 << (n.bit_length() - 1), _pow2(red))


def _smem_rows_plan(a, outer, red, out_dtype):
    """(launcher, sizes, constexprs) of `_smem_rows_kernel` for these rows, or None: f32
    softmax / log_softmax rows on an NVIDIA GPU with cp.async (sm_80+) whose shared memory
    per block holds a row's aligned superset in whole chunks."""
    if not (_SMEM_ROWS and gluon is not None and not _INTERPRET and _MODE < 2
            and a.device.type == "cuda" and torch.version.hip is None
            and a.dtype == torch.float32 and out_dtype == torch.float32
            and _SMEM_CHUNK % (128 * _SMEM_WARPS) == 0):
        return None
    index = a.device.index if a.device.index is not None else torch.cuda.current_device()
    if torch.cuda.get_device_capability(index)[0] < 8:
        return None
    consts, chunk_bytes = _smem_rows_consts(red)
    shared = triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"]
    if chunk_bytes + _SMEM_SCRATCH > shared:
        return None
    return _smem_rows, (outer, red), dict(GRID=min(outer, _num_sms(index)), **consts)


def _smem_rows_consts(red):
    """`_smem_rows_kernel`'s constexprs for rows of `red` f32 elements, and the shared memory
    its chunks take (bytes)."""
    nchunk = _cdiv(red + 3, _SMEM_CHUNK)
    consts = dict(MODE=_MODE, CHUNK=_SMEM_CHUNK, NCHUNK=nchunk,
                  L=gl.BlockedLayout([4], [32], [_SMEM_WARPS], [0]),
                  SL=gl.SwizzledSharedLayout(1, 1, 1, [0]), num_warps=_SMEM_WARPS)
    return consts, nchunk * _SMEM_CHUNK * 4


def _plan(a, dim, out_dtype):
    ndim = a.dim()
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})")
    dim = dim % rank
    shape = list(a.shape) if ndim > 0 else [1]
    outer = 1
    for s in shape[:dim]:
        outer *= s
    red = shape[dim]
    inner = 1
    for s in shape[dim + 1:]:
        inner *= s
    acc = tl.float64 if torch.float64 in (a.dtype, out_dtype) else tl.float32
    if inner == 1:
        aligned = red % 16 == 0
        wide = _MODE == 3 or (_MODE < 2 and acc == tl.float32)
        one_pass_max = _ONE_PASS_MAX_ALIGNED if aligned and wide else _ONE_PASS_MAX
        body_mode = _MODE < 2 or (_MODE == 3 and _BODY_BWD and a.element_size() == 2)
        if (not aligned and body_mode and acc == tl.float32
                and _ONE_PASS_MAX < _pow2(red) <= _BODY_MAX):
            consts = dict(MODE=_MODE, ACC=acc, BLOCK_N=_pow2(red), ALIGN=_ROW_ALIGN,
                          num_warps=_BODY_WARPS if not _SMALL else 4)
            return _row_body_kernel[(outer,)], (outer, red), consts
        if _pow2(red) > one_pass_max:
            smem_plan = _smem_rows_plan(a, outer, red, out_dtype)
            if smem_plan is not None:
                return smem_plan
            block_n, stages = _long_pipeline(a.element_size() * (2 if _MODE >= 2 else 1),
                                             acc == tl.float64)
            warps = _LONG_WARPS
            head = 0
            if _INTERPRET or red * a.element_size() >= _PERSIST_MIN_ROW_BYTES:
                grid = (max(1, min(outer, _persistent_programs(a, _LONG_PROGRAMS_PER_SM))),)
                head = _long_head(red, a.element_size(), acc == tl.float64)
            else:  # rows that stay in L2 anyway: one program per row, several per SM
                grid = (outer,)
                warps = _LONG_WARPS_SHORT
                stages = min(stages, _LONG_STAGES_SHORT)
            consts = dict(MODE=_MODE, ACC=acc, BLOCK_N=block_n, ALIGN=_ROW_ALIGN, STAGES=stages,
                          HEAD=head, REVERSE=bool(_LONG_REVERSE),
                          EV_KEEP="evict_last" if _LONG_EVICT_LAST else "",
                          EV_DONE="evict_first" if _LONG_EVICT_FIRST else "",
                          ST_CACHE=_LONG_STORE_CACHE, num_warps=warps)
            # a store takes a cache modifier or an eviction hint, not both (ptxas)
            consts["ST_EV"] = "" if consts["ST_CACHE"] else consts["EV_DONE"]
            return _long_rows_kernel[grid], (outer, red), consts
        block_n = max(2, _pow2(red))
        chunk = 16 // a.element_size()
        if _WIN_TILE and red * a.element_size() % 16 and red >= chunk and block_n <= _WIN_MAX_N:
            window = _pow2(red + chunk - 1)
            rows = max(8, _pow2(_WIN_TILE // window))
            consts = dict(R=red, MODE=_MODE, ACC=acc, RB=rows, W=window, CH=chunk,
                          FTZ=bool(_WIN_FTZ) and not _INTERPRET and acc == tl.float32,
                          DEBUG=bool(_WIN_DEBUG_COPY), num_warps=_WIN_WARPS,
                          ARITH=bool(_WIN_ARITH) and acc == tl.float32, GPU=not _INTERPRET)
            last = (outer - 1) // rows
            if _WIN_PROGRAMS_PER_SM:
                grid = max(1, min(last, _persistent_programs(a, _WIN_PROGRAMS_PER_SM)))
                return _window_stream_kernel[(grid,)], (outer, outer * red, last), consts
            return _window_rows_kernel[(last + 1,)], (outer, outer * red, last), consts
        if _FLAT_ROWS_TILE and red * a.element_size() % 16 and block_n <= _FLAT_MAX_N:
            rows = _pow2(max(8, _FLAT_ROWS_TILE // block_n))  # a power of two, at least 8
            full = outer // rows
            consts = dict(R=red, MODE=_MODE, ACC=acc, ROWS=rows, BLOCK_N=block_n,
                          FLAT=_pow2(rows * red), RECIP=bool(_FLAT_RECIP), num_warps=_FLAT_WARPS)
            return _flat_rows_kernel[(_cdiv(outer, rows),)], (outer * red, full), consts
        tile = _TILE if aligned else min(_TILE, _TILE_UNALIGNED)
        block_m = max(1, min(_pow2(outer), tile // block_n))
        target = _target_programs(a)
        # short rows: more programs for a full GPU, but not fewer than _MIN_TILE elements each
        while block_m > 1 and _cdiv(outer, block_m) < target and block_m * block_n > _MIN_TILE:
            block_m //= 2
        warps = _warps(block_m * block_n)
        # a runtime R is known aligned only when a multiple of 16; an even one has vectors of 2+
        if _ROWS_CONST_N and not aligned and red % 2 == 0:
            if _ROWS_CONST_M:
                block_m = _pow2(_ROWS_CONST_M)
            warps = int(_ROWS_CONST_WARPS) or _warps(block_m * block_n)
            if _ROWS_CONST_SPLIT and not _ROWS_CONST_WARPS:
                warps = max(1, min(warps, block_m))  # more warps than rows split a half-row
            consts = dict(R=red, MODE=_MODE, ACC=acc, BLOCK_M=block_m, BLOCK_N=block_n,
                          SPLIT=bool(_ROWS_CONST_SPLIT), num_warps=warps)
            return _rows_const_kernel[(_cdiv(outer, block_m),)], (outer,), consts
        grid = (_cdiv(outer, block_m),)
        consts = dict(MODE=_MODE, ACC=acc, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps)
        return _rows_kernel[grid], (outer, red), consts
    block_i = max(2, min(_pow2(inner), 32 if _SMALL else 64))
    one_pass = _pow2(red) * block_i <= (_TILE if _SMALL else 8192)
    block_r = max(2, _pow2(red)) if one_pass else max(2, _TILE // block_i)
    nib = _cdiv(inner, block_i)
    consts = dict(MODE=_MODE, ACC=acc, ONE_PASS=one_pass, BLOCK_R=block_r, BLOCK_I=block_i,
                  num_warps=_warps(block_r * block_i))
    return _cols_kernel[(outer * nib,)], (inner, red, nib), consts


def _launch(a, b, dim, out_dtype):
    """Softmax-like op of `a` (and `b`) along `dim`; returns a new contiguous tensor."""
    key = (a.shape, a.dtype, out_dtype, dim, a.device)
    plan = _PLANS.get(key)
    if plan is None:
        if not a.is_floating_point():
            raise RuntimeError(f"softmax: expected a floating point tensor, got {a.dtype}")
        plan = _PLANS[key] = _plan(a, dim, out_dtype)
    launch, sizes, consts = plan
    a = a.contiguous()
    b = a if b is None else b.contiguous()
    # empty_like: the cheapest allocation call (a is contiguous, so is out)
    out = torch.empty_like(a) if out_dtype == a.dtype else torch.empty_like(a, dtype=out_dtype)
    if out.numel():
        launch(a, b, out, *sizes, **consts)
    return out
