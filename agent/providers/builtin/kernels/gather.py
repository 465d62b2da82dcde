"""Gather kernels (index_select, gather, cat, stack): the text the builtin writer copies into the
files it emits.
"""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.copy import _strided_copy
from agent.providers.builtin.kernels.pieces import (
    _launch_pieces,
    _pieces_plan,
    _tile_rows_cols,
    _to_out_dtype,
)
from agent.providers.builtin.kernels.runtime import _INTERPRET, _OP, _cdiv, _pow2
from agent.providers.builtin.kernels.tiles import _CONSERVATIVE


# ---- emitted: index ----


@triton.jit
def _embedding_kernel(w_ptr, idx_ptr, out_ptr, R, D, s_w0, s_w1,
                      BLOCK_R: tl.constexpr, BLOCK_D: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_D + tl.arange(0, BLOCK_D)
    ok = rows < R
    idx = tl.load(idx_ptr + rows, mask=ok, other=0).to(tl.int64)
    m = ok[:, None] & (cols[None, :] < D)
    v = tl.load(w_ptr + idx[:, None] * s_w0 + cols[None, :] * s_w1, mask=m)
    tl.store(out_ptr + rows[:, None] * D + cols[None, :], v, mask=m)


@triton.jit
def _index_select_kernel(x_ptr, idx_ptr, out_ptr, ROWS, L, S, INNER,
                         BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    ok = rows < ROWS
    o = rows // L
    j = rows % L
    idx = tl.load(idx_ptr + j, mask=ok, other=0).to(tl.int64)
    m = ok[:, None] & (cols[None, :] < INNER)
    src = (o * S + idx)[:, None] * INNER + cols[None, :]
    v = tl.load(x_ptr + src, mask=m)
    tl.store(out_ptr + rows[:, None] * INNER + cols[None, :], v, mask=m)


@triton.jit
def _gather_kernel(x_ptr, idx_ptr, out_ptr, n, D0, D1, D2, D3, D4, D5,
                   sx0, sx1, sx2, sx3, sx4, sx5, si0, si1, si2, si3, si4, si5, sx_dim,
                   BLOCK: tl.constexpr):
    """out[p] = x[p's position with dim `dim` replaced by index[p]] (sx_dim its stride; the
    gathered dim's own stride in sx* is 0)."""
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
    idx = tl.load(idx_ptr + ioff, mask=ok, other=0).to(tl.int64)
    xoff = i0 * sx0 + i1 * sx1 + i2 * sx2 + i3 * sx3 + i4 * sx4 + i5 * sx5 + idx * sx_dim
    v = tl.load(x_ptr + xoff, mask=ok)
    tl.store(out_ptr + p, v, mask=ok)


def _wrap_dim(dim, ndim):
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})")
    return dim % rank


def _check_index(index, name):
    if index.dtype not in (torch.int64, torch.int32):
        raise RuntimeError(f"{name}(): Expected dtype int32/int64 for index, got {index.dtype}")


def _tile(rows, cols):
    small = _INTERPRET or _CONSERVATIVE
    block_c = max(2, min(_pow2(cols), 128 if small else 1024))
    block_r = max(1, min(_pow2(rows), (1024 if small else 4096) // block_c))
    return block_r, block_c, (4 if block_r * block_c <= 2048 else 8)


def _embedding(weight, indices, padding_idx=-1, scale_grad_by_freq=False, sparse=False):
    if weight.dim() != 2:
        raise RuntimeError("'weight' must be 2-D")
    _check_index(indices, "embedding")
    idx = indices.contiguous()
    R = idx.numel()
    D = weight.shape[1]
    out = torch.empty(list(indices.shape) + [D], dtype=weight.dtype, device=weight.device)
    if out.numel() == 0:
        return out
    block_r, block_d, warps = _tile(R, D)
    _embedding_kernel[(_cdiv(R, block_r), _cdiv(D, block_d))](
        weight, idx, out, R, D, weight.stride(0), weight.stride(1),
        BLOCK_R=block_r, BLOCK_D=block_d, num_warps=warps)
    return out


def _index_select(self, dim, index):
    _check_index(index, "index_select")
    if index.dim() > 1:
        raise IndexError("index_select(): Index is supposed to be a vector")
    dim = _wrap_dim(dim, self.dim())
    x = self.contiguous()
    shape = list(x.shape) if x.dim() > 0 else [1]
    L = index.numel()
    out_shape = list(shape)
    out_shape[dim] = L
    out = torch.empty(out_shape if self.dim() > 0 else [], dtype=x.dtype, device=x.device)
    if out.numel() == 0:
        return out
    outer = 1
    for s in shape[:dim]:
        outer *= s
    inner = 1
    for s in shape[dim + 1:]:
        inner *= s
    idx = index.reshape(-1).contiguous()
    block_r, block_i, warps = _tile(outer * L, inner)
    _index_select_kernel[(_cdiv(outer * L, block_r), _cdiv(inner, block_i))](
        x, idx, out, outer * L, L, shape[dim], inner,
        BLOCK_R=block_r, BLOCK_I=block_i, num_warps=warps)
    return out


def _gather(self, dim, index, sparse_grad=False):
    if index.dtype != torch.int64:
        raise RuntimeError("gather(): Expected dtype int64 for index")
    dim = _wrap_dim(dim, self.dim())
    if index.dim() != self.dim() and not (index.dim() <= 1 and self.dim() <= 1):
        raise RuntimeError("Index tensor must have the same number of dimensions as input tensor")
    out = torch.empty(index.shape, dtype=self.dtype, device=self.device)
    n = out.numel()
    if n == 0:
        return out
    ndim = max(index.dim(), 1)
    if ndim > 6:
        raise NotImplementedError(f"{_OP}: more than 6 dims are not supported")
    shape = list(index.shape) if index.dim() > 0 else [1]
    sx = list(self.stride()) if self.dim() > 0 else [0]
    si = list(index.stride()) if index.dim() > 0 else [0]
    sx_dim = sx[dim]
    sx[dim] = 0
    pad = 6 - ndim
    shape = [1] * pad + shape
    sx = [0] * pad + sx
    si = [0] * pad + si
    small = _INTERPRET or _CONSERVATIVE
    block = max(16, min(_pow2(n), 1024 if small else 1024))
    _gather_kernel[(_cdiv(n, block),)](self, index, out, n, *shape, *sx, *si, sx_dim,
                                       BLOCK=block, num_warps=4)
    return out


def _promote(tensors):
    dtype = tensors[0].dtype
    for t in tensors[1:]:
        dtype = torch.promote_types(dtype, t.dtype)
    return dtype


_PLANS = {}  # (op, dim, each input's shape/strides/dtype, device) -> run(tensors)


def _planned(key, make, tensors):
    run = _PLANS.get(key)
    if run is None:
        if len(_PLANS) >= 256:
            _PLANS.clear()
        run = _PLANS[key] = make()
    return run(tensors)


def _pieces_run(shape, fmt, dtype, device, pieces):
    """run(tensors): allocate the output, copy every piece into it (one launch per MAX_PIECES)."""
    out_strides = torch.empty(shape, dtype=dtype, device="meta", memory_format=fmt).stride()
    launches, leftovers = _pieces_plan(pieces)

    def run(tensors):
        out = torch.empty_strided(shape, out_strides, dtype=dtype, device=device)
        for grid, indices, ints, consts in launches:
            _launch_pieces(grid, out, [tensors[i] for i in indices], ints, consts)
        for index, piece_shape, _, dst_strides, offset in leftovers:
            _strided_copy(out.as_strided(piece_shape, dst_strides, out.storage_offset() + offset),
                          tensors[index])
        return out

    return run


def _cat_plan(tensors, dim):
    dtype = _promote(tensors)
    device = tensors[0].device
    # ATen skips legacy empty 1-D tensors (shape [0]) when the others have more dims
    parts = [i for i, t in enumerate(tensors) if not (t.dim() == 1 and t.shape[0] == 0)]
    if not parts:
        return _pieces_run([0], torch.contiguous_format, dtype, device, [])
    ref = tensors[parts[0]]
    dim = _wrap_dim(dim, ref.dim())
    shape = list(ref.shape)
    shape[dim] = sum(tensors[i].shape[dim] for i in parts)
    for i in parts:
        t = tensors[i]
        if t.device != device:
            raise RuntimeError("torch.cat(): all input tensors must be on the same device")
        if t.dim() != ref.dim() or any(a != b for d, (a, b) in enumerate(zip(t.shape, ref.shape)) if d != dim):
            raise RuntimeError("torch.cat(): Sizes of tensors must match except in the concatenated dimension")
    channels_last = ref.dim() == 4 and all(
        tensors[i].is_contiguous(memory_format=torch.channels_last) and not tensors[i].is_contiguous()
        for i in parts)
    fmt = torch.channels_last if channels_last else torch.contiguous_format
    out_strides = torch.empty(shape, device="meta", memory_format=fmt).stride()
    pieces, offset = [], 0
    for i in parts:
        t = tensors[i]
        size = t.shape[dim]
        if t.numel():
            pieces.append((i, list(t.shape), list(t.stride()), list(out_strides), offset * out_strides[dim]))
        offset += size
    return _pieces_run(shape, fmt, dtype, device, pieces)


def _cat(tensors, dim=0):
    if not tensors:
        raise RuntimeError("torch.cat(): expected a non-empty list of Tensors")
    key = ("cat", dim, tensors[0].device, *[(t.shape, t.stride(), t.dtype) for t in tensors])
    return _planned(key, lambda: _cat_plan(tensors, dim), tensors)


# ---- emitted: stack ----


# stack on a new last dim of 2.._STACK_INTERLEAVE_MAX (<= 4) inputs: one interleaving launch (0: off)
_STACK_INTERLEAVE_MAX = 4
_STACK_BLOCK = 1024  # elements taken from each input per program (H200: 8.7 us, 4096: 10.2)
_STACK_WARPS = 4


@triton.jit
def _stack_load(x_ptr, out_ptr, r0, r1, r2, r3, cols, S0, S1, S2, S3, SC, m):
    """A [rows, cols] tile of one input, cast to the output's dtype."""
    src = r0 * S0 + r1 * S1 + r2 * S2 + r3 * S3
    return _to_out_dtype(tl.load(x_ptr + (src[:, None] + cols[None, :] * SC), mask=m), out_ptr)


@triton.jit
def _stack_last(out_ptr, x0, x1, x2, x3, ROWS, C, CN, R1, R2, R3, NCB,
                S0_0, S1_0, S2_0, S3_0, SC_0, S0_1, S1_1, S2_1, S3_1, SC_1,
                S0_2, S1_2, S2_2, S3_2, SC_2, S0_3, S1_3, S2_3, S3_3, SC_3,
                N: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
                IDX64: tl.constexpr):
    """out[row, c, k] = x_k[row, c] for N inputs of one shape, merged to rows (r0, r1, r2, r3)
    x C columns, each input read through its own strides. A program loads one tile per input
    (coalesced along the columns) and interleaves them in registers (join + reshape), so it
    writes one contiguous, vectorized span of the output instead of N stride-N stores from
    different programs into the same sectors."""
    cb, rows, cols = _tile_rows_cols(tl.program_id(0), NCB, BLOCK_R, BLOCK_C, IDX64)
    r3 = rows % R3
    q = rows // R3
    r2 = q % R2
    q = q // R2
    r1 = q % R1
    r0 = q // R1
    row_ok = (rows < ROWS)[:, None]
    m = row_ok & (cols < C)[None, :]
    a = _stack_load(x0, out_ptr, r0, r1, r2, r3, cols, S0_0, S1_0, S2_0, S3_0, SC_0, m)
    b = _stack_load(x1, out_ptr, r0, r1, r2, r3, cols, S0_1, S1_1, S2_1, S3_1, SC_1, m)
    if N == 2:
        v = tl.reshape(tl.join(a, b), [BLOCK_R, BLOCK_C * 2])
        p = cb * (BLOCK_C * 2) + tl.arange(0, BLOCK_C * 2)
        tl.store(out_ptr + (rows[:, None] * CN + p[None, :]), v, mask=row_ok & (p < CN)[None, :])
    else:
        c = _stack_load(x2, out_ptr, r0, r1, r2, r3, cols, S0_2, S1_2, S2_2, S3_2, SC_2, m)
        if N == 4:
            d = _stack_load(x3, out_ptr, r0, r1, r2, r3, cols, S0_3, S1_3, S2_3, S3_3, SC_3, m)
        else:
            d = c  # a fourth lane that is never stored
        # join(join(a, c), join(b, d))[e, i, j] is input 2 * i + j's element e
        v = tl.reshape(tl.join(tl.join(a, c), tl.join(b, d)), [BLOCK_R, BLOCK_C * 4])
        if N == 4:
            p = cb * (BLOCK_C * 4) + tl.arange(0, BLOCK_C * 4)
            tl.store(out_ptr + (rows[:, None] * CN + p[None, :]), v,
                     mask=row_ok & (p < CN)[None, :])
        else:
            lane = tl.arange(0, BLOCK_C * 4)
            col = cb * BLOCK_C + lane // 4
            k = lane % 4
            tl.store(out_ptr + (rows[:, None] * CN + (col * N + k)[None, :]), v,
                     mask=row_ok & ((col < C) & (k < N))[None, :])


def _stack_last_dims(shape, strides):
    """(size, [stride of each input]) per dim after dropping size-1 dims and merging
    neighbours every input steps through as one (the contiguous output always does)."""
    dims = []
    for d, size in enumerate(shape):
        if size == 1:
            continue
        step = [s[d] for s in strides]
        if dims and all(prev == a * size for prev, a in zip(dims[-1][1], step)):
            dims[-1] = (dims[-1][0] * size, step)
        else:
            dims.append((size, step))
    return dims or [(1, [0] * len(strides))]


def _stack_last_plan(tensors, shape, dtype, device):
    """run(tensors) for a stack on a new last dim through `_stack_last`, or None when the
    inputs keep more than five dims after merging (the piece kernel takes those)."""
    n = len(tensors)
    dims = _stack_last_dims(list(tensors[0].shape), [list(t.stride()) for t in tensors])
    if len(dims) > 5:
        return None
    c, sc = dims[-1]
    rows4 = [(1, [0] * n)] * (5 - len(dims)) + dims[:-1]
    nrows = 1
    for size, _ in rows4:
        nrows *= size
    block = max(2, _STACK_BLOCK)
    bc = max(2, min(_pow2(c), block))
    br = max(1, min(_pow2(nrows), block // bc))
    ncb = _cdiv(c, bc)
    grid = (_cdiv(nrows, br) * ncb,)
    total = n * nrows * c
    span = max(sum((size - 1) * st[k] for size, st in dims) for k in range(n))
    big = total >= 2**31 - 1 or span >= 2**31 - 1 or grid[0] >= 2**31 - 1
    strides = []
    for k in range(4):  # missing inputs repeat the last one (never read)
        strides += [st[min(k, n - 1)] for _, st in [*rows4, (c, sc)]]
    ints = (nrows, c, c * n, rows4[1][0], rows4[2][0], rows4[3][0], ncb, *strides)
    consts = dict(N=n, BLOCK_R=br, BLOCK_C=bc, IDX64=big, num_warps=_STACK_WARPS)

    def run(tensors):
        out = torch.empty(shape, dtype=dtype, device=device)
        if total:
            _stack_last[grid](out, *tensors, *[tensors[-1]] * (4 - n), *ints, **consts)
        return out

    return run


def _stack_plan(tensors, dim):
    ref = tensors[0]
    device = ref.device
    for t in tensors:
        if t.shape != ref.shape:
            raise RuntimeError("stack expects each tensor to be equal size")
        if t.device != device:
            raise RuntimeError("stack expects all tensors to be on the same device")
    dim = _wrap_dim(dim, ref.dim() + 1)
    shape = list(ref.shape)
    shape.insert(dim, len(tensors))
    dtype = _promote(tensors)
    if dim == ref.dim() and 2 <= len(tensors) <= min(_STACK_INTERLEAVE_MAX, 4):
        run = _stack_last_plan(tensors, shape, dtype, device)
        if run is not None:
            return run
    out_strides = list(torch.empty(shape, device="meta").stride())
    step = out_strides.pop(dim)
    pieces = [(i, list(t.shape), list(t.stride()), out_strides, i * step)
              for i, t in enumerate(tensors) if t.numel()]
    return _pieces_run(shape, torch.contiguous_format, dtype, device, pieces)


def _stack(tensors, dim=0):
    if not tensors:
        raise RuntimeError("stack expects a non-empty TensorList")
    key = ("stack", dim, tensors[0].device, *[(t.shape, t.stride(), t.dtype) for t in tensors])
    return _planned(key, lambda: _stack_plan(tensors, dim), tensors)
