"""Advanced indexing: index.Tensor and index_put(_) (broadcast index tensors, ordered accumulation
where eager's order shows in the result).
"""

import torch
import triton
import triton.language as tl

from agent.providers.builtin.kernels.map_flat import _copy_into
from agent.providers.builtin.kernels.runtime import (
    _OP,
    _cdiv,
    _pow2,
)
from agent.providers.builtin.kernels.tiles import (
    _INTERPRET,
    _contiguous_strides,
    _prod,
    _tile2,
)

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
