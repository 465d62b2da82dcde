"""Strided, casting copies (copy_, _to_copy, fills), the text the builtin writer copies into the
files it emits; the multi-input piece copies that cat, stack and padding share follow in pieces.py.

Placeholder: `_CONSERVATIVE` (variant >= 1: small blocks).
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
