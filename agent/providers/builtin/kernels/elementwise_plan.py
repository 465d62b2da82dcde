"""Elementwise runtime, second part: broadcast shapes, output layout, dim merging, tile plans,
the geometry tensor and the launch plan a call builds once (`_build`); copied after
elementwise.py's section.
"""

import torch
import triton
import triton.language as tl

from agent.providers.builtin.kernels.elementwise import (
    _CAPTURED,
    _MAX_DIMS,
    _MAX_PLANS,
    _PLANS,
    _TILE,
    _TILE_ELEMS,
    _TILE_ELEMS_CPU,
    _TILE_MAX_COLS,
    _TILE_MAX_WASTE,
    _TILE_MIN_COLS,
    _TILE_MIN_ELEMS,
    _TILE_WARPS,
)
from agent.providers.builtin.kernels.runtime import _OP

# Generated per operator by elementwise.py (kernels, dtype plan, launch policy):
_KIND = _RAW = _CONTIGUOUS_INPUTS = None
_dtype_plan = _kernel_flat = _launch_config = _store_geometry = None



# ---- emitted: plan ----


def _broadcast_shapes(shapes):
    shapes = [tuple(s) for s in shapes]
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, size in enumerate(s):
            j = ndim - len(s) + i
            if size != 1:
                if out[j] != 1 and out[j] != size:
                    raise RuntimeError(f"{_OP}: shapes {shapes} do not broadcast")
                out[j] = size
    return tuple(out)


def _is_contiguous(shape, strides):
    """Row-major, ignoring size-1 dims (as Tensor.is_contiguous)."""
    expect = 1
    for size, stride in zip(reversed(shape), reversed(strides)):
        if size != 1 and stride != expect:
            return False
        expect *= size
    return True


def _is_dense(shape, strides):
    """Non-overlapping and dense: some permutation of the dims is contiguous."""
    expect = 1
    for stride, size in sorted((st, n) for n, st in zip(shape, strides) if n != 1):
        if stride != expect:
            return False
        expect *= size
    return True


def _output_strides(tensors, shape, device):
    """Strides of a new output: those of the first dense operand of the output's shape (channels-
    last or transposed inputs are then read and written in one order), else contiguous."""
    for t in tensors:
        if tuple(t.shape) == shape and t.device == device:
            strides = t.stride()
            if _is_contiguous(shape, strides):
                break
            if _is_dense(shape, strides):
                return strides
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(size, 1)
    return tuple(reversed(strides))


def _aligned_strides(t_shape, t_strides, shape):
    """Strides of a tensor broadcast to `shape` (0 along broadcast dims), without making a view."""
    strides = [0] * len(shape)
    pad = len(shape) - len(t_shape)
    for i, (size, stride) in enumerate(zip(t_shape, t_strides)):
        if size != 1:
            strides[pad + i] = stride
    return strides


def _plan(shape, strides):
    """One iteration order for all operands (strides[0] is the output's).

    Drops size-1 dims, walks the output's memory order and merges adjacent dims that every operand
    steps through as one. Returns (ndim, sizes, strides, linear) padded to _MAX_DIMS on the outer
    side, where linear[i] says operand i is contiguous in that order, or None for too many dims.
    """
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    dims.sort(key=lambda d: -strides[0][d])
    sizes, merged = [], [[] for _ in strides]
    for d in reversed(dims):
        if sizes and all(st[d] == m[-1] * sizes[-1] for st, m in zip(strides, merged)):
            sizes[-1] *= shape[d]
        else:
            sizes.append(shape[d])
            for st, m in zip(strides, merged):
                m.append(st[d])
    if not sizes:
        sizes, merged = [1], [[0] for _ in strides]
    if len(sizes) > _MAX_DIMS:
        return None
    sizes.reverse()
    for m in merged:
        m.reverse()
    linear = []
    for m in merged:
        expect, ok = 1, True
        for size, stride in zip(reversed(sizes), reversed(m)):
            if size != 1 and stride != expect:
                ok = False
            expect *= size
        linear.append(ok)
    pad = _MAX_DIMS - len(sizes)
    return len(sizes), [1] * pad + sizes, [[0] * pad + m for m in merged], linear


def _extent(sizes, strides):
    return sum((n - 1) * abs(s) for n, s in zip(sizes, strides))


def _tile_block(size, limit):
    """The largest power of two <= limit whose padding of `size` stays within _TILE_MAX_WASTE."""
    block = min(triton.next_power_of_2(size), limit)
    while block > 1 and -(-size // block) * block - size > _TILE_MAX_WASTE * size:
        block //= 2
    return block


def _tile_plan(ndim, sizes, merged, n, device):
    """(BLOCK_R, BLOCK_C, grid, layout, align) of `_kernel_tile` for a merged plan, or None when
    its tiles would be too small (tiny, unevenly divided inner dims: `_kernel` is cheaper).

    layout: NDIM + per operand i (0 = out) bit 3 + 2i when its inner stride is 1 (vector loads
    along the row) and bit 4 + 2i when it is 0 (one load per row, broadcast along it). align:
    the power of two (<= 16) that divides every row and outer stride of the unit-inner operands,
    promised to the compiler (`tl.multiple_of`) so row starts allow vector accesses."""
    elems = _TILE_ELEMS if device.type == "cuda" else _TILE_ELEMS_CPU
    rows, cols = sizes[-2], sizes[-1]
    block_c = _tile_block(cols, min(_TILE_MAX_COLS, elems))
    if cols % block_c and cols % 16 and cols & -cols >= 4:
        # a column mask Triton cannot prove constant over 16 elements (cols % 16 != 0) forbids
        # vector accesses; columns a power-of-two divisor wide need no column mask at all
        block_c = min(cols & -cols, block_c)
    if block_c < min(_TILE_MIN_COLS, cols):
        # uneven widths: narrow column blocks spread a warp over many rows, whole padded rows are
        # masked scalar accesses; both lose to `_kernel` (H200, div.Scalar [32, 1536, 14, 14]
        # expanded bf16: 4-wide blocks 42 us, rows padded to 256 24 us, `_kernel` 17)
        return None
    block_r = _tile_block(rows, max(1, elems // block_c))
    if block_r * block_c < min(_TILE_MIN_ELEMS, n):
        return None
    grid = n // (rows * cols) * -(-rows // block_r) * -(-cols // block_c)
    layout, align = ndim, 16
    for i, st in enumerate(merged):
        if st[-1] == 1:
            layout += 8 << (2 * i)
            for s in st[_MAX_DIMS - ndim : -1]:
                while s % align:
                    align //= 2
        elif st[-1] == 0:
            layout += 16 << (2 * i)
    return block_r, block_c, (grid,), layout, align


def _geometry(sizes, merged, idx64, device):
    """The merged sizes and each operand's strides as a tensor on `device`, read by `_kernel`
    (one pointer instead of ~6 launch arguments per operand). Filled by a one-program kernel (no
    host-to-device copy) once per plan; the plan keeps it. int32 unless offsets need int64."""
    values = [*sizes, *(s for st in merged for s in st)]
    geo = torch.empty(len(values), dtype=torch.int64 if idx64 else torch.int32, device=device)
    _store_geometry[(1,)](geo, *values)
    if geo.is_cuda and not torch.cuda.is_current_stream_capturing():
        # later calls may launch on another stream: the write must be done before any of them
        # (once per plan; under graph capture the graph's own order covers it)
        torch.cuda.current_stream(geo.device).synchronize()
    return geo


def _to_float_arg(v):
    return 0, float(v)


def _to_bool_arg(v):
    return bool(v), 0.0


def _to_int_arg(v):
    return int(v), 0.0


def _converter(kind):
    """The conversion `_scalar` applies for a kernel argument pair of `kind`."""
    if kind is tl.float32 or kind is tl.float64:
        return _to_float_arg
    return _to_bool_arg if kind is tl.int1 else _to_int_arg


def _build(key, operands, a, out):
    """The launch plan of one call geometry, cached in `_PLANS` under `key`.

    `out` is None (functional: the plan says how to allocate), `self` (in-place) or the out=
    tensor. Returns (launch, cdt, shape, strides, dtype, device, grid, block, num_warps, mid)
    followed by (mode, zero) per operand. launch: 0 nothing to do (no elements), 1 `_kernel_flat`,
    2 `_kernel`, 3 contiguous copies first (`_launch_copies`), 4 `_kernel_tile` (block is then
    (BLOCK_R, BLOCK_C)). mid: the launch arguments from `n` (for `_kernel_tile`: rows, cols)
    through IDX64 (then ALIGN, EVEN_C for `_kernel_tile`; for the strided kernels, the plan's geometry tensor
    from `_geometry` among them). mode: None when the kernel reads the operand (a tensor on the
    output's device; its value argument is `zero`), else how to turn the argument into a by-value
    kernel argument (a number, or a 0-d tensor on another device such as a CPU scalar beside
    CUDA tensors).
    """
    out_dtype, cdt, _, _, zeros = _dtype_plan(a)
    tensors = [v for v in operands if isinstance(v, torch.Tensor)]
    if not tensors:
        raise TypeError(f"{_OP}: expected a tensor operand")
    shape = _broadcast_shapes([t.shape for t in tensors])
    cache = True
    if out is None:
        device = next((t.device for t in tensors if t.dim() > 0), tensors[0].device)
        strides = _output_strides(tensors, shape, device)
        store_dtype = out_dtype
    else:
        if tuple(out.shape) != shape:
            if _KIND == "inplace":
                raise RuntimeError(
                    f"{_OP}: result shape {shape} differs from self {tuple(out.shape)}"
                )
            out.resize_(shape)  # as eager does for out=; the key no longer matches: not cached
            cache = False
        device = out.device
        strides = tuple(out.stride())
        store_dtype = out.dtype
    n = 1
    for size in shape:
        n *= size
    modes, flags, strided = [], [], []
    for v, raw, zero in zip(operands, _RAW, zeros):
        conv = _converter(tl.int32 if raw else cdt)
        if isinstance(v, torch.Tensor):
            if v.dim() == 0 and v.device != device:
                modes.append(lambda t, conv=conv: conv(t.item()))  # e.g. a CPU scalar tensor
                flags.append(1)
            elif v.dim() == 0:
                modes.append(None)  # read in-kernel at offset 0
                flags.append(2)
            elif v.device != device:
                raise RuntimeError(f"{_OP}: expected all tensors on {device}, got {v.device}")
            else:
                modes.append(None)
                flags.append(0)
                strided.append(v)
                continue
        elif v is None:
            modes.append(lambda t, zero=zero: zero)
            flags.append(1)
        else:
            modes.append(conv)
            flags.append(1)
        strided.append(None)
    grid = block = warps = None
    mid = ()
    launch = 0
    if n:
        block, warps = _launch_config(n, device)
        grid = (-(-n // block),)
        tail = (*flags, cdt, cdt is tl.float32 or cdt is tl.float64, store_dtype == torch.bool)
        flat_mid = (n, *tail, n + block >= 2**31)
        dense = _is_contiguous(shape, strides) or _is_dense(shape, strides)
        if dense and all(
            t is None or (tuple(t.shape) == shape and tuple(t.stride()) == strides)
            for t in strided
        ):
            launch, mid = 1, flat_mid
        else:
            plan = None
            if not _CONTIGUOUS_INPUTS:
                plan = _plan(
                    shape,
                    [_aligned_strides(shape, strides, shape)]
                    + [
                        [0] * len(shape)
                        if t is None
                        else _aligned_strides(t.shape, t.stride(), shape)
                        for t in strided
                    ],
                )
            if plan is not None:
                ndim, sizes, merged, linear = plan
                wide = any(_extent(sizes, st) >= 2**31 for st in merged)
                idx64 = wide or n + block >= 2**31
                geo = _geometry(sizes, merged, idx64, device)
                tile = _tile_plan(ndim, sizes, merged, n, device) if _TILE else None
                if tile is not None:
                    block_r, block_c, grid, layout, align = tile
                    block, warps = (block_r, block_c), _TILE_WARPS
                    even = sizes[-1] % block_c == 0
                    launch, mid = 4, (sizes[-2], sizes[-1], geo, layout, *tail, idx64, align, even)
                else:
                    layout = ndim + sum(8 << i for i, lin in enumerate(linear) if lin)
                    launch, mid = 2, (n, geo, layout, *tail, idx64)
                if device.type == "cuda" and torch.cuda.is_current_stream_capturing():
                    # the geometry is written when the graph replays: keep it for the graph only
                    _CAPTURED.append(geo)
                    cache = False
            else:
                copies = tuple(
                    t is not None and not (tuple(t.shape) == shape and t.is_contiguous())
                    for t in strided
                )
                launch, mid = 3, (copies, not _is_contiguous(shape, strides), flat_mid)
    plan = (launch, cdt, shape, strides, out_dtype, device, grid, block, warps, mid)
    for mode, zero in zip(modes, zeros):
        plan += (mode, zero)
    if cache:
        if len(_PLANS) >= _MAX_PLANS:
            _PLANS.clear()
        _PLANS[key] = plan
    return plan


def _launch_copies(out, ptrs, values, scalars, consts, plan):
    """Fallback launch: contiguous copies of the strided inputs (and a contiguous output when
    `out` is not), then one flat loop; the output is copied back into `out`."""
    shape, grid, block, warps = plan[2], plan[6], plan[7], plan[8]
    copies, temp, mid = plan[9]
    ptrs = [p.expand(shape).contiguous() if c else p for p, c in zip(ptrs, copies)]
    target = torch.empty(shape, dtype=out.dtype, device=out.device) if temp else out
    _kernel_flat[grid](
        target, *ptrs, *values, *scalars, *mid, *consts, BLOCK=block, num_warps=warps
    )
    if temp:
        out.copy_(target)
