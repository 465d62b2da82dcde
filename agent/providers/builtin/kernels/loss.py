"""Loss kernels (nll_loss and its backward): the text the builtin writer copies into the files it
emits.
"""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _INTERPRET, _cdiv, _pow2
from agent.providers.builtin.kernels.tiles import _CONSERVATIVE, _block1


# ---- emitted: nll ----


@triton.jit
def _nll_forward_kernel(x_ptr, t_ptr, w_ptr, out_ptr, tw_ptr, N, sx0, sx1, st, ignore_index,
                        HAS_W: tl.constexpr, REDUCTION: tl.constexpr, ACC: tl.constexpr,
                        BLOCK: tl.constexpr):
    """REDUCTION 0: out[i] = loss_i; 1 (mean) / 2 (sum): one program, out = sum (/ total weight)."""
    if REDUCTION == 0:
        i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
        ok = i < N
        t = tl.load(t_ptr + i * st, mask=ok, other=0).to(tl.int64)
        valid = ok & (t != ignore_index)
        x = tl.load(x_ptr + i * sx0 + t * sx1, mask=valid, other=0).to(ACC)
        w = tl.full([BLOCK], 1.0, ACC)
        if HAS_W:
            w = tl.load(w_ptr + t, mask=valid, other=0).to(ACC)
        loss = tl.where(valid, -x * w, 0.0)
        tl.store(out_ptr + i, loss.to(out_ptr.dtype.element_ty), mask=ok)
        if tl.program_id(0) == 0:  # eager's total_weight is 0 without a reduction
            tl.store(tw_ptr, tl.zeros([], tw_ptr.dtype.element_ty))
    else:
        loss_acc = tl.zeros([BLOCK], ACC)
        w_acc = tl.zeros([BLOCK], ACC)
        for start in range(0, N, BLOCK):
            i = start + tl.arange(0, BLOCK).to(tl.int64)
            ok = i < N
            t = tl.load(t_ptr + i * st, mask=ok, other=0).to(tl.int64)
            valid = ok & (t != ignore_index)
            x = tl.load(x_ptr + i * sx0 + t * sx1, mask=valid, other=0).to(ACC)
            w = tl.where(valid, 1.0, 0.0).to(ACC)
            if HAS_W:
                w = tl.load(w_ptr + t, mask=valid, other=0).to(ACC)
            loss_acc += tl.where(valid, -x * w, 0.0)
            w_acc += w
        total = tl.sum(loss_acc, axis=0)
        tw = tl.sum(w_acc, axis=0)
        if REDUCTION == 1:
            total = total / tw
        tl.store(out_ptr, total.to(out_ptr.dtype.element_ty))
        tl.store(tw_ptr, tw.to(tw_ptr.dtype.element_ty))


@triton.jit
def _nll_row_grad(go_ptr, t_ptr, w_ptr, tw_ptr, rows, row_ok, C, sgo, st, ignore_index,
                  HAS_W: tl.constexpr, REDUCTION: tl.constexpr, ACC: tl.constexpr):
    """(value at the target column, target, whether the row has one) for rows (scalar or block).

    A target outside [0, C) has no column: its row stays zero (and the flat walk never writes
    into a neighbouring row)."""
    t = tl.load(t_ptr + rows * st, mask=row_ok, other=0).to(tl.int64)
    valid = row_ok & (t != ignore_index) & (t >= 0) & (t < C)
    if REDUCTION == 0:
        g = tl.load(go_ptr + rows * sgo, mask=row_ok, other=0).to(ACC)
    else:
        g = tl.load(go_ptr).to(ACC)
        if REDUCTION == 1:
            g = g / tl.load(tw_ptr).to(ACC)
    g = -g
    if HAS_W:
        g = g * tl.load(w_ptr + t, mask=valid, other=0).to(ACC)
    return tl.where(valid, g, 0.0), t, valid


@triton.jit
def _nll_backward_kernel(go_ptr, t_ptr, w_ptr, tw_ptr, out_ptr, NUMEL, N, C, sgo, st,
                         ignore_index, HAS_W: tl.constexpr, REDUCTION: tl.constexpr,
                         ACC: tl.constexpr, SPAN: tl.constexpr, BLOCK: tl.constexpr):
    """grad_input[i, c] = (c == target[i]) ? -w[t] * grad : 0, written for every element.

    The output is walked flat, BLOCK contiguous elements per program, so stores are 16-byte
    vectors even when C is odd (50257: row tiles could not vectorize); only the last program
    masks. SPAN > 0: a block touches at most SPAN rows (C >= about BLOCK / 3), found from the
    block's first row with one scalar division; each row's target element is matched by its
    int32 position in the block, so the per-element work is a compare and a select per row.
    SPAN == 0 (short rows, small outputs): the row of every element, by integer division.
    """
    start = tl.program_id(0).to(tl.int64) * BLOCK
    local = tl.arange(0, BLOCK)
    if SPAN > 0:
        first = start // C
        v = tl.zeros([BLOCK], ACC)
        for k in tl.static_range(SPAN):
            row = first + k
            g, t, valid = _nll_row_grad(go_ptr, t_ptr, w_ptr, tw_ptr, row, row < N, C, sgo, st,
                                        ignore_index, HAS_W, REDUCTION, ACC)
            hit = row * C + t - start
            hit = tl.where(valid & (hit >= 0) & (hit < BLOCK), hit, -1).to(tl.int32)
            v = tl.where(local == hit, g, v)
    else:
        offs = start + local
        rows = offs // C
        g, t, valid = _nll_row_grad(go_ptr, t_ptr, w_ptr, tw_ptr, rows, offs < NUMEL, C, sgo,
                                    st, ignore_index, HAS_W, REDUCTION, ACC)
        v = tl.where((offs - rows * C == t) & valid, g, 0.0)
    ptrs = out_ptr + start + local
    v = v.to(out_ptr.dtype.element_ty)
    if start + BLOCK <= NUMEL:
        tl.store(ptrs, v)
    else:
        tl.store(ptrs, v, mask=local < NUMEL - start)


# nll_loss_backward's flat walk: elements per program, warps, and the most rows a block may
# touch for the per-row matching (more: per-element division).
_NLL_BWD_BLOCK = 1024 if _INTERPRET or _CONSERVATIVE else 4096
_NLL_BWD_WARPS = 4
_NLL_BWD_MAX_SPAN = 4
_NLL_BWD_MIN_PROGRAMS = 512


_REDUCTIONS = {0: "none", 1: "mean", 2: "sum"}


def _check(self, target, weight, reduction):
    if self.dim() not in (1, 2):
        raise ValueError(f"nll_loss: expected input of 1 or 2 dims, got {self.dim()}")
    if target.dim() > 1 or (self.dim() == 2 and target.numel() != self.shape[0]):
        raise ValueError("nll_loss: target must be [N] for an [N, C] input (or [] for [C])")
    C = self.shape[-1]
    if weight is not None and weight.numel() != C:
        raise RuntimeError(f"weight tensor should be defined either for all {C} classes or no classes but got weight tensor of shape: {list(weight.shape)}")
    if reduction not in _REDUCTIONS:
        raise ValueError(f"{reduction} is not a valid value for reduction")


def _acc(dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


def _nll_loss_forward(self, target, weight, reduction, ignore_index):
    _check(self, target, weight, reduction)
    N = self.shape[0] if self.dim() == 2 else 1
    sx0 = self.stride(0) if self.dim() == 2 else 0
    sx1 = self.stride(-1)
    st = target.stride(0) if target.dim() == 1 else 0
    w = weight.contiguous() if weight is not None else self
    # written by the kernel (no separate zero-fill launch)
    tw = torch.empty((), dtype=self.dtype, device=self.device)
    if reduction == 0:
        out = torch.empty((N,) if self.dim() == 2 else (), dtype=self.dtype, device=self.device)
        if N == 0:
            return out, tw.zero_()
        block, warps = _block1(N)
        _nll_forward_kernel[(_cdiv(N, block),)](
            self, target, w, out, tw, N, sx0, sx1, st, ignore_index, HAS_W=weight is not None,
            REDUCTION=0, ACC=_acc(self.dtype), BLOCK=block, num_warps=warps)
        return out, tw
    out = torch.empty((), dtype=self.dtype, device=self.device)
    block = max(32, min(_pow2(N), 1024))
    _nll_forward_kernel[(1,)](
        self, target, w, out, tw, N, sx0, sx1, st, ignore_index, HAS_W=weight is not None,
        REDUCTION=reduction, ACC=_acc(self.dtype), BLOCK=block, num_warps=4)
    return out, tw


def _nll_loss_backward(grad_output, self, target, weight, reduction, ignore_index, total_weight):
    _check(self, target, weight, reduction)
    N = self.shape[0] if self.dim() == 2 else 1
    C = self.shape[-1]
    out = torch.empty(self.shape, dtype=self.dtype, device=self.device)
    if out.numel() == 0:
        return out
    st = target.stride(0) if target.dim() == 1 else 0
    sgo = grad_output.stride(0) if grad_output.dim() == 1 else 0
    w = weight.contiguous() if weight is not None else self
    numel = out.numel()
    # small outputs: smaller blocks, so that a few hundred programs share the work (one 4096-
    # element block for [32, 1000] took 7.1 us on the H200, the earlier row kernel 3.8)
    block = _NLL_BWD_BLOCK if _INTERPRET else max(
        256, min(_NLL_BWD_BLOCK, _pow2(_cdiv(numel, _NLL_BWD_MIN_PROGRAMS))))
    span = (block - 1) // C + 2
    _nll_backward_kernel[(_cdiv(numel, block),)](
        grad_output, target, w, total_weight, out, numel, N, C, sgo, st, ignore_index,
        HAS_W=weight is not None, REDUCTION=reduction, ACC=_acc(self.dtype),
        SPAN=span if span <= _NLL_BWD_MAX_SPAN else 0, BLOCK=block,
        num_warps=_NLL_BWD_WARPS)
    return out
