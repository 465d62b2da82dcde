"""Copy family of the builtin provider: _to_copy (dtype casts), clone, lift_fresh_copy, copy_,
copy, and fills (fill_.Scalar, fill_.Tensor, zero_, zeros_like, ones_like, full_like, new_zeros,
new_ones, new_full).

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template, e.g. complex tensors).
Same request -> same text.

How the generated kernels work:
- outputs are allocated as eager does (`empty_like` with the requested memory format, so
  `preserve_format` keeps a dense input's strides);
- a copy merges dims that both tensors step through as one (a contiguous -> contiguous cast is a
  flat 1-D launch). Anything else runs a 2-D tile kernel whose axes are the destination's and the
  source's fastest dims, so a transposing copy reads and writes coalesced (Triton converts the
  tile layout through shared memory); up to four more dims come from the program id. Broadcast
  sources (copy_) have stride 0;
- casts from fp16/bf16 go through fp32 (Triton's CPU interpreter converts bf16 wrongly
  otherwise); casts to bool are `!= 0`, as in eager;
- fills write a value converted once by the kernel; fill_.Tensor reads its 0-d value on device.
"""

from __future__ import annotations

from string import Template
from typing import TYPE_CHECKING

from agent.providers.builtin import codegen, kernelsource

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer

NUM_VARIANTS = 2  # 0: merged-dims plan, big blocks; 1: small blocks

PRELUDE = """import os

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CONSERVATIVE = $conservative  # variant >= 1: small blocks
_MAX_OUTER = 4
"""

# Shared with the data-movement family (gather.py): a strided, casting copy.
COPY_SOURCE = '''_TL = {
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


''' + kernelsource.runtime("_cdiv", "_pow2") + '''


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
'''

# Up to this many inputs share one launch of the piece-copy kernel (cat, stack, padding).
MAX_PIECES = 4
_PIECE_FIELDS = (
    "E", "F", "R1", "R2", "C", "S0", "S1", "S2", "SC", "D0", "D1", "D2", "DC", "ROWS", "NCB",
)  # fmt: skip


def _pieces_kernel_source(num: int) -> str:
    """`_pieces_<num>`: one launch copying `num` strided inputs into places of one output.

    Program ids are dealt to the pieces in order (piece k owns [E_(k-1), E_k)), so no program is
    idle; a piece's tile covers rows x columns of its merged [R0, R1, R2, C] geometry.
    """
    ptrs = ", ".join(f"x{k}" for k in range(num))
    ints = ",\n              ".join(
        ", ".join(f"{f}_{k}" for f in _PIECE_FIELDS) for k in range(num)
    )
    blocks = ", ".join(f"BR_{k}: tl.constexpr, BC_{k}: tl.constexpr" for k in range(num))
    lines = [
        "@triton.jit",
        f"def _pieces_{num}(out_ptr, {ptrs},",
        f"              {ints},",
        f"              IDX64: tl.constexpr, {blocks}):",
        "    pid = tl.program_id(0)",
    ]
    indent = "    "
    for k in range(num):
        args = ", ".join(f"{f}_{k}" for f in _PIECE_FIELDS[2:])
        start = "0" if k == 0 else f"E_{k - 1}"
        lines.append(f"{indent}if pid < E_{k}:")
        lines.append(
            f"{indent}    _piece_copy(x{k}, out_ptr + F_{k}, pid - {start}, {args}, "
            f"BR_{k}, BC_{k}, IDX64)"
        )
        if k < num - 1:
            lines.append(f"{indent}else:")
            indent += "    "
    return "\n".join(lines) + "\n"


_PIECE_COPY = '''

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

'''

_PIECES_HOST = '''

_MAX_PIECES = $max_pieces


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
'''

# Shared with cat/stack (gather.py) and zero padding (movement.py): strided, casting copies of up
# to MAX_PIECES inputs into one output in one launch. Needs `_INTERPRET`, `_CONSERVATIVE`,
# `_cdiv` and `_pow2` from the file.
PIECES_SOURCE = (
    _PIECE_COPY
    + "\n\n".join(_pieces_kernel_source(n) for n in range(1, MAX_PIECES + 1))
    + _PIECES_HOST.replace("$max_pieces", str(MAX_PIECES))
)


_FILL_SOURCE = '''@triton.jit
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
'''


_LIKE_KW = "dtype=None, layout=None, device=None, pin_memory=None"

_SPECS: dict[str, tuple[str, str]] = {
    "_to_copy.default": (
        "copy with an optional dtype cast (memory format preserved)",
        f"""def _op(self, *, {_LIKE_KW}, non_blocking=False, memory_format=None):
    out = _like(self, dtype, layout, device, memory_format)
    return _strided_copy(out, self)""",
    ),
    "clone.default": (
        "copy (memory format preserved unless given)",
        """def _op(self, *, memory_format=None):
    out = _like(self, None, None, None, memory_format)
    return _strided_copy(out, self)""",
    ),
    "lift_fresh_copy.default": (
        "copy (memory format preserved)",
        """def _op(self):
    out = _like(self, None, None, None, None)
    return _strided_copy(out, self)""",
    ),
    "copy_.default": (
        "in-place copy of src (broadcast, cast) into self",
        """def _op(self, src, non_blocking=False):
    return _strided_copy(self, src.expand(self.shape))""",
    ),
    "copy.default": (
        "out-of-place copy of src (broadcast, cast) into a tensor like self",
        """def _op(self, src, non_blocking=False):
    out = _like(self, None, None, None, None)
    return _strided_copy(out, src.expand(self.shape))""",
    ),
    "fill_.Scalar": (
        "in-place fill with a number",
        """def _op(self, value):
    return _fill(self, value)""",
    ),
    "fill_.Tensor": (
        "in-place fill with a 0-d tensor's value",
        """def _op(self, value):
    return _fill(self, value)""",
    ),
    "zero_.default": (
        "in-place fill with zeros",
        """def _op(self):
    return _fill(self, 0)""",
    ),
    "zeros_like.default": (
        "a tensor like self filled with 0",
        f"""def _op(self, *, {_LIKE_KW}, memory_format=None):
    return _fill(_like(self, dtype, layout, device, memory_format), 0)""",
    ),
    "ones_like.default": (
        "a tensor like self filled with 1",
        f"""def _op(self, *, {_LIKE_KW}, memory_format=None):
    return _fill(_like(self, dtype, layout, device, memory_format), 1)""",
    ),
    "full_like.default": (
        "a tensor like self filled with fill_value",
        f"""def _op(self, fill_value, *, {_LIKE_KW}, memory_format=None):
    return _fill(_like(self, dtype, layout, device, memory_format), fill_value)""",
    ),
    "new_zeros.default": (
        "a new tensor of the given size filled with 0",
        f"""def _op(self, size, *, {_LIKE_KW}):
    return _fill(_new(self, size, dtype, layout, device), 0)""",
    ),
    "new_ones.default": (
        "a new tensor of the given size filled with 1",
        f"""def _op(self, size, *, {_LIKE_KW}):
    return _fill(_new(self, size, dtype, layout, device), 1)""",
    ),
    "new_full.default": (
        "a new tensor of the given size filled with fill_value",
        f"""def _op(self, size, fill_value, *, {_LIKE_KW}):
    return _fill(_new(self, size, dtype, layout, device), fill_value)""",
    ),
}

_PLAN = (
    "Plan: outputs are allocated as eager does (empty_like keeps a dense input's strides); dims "
    "both tensors step through as one are merged, so a contiguous copy is a flat launch; other "
    "copies run a 2-D tile over the destination's and the source's fastest dims (coalesced "
    "transposes), with up to four more dims from the program id. fp16/bf16 sources are converted "
    "through fp32; casts to bool are != 0."
)


def _write(request: KernelRequest) -> str | None:
    spec = _SPECS.get(request.op)
    if spec is None or codegen.unsupported_dtypes(request.cases):
        return None
    summary, body = spec
    variant = min(max(request.variant, 0), NUM_VARIANTS - 1)
    return codegen.render_file(
        codegen.file_header(
            request.op, summary=summary, plan=_PLAN, variant=variant, schema=request.schema
        ),
        Template(PRELUDE).substitute(conservative=str(variant >= 1)),
        COPY_SOURCE,
        _FILL_SOURCE,
        body,
        codegen.entry_point(request.op),
    )


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
