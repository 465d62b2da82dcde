"""Grouped matrix product kernel (mixture-of-experts GEMM): the text the builtin writer copies into
the files it emits.
"""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _cdiv


# ---- emitted: main ----
import os

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CONSERVATIVE = False  # variant >= 1: 64x64 tiles


# inline: _cdiv


@triton.jit
def _grouped_kernel(a_ptr, b_ptr, c_ptr, offs_ptr, M, N, K,
                    s_ag, s_am, s_ak, s_bg, s_bk, s_bn, s_cg, s_cm, s_cn,
                    MODE: tl.constexpr, WIDEN: tl.constexpr, PREC: tl.constexpr,
                    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr):
    """MODE 0: 2d x 3d (groups of rows), 1: 3d x 2d (groups of columns), 2: 2d x 2d (groups of
    K), 3: 3d x 3d (batched). Tile (pid_m, pid_n) of group g; s_ag / s_bg / s_cg step a group."""
    pid = tl.program_id(0)
    g = tl.program_id(1)
    num_n = tl.cdiv(N, BLOCK_N)
    pid_m = pid // num_n
    pid_n = pid % num_n
    if MODE != 3:
        hi = tl.load(offs_ptr + g)
        lo = tl.load(offs_ptr + g - 1, mask=g > 0, other=0)
    m_lo = 0
    m_hi = M
    n_lo = 0
    n_hi = N
    k_lo = 0
    k_hi = K
    if MODE == 0:
        m_lo = lo
        m_hi = tl.minimum(hi, M)
    elif MODE == 1:
        n_lo = lo
        n_hi = tl.minimum(hi, N)
    elif MODE == 2:
        k_lo = lo
        k_hi = tl.minimum(hi, K)
    rm = pid_m * BLOCK_M + tl.arange(0, BLOCK_M)
    rn = pid_n * BLOCK_N + tl.arange(0, BLOCK_N)
    live = (pid_m * BLOCK_M < m_hi) & (pid_m * BLOCK_M + BLOCK_M > m_lo)
    live = live & (pid_n * BLOCK_N < n_hi) & (pid_n * BLOCK_N + BLOCK_N > n_lo)
    if live:
        row_ok = (rm >= m_lo) & (rm < m_hi)
        col_ok = (rn >= n_lo) & (rn < n_hi)
        # rows and columns stay plain aranges, masked, not clamped with tl.where: a clamped index
        # loses the contiguity Triton needs for vector loads (the N-contiguous mat2 and
        # M-contiguous self cases ran 5-15x slower than eager on the H200 that way)
        a_base = a_ptr + g.to(tl.int64) * s_ag + rm[:, None].to(tl.int64) * s_am
        b_base = b_ptr + g.to(tl.int64) * s_bg + rn[None, :].to(tl.int64) * s_bn
        acc = tl.zeros([BLOCK_M, BLOCK_N], dtype=tl.float32)
        for k0 in range(k_lo, k_hi, BLOCK_K):
            kk = k0 + tl.arange(0, BLOCK_K)
            k_ok = kk < k_hi
            a = tl.load(a_base + kk[None, :].to(tl.int64) * s_ak, mask=row_ok[:, None] & k_ok[None, :],
                        other=0.0)
            b = tl.load(b_base + kk[:, None].to(tl.int64) * s_bk, mask=k_ok[:, None] & col_ok[None, :],
                        other=0.0)
            if WIDEN:
                a = a.to(tl.float32)
                b = b.to(tl.float32)
            acc = tl.dot(a, b, acc, input_precision=PREC, out_dtype=acc.dtype)
        c_ptrs = c_ptr + g.to(tl.int64) * s_cg + rm[:, None].to(tl.int64) * s_cm + rn[None, :].to(tl.int64) * s_cn
        mask = row_ok[:, None] & col_ok[None, :]
        tl.store(c_ptrs, acc.to(c_ptr.dtype.element_ty), mask=mask)


def _tiles(M, N, K, dtype):
    """(BLOCK_M, BLOCK_N, BLOCK_K, num_warps, num_stages) for the per-group GEMM."""
    if _INTERPRET:
        return 32, 32, 32, 4, 1
    if _CONSERVATIVE or dtype == torch.float32:
        return 64, 64, 32, 4, 3
    return 128, 128, 64, 8, 3


_PLANS = {}  # call geometry -> launch plan; bounded


def _plan(a, b, offs):
    if a.dtype not in (torch.float16, torch.bfloat16, torch.float32):
        raise RuntimeError(f"_grouped_mm: unsupported dtype {a.dtype}")
    if b.dtype != a.dtype:
        raise RuntimeError("_grouped_mm: both matrices must have the same dtype")
    if a.dim() == 2 and b.dim() == 3:
        mode, (M, K), (G, K2, N) = 0, a.shape, b.shape
        sa = (0, a.stride(0), a.stride(1))
        sb = (b.stride(0), b.stride(1), b.stride(2))
        out_shape = (M, N)
    elif a.dim() == 3 and b.dim() == 2:
        mode, (G, M, K), (K2, N) = 1, a.shape, b.shape
        sa = (a.stride(0), a.stride(1), a.stride(2))
        sb = (0, b.stride(0), b.stride(1))
        out_shape = (M, N)
    elif a.dim() == 2 and b.dim() == 2:
        mode, (M, K), (K2, N) = 2, a.shape, b.shape
        G = None if offs is None else offs.numel()
        sa = (0, a.stride(0), a.stride(1))
        sb = (0, b.stride(0), b.stride(1))
        out_shape = (G, M, N)
    elif a.dim() == 3 and b.dim() == 3:
        mode, (G, M, K), (G2, K2, N) = 3, a.shape, b.shape
        if G2 != G:
            raise RuntimeError("_grouped_mm: the two batches must have the same size")
        sa = (a.stride(0), a.stride(1), a.stride(2))
        sb = (b.stride(0), b.stride(1), b.stride(2))
        out_shape = (G, M, N)
    else:
        raise RuntimeError("_grouped_mm: self and mat2 must be 2-D or 3-D")
    if K2 != K:
        raise RuntimeError(f"_grouped_mm: contraction sizes differ ({K} vs {K2})")
    if mode != 3:
        if offs is None:
            raise RuntimeError("_grouped_mm: offs is required unless both matrices are 3-D")
        if offs.dim() != 1 or offs.dtype != torch.int32:
            raise RuntimeError("_grouped_mm: offs must be a 1-D int32 tensor")
        if mode != 2 and offs.numel() != G:
            raise RuntimeError(f"_grouped_mm: offs has {offs.numel()} groups, the 3-D matrix {G}")
    elif offs is not None:
        raise RuntimeError("_grouped_mm: offs must be None when both matrices are 3-D")
    bm, bn, bk, warps, stages = _tiles(M, N, K, a.dtype)
    grid = (_cdiv(M, bm) * _cdiv(N, bn), G)
    prec = "ieee"  # fp32 operands as eager without TF32; ignored for fp16/bf16
    return mode, out_shape, sa, sb, M, N, K, grid, prec, (bm, bn, bk, warps, stages)


def _grouped_mm(a, b, offs, bias, out_dtype):
    if bias is not None:
        raise NotImplementedError("_grouped_mm: a bias is not supported by this kernel")
    if out_dtype is not None and out_dtype != a.dtype:
        raise RuntimeError("Grouped gemm output dtype must match `mat_a` dtype")
    key = (a.shape, a.stride(), b.shape, b.stride(), a.dtype, a.device,
           None if offs is None else (offs.shape, offs.dtype))
    plan = _PLANS.get(key)
    if plan is None:
        plan = _plan(a, b, offs)
        if len(_PLANS) > 256:
            _PLANS.clear()
        _PLANS[key] = plan
    mode, out_shape, sa, sb, M, N, K, grid, prec, (bm, bn, bk, warps, stages) = plan
    out = torch.empty(out_shape, dtype=a.dtype, device=a.device)
    if out.numel() == 0 or grid[1] == 0:
        return out
    sc = (out.stride(0), out.stride(1), out.stride(2)) if out.dim() == 3 else (0, out.stride(0), out.stride(1))
    _grouped_kernel[grid](
        a, b, out, offs if offs is not None else out, M, N, K, *sa, *sb, *sc,
        MODE=mode, WIDEN=_INTERPRET and a.dtype != torch.float32, PREC=prec,
        BLOCK_M=bm, BLOCK_N=bn, BLOCK_K=bk, num_warps=warps, num_stages=stages)
    return out


def _op(self, mat2, offs=None, bias=None, out_dtype=None):
    return _grouped_mm(self, mat2, offs, bias, out_dtype)
