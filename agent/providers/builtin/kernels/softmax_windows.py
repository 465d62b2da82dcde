"""Softmax kernels for short rows (up to 128, e.g. 49-wide attention windows) read as flat
vectors: each row's max and sum by masked window arithmetic over a contiguous stream."""

import triton  # noqa: I001  (one line per import, lint-only)
import triton.language as tl

from agent.providers.builtin.kernels.softmax_rows import _finish

# ---- emitted: windows ----


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
