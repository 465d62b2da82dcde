"""The strided map kernel: each output coordinate of a [rows x last dim] tile maps to an input
coordinate (placed, wrapped, picked) or to the fill value. The movement writer copies its section
first, then map_flat.py's.
"""

import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import (
    _OP,
    _cdiv,
)
from agent.providers.builtin.kernels.tiles import (
    _prod,
    _tile_map,
)

# ---- emitted: map ----


@triton.jit
def _map_coord(c, n_in, off, step, WRAP: tl.constexpr):
    """The input coordinate of output coordinate c in one dim, and whether it is inside."""
    if WRAP:
        j = (c + n_in - off) % n_in  # 0 <= off < n_in, so never negative
        ok = c >= 0
    else:
        j0 = c - off
        j = j0 // step
        ok = (j0 >= 0) & (j * step == j0) & (j < n_in)
    return j, ok


@triton.jit
def _map_dim(r, n_out, n_in, off, step, WRAP: tl.constexpr):
    """Split one dim's coordinate c off the flat number r: (rest, c, input coordinate, inside)."""
    c = r % n_out
    rest = r // n_out
    j, ok = _map_coord(c, n_in, off, step, WRAP)
    return rest, c, j, ok


@triton.jit
def _map_carry(c0, carry, n_out, n_in, off, step, WRAP: tl.constexpr):
    """Coordinate c0 (the program's first row's) plus a carry of 0 or 1 from the inner dim:
    (carry out, c, input coordinate, inside)."""
    c = c0 + carry
    out = (c >= n_out).to(c.dtype)
    c = c - out * n_out
    j, ok = _map_coord(c, n_in, off, step, WRAP)
    return out, c, j, ok


@triton.jit
def _fill_of(value, fvalue, DT: tl.constexpr):
    """The fill value for an output of dtype DT, [1, 1]: a float fill arrives as a double
    (fvalue; a plain float argument would be packed as fp32) and reaches half types through
    fp32, as eager's Scalar conversion does; integer and bool fills arrive in value."""
    if DT == tl.float64:
        return tl.full([1, 1], fvalue, tl.float64)
    elif DT.is_floating():
        return tl.full([1, 1], fvalue, tl.float32)
    else:
        return tl.full([1, 1], value, DT)


@triton.jit
def _load_filled(ptrs, inside, value, fvalue, DT: tl.constexpr):
    """x at ptrs where inside, the fill elsewhere, for an output of dtype DT. When x has that
    dtype the fill, rounded once to it, is the masked load's `other`; otherwise (a fill that
    must not round through x's dtype) a select after the load. A select after every load made
    each thread wait for a gather before issuing the next (sm_90: 12 of 16 loads read early):
    constant_pad_nd [32,96,112,112] f16 46.6 us against 44.0 on the H200."""
    if ptrs.dtype.element_ty == DT:
        return tl.load(ptrs, mask=inside, other=_fill_of(value, fvalue, DT).to(DT))
    else:
        return tl.where(inside, tl.load(ptrs, mask=inside), _fill_of(value, fvalue, DT))


def _fill_pair(fill):
    """The (value, fvalue) kernel arguments of a fill (None: no fill)."""
    if isinstance(fill, float):
        return 0, fill
    return (0 if fill is None else fill), 0.0


@triton.jit
def _map_kernel(x_ptr, out_ptr, ROWS, NCB, value, fvalue: tl.float64,
                O0, O1, O2, O3, O4, OC, I0, I1, I2, I3, I4, IC,
                F0, F1, F2, F3, F4, FC, P0, P1, P2, P3, P4, PC,
                S0, S1, S2, S3, S4, SC, Q0, Q1, Q2, Q3, Q4, QC,
                WRAP: tl.constexpr, FILL: tl.constexpr, COL_IDENT: tl.constexpr,
                COL_SHIFT: tl.constexpr, COL64: tl.constexpr, ROW64: tl.constexpr,
                ROW_STEP: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """out[c] = x[j(c)] per dim (O: out sizes, I: in sizes, F: offsets, P: steps, S: x strides,
    Q: out strides); places outside the input get `value` (FILL).

    Rows (all dims but the last) are split with integer division once per program (ROW_STEP:
    rows then follow by carries) or once per row, in int32 unless
    there are 2**31 rows or more (ROW64: int64 division is a long software routine on the GPU);
    offsets are int64 from there on. The last dim, one coordinate per element, stays in int32
    (unless COL64) and, for a unit step without wrap-around (padding, slices), is a subtraction:
    per-element int64 division made a padded copy 12x slower than eager on the H200."""
    pid = tl.program_id(0)
    if ROW64:
        pid = pid.to(tl.int64)
    rows = (pid // NCB) * BLOCK_R + tl.arange(0, BLOCK_R)
    if COL64:  # a last dim of 2**31 elements or more
        cols = (pid.to(tl.int64) % NCB) * BLOCK_C + tl.arange(0, BLOCK_C)
    else:
        cols = (pid % NCB).to(tl.int32) * BLOCK_C + tl.arange(0, BLOCK_C)
    if ROW_STEP:
        # BLOCK_R <= O4: split the program's first row once (scalars), then each row is one more
        # than the last, with at most one carry per dim: no division per row.
        r0 = (pid // NCB) * BLOCK_R
        f4 = r0 % O4
        q = r0 // O4
        f3 = q % O3
        q = q // O3
        f2 = q % O2
        q = q // O2
        f1 = q % O1
        f0 = q // O1
        r, c4, j4, k4 = _map_carry(f4, tl.arange(0, BLOCK_R).to(f4.dtype), O4, I4, F4, P4, WRAP)
        r, c3, j3, k3 = _map_carry(f3, r, O3, I3, F3, P3, WRAP)
        r, c2, j2, k2 = _map_carry(f2, r, O2, I2, F2, P2, WRAP)
        r, c1, j1, k1 = _map_carry(f1, r, O1, I1, F1, P1, WRAP)
        r, c0, j0, k0 = _map_carry(f0, r, O0, I0, F0, P0, WRAP)
    else:
        r, c4, j4, k4 = _map_dim(rows, O4, I4, F4, P4, WRAP)
        r, c3, j3, k3 = _map_dim(r, O3, I3, F3, P3, WRAP)
        r, c2, j2, k2 = _map_dim(r, O2, I2, F2, P2, WRAP)
        r, c1, j1, k1 = _map_dim(r, O1, I1, F1, P1, WRAP)
        r, c0, j0, k0 = _map_dim(r, O0, I0, F0, P0, WRAP)
    row_ok = rows < ROWS
    row_in = row_ok & k0 & k1 & k2 & k3 & k4
    x_row = (j0.to(tl.int64) * S0 + j1.to(tl.int64) * S1 + j2.to(tl.int64) * S2
             + j3.to(tl.int64) * S3 + j4.to(tl.int64) * S4)
    o_row = (c0.to(tl.int64) * Q0 + c1.to(tl.int64) * Q1 + c2.to(tl.int64) * Q2
             + c3.to(tl.int64) * Q3 + c4.to(tl.int64) * Q4)
    col_ok = cols < OC
    if COL_IDENT:
        jc = cols
        col_in = col_ok
    elif COL_SHIFT:
        jc = cols - FC
        col_in = col_ok & (jc >= 0) & (jc < IC)
    else:
        _, _, jc, col_in = _map_dim(cols, OC, IC, FC, PC, WRAP)
        col_in = col_in & col_ok
    inside = row_in[:, None] & col_in[None, :]
    src = x_ptr + x_row[:, None] + jc.to(tl.int64)[None, :] * SC
    if FILL:
        v = _load_filled(src, inside, value, fvalue, out_ptr.dtype.element_ty)
    else:
        v = tl.load(src, mask=inside, other=0)
    out_mask = row_ok[:, None] & col_ok[None, :]
    tl.store(out_ptr + o_row[:, None] + cols.to(tl.int64)[None, :] * QC,
             v.to(out_ptr.dtype.element_ty), mask=out_mask)


def _map_args(x_strides, out_shape, out_strides, plan, wrap, fill):
    """(grid, ints, consts) for `_map_kernel` (plan[d] = (n_out, n_in, off, step) per dim of
    out), or None when out is empty."""
    nd = len(plan)
    if nd > 6:
        raise NotImplementedError(f"{_OP}: more than 6 dims are not supported by this kernel")
    if _prod(out_shape) == 0:
        return None
    pad = 6 - nd
    sizes = [1] * pad + [p[0] for p in plan]
    ins = [1] * pad + [p[1] for p in plan]
    offs = [0] * pad + [p[2] for p in plan]
    steps = [1] * pad + [p[3] for p in plan]
    xs = [0] * pad + list(x_strides)
    qs = [0] * pad + list(out_strides)
    rows = _prod(sizes[:5])
    cols = sizes[5]
    col_ident = offs[5] == 0 and steps[5] == 1 and ins[5] == sizes[5]
    col_shift = not col_ident and not wrap and steps[5] == 1
    block_r, block_c, warps = _tile_map(rows, cols)
    ncb = _cdiv(cols, block_c)
    ints = (rows, ncb, *_fill_pair(fill), *sizes, *ins, *offs, *steps, *xs, *qs)
    consts = dict(WRAP=wrap, FILL=fill is not None, COL_IDENT=col_ident, COL_SHIFT=col_shift,
                  COL64=cols + block_c >= 2**31 or ins[5] >= 2**31,
                  ROW64=rows + block_r >= 2**31 or _cdiv(rows, block_r) * ncb >= 2**31
                  or max(sizes[:5] + ins[:5]) + max(map(abs, offs[:5])) >= 2**30,
                  ROW_STEP=block_r <= sizes[4],
                  BLOCK_R=block_r, BLOCK_C=block_c, num_warps=warps)
    return (_cdiv(rows, block_r) * ncb,), ints, consts
