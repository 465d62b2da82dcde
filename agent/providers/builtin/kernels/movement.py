"""Data-movement kernels (pad, slices, copies, index, scatter, embedding), the text the builtin
writer copies into the files it emits: one section per piece, after the tile helpers of tiles.py.
"""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.copy import _launch_pieces, _pieces_plan
from agent.providers.builtin.kernels.runtime import (
    _OP,
    _cdiv,
    _pdl_enter,
    _pdl_launch,
    _pdl_ok,
    _pow2,
)
from agent.providers.builtin.kernels.tiles import (
    _CONSERVATIVE,
    _INTERPRET,
    _block1,
    _contiguous_strides,
    _prod,
    _scalar_for,
    _tile2,
    _tile_cap,
    _tile_map,
    _wrap_dim,
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


@triton.jit
def _flat_dim(c, inside, n, n_in, off, STEP: tl.constexpr, KIND: tl.constexpr):
    """(input coordinate, inside) of output coordinate c in one dim. KIND 0: the same coordinate;
    1: placed at off with a step (outside -> fill); 2: rolled by off, 0 <= off < n (n_in == n), a
    compare and add where `%` would be a division."""
    if KIND == 0:
        return c, inside
    elif KIND == 1:
        j0 = c - off
        if STEP == 1:
            return j0, inside & (j0 >= 0) & (j0 < n_in)
        else:
            j = j0 // STEP
            return j, inside & (j0 >= 0) & (j * STEP == j0) & (j < n_in)
    else:
        j = c - off
        return tl.where(j < 0, j + n, j), inside


@triton.jit
def _flat_row(c0, c1, c2, N0, I0, I1, I2, F0, F1, F2, S0, S1, S2, O1: tl.constexpr,
              O2: tl.constexpr, P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr,
              K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr):
    """x offset of the inner row at output coordinates (c0, c1, c2), and whether it is inside."""
    inside = tl.full(c0.shape, 1, tl.int1)
    j0, inside = _flat_dim(c0, inside, N0, I0, F0, P0, K0)
    j1, inside = _flat_dim(c1, inside, O1, I1, F1, P1, K1)
    j2, inside = _flat_dim(c2, inside, O2, I2, F2, P2, K2)
    return j0 * S0 + j1 * S1 + j2 * S2, inside


@triton.jit
def _flat_next(c0, c1, c2, O1: tl.constexpr, O2: tl.constexpr):
    """Coordinates of the inner row after (c0, c1, c2): a carry per dim, no division."""
    c2 = c2 + 1
    k = c2 >= O2
    c2 = tl.where(k, 0, c2)
    c1 = c1 + k.to(c1.dtype)
    k = c1 >= O1
    c1 = tl.where(k, 0, c1)
    return c0 + k.to(c0.dtype), c1, c2


@triton.jit
def _below(j, lim, IDX64: tl.constexpr):
    """0 <= j < lim (lim >= 0) as one unsigned compare."""
    if IDX64:
        return j.to(tl.uint64, bitcast=True) < lim.to(tl.int64).to(tl.uint64, bitcast=True)
    else:
        return j.to(tl.uint32, bitcast=True) < lim.to(tl.int32).to(tl.uint32, bitcast=True)


@triton.jit
def _flat_kernel(x_ptr, out_ptr, N, value, fvalue: tl.float64, N0, I0, I1, I2, I3, F0, F1, F2, F3,
                 S0, S1, S2, S3, O1: tl.constexpr, O2: tl.constexpr, O3: tl.constexpr,
                 P0: tl.constexpr, P1: tl.constexpr, P2: tl.constexpr, P3: tl.constexpr,
                 K0: tl.constexpr, K1: tl.constexpr, K2: tl.constexpr, K3: tl.constexpr,
                 FILL: tl.constexpr, IDX64: tl.constexpr, ALIGNED: tl.constexpr,
                 V: tl.constexpr, BLOCK: tl.constexpr):
    """`_map_kernel` for a contiguous output of at most 4 dims (after merging; sizes N0, O1, O2,
    O3): a program owns BLOCK consecutive output elements as rows of V, so stores are V-wide
    vector stores even for odd row lengths (the [rows x last dim] tile left lanes idle there).

    A row's coordinates come from divisions by the constexpr sizes (a multiply and a shift; the
    outermost coordinate is the last quotient, so N0 needs none), in int32 unless IDX64 (int64
    division is a long software routine on the GPU), once per row of V elements. ALIGNED: a row
    is one contiguous, aligned run of x, all inside or all outside (vector loads). Otherwise
    loads are gathers, and where V does not divide O3 a row may run past the end of its inner
    row (V <= O3, so at most once): the elements that wrap take the next inner row's offset and
    inside flag (found by carries)."""
    pid = tl.program_id(0)
    if IDX64:
        pid = pid.to(tl.int64)
    e = (pid * (BLOCK // V) + tl.arange(0, BLOCK // V)) * V  # each row's first element
    lane = tl.arange(0, V)[None, :]
    live = (e < N)[:, None]  # V divides N: whole rows are in or out
    t = e // O3
    c3 = e - t * O3
    c2 = t % O2
    t = t // O2
    c1 = t % O1
    c0 = t // O1
    base, row_in = _flat_row(c0, c1, c2, N0, I0, I1, I2, F0, F1, F2, S0, S1, S2, O1, O2,
                             P0, P1, P2, K0, K1, K2)
    if ALIGNED:
        j3, row_in = _flat_dim(c3, row_in, O3, I3, F3, P3, K3)
        src = tl.multiple_of(base + j3 * S3, V)[:, None] + lane  # S3 == 1, V | every offset
        inside = row_in[:, None] & live
    elif O3 % V == 0:  # rows never cross an inner row
        j3, inside = _flat_dim(c3[:, None] + lane, row_in[:, None] & live, O3, I3, F3, P3, K3)
        src = base[:, None] + j3 * S3
    else:
        c0, c1, c2 = _flat_next(c0, c1, c2, O1, O2)
        base2, row_in2 = _flat_row(c0, c1, c2, N0, I0, I1, I2, F0, F1, F2, S0, S1, S2, O1, O2,
                                   P0, P1, P2, K0, K1, K2)
        c = c3[:, None] + lane
        wrapped = c >= O3
        c = tl.where(wrapped, c - O3, c)
        j3, inside = _flat_dim(c, live, O3, I3, F3, P3, K3)
        if K3 == 1 and P3 != 1:
            inside = inside & tl.where(wrapped, row_in2[:, None], row_in[:, None])
        else:
            # 0 <= j3 < I3 (I3 == O3 unless placed) and the row's flags in one unsigned compare
            # per element: an outside row's limit is 0
            lim = tl.where(wrapped, tl.where(row_in2, I3, 0)[:, None],
                           tl.where(row_in, I3, 0)[:, None])
            inside = _below(j3, tl.where(live, lim, 0), IDX64)
        src = tl.where(wrapped, base2[:, None], base[:, None]) + j3 * S3
    if FILL:
        v = _load_filled(x_ptr + src, inside, value, fvalue, out_ptr.dtype.element_ty)
    else:
        v = tl.load(x_ptr + src, mask=inside)
    tl.store(out_ptr + e[:, None] + lane, v.to(out_ptr.dtype.element_ty), mask=live)


FLAT_DIMS = 4  # dims `_flat_kernel` addresses: one runtime outermost size, three constexpr ones
_IDX32_LIMIT = 2**31  # int32 offsets below this (a module constant so tests can lower it)


def _flat_dims(x_strides, plan, wrap):
    """The plan as [n_out, n_in, off, step, x stride, kind] per dim (kinds as in `_flat_dim`),
    outermost first, with size-1 copied dims dropped, neighbouring copied dims merged where x
    allows, and each repeated dim (wrap with n_out = k * n_in) split into a broadcast dim of k
    and a copied dim; None for a wrap the flat kernel does not take."""
    dims = []
    for (n_out, n_in, off, step), s in zip(plan, x_strides):
        if off == 0 and n_out == n_in and (step == 1 or n_out == 1):
            dims.append([n_out, n_in, 0, 1, s, 0])
        elif not wrap:
            dims.append([n_out, n_in, off, step, s, 1])
        elif n_out == n_in and 0 <= off < n_in:
            dims.append([n_out, n_in, off, 1, s, 2])
        elif off == 0 and n_in > 0 and n_out % n_in == 0:
            dims.append([n_out // n_in, n_out // n_in, 0, 1, 0, 0])
            dims.append([n_in, n_in, 0, 1, s, 0])
        else:
            return None
    merged = []
    for d in dims:
        if d[5] == 0 and d[0] == 1:
            continue
        last = merged[-1] if merged else None
        if last and d[5] == 0 and last[5] == 0 and last[4] == d[4] * d[0]:
            last[0] = last[1] = last[0] * d[0]
            last[4] = d[4]
        else:
            merged.append(d)
    return merged or [[1, 1, 0, 1, 0, 0]]


def _flat_aligned(dims, itemsize):
    """Elements per aligned row: a power of two of at most 16 bytes such that the innermost dim
    is unit-stride in x and its sizes and offset, and every other x stride, are multiples of it
    (so a row is one aligned, contiguous run of x, all inside or all outside); 1 if none."""
    n_out, n_in, off, step, s, _ = dims[-1]
    if s != 1 or step != 1:
        return 1
    g = max(1, 16 // itemsize)
    while g > 1 and any(v % g for v in (n_out, n_in, off, *[d[4] for d in dims[:-1]])):
        g //= 2
    return g


# Bytes of a row of the unaligned walk: its loads are per-element gathers with lanes a row
# apart, so narrower rows touch fewer sectors per load. H200, constant_pad_nd [32,96,112,112] f16
# pad [0,1,0,1]: 46.9 us at 32 bytes, 44.5 at 16, 44.1 at 8 (83% of HBM bandwidth), 50.4 at 4;
# [32,144,56,56] pad [1,2,1,2]: 19.5, 20.2, 20.2, 24.9.
_FLAT_ROW_BYTES = 8


def _flat_vec(dims, itemsize):
    """(V, ALIGNED): aligned rows when they are at least 8 bytes wide; otherwise rows of up to
    _FLAT_ROW_BYTES (16 in the fallback variant) that may wrap once, so V <= the inner size, and
    V divides the total so the last row is whole."""
    aligned = _flat_aligned(dims, itemsize)
    if aligned > 1 and aligned * itemsize >= 8:
        return aligned, True
    v = max(1, (16 if _CONSERVATIVE else _FLAT_ROW_BYTES) // itemsize)
    total = _prod(d[0] for d in dims)
    while v > 1 and (v > dims[-1][0] or total % v):
        v //= 2
    return v, False


_FLAT_THREAD_BYTES, _FLAT_WARPS = 32, 4  # GPU tile of the flat walk (knob_sweep re-measures them)


def _flat_block(total, vec, itemsize):
    """(BLOCK, num_warps): 32 bytes of output per thread of 4 warps on a GPU (two 16-byte
    stores; 16 bytes in the fallback variant), the interpreter's large tiles there."""
    if _INTERPRET:
        return max(vec, min(_pow2(total), _tile_cap())), 4
    per_thread = max(1, (16 if _CONSERVATIVE else _FLAT_THREAD_BYTES) // itemsize)
    return max(vec, min(_pow2(total), 32 * _FLAT_WARPS * per_thread)), _FLAT_WARPS


def _flat_args(x_strides, plan, wrap, fill, itemsize):
    """(grid, ints, consts) for `_flat_kernel` filling a contiguous output from x, or None when
    the plan needs more than FLAT_DIMS dims (then `_map_kernel` does it). Offsets are int32
    when every flat index and every x offset the kernel can form, masked lanes included, stays
    below 2**31 (IDX64 otherwise)."""
    dims = _flat_dims(x_strides, plan, wrap)
    if dims is None or len(dims) > FLAT_DIMS:
        return None
    vec, aligned = _flat_vec(dims, itemsize)
    one = [1, 1, 0, 1, 0, 0]
    if len(dims) == 1 and aligned and dims[0][5] == 0:
        # a plain copy in the runtime slot: one compilation serves every size
        dims = dims + [one] * (FLAT_DIMS - 1)
    else:  # the outermost dim first (the only runtime size), the innermost last
        outer = dims[:1] if len(dims) > 1 else []
        dims = outer + [one] * (FLAT_DIMS - len(dims)) + dims[len(outer):]
    total = _prod(d[0] for d in dims)
    block, warps = _flat_block(total, vec, itemsize)
    reach = sum((d[0] + d[1] + abs(d[2])) * d[4] for d in dims)
    idx64 = total + block >= _IDX32_LIMIT or reach >= _IDX32_LIMIT
    ints = (total, *_fill_pair(fill), dims[0][0], *[d[1] for d in dims],
            *[d[2] for d in dims], *[d[4] for d in dims])
    consts = dict(O1=dims[1][0], O2=dims[2][0], O3=dims[3][0], P0=dims[0][3], P1=dims[1][3],
                  P2=dims[2][3], P3=dims[3][3], K0=dims[0][5], K1=dims[1][5], K2=dims[2][5],
                  K3=dims[3][5], FILL=fill is not None,
                  IDX64=idx64, ALIGNED=aligned, V=vec,
                  BLOCK=block, num_warps=warps)
    return (_cdiv(total, block),), ints, consts


def _map_launcher(x_strides, out_shape, out_strides, plan, wrap, fill, itemsize):
    """launch(x, out) filling out (strides `out_strides`) from x by one launch, or None when out
    is empty. A contiguous output takes `_flat_kernel` where the plan fits in it (all of pad,
    roll, slice/select backward and repeat on up to 4 merged dims), anything else `_map_kernel`."""
    if _prod(out_shape) == 0:
        return None
    flat = None
    if list(out_strides) == _contiguous_strides(out_shape) or _prod(out_shape) == 1:
        flat = _flat_args(x_strides, plan, wrap, fill, itemsize)
    kernel, (grid, ints, consts) = (_flat_kernel, flat) if flat else (
        _map_kernel, _map_args(x_strides, out_shape, out_strides, plan, wrap, fill))

    def launch(x, out):
        kernel[grid](x, out, *ints, **consts)

    return launch


def _map(x, x_strides, out, plan, wrap, fill=None):
    """Fill `out` (any strides) from `x`; plan[d] = (n_out, n_in, off, step) per dim of out."""
    itemsize = max(x.element_size(), out.element_size())
    launch = _map_launcher(x_strides, list(out.shape), list(out.stride()), plan, wrap, fill, itemsize)
    if launch is not None:
        launch(x, out)
    return out


_RUNS = {}  # (op, geometry, arguments) -> run(x): the launches, planned once


def _planned(key, make):
    run = _RUNS.get(key)
    if run is None:
        if len(_RUNS) >= 256:
            _RUNS.clear()
        run = _RUNS[key] = make()
    return run


def _map_run(x_strides, plan, wrap, fill, dtype, device):
    """run(x) -> a new contiguous output (x's dtype is `dtype`) filled by one launch."""
    shape = [p[0] for p in plan]
    itemsize = torch.empty((), dtype=dtype).element_size()
    launch = _map_launcher(x_strides, shape, _contiguous_strides(shape), plan, wrap, fill, itemsize)

    def run(x):
        out = torch.empty(shape, dtype=dtype, device=device)
        if launch is not None:
            launch(x, out)
        return out

    return run


def _copy_into(dst, src):
    """dst[...] = src[...] (same shape, any strides), casting to dst's dtype. The launch is
    planned once per (shape, strides, dtypes): repeated calls skip the walk's planning."""
    key = ("copy_into", dst.shape, dst.stride(), src.stride(), src.dtype, dst.dtype)
    launch = _planned(key, lambda: _copy_launcher(dst, src) or _no_launch)
    launch(src, dst)
    return dst


def _copy_launcher(dst, src):
    plan = [(n, n, 0, 1) for n in dst.shape]
    itemsize = max(src.element_size(), dst.element_size())
    return _map_launcher(list(src.stride()), list(dst.shape), list(dst.stride()), plan, False,
                         None, itemsize)


def _no_launch(x, out):
    """The launch of an empty copy."""


# ---- emitted: map_ops ----


def _constant_pad_nd(self, pad, value=0):
    key = ("pad", self.shape, self.stride(), self.dtype, self.device, tuple(pad), value)
    return _planned(key, lambda: _pad_plan(self, list(pad), value))(self)


def _pad_plan(self, pad, value):
    if len(pad) % 2 != 0:
        raise RuntimeError(f"Length of pad must be even but instead it equals {len(pad)}")
    if len(pad) // 2 > self.dim():
        raise RuntimeError("Length of pad should be no more than twice the number of dimensions of the input.")
    plan = []
    for d in range(self.dim()):
        k = self.dim() - 1 - d
        lo, hi = (pad[2 * k], pad[2 * k + 1]) if 2 * k < len(pad) else (0, 0)
        n_in = self.shape[d]
        n_out = n_in + lo + hi
        if n_out < 0:
            raise RuntimeError(f"The input size {n_in}, plus negative padding {lo} and {hi} resulted in a negative output size")
        plan.append((n_out, n_in, lo, 1))
    shape = list(self.shape)
    if not any(pad) and self.numel() > 0:
        # no padding: a plain copy (dims merged, so a dense input is one flat, vectorized pass)
        launches, leftovers = _pieces_plan([(0, shape, list(self.stride()), _contiguous_strides(shape), 0)])
        if not leftovers:
            dtype, device = self.dtype, self.device

            def run(x):
                out = torch.empty(shape, dtype=dtype, device=device)
                for grid, _, ints, consts in launches:
                    _launch_pieces(grid, out, [x], ints, consts)
                return out

            return run
    return _map_run(list(self.stride()), plan, False, _scalar_for(value, self.dtype), self.dtype, self.device)


def _slice_backward(grad_output, input_sizes, dim, start, end, step):
    key = ("slice", grad_output.shape, grad_output.stride(), grad_output.dtype, grad_output.device,
           tuple(input_sizes), dim, start, step)
    return _planned(key, lambda: _slice_backward_plan(grad_output, input_sizes, dim, start, step))(grad_output)


def _slice_backward_plan(grad_output, input_sizes, dim, start, step):
    sizes = [int(s) for s in input_sizes]
    dim = _wrap_dim(dim, len(sizes))
    if step <= 0:
        raise RuntimeError("slice step must be positive")
    size = sizes[dim]
    if start < 0:
        start += size
    start = min(max(start, 0), size)
    plan = [(s, s, 0, 1) for s in sizes]
    plan[dim] = (size, grad_output.shape[dim], start, step)
    return _map_run(list(grad_output.stride()), plan, False, _scalar_for(0, grad_output.dtype),
                    grad_output.dtype, grad_output.device)


def _select_backward(grad_output, input_sizes, dim, index):
    key = ("select", grad_output.shape, grad_output.stride(), grad_output.dtype, grad_output.device,
           tuple(input_sizes), dim, index)
    return _planned(key, lambda: _select_backward_plan(grad_output, input_sizes, dim, index))(grad_output)


def _select_backward_plan(grad_output, input_sizes, dim, index):
    sizes = [int(s) for s in input_sizes]
    dim = _wrap_dim(dim, len(sizes))
    size = sizes[dim]
    if not -size <= index < size:
        raise IndexError(f"select(): index {index} out of range for tensor of size {sizes} at dimension {dim}")
    index %= size
    strides = list(grad_output.stride())
    strides.insert(dim, 0)  # grad_output seen with a size-1 dim at `dim`
    plan = [(s, s, 0, 1) for s in sizes]
    plan[dim] = (size, 1, index, 1)
    return _map_run(strides, plan, False, _scalar_for(0, grad_output.dtype), grad_output.dtype,
                    grad_output.device)


def _repeat(self, repeats):
    key = ("repeat", self.shape, self.stride(), self.dtype, self.device, tuple(repeats))
    return _planned(key, lambda: _repeat_plan(self, repeats))(self)


def _repeat_plan(self, repeats):
    repeats = [int(r) for r in repeats]
    if len(repeats) < self.dim():
        raise RuntimeError("Number of dimensions of repeat dims can not be smaller than number of dimensions of tensor")
    if any(r < 0 for r in repeats):
        raise RuntimeError(f"Trying to create tensor with negative dimension: {repeats}")
    pad = len(repeats) - self.dim()
    in_shape = [1] * pad + list(self.shape)
    strides = [0] * pad + list(self.stride())
    plan = [(n * r, n, 0, 1) for n, r in zip(in_shape, repeats)]
    return _map_run(strides, plan, True, None, self.dtype, self.device)


def _roll(self, shifts, dims=()):
    if not dims:
        return _roll_flat(self, shifts)
    key = ("roll", self.shape, self.stride(), self.dtype, self.device, tuple(shifts), tuple(dims))
    return _planned(key, lambda: _roll_plan(self, shifts, dims))(self)


def _roll_flat(self, shifts):
    shifts = [int(s) for s in shifts]
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    if out.numel() == 0:
        return out
    if len(shifts) != 1:
        raise RuntimeError(f"`shifts` required to be of size 1 when `dims` is empty, got {len(shifts)}")
    x = self.contiguous()
    n = x.numel()
    flat = out.view(-1)
    return _map(x, [1], flat, [(n, n, shifts[0] % n, 1)], wrap=True).view(self.shape)


def _roll_plan(self, shifts, dims):
    shifts = [int(s) for s in shifts]
    dims = [int(d) for d in dims]
    if len(shifts) != len(dims):
        raise RuntimeError(f"shifts and dimensions must align. shifts: {len(shifts)}, dims:{len(dims)}")
    total = [0] * self.dim()
    for s, d in zip(shifts, dims):
        total[_wrap_dim(d, self.dim())] += s
    plan = [(n, n, total[d] % n if n else 0, 1) for d, n in enumerate(self.shape)]
    return _map_run(list(self.stride()), plan, True, None, self.dtype, self.device)


# ---- emitted: index ----


@triton.jit
def _idx_term(ptr, off, n, t, mask):
    """index value * the indexed dim's stride (negative indices wrap, as in ATen)."""
    k = tl.load(ptr + off, mask=mask, other=0).to(tl.int64)
    k = tl.where(k < 0, k + n, k)
    return k * t


@triton.jit
def _index_kernel(x_ptr, y_ptr, i0_ptr, i1_ptr, i2_ptr, ROWS, NCB,
                  D0, D1, D2, D3, D4, DC, X0, X1, X2, X3, X4, XC,
                  Y0, Y1, Y2, Y3, Y4, YC, A0, A1, A2, A3, A4, AC,
                  B0, B1, B2, B3, B4, BC, E0, E1, E2, E3, E4, EC,
                  N0, N1, N2, T0, T1, T2,
                  NIDX: tl.constexpr, MODE: tl.constexpr, IDX_COLS: tl.constexpr,
                  BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """Over the indexed shape D: x position = sum c_d * X_d + sum_k index_k * T_k, index_k read at
    sum c_d * (A|B|E)_d; y position = sum c_d * Y_d.
    MODE 0: y = x[...] (index); 1: x[...] = y (index_put); 2: x[...] += y (atomic, accumulate)."""
    pid = tl.program_id(0).to(tl.int64)
    rows = (pid // NCB) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = (pid % NCB) * BLOCK_C + tl.arange(0, BLOCK_C)
    row_ok = rows < ROWS
    col_ok = cols < DC
    m = row_ok[:, None] & col_ok[None, :]
    r = rows
    c4 = r % D4
    r = r // D4
    c3 = r % D3
    r = r // D3
    c2 = r % D2
    r = r // D2
    c1 = r % D1
    c0 = r // D1
    xo = c0 * X0 + c1 * X1 + c2 * X2 + c3 * X3 + c4 * X4
    yo = c0 * Y0 + c1 * Y1 + c2 * Y2 + c3 * Y3 + c4 * Y4
    ao = c0 * A0 + c1 * A1 + c2 * A2 + c3 * A3 + c4 * A4
    if IDX_COLS:  # the last dim is an index dim: index values change along the columns
        term = _idx_term(i0_ptr, ao[:, None] + cols[None, :] * AC, N0, T0, m)
        if NIDX >= 2:
            bo = c0 * B0 + c1 * B1 + c2 * B2 + c3 * B3 + c4 * B4
            term += _idx_term(i1_ptr, bo[:, None] + cols[None, :] * BC, N1, T1, m)
        if NIDX >= 3:
            eo = c0 * E0 + c1 * E1 + c2 * E2 + c3 * E3 + c4 * E4
            term += _idx_term(i2_ptr, eo[:, None] + cols[None, :] * EC, N2, T2, m)
        x_off = xo[:, None] + term + cols[None, :] * XC
    else:  # one index value per row
        term = _idx_term(i0_ptr, ao, N0, T0, row_ok)
        if NIDX >= 2:
            bo = c0 * B0 + c1 * B1 + c2 * B2 + c3 * B3 + c4 * B4
            term += _idx_term(i1_ptr, bo, N1, T1, row_ok)
        if NIDX >= 3:
            eo = c0 * E0 + c1 * E1 + c2 * E2 + c3 * E3 + c4 * E4
            term += _idx_term(i2_ptr, eo, N2, T2, row_ok)
        x_off = (xo + term)[:, None] + cols[None, :] * XC
    y_off = yo[:, None] + cols[None, :] * YC
    if MODE == 0:
        v = tl.load(x_ptr + x_off, mask=m)
        tl.store(y_ptr + y_off, v, mask=m)
    elif MODE == 1:
        v = tl.load(y_ptr + y_off, mask=m)
        tl.store(x_ptr + x_off, v.to(x_ptr.dtype.element_ty), mask=m)
    else:
        v = tl.load(y_ptr + y_off, mask=m)
        tl.atomic_add(x_ptr + x_off, v.to(x_ptr.dtype.element_ty), mask=m)


def _broadcast_shape(shapes):
    ndim = max(len(s) for s in shapes)
    out = [1] * ndim
    for s in shapes:
        for i, n in enumerate(s):
            j = ndim - len(s) + i
            if n != 1:
                if out[j] not in (1, n):
                    raise IndexError("shape mismatch: indexing tensors could not be broadcast together with shapes " + " ".join(str(list(t)) for t in shapes))
                out[j] = n
    return out


def _bstrides(t, shape):
    """t's strides over `shape` (right-aligned broadcasting: 0 where t has size 1 or no dim)."""
    pad = len(shape) - t.dim()
    if pad < 0:
        raise RuntimeError(f"shape mismatch: value tensor of shape {list(t.shape)} cannot be broadcast to indexing result of shape {list(shape)}")
    strides = []
    for i, n in enumerate(shape):
        if i < pad or t.shape[i - pad] == 1:
            strides.append(0)
        elif t.shape[i - pad] == n:
            strides.append(t.stride(i - pad))
        else:
            raise RuntimeError(f"shape mismatch: value tensor of shape {list(t.shape)} cannot be broadcast to indexing result of shape {list(shape)}")
    return strides


def _index_plan(sizes, strides, indices):
    """ATen's advanced-indexing layout: (shape, x strides per dim, [(index, strides per dim,
    indexed dim size, indexed dim stride)])."""
    entries = list(indices)
    ndim = len(sizes)
    if len(entries) > ndim:
        raise IndexError(f"too many indices for tensor of dimension {ndim} (got {len(entries)})")
    dims = [d for d, t in enumerate(entries) if t is not None]
    if not dims:
        raise NotImplementedError(f"{_OP}: at least one index tensor is needed by this kernel")
    tensors = [entries[d] for d in dims]
    for t in tensors:
        if t.dtype in (torch.bool, torch.uint8):
            raise NotImplementedError(f"{_OP}: boolean mask indices are not supported by this kernel")
        if t.dtype not in (torch.int64, torch.int32):
            raise IndexError("tensors used as indices must be long, int, byte or bool tensors")
    if len(tensors) > 3:
        raise NotImplementedError(f"{_OP}: more than 3 index tensors are not supported by this kernel")
    bshape = _broadcast_shape([list(t.shape) for t in tensors])
    rest = [d for d in range(ndim) if d not in dims]
    if dims == list(range(dims[0], dims[-1] + 1)):  # adjacent: the index dims stay in place
        before = [d for d in rest if d < dims[0]]
        after = [d for d in rest if d > dims[-1]]
    else:  # separated by a slice: the index dims go first
        before, after = [], rest
    shape = [sizes[d] for d in before] + bshape + [sizes[d] for d in after]
    xs = [strides[d] for d in before] + [0] * len(bshape) + [strides[d] for d in after]
    pieces = []
    for d, t in zip(dims, tensors):
        ts = [0] * len(before) + _bstrides(t, bshape) + [0] * len(after)
        pieces.append((t, ts, sizes[d], strides[d]))
    return shape, xs, pieces


def _index_launch(x, y, tensors, args):
    grid, slots, ints, consts = args
    _index_kernel[grid](x, y, tensors[slots[0]], tensors[slots[1]], tensors[slots[2]], *ints,
                        **consts)


def _index_args(plan, y_strides, mode):
    """(grid, index tensor slots, ints, consts) for `_index_kernel`; None for an empty result."""
    shape, xs, pieces = plan
    nd = len(shape)
    if nd > 6:
        raise NotImplementedError(f"{_OP}: results with more than 6 dims are not supported by this kernel")
    if _prod(shape) == 0:
        return None
    pad = 6 - nd
    shape = [1] * pad + list(shape)
    xs = [0] * pad + list(xs)
    ys = [0] * pad + list(y_strides)
    idx = [([0] * pad + list(ts), k, n, st) for k, (_, ts, n, st) in enumerate(pieces)]
    while len(idx) < 3:  # unused slots: point at the first index, never read
        idx.append(([0] * 6, 0, 1, 0))
    rows = _prod(shape[:5])
    cols = shape[5]
    idx_cols = any(ts[5] != 0 for ts, _, _, _ in idx[: len(pieces)])
    block_r, block_c, warps = _tile2(rows, cols)
    ncb = _cdiv(cols, block_c)
    ints = (rows, ncb, *shape, *xs, *ys, *idx[0][0], *idx[1][0], *idx[2][0],
            idx[0][2], idx[1][2], idx[2][2], idx[0][3], idx[1][3], idx[2][3])
    consts = dict(NIDX=len(pieces), MODE=mode, IDX_COLS=idx_cols,
                  BLOCK_R=block_r, BLOCK_C=block_c, num_warps=warps)
    return (_cdiv(rows, block_r) * ncb,), (idx[0][1], idx[1][1], idx[2][1]), ints, consts


_INDEX_RUNS = {}  # (geometry, index geometries) -> run(self, index tensors)


def _index(self, indices):
    key = (self.shape, self.stride(), self.dtype, self.device,
           *[None if t is None else (t.shape, t.stride(), t.dtype) for t in indices])
    run = _INDEX_RUNS.get(key)
    if run is None:
        if len(_INDEX_RUNS) >= 256:
            _INDEX_RUNS.clear()
        run = _INDEX_RUNS[key] = _index_run(self, indices)
    return run(self, [t for t in indices if t is not None])


def _index_run(self, indices):
    plan = _index_plan(list(self.shape), list(self.stride()), indices)
    shape, dtype, device = plan[0], self.dtype, self.device
    args = _index_args(plan, _contiguous_strides(shape), 0)

    def run(x, tensors):
        out = torch.empty(shape, dtype=dtype, device=device)
        if args is not None:
            _index_launch(x, out, tensors, args)
        return out

    return run


@triton.jit
def _ordered_acc_kernel(dst_ptr, idx_ptr, v_ptr, K, R, D, sv0, sv1, BLOCK_K: tl.constexpr,
                        BLOCK_D: tl.constexpr):
    """dst[idx[k]] += v[k] for every k, rounding to dst's dtype after every addition and taking
    the k of one row in increasing order: what eager does for f16/bf16 (CUDA: a stable sort of
    the indices, then each run added in order through the storage dtype; CPU: a serial loop).
    Summing in fp32 and rounding once (the atomic path) is more exact but differs from eager by
    up to two bf16 ulps where a row repeats. The program of position k works only if k is its
    row's first occurrence; it then adds every later occurrence, in order."""
    k = tl.program_id(0)
    cols = tl.program_id(1) * BLOCK_D + tl.arange(0, BLOCK_D)
    col_ok = cols < D
    row = tl.load(idx_ptr + k)
    row = tl.where(row < 0, row + R, row)
    earlier = 0
    for j0 in range(0, k, BLOCK_K):
        j = j0 + tl.arange(0, BLOCK_K)
        r = tl.load(idx_ptr + j, mask=j < k, other=-1)
        r = tl.where(r < 0, r + R, r)
        earlier += tl.sum(((r == row) & (j < k)).to(tl.int32), axis=0)
    if earlier == 0:
        out = dst_ptr + row.to(tl.int64) * D + cols
        acc = tl.load(out, mask=col_ok, other=0).to(tl.float32)
        for j0 in range(k, K, BLOCK_K):
            j = j0 + tl.arange(0, BLOCK_K)
            r = tl.load(idx_ptr + j, mask=j < K, other=-1)
            r = tl.where(r < 0, r + R, r)
            hit = (r == row) & (j < K)
            n = tl.sum(hit.to(tl.int32), axis=0)
            while n > 0:
                first = tl.min(tl.where(hit, j, K), axis=0)
                v = tl.load(v_ptr + first.to(tl.int64) * sv0 + cols * sv1, mask=col_ok, other=0)
                acc = _round_through(acc + v.to(tl.float32), dst_ptr.dtype.element_ty)
                hit = hit & (j != first)
                n -= 1
        tl.store(out, acc.to(dst_ptr.dtype.element_ty), mask=col_ok)  # exact: acc is rounded


@triton.jit
def _round_through(x, DT: tl.constexpr):
    """fp32 x rounded to DT (f16 or bf16, to nearest even) and back to fp32. bf16 is rounded on
    the bits: Triton's CPU interpreter truncates fp32 -> bf16 casts (the GPU rounds), and a
    truncation at every step of a long sum drifts several ulps from eager."""
    if DT == tl.bfloat16:
        u = x.to(tl.uint32, bitcast=True)
        u = (u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000
        return tl.where(x != x, x, u.to(tl.float32, bitcast=True))
    return x.to(DT).to(tl.float32)


# index_put(accumulate=True) in f16/bf16 takes the ordered path (eager's rounding) for at most
# this many index positions: each first occurrence scans the index vector, K**2 work (8192: at
# most 512 MB of cached index reads); longer index vectors keep the fp32 sum.
_ORDERED_MAX_K = 8192


def _ordered_put_args(dst, indices, values):
    """(K, R, D, sv0, sv1) when the ordered path applies: one index tensor on dim 0, a dense
    destination, values [K, ...] or broadcast over K, dense along the row; else None."""
    if len(indices) != 1 or indices[0] is None or dst.dim() < 1:
        return None
    idx = indices[0]
    if idx.dtype != torch.int64 or idx.dim() != 1 or not idx.is_contiguous():
        return None
    K, R = idx.shape[0], dst.shape[0]
    D = _prod(dst.shape[1:])
    if K == 0 or K > _ORDERED_MAX_K or D == 0 or not dst.is_contiguous():
        return None
    row_shape = list(dst.shape[1:])
    v = values
    if v.dim() == len(row_shape):
        v = v.unsqueeze(0)
    if v.dim() != len(row_shape) + 1 or v.shape[0] not in (1, K):
        return None
    if list(v.shape[1:]) != row_shape and v.numel() != v.shape[0]:
        return None
    if v.numel() == v.shape[0]:  # one value per position (or one in all): broadcast along the row
        sv1 = 0
    elif v[0].is_contiguous():
        sv1 = 1
    else:
        return None
    sv0 = 0 if v.shape[0] == 1 else v.stride(0)
    return v, (K, R, D, sv0, sv1)


def _index_put(self, indices, values, accumulate, inplace):
    if values.dtype != self.dtype:
        raise RuntimeError(f"Index put requires the source and destination dtypes match, got {self.dtype} for the destination and {values.dtype} for the source.")
    if accumulate and self.dtype == torch.bool:
        raise NotImplementedError(f"{_OP}: accumulate on bool tensors is not supported by this kernel")
    if inplace:
        dst = self
    else:
        dst = torch.empty(self.shape, dtype=self.dtype, device=self.device)
        _copy_into(dst, self)
    if accumulate and self.dtype in (torch.float16, torch.bfloat16):
        ordered = _ordered_put_args(dst, list(indices), values)
        if ordered is not None:
            v, (K, R, D, sv0, sv1) = ordered
            block_d = max(16, min(_pow2(D), 1024))
            block_k = max(16, min(_pow2(K), 16384 if _INTERPRET else 1024))
            _ordered_acc_kernel[(K, _cdiv(D, block_d))](dst, indices[0], v, K, R, D, sv0, sv1,
                                                        BLOCK_K=block_k, BLOCK_D=block_d)
            return dst
    # other f16/bf16 sums go through an fp32 copy: one rounding at the end
    acc = dst
    if accumulate and self.dtype in (torch.float16, torch.bfloat16):
        acc = torch.empty(self.shape, dtype=torch.float32, device=self.device)
        _copy_into(acc, dst)
    args = _put_args(acc, indices, values, 2 if accumulate else 1)
    if args is not None:
        _index_launch(acc, values, [t for t in indices if t is not None], args)
    if acc is not dst:
        _copy_into(dst, acc)
    return dst


_PUT_ARGS = {}  # (geometries of dst, values and indices; mode) -> `_index_args`, planned once
_UNPLANNED = object()


def _put_args(acc, indices, values, mode):
    """`_index_args` of the put into `acc`: planned once per geometry (invalid indices or values
    raise while planning, so on every call, and nothing is cached)."""
    key = (acc.shape, acc.stride(), acc.device, mode, values.shape, values.stride(),
           *[None if t is None else (t.shape, t.stride(), t.dtype) for t in indices])
    args = _PUT_ARGS.get(key, _UNPLANNED)
    if args is _UNPLANNED:
        if len(_PUT_ARGS) >= 256:
            _PUT_ARGS.clear()
        plan = _index_plan(list(acc.shape), list(acc.stride()), indices)
        args = _PUT_ARGS[key] = _index_args(plan, _bstrides(values, plan[0]), mode)
    return args


# ---- emitted: scatter ----


@triton.jit
def _scatter_kernel(dst_ptr, idx_ptr, src_ptr, n, D0, D1, D2, D3, D4, D5,
                    sd0, sd1, sd2, sd3, sd4, sd5, si0, si1, si2, si3, si4, si5,
                    ss0, ss1, ss2, ss3, ss4, ss5, sd_dim, size_dim, BLOCK: tl.constexpr):
    """dst[p with dim `dim` replaced by index[p]] = src[p] over the index's positions p (the
    scattered dim's own stride in sd* is 0, sd_dim holds it)."""
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = p < n
    r = p
    i5 = r % D5
    r = r // D5
    i4 = r % D4
    r = r // D4
    i3 = r % D3
    r = r // D3
    i2 = r % D2
    r = r // D2
    i1 = r % D1
    i0 = r // D1
    ioff = i0 * si0 + i1 * si1 + i2 * si2 + i3 * si3 + i4 * si4 + i5 * si5
    k = tl.load(idx_ptr + ioff, mask=ok, other=0).to(tl.int64)
    k = tl.where(k < 0, k + size_dim, k)
    soff = i0 * ss0 + i1 * ss1 + i2 * ss2 + i3 * ss3 + i4 * ss4 + i5 * ss5
    v = tl.load(src_ptr + soff, mask=ok)
    doff = i0 * sd0 + i1 * sd1 + i2 * sd2 + i3 * sd3 + i4 * sd4 + i5 * sd5 + k * sd_dim
    tl.store(dst_ptr + doff, v.to(dst_ptr.dtype.element_ty), mask=ok)


def _scatter(self, dim, index, src):
    if index.dtype != torch.int64:
        raise RuntimeError("scatter(): Expected dtype int64 for index")
    if src.dtype != self.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    key = ("scatter", self.shape, self.dtype, self.device, dim, index.shape, index.stride(),
           src.shape, src.stride())
    run = _planned(key, lambda: _scatter_plan(self, dim, index, src))
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    _copy_into(out, self)
    run(out, index, src)
    return out


def _scatter_plan(self, dim, index, src):
    """run(out, index, src): the scatter launch into the contiguous copy of self."""
    dim = _wrap_dim(dim, self.dim())
    n = index.numel()
    if n == 0:
        return lambda out, index, src: None
    ndim = max(index.dim(), 1)
    if ndim > 6:
        raise NotImplementedError(f"{_OP}: more than 6 dims are not supported by this kernel")
    pad = 6 - ndim
    shape = [1] * pad + (list(index.shape) if index.dim() else [1])
    sd = _contiguous_strides(list(self.shape)) if self.dim() else [0]
    sd_dim = sd[dim]
    sd[dim] = 0
    sd = [0] * pad + sd
    si = [0] * pad + (list(index.stride()) if index.dim() else [0])
    ss = [0] * pad + (list(src.stride()) if src.dim() else [0])
    size_dim = self.shape[dim] if self.dim() else 1
    block, warps = _block1(n)
    kernel = _scatter_kernel[(_cdiv(n, block),)]
    ints = (n, *shape, *sd, *si, *ss, sd_dim, size_dim)

    def run(out, index, src):
        kernel(out, index, src, *ints, BLOCK=block, num_warps=warps)

    return run


# ---- emitted: embed ----


@triton.jit
def _embed_rows(rows, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3):
    """Index and grad-row offsets of flat index positions (indices padded to 4 dims)."""
    r = rows
    c3 = r % I3
    r = r // I3
    c2 = r % I2
    r = r // I2
    c1 = r % I1
    c0 = r // I1
    ioff = c0 * SI0 + c1 * SI1 + c2 * SI2 + c3 * SI3
    goff = c0 * SG0 + c1 * SG1 + c2 * SG2 + c3 * SG3
    return ioff, goff


@triton.jit
def _embed_count_kernel(idx_ptr, cnt_ptr, R, I1, I2, I3, SI0, SI1, SI2, SI3,
                        BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = rows < R
    ioff, _ = _embed_rows(rows, I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    idx = tl.load(idx_ptr + ioff, mask=ok, other=0).to(tl.int64)
    tl.atomic_add(cnt_ptr + idx, tl.full([BLOCK], 1, tl.int32), mask=ok)


@triton.jit
def _embed_tile(g_ptr, idx_ptr, R, D, NCB, padding_idx, I1, I2, I3, SI0, SI1, SI2, SI3, SG0,
                SG1, SG2, SG3, SGD, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """This program's [BLOCK_R grad rows, BLOCK_C columns] tile: (weight rows, columns, the
    mask of contributions (rows whose index is padding_idx left out), grad values)."""
    pid = tl.program_id(0).to(tl.int64)
    rows = (pid // NCB) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = (pid % NCB) * BLOCK_C + tl.arange(0, BLOCK_C)
    row_ok = rows < R
    ioff, goff = _embed_rows(rows, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3)
    idx = tl.load(idx_ptr + ioff, mask=row_ok, other=0).to(tl.int64)
    m = (row_ok & (idx != padding_idx))[:, None] & (cols[None, :] < D)
    g = tl.load(g_ptr + goff[:, None] + cols[None, :] * SGD, mask=m, other=0)
    return idx, cols, m, g


@triton.jit
def _embed_terms(g_ptr, idx_ptr, cnt_ptr, R, D, NCB, padding_idx, I1, I2, I3, SI0, SI1, SI2,
                 SI3, SG0, SG1, SG2, SG3, SGD, SCALE: tl.constexpr, BLOCK_R: tl.constexpr,
                 BLOCK_C: tl.constexpr):
    """`_embed_tile` with the grads as fp64 terms, divided by their row's count when SCALE."""
    idx, cols, m, g = _embed_tile(g_ptr, idx_ptr, R, D, NCB, padding_idx, I1, I2, I3, SI0, SI1,
                                  SI2, SI3, SG0, SG1, SG2, SG3, SGD, BLOCK_R, BLOCK_C)
    g = g.to(tl.float64)
    if SCALE:
        cnt = tl.load(cnt_ptr + idx, mask=idx != padding_idx, other=1).to(tl.float64)
        g = g / cnt[:, None]
    return idx, cols, m, g


@triton.jit
def _embed_amax_kernel(g_ptr, idx_ptr, accf_ptr, AMAX, R, D, NCB, padding_idx,
                       I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """accf[AMAX] = max |grad| over the contributions, +inf when any is NaN or infinite (an
    atomic max: the same result in any order)."""
    _, _, m, g = _embed_tile(g_ptr, idx_ptr, R, D, NCB, padding_idx, I1, I2, I3, SI0, SI1, SI2,
                             SI3, SG0, SG1, SG2, SG3, SGD, BLOCK_R, BLOCK_C)
    a = tl.abs(g.to(tl.float32))
    bad = tl.max((m & ((a != a) | (a == float("inf")))).to(tl.int32))
    top = tl.max(tl.where(m, a, 0.0))
    tl.atomic_max(accf_ptr + AMAX, tl.where(bad > 0, float("inf"), top))


@triton.jit
def _embed_scale(accf_ptr, AMAX, R):
    """(2**S as fp64, whether every contribution is finite): S puts the largest possible row
    sum, R * max|grad|, below 2**62, so the int64 sums cannot overflow."""
    amax = tl.load(accf_ptr + AMAX).to(tl.float64)
    finite = amax < float("inf")
    bound = tl.maximum(amax * R, 1e-300)
    shift = 61.0 - tl.floor(tl.log2(bound))
    shift = tl.minimum(tl.maximum(shift, -1000.0), 1000.0)
    return tl.exp2(shift), finite


@triton.jit
def _embed_slot_kernel(idx_ptr, slot_ptr, R, padding_idx, I1, I2, I3, SI0, SI1, SI2, SI3,
                       BLOCK: tl.constexpr):
    """slot[w] = the first row whose index is w (an atomic min: the same in any order); that
    row of the compact accumulator holds weight row w's sum."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = rows < R
    ioff, _ = _embed_rows(rows, I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    idx = tl.load(idx_ptr + ioff, mask=ok, other=0).to(tl.int64)
    tl.atomic_min(slot_ptr + idx, rows.to(tl.int32), mask=ok & (idx != padding_idx))


@triton.jit
def _embed_bwd_kernel(g_ptr, idx_ptr, acc_ptr, accf_ptr, cnt_ptr, slot_ptr, AMAX, R, D, NCB,
                      padding_idx, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD,
                      SCALE: tl.constexpr, SLOT: tl.constexpr, BLOCK_R: tl.constexpr,
                      BLOCK_C: tl.constexpr):
    """acc[index[r], :] += grad[r, :] as int64 fixed point (grad * 2**S, truncated): integer
    additions give the same sum in any order, so the result is deterministic and, to 2**-S per
    term, exact. With a NaN or infinity among the grads, fp32 atomic adds into acc's memory
    instead (accf, its low words), which carry them as eager does. SLOT: acc has a row per
    index position, and weight row w sums into row slot[w] (fewer bytes than the table when
    there are fewer indices than weight rows)."""
    idx, cols, m, g = _embed_terms(g_ptr, idx_ptr, cnt_ptr, R, D, NCB, padding_idx, I1, I2, I3,
                                   SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, SCALE, BLOCK_R,
                                   BLOCK_C)
    scale, finite = _embed_scale(accf_ptr, AMAX, R)
    dst = idx
    if SLOT:
        dst = tl.load(slot_ptr + idx).to(tl.int64)  # masked-out rows read a valid slot, unused
    slot = dst[:, None] * D + cols[None, :]
    if finite:
        tl.atomic_add(acc_ptr + slot, (g * scale).to(tl.int64), mask=m)
    else:
        tl.atomic_add(accf_ptr + 2 * slot, g.to(tl.float32), mask=m)


@triton.jit
def _embed_sums(acc_ptr, accf_ptr, src, m, AMAX, R, OUT: tl.constexpr):
    """The sums at accumulator elements src in dtype OUT: acc / 2**S, or the fp32 sums of the
    non-finite case."""
    scale, finite = _embed_scale(accf_ptr, AMAX, R)
    if finite:
        v = tl.load(acc_ptr + src, mask=m, other=0).to(tl.float64) / scale
    else:
        v = tl.load(accf_ptr + 2 * src, mask=m, other=0).to(tl.float64)
    if OUT != tl.float32:
        v = v.to(tl.float32)  # then rounded once more (Triton's interpreter casts fp64 to bf16 wrongly)
    return v.to(OUT)


@triton.jit
def _embed_out_kernel(acc_ptr, accf_ptr, out_ptr, AMAX, R, N, BLOCK: tl.constexpr):
    """out = the sums, in the output dtype."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = i < N
    tl.store(out_ptr + i, _embed_sums(acc_ptr, accf_ptr, i, ok, AMAX, R,
                                      out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _embed_out_rows_kernel(acc_ptr, accf_ptr, slot_ptr, out_ptr, AMAX, R, NW, D,
                           BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr):
    """out[w] = acc[slot[w]] / 2**S in the output dtype (the fp32 sums of the non-finite
    case), zero for weight rows no index names."""
    w = tl.program_id(0).to(tl.int64) * BLOCK_W + tl.arange(0, BLOCK_W)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    inside = (w < NW)[:, None] & (cols < D)[None, :]
    s = tl.load(slot_ptr + w, mask=w < NW, other=R).to(tl.int64)
    v = _embed_sums(acc_ptr, accf_ptr, s[:, None] * D + cols[None, :], inside & (s < R)[:, None],
                    AMAX, R, out_ptr.dtype.element_ty)
    tl.store(out_ptr + w[:, None] * D + cols[None, :], v, mask=inside)


@triton.jit
def _embed_zero_block(out_ptr, b, N, ZB: tl.constexpr):
    """Zeros of the output's flat elements [b * ZB, (b + 1) * ZB) (below N). The index kernels
    (`_embed_link_kernel`, `_embed_rank_kernel`) run these as extra programs of their grid:
    the fill streams at HBM speed while their compare loops wait on L2 and the ALUs, where a
    zero fill of its own ran before them (H200, 125 MiB: 39.6 us)."""
    offs = b.to(tl.int64) * ZB + tl.arange(0, ZB)
    tl.store(out_ptr + offs, tl.zeros([ZB], out_ptr.dtype.element_ty), mask=offs < N)


@triton.jit
def _embed_link_kernel(idx_ptr, link_ptr, R, padding_idx, I1, I2, I3, SI0, SI1, SI2, SI3,
                       zero_ptr, NLINK, NZERO, CHUNK: tl.constexpr, ROWS: tl.constexpr,
                       BLOCK_Q: tl.constexpr, ZB: tl.constexpr, PDL_NEXT: tl.constexpr):
    """Programs NLINK and on zero the output (`_embed_zero_block`); the others link rows.
    PDL_NEXT: the term kernel's launch may start once every program has done its work."""
    if tl.program_id(0) >= NLINK:
        _embed_zero_block(zero_ptr, tl.program_id(0) - NLINK, NZERO, ZB)
    else:
        _embed_link_rows(idx_ptr, link_ptr, R, padding_idx, I1, I2, I3, SI0, SI1, SI2, SI3,
                         CHUNK, ROWS, BLOCK_Q)
    _pdl_enter(False, PDL_NEXT)


@triton.jit
def _embed_link_rows(idx_ptr, link_ptr, R, padding_idx, I1, I2, I3, SI0, SI1, SI2, SI3,
                     CHUNK: tl.constexpr, ROWS: tl.constexpr, BLOCK_Q: tl.constexpr):
    """Step 1 of eager's arithmetic for few indices (CUDA's embedding_backward_feature_kernel,
    up to 3072 indices, sums each chunk of CHUNK rows on its own; a row that is the first of its
    chunk with its weight row is that row's leader): the order in which leaders are added to
    their weight row. One program per ROWS rows r (ROWS divides CHUNK), comparing their indices
    with all R indices q in [ROWS, BLOCK_Q] tiles, elementwise (the reductions come once, at the
    end):
    - link[r]: the first row of a later chunk with r's weight row (that row is its chunk's
      leader), or -1;
    - link[R + r]: r's weight row when no earlier row has it (r heads the chain), else -1;
    - link[2R + r]: 1 when a later row of r's chunk (a peer) has its weight row, else 0;
    - link[3R + r]: 1 when r leads its weight row's rows in its chunk and has peers (its term
      is summed ahead, `_embed_term_kernel`), else 0.
    Indices compare as int32 (valid ones are below num_weights; masked loads give -1, which no
    valid index equals), so each index before r's chunk costs a compare and an or, each after
    it a compare, a select and a min. (One program per row scanning 1-D int64 tiles took 87 us
    for 8192 indices on the H200; one per chunk of 32 rows, int64, 75 us.)"""
    rows0 = tl.program_id(0) * ROWS
    r = rows0 + tl.arange(0, ROWS)[:, None]
    c0 = rows0 // CHUNK * CHUNK
    c_end = c0 + CHUNK
    r_ok = r < R
    ioff, _ = _embed_rows(r.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    idx = tl.load(idx_ptr + ioff, mask=r_ok, other=-1).to(tl.int32)
    big = R + CHUNK
    seen = tl.zeros([ROWS, BLOCK_Q], tl.int1)
    for q0 in range(0, c0, BLOCK_Q):
        q = q0 + tl.arange(0, BLOCK_Q)[None, :]
        qoff, _unused = _embed_rows(q.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
        seen = seen | (tl.load(idx_ptr + qoff, mask=q < c0, other=-1).to(tl.int32) == idx)
    nxt = tl.full([ROWS, BLOCK_Q], big, tl.int32)
    for q0 in range(c_end, R, BLOCK_Q):
        q = q0 + tl.arange(0, BLOCK_Q)[None, :]
        qoff, _unused = _embed_rows(q.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
        qi = tl.load(idx_ptr + qoff, mask=q < R, other=-1).to(tl.int32)
        nxt = tl.minimum(nxt, tl.where(qi == idx, q, big))
    # r's own chunk: a row before r with its weight row (r is no leader, so no head), or after
    # it (r has peers)
    qc = c0 + tl.arange(0, CHUNK)[None, :]
    qcoff, _unused = _embed_rows(qc.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    eqc = tl.load(idx_ptr + qcoff, mask=qc < R, other=-1).to(tl.int32) == idx
    in_chunk = tl.max((eqc & (qc < r)).to(tl.int32), axis=1, keep_dims=True)
    before = tl.maximum(in_chunk, tl.max(seen.to(tl.int32), axis=1, keep_dims=True))
    peers = tl.max((eqc & (qc > r)).to(tl.int32), axis=1, keep_dims=True)
    first_next = tl.min(nxt, axis=1, keep_dims=True)
    live = r_ok & (idx != padding_idx)
    tl.store(link_ptr + r, tl.where(live & (first_next < big), first_next, -1).to(tl.int64),
             mask=r_ok)
    tl.store(link_ptr + R + r, tl.where(live & (before == 0), idx, -1).to(tl.int64), mask=r_ok)
    tl.store(link_ptr + 2 * R + r, (live & (peers > 0)).to(tl.int64), mask=r_ok)
    tl.store(link_ptr + 3 * R + r, (live & (peers > 0) & (in_chunk == 0)).to(tl.int64),
             mask=r_ok)


@triton.jit
def _embed_chain_term(g_ptr, idx_ptr, link_ptr, k, on, cols, col_ok, R, I1, I2, I3, SI0, SI1,
                      SI2, SI3, SG0, SG1, SG2, SG3, SGD, CHUNK: tl.constexpr,
                      DT: tl.constexpr):
    """Leader k's term of its weight row, fp32 (rows where `on`): its grad row, plus its peers'
    in index order when it has any (fp32, as eager sums a chunk), rounded to DT (as eager
    rounds each chunk's sum). Peers are rare with many weight rows: their loop runs only
    when one of the rows has some, and loads only theirs."""
    kk = tl.where(on, k, 0)
    ioff, goff = _embed_rows(kk, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3)
    t = tl.load(g_ptr + goff[:, None] + cols[None, :] * SGD, mask=on[:, None] & col_ok[None, :],
                other=0).to(tl.float32)
    peer = on & (tl.load(link_ptr + 2 * R + kk, mask=on, other=0) != 0)
    if tl.max(peer.to(tl.int32)) > 0:
        w = tl.load(idx_ptr + ioff, mask=peer, other=-1).to(tl.int32)
        c0 = kk // CHUNK * CHUNK
        for j in tl.static_range(1, CHUNK):
            q = c0 + j
            later = peer & (q > kk) & (q < R)
            qoff, qg = _embed_rows(q, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3)
            same = later & (tl.load(idx_ptr + qoff, mask=later, other=-1).to(tl.int32) == w)
            g = tl.load(g_ptr + qg[:, None] + cols[None, :] * SGD,
                        mask=same[:, None] & col_ok[None, :], other=0)
            t = tl.where(same[:, None], t + g.to(tl.float32), t)
        t = t.to(DT).to(tl.float32)
    return t


@triton.jit
def _embed_term_kernel(g_ptr, idx_ptr, link_ptr, term_ptr, R, D,
                       I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD,
                       CHUNK: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
                       PDL_WAIT: tl.constexpr, PDL_NEXT: tl.constexpr):
    """Step 2: the terms of the leaders with peers (link[3R + r]), all at once, into
    term[r, :] in the output dtype, so that the fold (step 3) only adds finished terms. Summed
    in the fold itself, a weight row named in most chunks (skewed indices, as token streams
    are) walked its chunks' peers hop after hop: H200, 1024 Zipf(1.1) indices, 250-270 us
    against eager's 43-69. PDL_WAIT / PDL_NEXT: dependent launches."""
    _pdl_enter(PDL_WAIT, False)
    DT: tl.constexpr = term_ptr.dtype.element_ty
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < D
    on = tl.load(link_ptr + 3 * R + r, mask=r < R, other=0) != 0
    if tl.max(on.to(tl.int32)) > 0:
        t = _embed_chain_term(g_ptr, idx_ptr, link_ptr, r, on, cols, col_ok, R, I1, I2, I3,
                              SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, CHUNK, DT)
        tl.store(term_ptr + r[:, None] * D + cols[None, :], t.to(DT),
                 mask=on[:, None] & col_ok[None, :])
    _pdl_enter(False, PDL_NEXT)


@triton.jit
def _embed_leader_term(g_ptr, link_ptr, term_ptr, k, on, cols, col_ok, R, D, I1, I2, I3, SI0,
                       SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD):
    """Leader k's term (rows where `on`), fp32: its grad row, or its chunk's sum from step 2
    when it has peers."""
    kk = tl.where(on, k, 0)
    summed = on & (tl.load(link_ptr + 3 * R + kk, mask=on, other=0) != 0)
    _unused, goff = _embed_rows(kk, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3)
    t = tl.load(g_ptr + goff[:, None] + cols[None, :] * SGD,
                mask=(on & ~summed)[:, None] & col_ok[None, :], other=0).to(tl.float32)
    s = tl.load(term_ptr + kk[:, None] * D + cols[None, :],
                mask=summed[:, None] & col_ok[None, :], other=0).to(tl.float32)
    return tl.where(summed[:, None], s, t)


@triton.jit
def _embed_fold_kernel(g_ptr, link_ptr, term_ptr, out_ptr, R, D,
                       I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, PDL_WAIT: tl.constexpr):
    """Step 3: each chain's head walks its leaders in index order and adds their terms
    (`_embed_leader_term`), rounded to the output dtype at every step, as eager adds chunk
    after chunk (out[w] = dtype(out[w] + term)).
    The output is zero-filled before, by the link kernel's extra programs (a fold over all
    weight rows that wrote their zeros too took 93 us against 39 + 26 for [4, 2048, 2048] grads
    into 32000 rows on the H200: its programs wait on chains of dependent loads)."""
    _pdl_enter(PDL_WAIT, False)
    DT: tl.constexpr = out_ptr.dtype.element_ty
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < D
    w = tl.load(link_ptr + R + r, mask=r < R, other=-1)
    head = w >= 0
    if tl.max(head.to(tl.int32)) > 0:
        v = _embed_leader_term(g_ptr, link_ptr, term_ptr, r, head, cols, col_ok, R, D, I1, I2,
                               I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD)
        k = tl.load(link_ptr + r, mask=head, other=-1)
        while tl.max(k) >= 0:
            on = k >= 0
            t = _embed_leader_term(g_ptr, link_ptr, term_ptr, k, on, cols, col_ok, R, D, I1, I2,
                                   I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD)
            t = (v + t).to(DT).to(tl.float32)
            v = tl.where(on[:, None], t, v)
            k = tl.load(link_ptr + tl.where(on, k, 0), mask=on, other=-1)
        tl.store(out_ptr + w[:, None] * D + cols[None, :], v.to(DT),
                 mask=head[:, None] & col_ok[None, :])


@triton.jit
def _embed_sort_count_kernel(idx_ptr, cnt_ptr, R, NW, padding_idx, I1, I2, I3, SI0, SI1, SI2,
                             SI3, BLOCK: tl.constexpr, PDL_NEXT: tl.constexpr):
    """Sorted path, step 1: cnt[key] += 1 per index (integer atomics: the same counts in any
    order). A row's key is its weight row, or NW when it is padding_idx (sorted last, summed
    into nothing). PDL_NEXT: the scan's launch may start at once (it waits for the counts)."""
    _pdl_enter(False, PDL_NEXT)
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = rows < R
    ioff, _ = _embed_rows(rows, I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    idx = tl.load(idx_ptr + ioff, mask=ok, other=0).to(tl.int32)
    key = tl.where(idx == padding_idx, NW, idx)
    tl.atomic_add(cnt_ptr + key, tl.full([BLOCK], 1, tl.int32), mask=ok)


@triton.jit
def _embed_sorted_count(ptrs, mask, SINGLES: tl.constexpr):
    """How many of a key's rows the sort places: all of them, or (SINGLES) none of a lone one."""
    c = tl.load(ptrs, mask=mask, other=0)
    if SINGLES:
        c = tl.where(c >= 2, c, 0)
    return c


@triton.jit
def _embed_scan_kernel(cnt_ptr, start_ptr, N, BLOCK: tl.constexpr, STEP: tl.constexpr,
                       SINGLES: tl.constexpr, PDL_WAIT: tl.constexpr, PDL_NEXT: tl.constexpr):
    """Step 2: start[k] = cnt[0] + ... + cnt[k - 1] for k in [0, N]; program b writes its
    BLOCK starts after summing every count before its block itself (STEP at a time: a few
    steps for a vocabulary of 50k; one program scanning all blocks in turn took 10.6 us).
    SINGLES: counts of 1 count as 0 (those rows are not sorted; start[N] is how many are).
    PDL_WAIT / PDL_NEXT: `_embed_sorted`'s dependent launches."""
    _pdl_enter(PDL_WAIT, PDL_NEXT)
    b0 = tl.program_id(0) * BLOCK
    before = tl.zeros([STEP], tl.int32)
    for s0 in range(0, b0, STEP):
        offs = s0 + tl.arange(0, STEP)
        before += _embed_sorted_count(cnt_ptr + offs, offs < b0, SINGLES)
    offs = b0 + tl.arange(0, BLOCK)
    c = _embed_sorted_count(cnt_ptr + offs, offs < N, SINGLES)
    tl.store(start_ptr + offs + 1, tl.sum(before, axis=0) + tl.cumsum(c, axis=0), mask=offs < N)
    tl.store(start_ptr + offs, tl.zeros([BLOCK], tl.int32), mask=offs < 1)


@triton.jit
def _embed_rank_kernel(idx_ptr, start_ptr, order_ptr, R, NW, padding_idx, I1, I2, I3, SI0, SI1,
                       SI2, SI3, zero_ptr, cnt_ptr, g_ptr, SG0, SG1, SG2, SG3, SGD, NRANK,
                       NCOPY, NZERO, D, ROWS: tl.constexpr, BLOCK_Q: tl.constexpr,
                       ZB: tl.constexpr, ZR: tl.constexpr, ZC: tl.constexpr, CR: tl.constexpr,
                       CC: tl.constexpr, SINGLES: tl.constexpr, PDL_WAIT: tl.constexpr,
                       PDL_NEXT: tl.constexpr):
    """Programs NRANK and on do fill units 0, 1, ... (`_embed_fill`: the copies of weight rows
    named once, then the zeros); the others rank rows. The segment kernel's launch may start
    (PDL_NEXT) once every program has done its work: a grid of many waves whose dependents
    started early would have them waiting in slots its own programs need."""
    pid = tl.program_id(0)
    if pid >= NRANK:
        _embed_fill(pid - NRANK, NCOPY, idx_ptr, cnt_ptr, g_ptr, zero_ptr, R, NW, padding_idx,
                    I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, NZERO, D, ZB, ZR,
                    ZC, CR, CC, SINGLES)
    else:
        _pdl_enter(PDL_WAIT, False)
        _embed_rank_rows(idx_ptr, start_ptr, order_ptr, cnt_ptr, R, NW, padding_idx, I1, I2, I3,
                         SI0, SI1, SI2, SI3, ROWS, BLOCK_Q, SINGLES)
    _pdl_enter(False, PDL_NEXT)


@triton.jit
def _embed_fill(u, NCOPY, idx_ptr, cnt_ptr, g_ptr, out_ptr, R, NW, padding_idx, I1, I2, I3, SI0,
                SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, NZERO, D, ZB: tl.constexpr,
                ZR: tl.constexpr, ZC: tl.constexpr, CR: tl.constexpr, CC: tl.constexpr,
                SINGLES: tl.constexpr):
    """Fill unit u of the sorted path's output: below NCOPY, the copies of index positions
    [u * CR, (u + 1) * CR) whose weight row is named once (SINGLES); then the zeros of weight
    rows no index names (ZR > 0, `_embed_zero_rows`), or of the whole output. These read only
    the counts (and the grads), so the rank kernel's fill programs do not wait for the scan:
    that launch starts only once every scan program has waited for the count kernel, and the
    fill streams beside the scan and the ranks. (Fill programs in the segment launch, or in
    the fix launch beside the segment sums, measured slower.)"""
    if u >= NCOPY:
        if ZR > 0:
            _embed_zero_rows(out_ptr, cnt_ptr, u - NCOPY, NW, D, ZR, ZC)
        else:
            _embed_zero_block(out_ptr, u - NCOPY, NZERO, ZB)
    elif SINGLES:
        _embed_copy_singles(idx_ptr, cnt_ptr, g_ptr, out_ptr, u, R, NW, padding_idx, I1, I2, I3,
                            SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, D, CR, CC)


@triton.jit
def _embed_copy_singles(idx_ptr, cnt_ptr, g_ptr, out_ptr, c, R, NW, padding_idx, I1, I2, I3,
                        SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, D, CR: tl.constexpr,
                        CC: tl.constexpr):
    """Index positions [c * CR, (c + 1) * CR) whose weight row no other position names: that
    grad row is the weight row's sum (0 + g in fp32, as the sums give it: -0 becomes +0, NaN
    and infinities stay). Read in index order (whole rows, CC columns a step), stored where
    the index says."""
    rows = c.to(tl.int64) * CR + tl.arange(0, CR)
    ok = rows < R
    ioff, goff = _embed_rows(rows, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3)
    idx = tl.load(idx_ptr + ioff, mask=ok, other=0).to(tl.int32)
    named = ok & (idx != padding_idx)
    one = named & (tl.load(cnt_ptr + idx, mask=named, other=0) == 1)
    DT: tl.constexpr = out_ptr.dtype.element_ty
    for c0 in range(0, D, CC):
        cols = c0 + tl.arange(0, CC)
        m = one[:, None] & (cols < D)[None, :]
        g = tl.load(g_ptr + goff[:, None] + cols.to(tl.int64)[None, :] * SGD, mask=m, other=0)
        tl.store(out_ptr + idx.to(tl.int64)[:, None] * D + cols[None, :],
                 (g.to(tl.float32) + 0.0).to(DT), mask=m)


@triton.jit
def _embed_rank_rows(idx_ptr, start_ptr, order_ptr, cnt_ptr, R, NW, padding_idx, I1, I2, I3, SI0,
                     SI1, SI2, SI3, ROWS: tl.constexpr, BLOCK_Q: tl.constexpr,
                     SINGLES: tl.constexpr):
    """Step 3, a stable counting sort: row r goes to position start[key] + (rows before r with
    its key), so each weight row's rows lie together in index order: order[pos] = r and
    order[R + pos] = its key. Keys compare as the raw int32 indices (the padding mapping is
    one to one); each earlier index costs a compare and an add. SINGLES: a key's lone row is
    not placed (the fill copies it)."""
    rows0 = tl.program_id(0) * ROWS
    r = rows0 + tl.arange(0, ROWS)[:, None]
    r_ok = r < R
    ioff, _ = _embed_rows(r.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    idx = tl.load(idx_ptr + ioff, mask=r_ok, other=-1).to(tl.int32)
    same = tl.zeros([ROWS, BLOCK_Q], tl.int32)
    for q0 in range(0, rows0, BLOCK_Q):
        q = q0 + tl.arange(0, BLOCK_Q)[None, :]
        qoff, _unused = _embed_rows(q.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
        qi = tl.load(idx_ptr + qoff, mask=q < rows0, other=-1).to(tl.int32)
        same += (qi == idx).to(tl.int32)
    rank = tl.sum(same, axis=1, keep_dims=True)
    # the program's own rows: those before r
    qc = rows0 + tl.arange(0, ROWS)[None, :]
    qcoff, _unused = _embed_rows(qc.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    qci = tl.load(idx_ptr + qcoff, mask=qc < R, other=-1).to(tl.int32)
    rank += tl.sum(((qci == idx) & (qc < r)).to(tl.int32), axis=1, keep_dims=True)
    key = tl.where(idx == padding_idx, NW, idx)
    pos = tl.load(start_ptr + key, mask=r_ok, other=0) + rank
    placed = r_ok
    if SINGLES:
        placed = r_ok & (tl.load(cnt_ptr + key, mask=r_ok, other=0) >= 2)
    tl.store(order_ptr + pos, r, mask=placed)
    tl.store(order_ptr + R + pos, key, mask=placed)


@triton.jit
def _embed_run_sums(same, g, TC: tl.constexpr):
    """same [T, T] (0/1) @ g [T, BLOCK_C] on tensor cores (TC), fp32 accumulation, exact products.
    f32 grads go as three bf16 pieces (g = g1 + g2 + g3 exactly: 8 significant bits each), so
    a lone row comes back bit for bit; fp32 FMA dots (input_precision="ieee") took 277 us
    where these take ~50 for [8, 512, 768] f32 grads on the H200. (|g| within a bf16 step of
    the fp32 maximum would round g1 to infinity: not handled.) Not TC (Triton's interpreter,
    whose bf16 dots are wrong): an fp32 dot."""
    if not TC:
        return tl.dot(same.to(tl.float32), g.to(tl.float32), input_precision="ieee")
    elif g.dtype == tl.float32:
        one = same.to(tl.bfloat16)
        g1 = g.to(tl.bfloat16)
        rest = g - g1.to(tl.float32)
        g2 = rest.to(tl.bfloat16)
        g3 = (rest - g2.to(tl.float32)).to(tl.bfloat16)
        acc = tl.dot(one, g1, out_dtype=tl.float32)
        acc = tl.dot(one, g2, acc, out_dtype=tl.float32)
        return tl.dot(one, g3, acc, out_dtype=tl.float32)
    else:
        return tl.dot(same.to(g.dtype), g, out_dtype=tl.float32)


@triton.jit
def _embed_zero_rows(out_ptr, cnt_ptr, z, NW, D, ZR: tl.constexpr, ZC: tl.constexpr):
    """Zeros of weight rows [z * ZR, (z + 1) * ZR) that no index names (cnt[w] == 0: padding_idx
    counts under NW, so its row is zeroed here)."""
    rows = z.to(tl.int64) * ZR + tl.arange(0, ZR)
    row_ok = rows < NW
    idle = tl.load(cnt_ptr + rows, mask=row_ok, other=1) == 0
    for c0 in range(0, D, ZC):
        cols = c0 + tl.arange(0, ZC)
        tl.store(out_ptr + rows[:, None] * D + cols[None, :],
                 tl.zeros([ZR, ZC], out_ptr.dtype.element_ty),
                 mask=(row_ok & idle)[:, None] & (cols < D)[None, :])


@triton.jit
def _embed_seg_kernel(g_ptr, order_ptr, start_ptr, out_ptr, part_ptr, R, D, NW, I1, I2, I3, SG0,
                      SG1, SG2, SG3, SGD, NCP, T: tl.constexpr, BLOCK_C: tl.constexpr,
                      TC: tl.constexpr, CHECK_SUMS: tl.constexpr, COL_STEPS: tl.constexpr,
                      STAGES: tl.constexpr, SINGLES: tl.constexpr, PDL_WAIT: tl.constexpr,
                      PDL_NEXT: tl.constexpr):
    """Step 4: a tile of T sorted positions x BLOCK_C columns; their grad rows loaded at once
    (no chain of dependent loads, however many rows share a weight row) and summed per weight
    row as one small matrix product: same[p, q] (positions p and q hold the same weight row,
    and so the same run of it, keys being sorted) times the grads, accumulated in fp32 on
    tensor cores with exact products (`_embed_run_sums`). A weight row whose rows all lie in
    the tile is stored (rounded once); one continuing into the next tile leaves its partial sum
    in part[0, tile], and the part of one that began in an earlier tile goes to part[1, tile],
    for `_embed_fix_kernel` to add up in tile order. (A segmented scan down the tile's rows
    took 78 us for [4, 2048, 2048] grads on the H200: it crosses warps at every step.)
    Program t * NCP + b does tile t's column blocks b * COL_STEPS and on, in turn (STAGES of
    them in flight), its positions' keys and rows loaded once. SINGLES: only the first
    start[NW + 1] of the R places hold rows; the programs of tiles past them leave at once,
    without waiting (the scan is done: the rank kernel's programs waited for it). The others,
    and program 0 always (so that this grid ends after the rank kernel's), wait for the rank
    kernel, then let the fix kernel's launch start (PDL_NEXT), whose programs mostly leave
    at once too."""
    pid = tl.program_id(0)
    t = pid // NCP
    M = _embed_placed(start_ptr, R, NW, SINGLES)
    if (t * T < M) | (pid == 0):
        _pdl_enter(PDL_WAIT, PDL_NEXT)
    if t * T < M:
        _embed_seg_tile(g_ptr, order_ptr, out_ptr, part_ptr, t, pid % NCP, tl.cdiv(R, T), M, R,
                        D, NW, I1, I2, I3, SG0, SG1, SG2, SG3, SGD, T, BLOCK_C, TC, CHECK_SUMS,
                        COL_STEPS, STAGES)


@triton.jit
def _embed_placed(start_ptr, R, NW, SINGLES: tl.constexpr):
    """How many sorted places hold rows: R, or (SINGLES) the scan's total."""
    if SINGLES:
        return tl.load(start_ptr + NW + 1)
    else:
        return R


@triton.jit
def _embed_seg_tile(g_ptr, order_ptr, out_ptr, part_ptr, t, b, NT, M, R, D, NW, I1, I2, I3, SG0,
                    SG1, SG2, SG3, SGD, T: tl.constexpr, BLOCK_C: tl.constexpr, TC: tl.constexpr,
                    CHECK_SUMS: tl.constexpr, COL_STEPS: tl.constexpr, STAGES: tl.constexpr):
    """`_embed_seg_kernel`'s tile t (of NT) of the M sorted places (keys at order[R:]), its
    column blocks b * COL_STEPS and on."""
    DT: tl.constexpr = out_ptr.dtype.element_ty
    p = t * T + tl.arange(0, T)
    p_ok = p < M
    key = tl.load(order_ptr + R + p, mask=p_ok, other=NW)
    nxt = tl.load(order_ptr + R + p + 1, mask=p + 1 < M, other=-1)
    row = tl.load(order_ptr + p, mask=p_ok, other=0)
    live = p_ok & (key < NW)
    _, goff = _embed_rows(row.to(tl.int64), I1, I2, I3, 0, 0, 0, 0, SG0, SG1, SG2, SG3)
    same = key[:, None] == key[None, :]
    end = live & (key != nxt) | live & (p == t * T + T - 1)
    cont = key == nxt  # (only at the tile's last position) the weight row goes on
    first = tl.load(order_ptr + R + t * T)
    # block-shaped conditions only (the interpreter rejects masks that combine scalar ones)
    before = (key == first) & (key == tl.load(order_ptr + R + tl.maximum(t * T - 1, 0))) & (p >= T)
    done = end & ~cont & ~before
    slot = tl.where(cont, 0, 1).to(tl.int64) * NT + t
    for c in tl.range(0, COL_STEPS, num_stages=STAGES):
        cols = (b.to(tl.int64) * COL_STEPS + c) * BLOCK_C + tl.arange(0, BLOCK_C)
        col_ok = cols < D
        g = tl.load(g_ptr + goff[:, None] + cols[None, :] * SGD,
                    mask=live[:, None] & col_ok[None, :], other=0)
        sums = _embed_run_sums(same, g, TC)
        if CHECK_SUMS:
            # a NaN or infinite grad makes its own row's sum (and so their total) NaN or
            # infinite; an overflow to infinity also takes the branch, which gives it the same
            # sums
            total = tl.sum(tl.sum(sums, axis=1), axis=0)
            odd = (total - total) != 0
        else:
            gf = g.to(tl.float32)
            odd = tl.max(tl.max(((gf != gf) | (tl.abs(gf) == float("inf"))).to(tl.int32),
                                axis=1), axis=0) > 0
        if odd:
            # 0 * NaN is NaN: sum the finite values alone, then give each run what eager's sums
            # give it: NaN for a NaN or for both infinities, else the infinity it holds
            gf = g.to(tl.float32)
            bad = (gf != gf) | (tl.abs(gf) == float("inf"))
            sums = _embed_run_sums(same, tl.where(bad, 0, g), TC)
            one = same.to(tl.float16)
            nan = tl.dot(one, (gf != gf).to(tl.float16), out_dtype=tl.float32) > 0
            pos = tl.dot(one, (gf == float("inf")).to(tl.float16), out_dtype=tl.float32) > 0
            neg = tl.dot(one, (gf == -float("inf")).to(tl.float16), out_dtype=tl.float32) > 0
            sums = tl.where(pos, float("inf"), sums)
            sums = tl.where(neg, -float("inf"), sums)
            sums = tl.where(nan | (pos & neg), float("nan"), sums)
        tl.store(out_ptr + key.to(tl.int64)[:, None] * D + cols[None, :], sums.to(DT),
                 mask=done[:, None] & col_ok[None, :])
        tl.store(part_ptr + slot[:, None] * D + cols[None, :], sums,
                 mask=(end & (cont | before))[:, None] & col_ok[None, :])


@triton.jit
def _embed_fix_kernel(order_ptr, start_ptr, out_ptr, part_ptr, R, D, NW, NT, T: tl.constexpr,
                      BLOCK_C: tl.constexpr, SINGLES: tl.constexpr, PDL_WAIT: tl.constexpr):
    """Step 5, launched while the segment kernel runs: program t + NT * b fixes tile t's column
    block b (`_embed_fix_tile`) after waiting for the segment kernel. One whose tile has
    nothing to fix leaves without waiting (the keys it reads are the rank kernel's, done
    before the segment kernel let this launch start), except program 0, so that this grid
    ends after the segment kernel's."""
    pid = tl.program_id(0)
    t = pid % NT
    M = _embed_placed(start_ptr, R, NW, SINGLES)
    at = tl.minimum(t * T, tl.maximum(M - 1, 0))  # (tiles past M read in bounds, then stop)
    first = tl.load(order_ptr + R + at)
    before = (t > 0) & (tl.load(order_ptr + R + tl.maximum(at - 1, 0)) == first)
    last = tl.maximum(tl.minimum(t * T + T, M) - 1, 0)
    goes_on = (last + 1 < M) & (tl.load(order_ptr + R + last) == first) & (
        tl.load(order_ptr + R + tl.minimum(last + 1, tl.maximum(M - 1, 0))) == first)
    fix = (t * T < M) & before & ~goes_on & (first < NW)
    if fix | (pid == 0):
        _pdl_enter(PDL_WAIT, False)
    if fix:
        _embed_fix_tile(out_ptr, part_ptr, start_ptr, first, t, pid // NT, NT, D, T, BLOCK_C)


@triton.jit
def _embed_fix_tile(out_ptr, part_ptr, start_ptr, first, t, b, NT, D, T: tl.constexpr,
                    BLOCK_C: tl.constexpr):
    """Weight row `first`'s sum in column block b: the partial sums of its tiles before tile t,
    in tile order, then tile t's part; stored rounded once."""
    cols = b.to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < D
    acc = tl.zeros([BLOCK_C], tl.float32)
    for j in range(tl.load(start_ptr + first) // T, t):
        acc += tl.load(part_ptr + j * D + cols, mask=col_ok, other=0)
    acc += tl.load(part_ptr + (NT + t).to(tl.int64) * D + cols, mask=col_ok, other=0)
    tl.store(out_ptr + first.to(tl.int64) * D + cols, acc.to(out_ptr.dtype.element_ty),
             mask=col_ok)


@triton.jit
def _embed_bwd_f64_kernel(g_ptr, idx_ptr, acc_ptr, cnt_ptr, R, D, NCB, padding_idx,
                          I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD,
                          SCALE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """fp64: acc[index[r], :] += grad[r, :] by fp64 atomic adds (62-bit fixed point would be
    coarser than fp64 sums)."""
    idx, cols, m, g = _embed_terms(g_ptr, idx_ptr, cnt_ptr, R, D, NCB, padding_idx, I1, I2, I3,
                                   SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, SCALE, BLOCK_R,
                                   BLOCK_C)
    tl.atomic_add(acc_ptr + idx[:, None] * D + cols[None, :], g, mask=m)


# CUDA eager sums up to this many indices (without scale_grad_by_freq) chunk by chunk, rounding
# to the output dtype per chunk; `_embed_link_kernel`, `_embed_term_kernel` and
# `_embed_fold_kernel` give the same result with every chunk in parallel
_EAGER_FEATURE_MAX = 3072
# past that and up to this many indices (no frequency scaling, not f64), the sorted path:
# a stable counting sort of the rows by weight row, then per-weight-row sums over tiles of the
# sorted rows (fp32, rounded once, as eager's sorted path sums). Its cost does not depend on how the
# indices are distributed; the chains it replaced walked a weight row's chunks one dependent
# load after another (H200, Zipf-distributed indices: 7x slower than eager).
# The rank scan is quadratic in the indices; past this, the int64 atomics
_EMBED_SORT_MAX = 16384
# `_embed_sort_count_kernel`: indices per program; `_embed_scan_kernel`: counts per step, warps;
# `_embed_rank_kernel`: rows per program, indices per step; `_embed_seg_kernel`: sorted rows
# per tile (>= 16, a tl.dot), columns per program
_EMBED_COUNT_BLOCK = 256
_EMBED_SCAN_BLOCK, _EMBED_SCAN_STEP, _EMBED_SCAN_WARPS = 2048, 8192, 8
_EMBED_RANK_ROWS = 16
_EMBED_RANK_TILE = 64
_EMBED_SEG_ROWS = 32
_EMBED_SEG_COLS = 128
_EMBED_SEG_WARPS = 4
# > 0: registers per thread of `_embed_seg_kernel` capped (Triton's maxnreg): uncapped it takes
# 193, two programs of 4 warps per SM. H200, whole op, none/64/96/128/160: [4,2048,2048] bf16
# 97.2/95.5/85.0/85.7/88.7 us, [8,1024,768] bf16 61.2/63.6/57.9/57.5/58.2, [8,512,768] f32
# 54.4/58.6/55.4/54.1/52.8 (at 128: 7 spill stores in the sm_90 compile)
_EMBED_SEG_MAXNREG = 128
# `_embed_seg_kernel` looks for NaN and infinite grads in its tile's sums (one add per element)
# rather than in the grads (a conversion and two compares per element): it is ALU-bound (Nsight
# Compute). H200, whole op, grads/sums: [4,2048,2048] bf16 85.0/83.1 us, [8,1024,768] bf16
# 56.8/55.9, f32 cases within 0.4 us
_EMBED_SEG_CHECK_SUMS = True
# `_embed_seg_kernel`: column blocks per program (done in turn; 1: a program per block), and
# how many of them are in flight at once (Triton pipelining). H200, whole op, steps/stages 1/1,
# 2/3, 4/3, 16/3: [4,2048,2048] bf16 82.8/78.7/78.2/82.2 us, [8,1024,768] bf16 55.7/55.2/56.2/
# 54.3; Zipf 1.1 indices, 1/2 and 4/2: 86.9 and 83.0
_EMBED_SEG_COL_STEPS = 2
_EMBED_SEG_STAGES = 3
# `_embed_link_kernel`: rows per program (a divisor of 32), indices per step, warps (H200,
# [4,2048] indices into 32000 rows, whole op: 8-32 rows x 64-256 indices 156-171 us, 16 x 64 best)
_EMBED_LINK_ROWS = 16
_EMBED_LINK_TILE = 64
_EMBED_LINK_WARPS = 4
# output elements zeroed per extra program of the link and rank kernels (`_embed_zero_block`),
# and at most per program of `_embed_zero_rows` (whole rows: D rounded up to a power of two)
_EMBED_ZERO_TILE = 4096
# the sorted path's rank kernel zeroes, in extra programs, 1: only the weight rows no index
# names (the others are written by the segment and fix kernels), 0: the whole output. H200,
# whole op, 0/1: [4,2048,2048] bf16 into 32000 rows 114.1/98.5 us, [8,1024,768] bf16 into 50257
# 76.7/61.4. (Zeroing those rows in the segment kernel's launch instead, interleaved with its
# tiles: 111.7 / 87.2 us; its programs are sized for the tiles' matrix products.)
_EMBED_ZERO_ROWS = 1
# the kernels after the first of the few-index path (term, fold) and of the sorted path (scan,
# rank, segment, fix) as programmatic dependent launches (sm_90+), each launched while the one
# before it finishes, every program of a many-wave grid letting it start once its own work is
# done. H200, whole op, off / on: [4,2048,2048] bf16 into 32000 rows 79.0 /
# 74.0 us, [8,1024,768] bf16 55.4 / 49.0, [8,512,768] f32 53.6 / 48.6; Zipf 1.1 83.3 / 78.6
_EMBED_PDL = True
# dependent kernels whose programs may touch memory before `_pdl_enter(PDL_WAIT, ...)`: each
# reads, before its wait, only what a launch before the one ahead of it wrote (the counts, the
# scan's total, the ranks: see their docstrings), and waits before reading anything else
# (tests/builtin/test_builtin_pdl.py holds every other kernel to waiting first)
_PDL_WAITS_LATER = ("_embed_rank_kernel", "_embed_seg_kernel", "_embed_fix_kernel")
# the sorted path copies each weight row named once (most rows for uniform indices) from its
# grad row, in programs of the rank kernel's launch that read the grad in index order, and
# sorts and sums only the rows of weight rows named twice or more (needs _EMBED_ZERO_ROWS).
# Copies by the zero programs, in weight-row order (a gather of each lone row),
# were slower than the sort: [4,2048,2048] bf16 86-90 us against 74. H200,
# whole op, off / on: [4,2048,2048] bf16 74.0 / 63.7 us, [8,1024,768] bf16 49.6 / 46.7,
# [8,512,768] f32 48.7 / 47.7, Zipf 1.1 78.0 / 77.2
_EMBED_SINGLES = True
# grad elements per program and step of `_embed_copy_singles` (whole rows up to this many).
# H200, 512/1024/2048/4096/8192: [4,2048,2048] bf16 66.3/65.0/63.7/65.3/86.8 us,
# [8,1024,768] bf16 51.4/51.2/46.7/56.6/72.5; since the fill streams beside the scan,
# 1024/2048: [4,2048,2048] bf16 59.5-59.9/62.1-62.4, [8,1024,768] bf16 42.9-43.1/45.8-46.0,
# [8,512,768] f32 44.5-44.6/45.1-45.3
_EMBED_SINGLES_TILE = 1024


def _embed_zero_tile():
    return 256 if _INTERPRET else _EMBED_ZERO_TILE


def _flat_stride(shape, strides):
    """s such that the element at row-major position r of a tensor of `shape` with `strides`
    sits at r * s, or None when no such s exists."""
    s, span = None, 1
    for size, stride in zip(reversed(list(shape)), reversed(list(strides))):
        if size == 1:
            continue
        if s is None:
            s = stride
        elif stride != s * span:
            return None
        span *= size
    return 0 if s is None else s


def _embed_sorted(grad_output, indices, num_weights, padding_idx, geometry, pdl):
    """The sorted path (`_EMBED_SORT_MAX`): count, scan, rank and place, segmented sums, and
    the sums of weight rows whose rows span tiles (pdl: `_EMBED_PDL`'s dependent launches)."""
    R, D = indices.numel(), grad_output.shape[-1]
    dtype, device = grad_output.dtype, grad_output.device
    out = torch.empty((num_weights, D), dtype=dtype, device=device)  # see _EMBED_ZERO_ROWS
    singles = bool(_EMBED_SINGLES and _EMBED_ZERO_ROWS)
    cnt = torch.zeros((num_weights + 1,), dtype=torch.int32, device=device)
    start = torch.empty((num_weights + 2,), dtype=torch.int32, device=device)
    order = torch.empty((2 * R,), dtype=torch.int32, device=device)
    block = max(32, min(_pow2(R), _EMBED_COUNT_BLOCK))
    _embed_sort_count_kernel[(_cdiv(R, block),)](indices, cnt, R, num_weights, padding_idx,
                                                 *geometry[:7], BLOCK=block, PDL_NEXT=pdl,
                                                 num_warps=4)
    scan = max(32, min(_pow2(num_weights + 1), 64 if _INTERPRET else _EMBED_SCAN_BLOCK))
    _embed_scan_kernel[(_cdiv(num_weights + 1, scan),)](cnt, start, num_weights + 1, BLOCK=scan,
                                                        STEP=4 * scan if _INTERPRET else
                                                        _EMBED_SCAN_STEP, SINGLES=singles,
                                                        PDL_NEXT=pdl,
                                                        num_warps=_EMBED_SCAN_WARPS,
                                                        **_pdl_launch(pdl))
    rows = _EMBED_RANK_ROWS
    ranks, zb = _cdiv(R, rows), _embed_zero_tile()
    zc = min(_pow2(D), zb // 4)
    zr = zb // zc  # rows per zero program of `_embed_zero_rows`
    nz = _cdiv(num_weights, zr) if _EMBED_ZERO_ROWS else _cdiv(out.numel(), zb)
    ct = 256 if _INTERPRET else _EMBED_SINGLES_TILE
    cc = min(_pow2(D), ct)
    cr = max(1, ct // cc)  # index positions per program of `_embed_copy_singles`
    copies = _cdiv(R, cr) if singles else 0
    zr = zr if _EMBED_ZERO_ROWS else 0  # (0: `_embed_fill` zeroes flat blocks)
    _embed_rank_kernel[(ranks + copies + nz,)](
        indices, start, order, R, num_weights, padding_idx, *geometry[:7], out, cnt,
        grad_output, *geometry[7:], ranks, copies, out.numel(), D, ROWS=rows,
        BLOCK_Q=_EMBED_RANK_TILE, ZB=zb, ZR=zr, ZC=zc, CR=cr, CC=cc,
        SINGLES=singles, PDL_NEXT=pdl, num_warps=4,
        **_pdl_launch(pdl))
    tile = max(16, _EMBED_SEG_ROWS)
    bc = max(16, min(_pow2(D), _EMBED_SEG_COLS))
    nt, ncb = _cdiv(R, tile), _cdiv(D, bc)
    steps = max(1, min(_EMBED_SEG_COL_STEPS, ncb))
    ncp = _cdiv(ncb, steps)
    part = torch.empty((2, nt, D), dtype=torch.float32, device=device)
    _embed_seg_kernel[(nt * ncp,)](
        grad_output, order, start, out, part, R, D, num_weights, *geometry[:3], *geometry[7:],
        ncp, T=tile, BLOCK_C=bc, TC=not _INTERPRET, CHECK_SUMS=bool(_EMBED_SEG_CHECK_SUMS),
        COL_STEPS=steps, STAGES=_EMBED_SEG_STAGES, SINGLES=singles, num_warps=_EMBED_SEG_WARPS,
        PDL_NEXT=pdl, **_pdl_launch(pdl),
        **({"maxnreg": _EMBED_SEG_MAXNREG} if _EMBED_SEG_MAXNREG else {}))
    _embed_fix_kernel[(nt * ncb,)](order, start, out, part, R, D, num_weights, nt, T=tile,
                                   BLOCK_C=bc, SINGLES=singles, num_warps=4, **_pdl_launch(pdl))
    return out


def _embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    if indices.dtype not in (torch.int64, torch.int32):
        raise RuntimeError(f"embedding_dense_backward: expected indices of type int64 or int32, got {indices.dtype}")
    nd = indices.dim()
    if nd > 4:
        raise NotImplementedError(f"{_OP}: indices with more than 4 dims are not supported by this kernel")
    if grad_output.dim() != nd + 1:
        raise RuntimeError("embedding_dense_backward: grad_output must have one more dim than indices")
    D = grad_output.shape[-1]
    R = indices.numel()
    dtype, device = grad_output.dtype, grad_output.device
    if R == 0 or D == 0 or num_weights == 0:
        return torch.zeros((num_weights, D), dtype=dtype, device=device)
    pad = 4 - nd
    flat_i = _flat_stride(indices.shape, indices.stride())
    flat_g = _flat_stride(indices.shape, grad_output.stride()[:-1])
    if flat_i is not None and flat_g is not None:
        # row r at r * stride: sizes of 1 are specialized by Triton, so `_embed_rows` divides
        # by constants only (64-bit divisions by runtime sizes cost ~30 us per 1024-index scan)
        geometry = [1, 1, 1, flat_i, 0, 0, 0, flat_g, 0, 0, 0, grad_output.stride(-1)]
    else:
        geometry = ([1] * pad + list(indices.shape))[1:] + [0] * pad + list(indices.stride())             + [0] * pad + list(grad_output.stride()[:-1]) + [grad_output.stride(-1)]
    cnt = indices  # read only when scaling by frequency
    if scale_grad_by_freq:
        cnt = torch.zeros((num_weights,), dtype=torch.int32, device=device)
        block, warps = _block1(R)
        _embed_count_kernel[(_cdiv(R, block),)](indices, cnt, R, *geometry[:7],
                                                BLOCK=block, num_warps=warps)
    plain = not scale_grad_by_freq and dtype != torch.float64
    pdl = bool(_EMBED_PDL and _pdl_ok(device))
    if plain and R <= _EAGER_FEATURE_MAX:
        out = torch.empty((num_weights, D), dtype=dtype, device=device)  # zeroed by the links
        link = torch.empty((4 * R,), dtype=torch.int64, device=device)
        term = torch.empty((R, D), dtype=dtype, device=device)  # rows of leaders with peers
        rows = _EMBED_LINK_ROWS
        links, zb = _cdiv(R, rows), _embed_zero_tile()
        _embed_link_kernel[(links + _cdiv(out.numel(), zb),)](
            indices, link, R, padding_idx, *geometry[:7], out, links, out.numel(), CHUNK=32,
            ROWS=rows, BLOCK_Q=_EMBED_LINK_TILE, ZB=zb, PDL_NEXT=pdl,
            num_warps=_EMBED_LINK_WARPS)
        bc = max(16, min(_pow2(D), 128))
        grid = (_cdiv(R, 16), _cdiv(D, bc))
        _embed_term_kernel[grid](grad_output, indices, link, term, R, D, *geometry, CHUNK=32,
                                 BLOCK_R=16, BLOCK_C=bc, PDL_NEXT=pdl, num_warps=4,
                                 **_pdl_launch(pdl))
        _embed_fold_kernel[grid](grad_output, link, term, out, R, D, *geometry, BLOCK_R=16,
                                 BLOCK_C=bc, num_warps=4, **_pdl_launch(pdl))
        return out
    if plain and R <= _EMBED_SORT_MAX:
        return _embed_sorted(grad_output, indices, num_weights, padding_idx, geometry, pdl)
    block_r, block_c, warps = _tile2(R, D)
    ncb = _cdiv(D, block_c)
    grid = (_cdiv(R, block_r) * ncb,)
    if dtype == torch.float64:
        out = torch.zeros((num_weights, D), dtype=dtype, device=device)
        _embed_bwd_f64_kernel[grid](grad_output, indices, out, cnt, R, D, ncb, padding_idx,
                                    *geometry, SCALE=bool(scale_grad_by_freq), BLOCK_R=block_r,
                                    BLOCK_C=block_c, num_warps=warps)
        return out
    # int64 sums, and one more word whose low half holds max |grad| as fp32; with fewer
    # indices than weight rows, a row per index position (weight row w in row slot[w])
    use_slot = R < num_weights
    n = (R if use_slot else num_weights) * D
    acc = torch.zeros((n + 1,), dtype=torch.int64, device=device)
    accf = acc.view(torch.float32)
    amax = 2 * n
    slot = acc
    if use_slot:
        slot = torch.full((num_weights,), R, dtype=torch.int32, device=device)
        block, warps1 = _block1(R)
        _embed_slot_kernel[(_cdiv(R, block),)](indices, slot, R, padding_idx, *geometry[:7],
                                               BLOCK=block, num_warps=warps1)
    _embed_amax_kernel[grid](grad_output, indices, accf, amax, R, D, ncb, padding_idx, *geometry,
                             BLOCK_R=block_r, BLOCK_C=block_c, num_warps=warps)
    _embed_bwd_kernel[grid](grad_output, indices, acc, accf, cnt, slot, amax, R, D, ncb,
                            padding_idx, *geometry, SCALE=bool(scale_grad_by_freq),
                            SLOT=use_slot, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=warps)
    out = torch.empty((num_weights, D), dtype=dtype, device=device)
    if use_slot:
        block_c = max(16, min(_pow2(D), 256))
        block_w = max(1, 2048 // block_c)
        _embed_out_rows_kernel[(_cdiv(num_weights, block_w), _cdiv(D, block_c))](
            acc, accf, slot, out, amax, R, num_weights, D, BLOCK_W=block_w, BLOCK_C=block_c,
            num_warps=4)
        return out
    block, warps = _block1(n)
    _embed_out_kernel[(_cdiv(n, block),)](acc, accf, out, amax, R, n, BLOCK=block,
                                          num_warps=warps)
    return out
