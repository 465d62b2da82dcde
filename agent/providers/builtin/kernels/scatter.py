"""scatter.src: a copy of self with src values written at index along dim."""

import torch
import triton
import triton.language as tl

from agent.providers.builtin.kernels.map_flat import _copy_into, _planned
from agent.providers.builtin.kernels.runtime import (
    _OP,
    _cdiv,
)
from agent.providers.builtin.kernels.tiles import (
    _block1,
    _contiguous_strides,
    _wrap_dim,
)

# ---- emitted: scatter ----


@triton.jit
def _scatter_kernel(dst_ptr, idx_ptr, src_ptr, n, D0, D1, D2, D3, D4, D5,
                    sd0, sd1, sd2, sd3, sd4, sd5, si0, si1, si2, si3, si4, si5,
                    ss0, ss1, ss2, ss3, ss4, ss5, sd_dim, size_dim, BLOCK: tl.constexpr):
    """dst[p with dim `dim` replaced by index[p]] = src[p] over the index's positions p (the
    scattered dim's own stride in sd* is 0, sd_dim holds it)."""
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
    k = tl.load(idx_ptr + ioff, mask=ok, other=0).to(tl.int64)
    k = tl.where(k < 0, k + size_dim, k)
    soff = i0 * ss0 + i1 * ss1 + i2 * ss2 + i3 * ss3 + i4 * ss4 + i5 * ss5
    v = tl.load(src_ptr + soff, mask=ok)
    doff = i0 * sd0 + i1 * sd1 + i2 * sd2 + i3 * sd3 + i4 * sd4 + i5 * sd5 + k * sd_dim
    tl.store(dst_ptr + doff, v.to(dst_ptr.dtype.element_ty), mask=ok)


def _scatter(self, dim, index, src):
    if index.dtype != torch.int64:
        raise RuntimeError("scatter(): Expected dtype int64 for index")
    if src.dtype != self.dtype:
        raise RuntimeError("scatter(): Expected self.dtype to be equal to src.dtype")
    key = ("scatter", self.shape, self.dtype, self.device, dim, index.shape, index.stride(),
           src.shape, src.stride())
    run = _planned(key, lambda: _scatter_plan(self, dim, index, src))
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    _copy_into(out, self)
    run(out, index, src)
    return out


def _scatter_plan(self, dim, index, src):
    """run(out, index, src): the scatter launch into the contiguous copy of self."""
    dim = _wrap_dim(dim, self.dim())
    n = index.numel()
    if n == 0:
        return lambda out, index, src: None
    ndim = max(index.dim(), 1)
    if ndim > 6:
        raise NotImplementedError(f"{_OP}: more than 6 dims are not supported by this kernel")
    pad = 6 - ndim
    shape = [1] * pad + (list(index.shape) if index.dim() else [1])
    sd = _contiguous_strides(list(self.shape)) if self.dim() else [0]
    sd_dim = sd[dim]
    sd[dim] = 0
    sd = [0] * pad + sd
    si = [0] * pad + (list(index.stride()) if index.dim() else [0])
    ss = [0] * pad + (list(src.stride()) if src.dim() else [0])
    size_dim = self.shape[dim] if self.dim() else 1
    block, warps = _block1(n)
    kernel = _scatter_kernel[(_cdiv(n, block),)]
    ints = (n, *shape, *sd, *si, *ss, sd_dim, size_dim)

    def run(out, index, src):
        kernel(out, index, src, *ints, BLOCK=block, num_warps=warps)

    return run
