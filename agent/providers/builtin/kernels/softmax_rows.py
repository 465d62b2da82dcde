"""Softmax kernels for rows along the last dim that fit a tile: the elementwise tail `_finish`,
row tiles (`_rows_kernel`, `_rows_const_kernel` for a constant row length) and short rows
packed flat (`_flat_rows_kernel`)."""

import triton  # noqa: I001  (one line per import, lint-only)
import triton.language as tl

# ---- emitted: rows ----


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
