"""_weight_norm_interface: sums of squares per kept index (atomic adds into fp32), then one
elementwise launch for w = v * g / ||v|| and the norm."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _INTERPRET, _cdiv, _pow2
from agent.providers.builtin.kernels.tiles import _block1, _prod, _tile_cap, _wrap_dim


# ---- emitted: weight_norm ----


@triton.jit
def _sumsq_cols_kernel(v_ptr, ss_ptr, A, D, CHUNK, NDB, BLOCK_A: tl.constexpr,
                       BLOCK_D: tl.constexpr):
    """B == 1: ss[d] += sum over a chunk of rows of v[a, d]^2 (tiles along d, in memory order)."""
    pid = tl.program_id(0)
    d = (pid % NDB).to(tl.int64) * BLOCK_D + tl.arange(0, BLOCK_D)
    a_start = (pid // NDB).to(tl.int64) * CHUNK
    d_ok = d < D
    acc = tl.zeros([BLOCK_A, BLOCK_D], tl.float32)
    for a0 in range(a_start, tl.minimum(a_start + CHUNK, A), BLOCK_A):
        a = a0 + tl.arange(0, BLOCK_A)
        m = (a[:, None] < tl.minimum(a_start + CHUNK, A)) & d_ok[None, :]
        v = tl.load(v_ptr + a[:, None] * D + d[None, :], mask=m, other=0).to(tl.float32)
        acc += v * v
    tl.atomic_add(ss_ptr + d, tl.sum(acc, axis=0), mask=d_ok)


@triton.jit
def _sumsq_rows_kernel(v_ptr, ss_ptr, D, B, AB, CHUNK, BLOCK: tl.constexpr):
    """B > 1: ss[d] += sum over a chunk of the (a, b) positions of v[a, d, b]^2."""
    d = tl.program_id(0).to(tl.int64)
    start = tl.program_id(1).to(tl.int64) * CHUNK
    end = tl.minimum(start + CHUNK, AB)
    acc = tl.zeros([BLOCK], tl.float32)
    for r0 in range(start, end, BLOCK):
        r = r0 + tl.arange(0, BLOCK)
        m = r < end
        v = tl.load(v_ptr + (r // B) * D * B + d * B + r % B, mask=m, other=0).to(tl.float32)
        acc += v * v
    tl.atomic_add(ss_ptr + d, tl.sum(acc, axis=0))


@triton.jit
def _weight_norm_scale_kernel(v_ptr, g_ptr, ss_ptr, w_ptr, norm_ptr, n, D, B, sg,
                              BLOCK: tl.constexpr):
    """w = v * g[d] / sqrt(ss[d]); the first D lanes also write norm[d] = sqrt(ss[d])."""
    p = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = p < n
    d = (p // B) % D
    nrm = tl.sqrt(tl.load(ss_ptr + d, mask=ok, other=1))
    g = tl.load(g_ptr + d * sg, mask=ok, other=0).to(tl.float32)
    v = tl.load(v_ptr + p, mask=ok, other=0).to(tl.float32)
    tl.store(w_ptr + p, (v * (g / nrm)).to(w_ptr.dtype.element_ty), mask=ok)
    first = p < D
    tl.store(norm_ptr + p, tl.sqrt(tl.load(ss_ptr + p, mask=first, other=0)).to(norm_ptr.dtype.element_ty), mask=first)


def _weight_norm_interface(v, g, dim=0):
    if v.dim() == 0:
        raise RuntimeError("_weight_norm_interface: expected a tensor with at least 1 dim")
    dim = _wrap_dim(dim, v.dim())
    if dim not in (0, v.dim() - 1):
        raise RuntimeError("fused kernels can only be applied for first or last dim")
    x = v.contiguous()
    D = x.shape[dim]
    A = _prod(x.shape[:dim])
    B = _prod(x.shape[dim + 1:])
    if g.numel() != D:
        raise RuntimeError("_weight_norm_interface: g must hold one value per slice of v along dim")
    norm_dtype = torch.float32 if v.dtype in (torch.float16, torch.bfloat16) else v.dtype
    w = torch.empty(v.shape, dtype=v.dtype, device=v.device)
    norm_shape = [D if i == dim else 1 for i in range(v.dim())]
    norm = torch.empty(norm_shape, dtype=norm_dtype, device=v.device)
    if w.numel() == 0:
        return w, norm
    ss = torch.zeros((D,), dtype=torch.float32, device=v.device)
    cap = _tile_cap()
    if B == 1:
        block_d = max(2, min(_pow2(D), 128))
        block_a = max(1, min(_pow2(A), cap // block_d))
        chunk = max(block_a, 16 * block_a if _INTERPRET else 4 * block_a)
        ndb = _cdiv(D, block_d)
        _sumsq_cols_kernel[(_cdiv(A, chunk) * ndb,)](x, ss, A, D, chunk, ndb,
                                                    BLOCK_A=block_a, BLOCK_D=block_d)
    else:
        block = max(32, min(_pow2(A * B), cap if _INTERPRET else 1024))
        chunk = 16 * block
        _sumsq_rows_kernel[(D, _cdiv(A * B, chunk))](x, ss, D, B, A * B, chunk, BLOCK=block)
    n = w.numel()
    block, warps = _block1(n)
    sg = g.stride(dim) if g.dim() == v.dim() else 1
    _weight_norm_scale_kernel[(_cdiv(n, block),)](x, g, ss, w, norm, n, D, B, sg,
                                                 BLOCK=block, num_warps=warps)
    return w, norm
