"""Reductions' shared header (sums, means, moments, extremes): the emitted file's flags, dims
normalisation, the [outer, R, inner] view and the tile and split choice. Placeholder:
`_CONSERVATIVE` (variant >= 1: no split reductions, smaller tiles).
"""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _cdiv, _num_sms, _pow2


# ---- emitted: prelude ----
import functools  # noqa: F401  (the inlined _num_sms uses it)
import os

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CONSERVATIVE = False  # variant >= 1: no split reductions, smaller tiles


# inline: _cdiv, _pow2, _num_sms


def _target_programs(x):
    """Programs that keep the device busy; tiny on the interpreter so splits still get used."""
    if _INTERPRET or x.device.type != "cuda":
        return 4
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    return 4 * _num_sms(index)


def _norm_dims(dim, ndim):
    """None, [] -> every dim (ATen's rule for these overloads); negative dims wrapped."""
    if dim is None:
        return list(range(ndim))
    if isinstance(dim, int):
        dim = [dim]
    dim = list(dim)
    if len(dim) == 0:
        return list(range(ndim))
    rank = max(ndim, 1)
    out = []
    for d in dim:
        if not -rank <= d < rank:
            raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {d})")
        d = d % rank
        if ndim == 0:
            continue
        if d in out:
            raise RuntimeError(f"dim {d} appears multiple times in the list of dims")
        out.append(d)
    return sorted(out)


def _out_shape(shape, dims, keepdim):
    if keepdim:
        return [1 if d in dims else s for d, s in enumerate(shape)]
    return [s for d, s in enumerate(shape) if d not in dims]


def _prod(values):
    p = 1
    for v in values:
        p *= v
    return p


def _strided_outer(x, dims):
    """(outer, R, inner, outer stride) when the reduced dims and the dims after them form one
    dense row-major block and the dims before them step through memory with one stride (e.g. the
    last position of a [batch, seq, vocab] slice); None otherwise."""
    shape, strides = x.shape, x.stride()
    eff = [d for d in range(x.dim()) if shape[d] != 1]
    pos = [i for i, d in enumerate(eff) if d in dims]
    if not pos or pos != list(range(pos[0], pos[-1] + 1)):
        return None
    expect = 1
    for d in reversed(eff[pos[0]:]):
        if strides[d] != expect:
            return None
        expect *= shape[d]
    before = eff[: pos[0]]
    for a, b in zip(before, before[1:]):
        if strides[a] != strides[b] * shape[b]:
            return None
    red = _prod(shape[d] for d in eff[pos[0] : pos[-1] + 1])
    inner = _prod(shape[d] for d in eff[pos[-1] + 1 :])
    outer = _prod(shape[d] for d in before)
    return outer, red, inner, strides[before[-1]] if before else red * inner


def _as_outer_r_inner(x, dims, logical_order):
    """(perm, outer, R, inner, outer stride): the tensor's memory read as [outer, R, inner], the
    [R, inner] blocks dense and `outer stride` apart.

    perm None: the input itself when the layout allows it; otherwise the caller reads
    `x.permute(perm).contiguous()` (a copy, reduced dims last).
    `logical_order` (flat indices over several dims) accepts only the input's own order.
    """
    shape = list(x.shape)
    eff = [d for d in range(x.dim()) if shape[d] != 1]
    orders = []
    if x.is_contiguous():
        orders.append(list(range(x.dim())))
    if not logical_order and x.dim() > 1:
        perm = sorted(range(x.dim()), key=lambda d: -x.stride(d))
        if x.permute(perm).is_contiguous():
            orders.append(perm)
    for order in orders:
        seq = [d for d in order if d in eff]
        pos = [i for i, d in enumerate(seq) if d in dims]
        kept = [d for d in seq if d not in dims]
        if pos and pos != list(range(pos[0], pos[-1] + 1)):
            continue
        if kept != sorted(kept):
            continue
        first = pos[0] if pos else len(seq)
        last = pos[-1] + 1 if pos else len(seq)
        outer = _prod(shape[d] for d in seq[:first])
        red = _prod(shape[d] for d in seq[first:last])
        inner = _prod(shape[d] for d in seq[last:])
        return None, outer, red, inner, red * inner
    strided = _strided_outer(x, dims)
    if strided is not None:
        return (None, *strided)
    kept = [d for d in range(x.dim()) if d not in dims]
    red = _prod(shape[d] for d in dims)
    return kept + list(dims), _prod(shape[d] for d in kept), red, 1, red


# GPU tile limits (elements): module constants so benchmarks/knob_sweep.py can re-measure them
# split reductions: the combine launch as a programmatic dependent of the partial sums (sm_90+)
_SPLIT_PDL = True
_ROW_CAP_N, _ROW_CAP_TILE = 4096, 4096  # rows kernel: elements of a row per step, per program
_COL_CAP_I, _COL_CAP_TILE = 128, 4096  # columns kernel: inner elements, elements per program
_WARPS_SMALL, _WARPS_BIG = 4, 8  # tiles below / from 4096 elements


def _row_blocks(rows, red, acc_bytes, target):
    if _INTERPRET or _CONSERVATIVE:
        cap_n, cap_tile = 256, 1024
    else:
        cap_n, cap_tile = (_ROW_CAP_N // 2 if acc_bytes == 8 else _ROW_CAP_N), _ROW_CAP_TILE
    block_n = max(2, min(_pow2(red), cap_n))
    block_m = max(1, min(_pow2(rows), cap_tile // block_n))
    while block_m > 1 and _cdiv(rows, block_m) < target:  # short rows: more programs
        block_m //= 2
    return block_m, block_n


def _col_blocks(inner, red, acc_bytes):
    if _INTERPRET or _CONSERVATIVE:
        cap_i, cap_tile = 32, 1024
    else:
        cap_i, cap_tile = _COL_CAP_I, (_COL_CAP_TILE // 2 if acc_bytes == 8 else _COL_CAP_TILE)
    block_i = max(2, min(_pow2(inner), cap_i))
    block_r = max(2, min(_pow2(red), cap_tile // block_i))
    return block_r, block_i


def _split(tiles, red, block, target):
    """(num_splits, chunk): split R over programs when `tiles` alone would leave the GPU idle."""
    splits = 1
    if not _CONSERVATIVE and tiles < target and red >= 4 * block:
        splits = min(_cdiv(target, tiles), red // (2 * block), 1024)
    chunk = _cdiv(_cdiv(red, max(splits, 1)), block) * block
    chunk = max(chunk, block)
    return max(1, _cdiv(red, chunk)), chunk


def _warps(tile):
    return _WARPS_BIG if tile >= 4096 else _WARPS_SMALL


def _tl_dtype(dt):
    return {
        torch.float16: tl.float16,
        torch.bfloat16: tl.bfloat16,
        torch.float32: tl.float32,
        torch.float64: tl.float64,
        torch.int64: tl.int64,
    }[dt]


def _acc_dtype(in_dtype, out_dtype):
    if torch.float64 in (in_dtype, out_dtype):
        return torch.float64
    if in_dtype.is_floating_point or out_dtype.is_floating_point:
        return torch.float32
    return torch.int64
