"""_safe_softmax: softmax along a dim where a fully masked (-inf) row gives zeros, as eager does."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _INTERPRET, _cdiv, _pow2
from agent.providers.builtin.kernels.tiles import _CONSERVATIVE, _prod, _tile_cap, _wrap_dim


# ---- emitted: safe_softmax ----


@triton.jit
def _safe_softmax_kernel(x_ptr, out_ptr, ROWS, R, INNER, ACC: tl.constexpr,
                         ONE_PASS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    """Row r = (o, i) holds elements o * R * INNER + i + k * INNER, k < R."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < ROWS
    base = (rows // INNER) * R * INNER + rows % INNER
    if ONE_PASS:
        cols = tl.arange(0, BLOCK_N)
        m = row_ok[:, None] & (cols[None, :] < R)
        offs = base[:, None] + cols[None, :].to(tl.int64) * INNER
        a = tl.load(x_ptr + offs, mask=m, other=float("-inf")).to(ACC)
        mx = tl.max(a, axis=1)
        safe = tl.where(mx == float("-inf"), 0.0, mx)
        e = tl.exp(a - safe[:, None])
        dead = mx == float("-inf")
        s = tl.where(dead, 1.0, tl.sum(e, axis=1))  # dead rows: no 0/0
        y = tl.where(dead[:, None], 0.0, e / s[:, None])
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)
    else:
        mx = tl.full([BLOCK_M], float("-inf"), ACC)
        s = tl.zeros([BLOCK_M], ACC)
        for c0 in range(0, R, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            m = row_ok[:, None] & (cols[None, :] < R)
            a = tl.load(x_ptr + base[:, None] + cols[None, :].to(tl.int64) * INNER, mask=m,
                        other=float("-inf")).to(ACC)
            new_mx = tl.maximum(mx, tl.max(a, axis=1))
            safe = tl.where(new_mx == float("-inf"), 0.0, new_mx)
            s = s * tl.exp(mx - safe) + tl.sum(tl.exp(a - safe[:, None]), axis=1)
            mx = new_mx
        dead = mx == float("-inf")
        safe = tl.where(dead, 0.0, mx)
        s = tl.where(dead, 1.0, s)
        for c0 in range(0, R, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            m = row_ok[:, None] & (cols[None, :] < R)
            offs = base[:, None] + cols[None, :].to(tl.int64) * INNER
            a = tl.load(x_ptr + offs, mask=m, other=float("-inf")).to(ACC)
            y = tl.where(dead[:, None], 0.0, tl.exp(a - safe[:, None]) / s[:, None])
            tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)


def _safe_softmax(self, dim, dtype=None):
    if not self.is_floating_point():
        raise RuntimeError(f"_safe_softmax: expected a floating point tensor, got {self.dtype}")
    dim = _wrap_dim(dim, self.dim())
    out_dtype = dtype if dtype is not None else self.dtype
    x = self.contiguous()
    out = torch.empty(self.shape, dtype=out_dtype, device=self.device)
    if out.numel() == 0:
        return out
    shape = list(x.shape) if x.dim() else [1]
    red = shape[dim]
    inner = _prod(shape[dim + 1:])
    rows = _prod(shape) // red
    acc = tl.float64 if torch.float64 in (self.dtype, out_dtype) else tl.float32
    cap = _tile_cap()
    one_pass = _pow2(red) <= (256 if _CONSERVATIVE else (4096 if _INTERPRET else 8192))
    block_n = max(2, _pow2(red)) if one_pass else min(cap, 1024)
    block_m = max(1, min(_pow2(rows), cap // block_n))
    if inner > 1:
        block_m = max(1, min(block_m, 64))
    warps = 4 if block_m * block_n <= 1024 else (8 if block_m * block_n <= 4096 else 16)
    _safe_softmax_kernel[(_cdiv(rows, block_m),)](
        x, out, rows, red, inner, ACC=acc, ONE_PASS=one_pass, BLOCK_M=block_m, BLOCK_N=block_n,
        num_warps=warps)
    return out
