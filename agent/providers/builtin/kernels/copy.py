"""Strided, casting copies (copy_, _to_copy, fills, and the multi-input piece copies that cat,
stack and padding share), the text the builtin writer copies into the files it emits.

Placeholder: `_CONSERVATIVE` (variant >= 1: small blocks).

`_pieces_<n>` (section `pieces`, n = 1 ... `_MAX_PIECES`): one launch copying n strided inputs into
places of one output. Program ids are dealt to the pieces in order (piece k owns
[E_(k-1), E_k)), so no program is idle; a piece's tile covers rows x columns of its merged
[R0, R1, R2, C] geometry (`_piece_copy`). Each input k has the same 15 integers (E_k ... NCB_k)
and two block sizes (BR_k, BC_k).
"""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _OP, _cdiv, _pow2


# ---- emitted: prelude ----
import os

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CONSERVATIVE = False  # variant >= 1: small blocks
_MAX_OUTER = 4


# ---- emitted: copy ----
_TL = {
    torch.float16: tl.float16,
    torch.bfloat16: tl.bfloat16,
    torch.float32: tl.float32,
    torch.float64: tl.float64,
    torch.int8: tl.int8,
    torch.uint8: tl.uint8,
    torch.int16: tl.int16,
    torch.int32: tl.int32,
    torch.int64: tl.int64,
    torch.bool: tl.int1,
}


# inline: _cdiv, _pow2


@triton.jit
def _convert(v, DST: tl.constexpr, WIDEN: tl.constexpr):
    if WIDEN:
        v = v.to(tl.float32)
    if DST == tl.int1:
        return v != 0
    return v.to(DST)


@triton.jit
def _copy_flat(src_ptr, dst_ptr, n, DST: tl.constexpr, WIDEN: tl.constexpr,
               BLOCK: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    v = tl.load(src_ptr + offs, mask=mask)
    tl.store(dst_ptr + offs, _convert(v, DST, WIDEN), mask=mask)


@triton.jit
def _copy_tiled(src_ptr, dst_ptr, DX, DY, D0, D1, D2, D3,
                sx_s, sy_s, s0_s, s1_s, s2_s, s3_s, sx_d, sy_d, s0_d, s1_d, s2_d, s3_d, NBX, NBY,
                DST: tl.constexpr, WIDEN: tl.constexpr,
                BLOCK_Y: tl.constexpr, BLOCK_X: tl.constexpr):
    """Tile [BLOCK_Y, BLOCK_X] over dims (Y, X); the program id also walks 4 outer dims."""
    pid = tl.program_id(0).to(tl.int64)
    bx = pid % NBX
    rest = pid // NBX
    by = rest % NBY
    o = rest // NBY
    i3 = o % D3
    o = o // D3
    i2 = o % D2
    o = o // D2
    i1 = o % D1
    i0 = o // D1
    base_s = i0 * s0_s + i1 * s1_s + i2 * s2_s + i3 * s3_s
    base_d = i0 * s0_d + i1 * s1_d + i2 * s2_d + i3 * s3_d
    y = by * BLOCK_Y + tl.arange(0, BLOCK_Y)
    x = bx * BLOCK_X + tl.arange(0, BLOCK_X)
    mask = (y[:, None] < DY) & (x[None, :] < DX)
    v = tl.load(src_ptr + base_s + y[:, None] * sy_s + x[None, :] * sx_s, mask=mask)
    tl.store(dst_ptr + base_d + y[:, None] * sy_d + x[None, :] * sx_d,
             _convert(v, DST, WIDEN), mask=mask)


def _merge(shape, strides_a, strides_b):
    """Drop size-1 dims and merge neighbours both tensors step through as one (row-major)."""
    dims = [(s, a, b) for s, a, b in zip(shape, strides_a, strides_b) if s != 1]
    merged = []
    for s, a, b in dims:
        if merged:
            ps, pa, pb = merged[-1]
            if pa == a * s and pb == b * s:
                merged[-1] = (ps * s, a, b)
                continue
        merged.append((s, a, b))
    return merged


def _widen(src_dtype, dst_dtype):
    return src_dtype in (torch.float16, torch.bfloat16) and dst_dtype != src_dtype


def _blocks_1d(n):
    if _INTERPRET or _CONSERVATIVE:
        return max(16, min(_pow2(n), 4096 if _INTERPRET else 1024)), 4
    return (2048, 8) if n >= (1 << 22) else (1024, 4)


_COPY_PLANS = {}  # (shapes, strides, dtypes) -> (kernel launcher, int args, constexprs)


def _strided_copy(dst, src):
    """dst[...] = src[...] (src already expanded to dst's shape), converting the dtype."""
    key = (dst.shape, dst.stride(), src.stride(), src.dtype, dst.dtype)
    plan = _COPY_PLANS.get(key)
    if plan is None:
        if dst.numel() == 0:
            return dst
        plan = _COPY_PLANS[key] = _copy_plan(dst, src)
    launch, ints, consts = plan
    launch(src, dst, *ints, **consts)
    return dst


def _copy_plan(dst, src):
    if dst.dtype not in _TL or src.dtype not in _TL:
        raise TypeError(f"{_OP}: dtype {src.dtype} -> {dst.dtype} is not supported by this kernel")
    dst_tl = _TL[dst.dtype]
    widen = _widen(src.dtype, dst.dtype)
    dims = _merge(list(dst.shape), list(src.stride()), list(dst.stride()))
    if not dims or (len(dims) == 1 and dims[0][1] == 1 and dims[0][2] == 1):
        n = dst.numel()
        block, warps = _blocks_1d(n)
        return (_copy_flat[(_cdiv(n, block),)], (n,),
                dict(DST=dst_tl, WIDEN=widen, BLOCK=block, num_warps=warps))
    # X: the destination's fastest dim; Y: the source's fastest other dim (a transpose tile)
    order = list(range(len(dims)))
    x = min(order, key=lambda d: (dims[d][2], -d))
    rest = [d for d in order if d != x]
    y = min(rest, key=lambda d: (dims[d][1], -d)) if rest else None
    outer = [d for d in rest if d != y]
    if len(outer) > _MAX_OUTER:
        raise NotImplementedError(f"{_OP}: copies with more than {_MAX_OUTER + 2} merged dims are not supported")
    outer = [None] * (_MAX_OUTER - len(outer)) + outer
    size = lambda d: 1 if d is None else dims[d][0]
    s_src = lambda d: 0 if d is None else dims[d][1]
    s_dst = lambda d: 0 if d is None else dims[d][2]
    dx, dy = size(x), size(y)
    small = _INTERPRET or _CONSERVATIVE
    cap = 32 if small else 64
    block_x = max(2, min(_pow2(dx), cap if dy > 1 else (1024 if not small else 256)))
    block_y = max(1, min(_pow2(dy), cap if dx > 1 else 1024))
    if dy == 1:
        block_y = 1
    nbx, nby = _cdiv(dx, block_x), _cdiv(dy, block_y)
    n_outer = 1
    for d in outer:
        n_outer *= size(d)
    ints = (dx, dy, *[size(d) for d in outer],
            s_src(x), s_src(y), *[s_src(d) for d in outer],
            s_dst(x), s_dst(y), *[s_dst(d) for d in outer], nbx, nby)
    return (_copy_tiled[(nbx * nby * n_outer,)], ints,
            dict(DST=dst_tl, WIDEN=widen, BLOCK_Y=block_y, BLOCK_X=block_x,
                 num_warps=4 if block_x * block_y <= 2048 else 8))


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


# ---- emitted: fill ----
@triton.jit
def _fill_flat(dst_ptr, value_ptr, value, fvalue: tl.float64, n, FROM_PTR: tl.constexpr,
               IS_FLOAT: tl.constexpr, DST: tl.constexpr, BLOCK: tl.constexpr):
    # a float value arrives as a double in fvalue (a plain float argument is packed as fp32):
    # exact for f64, through fp32 for the other float types (as eager converts a Scalar)
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if FROM_PTR:
        v = tl.load(value_ptr + offs * 0)
    elif IS_FLOAT and DST == tl.float64:
        v = tl.full([BLOCK], fvalue, tl.float64)
    elif IS_FLOAT:
        v = tl.full([BLOCK], fvalue, tl.float32)
    else:
        v = tl.zeros([BLOCK], tl.int64) + value
    tl.store(dst_ptr + offs, _convert(v, DST, False), mask=mask)


def _fill(dst, value):
    """Write `value` (a Python number or a 0-d tensor) into every element of dst."""
    if dst.numel() == 0:
        return dst
    if dst.dtype not in _TL:
        raise TypeError(f"{_OP}: dtype {dst.dtype} is not supported by this kernel")
    if isinstance(value, torch.Tensor):
        if value.dim() != 0:
            raise RuntimeError(f"fill_ only supports 0-dimension value tensor but got tensor with {value.dim()} dimensions.")
        # a broadcast read of the value (stride 0), cast on the fly
        return _strided_copy(dst, value.expand(dst.shape))
    target = dst if dst.is_contiguous() else torch.empty((1,), dtype=dst.dtype, device=dst.device)
    n = target.numel()
    block, warps = _blocks_1d(n)
    if isinstance(value, bool):
        value = int(value)
    is_float = isinstance(value, float) or dst.is_floating_point()
    pair = (0, float(value)) if is_float else (int(value), 0.0)
    _fill_flat[(_cdiv(n, block),)](target, target, *pair, n, FROM_PTR=False, IS_FLOAT=is_float, DST=_TL[dst.dtype],
                                    BLOCK=block, num_warps=warps)
    if target is not dst:
        _strided_copy(dst, target.expand(dst.shape))
    return dst


def _like(self, dtype, layout, device, memory_format):
    if layout is not None and layout != torch.strided:
        raise NotImplementedError(f"{_OP}: only strided tensors are supported, got {layout}")
    if device is not None and torch.device(device) != self.device:
        dev = torch.device(device)
        if dev.type != self.device.type or (dev.index is not None and dev.index != self.device.index):
            raise NotImplementedError(f"{_OP}: copies across devices are not supported by a Triton kernel")
    return torch.empty_like(
        self,
        dtype=dtype if dtype is not None else self.dtype,
        memory_format=memory_format if memory_format is not None else torch.preserve_format,
    )


def _new(self, size, dtype, layout, device):
    if layout is not None and layout != torch.strided:
        raise NotImplementedError(f"{_OP}: only strided tensors are supported, got {layout}")
    dev = torch.device(device) if device is not None else self.device
    return torch.empty(list(size), dtype=dtype if dtype is not None else self.dtype, device=dev)
