"""The flat map kernel (contiguous outputs of up to four merged dims as vector-wide runs) and the
launch planning that picks it or the tile map of map_tile.py; copied after map_tile.py's section.
"""

import torch
import triton
import triton.language as tl

from agent.providers.builtin.kernels.map_tile import (
    _fill_pair,
    _load_filled,
    _map_args,
    _map_kernel,
)
from agent.providers.builtin.kernels.runtime import (
    _cdiv,
    _pow2,
)
from agent.providers.builtin.kernels.tiles import (
    _CONSERVATIVE,
    _INTERPRET,
    _contiguous_strides,
    _prod,
    _tile_cap,
)

# ---- emitted: map_flat ----


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
