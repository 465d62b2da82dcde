"""Multi-input piece copies that cat, stack and zero padding share: strided, casting copies of up to
`_MAX_PIECES` inputs into places of one output in one launch, the text the builtin writer copies
into the files it emits after copy.py's prelude and copy sections (`copy.PIECES_SOURCE`).

`_pieces_<n>` (section `pieces`, n = 1 ... `_MAX_PIECES`, written out): program ids are dealt to
the pieces in order (piece k owns [E_(k-1), E_k)), so no program is idle; a piece's tile covers
rows x columns of its merged [R0, R1, R2, C] geometry (`_piece_copy`). Each input k has the same
15 integers (E_k ... NCB_k) and two block sizes (BR_k, BC_k); `_pieces_plan` computes them and
`_launch_pieces` picks the kernel by input count.
"""

import triton
import triton.language as tl

from agent.providers.builtin.kernels.copy import _CONSERVATIVE, _INTERPRET
from agent.providers.builtin.kernels.runtime import _cdiv, _pow2

# ---- emitted: piece_copy ----


@triton.jit
def _to_out_dtype(v, out_ptr):
    """v cast to out_ptr's element type as eager casts (bools as != 0; halves through fp32: the
    interpreter converts bf16 wrongly otherwise)."""
    if v.dtype != out_ptr.dtype.element_ty:
        if out_ptr.dtype.element_ty == tl.int1:
            v = v != 0
        else:
            if v.dtype == tl.float16 or v.dtype == tl.bfloat16:
                v = v.to(tl.float32)
            v = v.to(out_ptr.dtype.element_ty)
    return v


@triton.jit
def _tile_rows_cols(t, NCB, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, IDX64: tl.constexpr):
    """(column block, row indices, column indices) of tile t of a grid of row blocks x NCB
    column blocks (int64 with IDX64)."""
    rb = t // NCB
    cb = t - rb * NCB
    if IDX64:
        rb = rb.to(tl.int64)
        cb = cb.to(tl.int64)
    return cb, rb * BLOCK_R + tl.arange(0, BLOCK_R), cb * BLOCK_C + tl.arange(0, BLOCK_C)


@triton.jit
def _piece_copy(x_ptr, out_ptr, t, R1, R2, C, S0, S1, S2, SC, D0, D1, D2, DC, ROWS, NCB,
                BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, IDX64: tl.constexpr):
    """Tile t of one piece: out[r0*D0 + r1*D1 + r2*D2 + c*DC] = x[r0*S0 + r1*S1 + r2*S2 + c*SC]
    over rows (r0, r1, r2) and C columns, cast to the output's dtype."""
    _, rows, cols = _tile_rows_cols(t, NCB, BLOCK_R, BLOCK_C, IDX64)
    r2 = rows % R2
    q = rows // R2
    r1 = q % R1
    r0 = q // R1
    src = r0 * S0 + r1 * S1 + r2 * S2
    dst = r0 * D0 + r1 * D1 + r2 * D2
    m = (rows < ROWS)[:, None] & (cols < C)[None, :]
    v = _to_out_dtype(tl.load(x_ptr + (src[:, None] + cols[None, :] * SC), mask=m), out_ptr)
    tl.store(out_ptr + (dst[:, None] + cols[None, :] * DC), v, mask=m)


# ---- emitted: pieces ----


@triton.jit
def _pieces_1(out_ptr, x0,
              E_0, F_0, R1_0, R2_0, C_0, S0_0, S1_0, S2_0, SC_0, D0_0, D1_0, D2_0, DC_0, ROWS_0, NCB_0,
              IDX64: tl.constexpr, BR_0: tl.constexpr, BC_0: tl.constexpr):
    pid = tl.program_id(0)
    if pid < E_0:
        _piece_copy(x0, out_ptr + F_0, pid - 0, R1_0, R2_0, C_0, S0_0, S1_0, S2_0, SC_0, D0_0, D1_0, D2_0, DC_0, ROWS_0, NCB_0, BR_0, BC_0, IDX64)


@triton.jit
def _pieces_2(out_ptr, x0, x1,
              E_0, F_0, R1_0, R2_0, C_0, S0_0, S1_0, S2_0, SC_0, D0_0, D1_0, D2_0, DC_0, ROWS_0, NCB_0,
              E_1, F_1, R1_1, R2_1, C_1, S0_1, S1_1, S2_1, SC_1, D0_1, D1_1, D2_1, DC_1, ROWS_1, NCB_1,
              IDX64: tl.constexpr, BR_0: tl.constexpr, BC_0: tl.constexpr, BR_1: tl.constexpr, BC_1: tl.constexpr):
    pid = tl.program_id(0)
    if pid < E_0:
        _piece_copy(x0, out_ptr + F_0, pid - 0, R1_0, R2_0, C_0, S0_0, S1_0, S2_0, SC_0, D0_0, D1_0, D2_0, DC_0, ROWS_0, NCB_0, BR_0, BC_0, IDX64)
    else:
        if pid < E_1:
            _piece_copy(x1, out_ptr + F_1, pid - E_0, R1_1, R2_1, C_1, S0_1, S1_1, S2_1, SC_1, D0_1, D1_1, D2_1, DC_1, ROWS_1, NCB_1, BR_1, BC_1, IDX64)


@triton.jit
def _pieces_3(out_ptr, x0, x1, x2,
              E_0, F_0, R1_0, R2_0, C_0, S0_0, S1_0, S2_0, SC_0, D0_0, D1_0, D2_0, DC_0, ROWS_0, NCB_0,
              E_1, F_1, R1_1, R2_1, C_1, S0_1, S1_1, S2_1, SC_1, D0_1, D1_1, D2_1, DC_1, ROWS_1, NCB_1,
              E_2, F_2, R1_2, R2_2, C_2, S0_2, S1_2, S2_2, SC_2, D0_2, D1_2, D2_2, DC_2, ROWS_2, NCB_2,
              IDX64: tl.constexpr, BR_0: tl.constexpr, BC_0: tl.constexpr, BR_1: tl.constexpr, BC_1: tl.constexpr, BR_2: tl.constexpr, BC_2: tl.constexpr):
    pid = tl.program_id(0)
    if pid < E_0:
        _piece_copy(x0, out_ptr + F_0, pid - 0, R1_0, R2_0, C_0, S0_0, S1_0, S2_0, SC_0, D0_0, D1_0, D2_0, DC_0, ROWS_0, NCB_0, BR_0, BC_0, IDX64)
    else:
        if pid < E_1:
            _piece_copy(x1, out_ptr + F_1, pid - E_0, R1_1, R2_1, C_1, S0_1, S1_1, S2_1, SC_1, D0_1, D1_1, D2_1, DC_1, ROWS_1, NCB_1, BR_1, BC_1, IDX64)
        else:
            if pid < E_2:
                _piece_copy(x2, out_ptr + F_2, pid - E_1, R1_2, R2_2, C_2, S0_2, S1_2, S2_2, SC_2, D0_2, D1_2, D2_2, DC_2, ROWS_2, NCB_2, BR_2, BC_2, IDX64)


@triton.jit
def _pieces_4(out_ptr, x0, x1, x2, x3,
              E_0, F_0, R1_0, R2_0, C_0, S0_0, S1_0, S2_0, SC_0, D0_0, D1_0, D2_0, DC_0, ROWS_0, NCB_0,
              E_1, F_1, R1_1, R2_1, C_1, S0_1, S1_1, S2_1, SC_1, D0_1, D1_1, D2_1, DC_1, ROWS_1, NCB_1,
              E_2, F_2, R1_2, R2_2, C_2, S0_2, S1_2, S2_2, SC_2, D0_2, D1_2, D2_2, DC_2, ROWS_2, NCB_2,
              E_3, F_3, R1_3, R2_3, C_3, S0_3, S1_3, S2_3, SC_3, D0_3, D1_3, D2_3, DC_3, ROWS_3, NCB_3,
              IDX64: tl.constexpr, BR_0: tl.constexpr, BC_0: tl.constexpr, BR_1: tl.constexpr, BC_1: tl.constexpr, BR_2: tl.constexpr, BC_2: tl.constexpr, BR_3: tl.constexpr, BC_3: tl.constexpr):
    pid = tl.program_id(0)
    if pid < E_0:
        _piece_copy(x0, out_ptr + F_0, pid - 0, R1_0, R2_0, C_0, S0_0, S1_0, S2_0, SC_0, D0_0, D1_0, D2_0, DC_0, ROWS_0, NCB_0, BR_0, BC_0, IDX64)
    else:
        if pid < E_1:
            _piece_copy(x1, out_ptr + F_1, pid - E_0, R1_1, R2_1, C_1, S0_1, S1_1, S2_1, SC_1, D0_1, D1_1, D2_1, DC_1, ROWS_1, NCB_1, BR_1, BC_1, IDX64)
        else:
            if pid < E_2:
                _piece_copy(x2, out_ptr + F_2, pid - E_1, R1_2, R2_2, C_2, S0_2, S1_2, S2_2, SC_2, D0_2, D1_2, D2_2, DC_2, ROWS_2, NCB_2, BR_2, BC_2, IDX64)
            else:
                if pid < E_3:
                    _piece_copy(x3, out_ptr + F_3, pid - E_2, R1_3, R2_3, C_3, S0_3, S1_3, S2_3, SC_3, D0_3, D1_3, D2_3, DC_3, ROWS_3, NCB_3, BR_3, BC_3, IDX64)


# ---- emitted: pieces_host ----


_MAX_PIECES = 4


def _launch_pieces(grid, out, xs, ints, consts):
    n = len(xs)
    if n == 1:
        _pieces_1[grid](out, *xs, *ints, **consts)
    elif n == 2:
        _pieces_2[grid](out, *xs, *ints, **consts)
    elif n == 3:
        _pieces_3[grid](out, *xs, *ints, **consts)
    else:
        _pieces_4[grid](out, *xs, *ints, **consts)


def _piece_dims(shape, src_strides, dst_strides):
    """([3 row dims], column dim), each (size, src stride, dst stride), after merging neighbours
    both tensors step through as one; None when more than four dims remain."""
    dims = []
    for s, a, b in zip(shape, src_strides, dst_strides):
        if s == 1:
            continue
        if dims and dims[-1][1] == a * s and dims[-1][2] == b * s:
            dims[-1] = (dims[-1][0] * s, a, b)
        else:
            dims.append((s, a, b))
    if not dims:
        dims = [(1, 1, 1)]
    # columns: the destination's fastest dim (stores coalesce; loads too when the strides agree)
    c = min(range(len(dims)), key=lambda d: (dims[d][2], -d))
    col = dims.pop(c)
    if len(dims) > 3:
        return None
    return [(1, 0, 0)] * (3 - len(dims)) + dims, col


def _pieces_plan(pieces):
    """Plan copying pieces (input index, shape, src strides, dst strides, dst offset) into one
    output: (launches, leftovers). A launch is (grid, input indices, ints, consts) for
    `_launch_pieces`; leftovers are pieces with more dims than the kernel takes."""
    cap = 16384 if _INTERPRET else (1024 if _CONSERVATIVE else 4096)
    items, leftovers = [], []
    for piece in pieces:
        index, shape, src_strides, dst_strides, offset = piece
        geometry = _piece_dims(shape, src_strides, dst_strides)
        if geometry is None:
            leftovers.append(piece)
            continue
        rows3, (c, sc, dc) = geometry
        nrows = rows3[0][0] * rows3[1][0] * rows3[2][0]
        bc = max(2, min(_pow2(c), cap if nrows == 1 else min(cap, 1024)))
        br = max(1, min(_pow2(nrows), cap // bc))
        ncb = _cdiv(c, bc)
        tiles = _cdiv(nrows, br) * ncb
        span = offset + sum((s - 1) * max(a, b) for s, a, b in [*rows3, (c, sc, dc)])
        items.append((index, tiles, offset, rows3, c, sc, dc, nrows, ncb, br, bc, span))
    launches = []
    for g in range(0, len(items), _MAX_PIECES):
        group = items[g:g + _MAX_PIECES]
        ints, consts, end, big, tile = [], {}, 0, False, 0
        for k, (_, tiles, offset, rows3, c, sc, dc, nrows, ncb, br, bc, span) in enumerate(group):
            end += tiles
            (_, s0, d0), (r1, s1, d1), (r2, s2, d2) = rows3
            ints += [end, offset, r1, r2, c, s0, s1, s2, sc, d0, d1, d2, dc, nrows, ncb]
            consts[f"BR_{k}"] = br
            consts[f"BC_{k}"] = bc
            big = big or span >= 2**31 - 1 or end >= 2**31 - 1
            tile = max(tile, br * bc)
        consts["IDX64"] = big
        consts["num_warps"] = 8 if tile >= 4096 else 4
        launches.append(((end,), tuple(it[0] for it in group), tuple(ints), consts))
    return launches, leftovers
