"""embedding_dense_backward: the fp64 kernel and the host code that picks a path (atomic, chunked,
sorted) and launches it; copied after the other embedding sections.
"""

import torch
import triton
import triton.language as tl

from agent.providers.builtin.kernels.embedding_atomic import (
    _embed_amax_kernel,
    _embed_bwd_kernel,
    _embed_count_kernel,
    _embed_out_kernel,
    _embed_out_rows_kernel,
    _embed_slot_kernel,
    _embed_terms,
)
from agent.providers.builtin.kernels.embedding_chunked import (
    _embed_fold_kernel,
    _embed_link_kernel,
    _embed_term_kernel,
)
from agent.providers.builtin.kernels.embedding_sorted import (
    _embed_fix_kernel,
    _embed_rank_kernel,
    _embed_scan_kernel,
    _embed_seg_kernel,
    _embed_sort_count_kernel,
)
from agent.providers.builtin.kernels.runtime import (
    _OP,
    _cdiv,
    _pdl_launch,
    _pdl_ok,
    _pow2,
)
from agent.providers.builtin.kernels.tiles import (
    _INTERPRET,
    _block1,
    _tile2,
)

# ---- emitted: embedding_backward ----



@triton.jit
def _embed_bwd_f64_kernel(g_ptr, idx_ptr, acc_ptr, cnt_ptr, R, D, NCB, padding_idx,
                          I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD,
                          SCALE: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """fp64: acc[index[r], :] += grad[r, :] by fp64 atomic adds (62-bit fixed point would be
    coarser than fp64 sums)."""
    idx, cols, m, g = _embed_terms(g_ptr, idx_ptr, cnt_ptr, R, D, NCB, padding_idx, I1, I2, I3,
                                   SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, SCALE, BLOCK_R,
                                   BLOCK_C)
    tl.atomic_add(acc_ptr + idx[:, None] * D + cols[None, :], g, mask=m)


# CUDA eager sums up to this many indices (without scale_grad_by_freq) chunk by chunk, rounding
# to the output dtype per chunk; `_embed_link_kernel`, `_embed_term_kernel` and
# `_embed_fold_kernel` give the same result with every chunk in parallel
_EAGER_FEATURE_MAX = 3072
# past that and up to this many indices (no frequency scaling, not f64), the sorted path:
# a stable counting sort of the rows by weight row, then per-weight-row sums over tiles of the
# sorted rows (fp32, rounded once, as eager's sorted path sums). Its cost does not depend on how the
# indices are distributed; the chains it replaced walked a weight row's chunks one dependent
# load after another (H200, Zipf-distributed indices: 7x slower than eager).
# The rank scan is quadratic in the indices; past this, the int64 atomics
_EMBED_SORT_MAX = 16384
# `_embed_sort_count_kernel`: indices per program; `_embed_scan_kernel`: counts per step, warps;
# `_embed_rank_kernel`: rows per program, indices per step; `_embed_seg_kernel`: sorted rows
# per tile (>= 16, a tl.dot), columns per program
_EMBED_COUNT_BLOCK = 256
_EMBED_SCAN_BLOCK, _EMBED_SCAN_STEP, _EMBED_SCAN_WARPS = 2048, 8192, 8
_EMBED_RANK_ROWS = 16
_EMBED_RANK_TILE = 64
_EMBED_SEG_ROWS = 32
_EMBED_SEG_COLS = 128
_EMBED_SEG_WARPS = 4
# > 0: registers per thread of `_embed_seg_kernel` capped (Triton's maxnreg): uncapped it takes
# 193, two programs of 4 warps per SM. H200, whole op, none/64/96/128/160: [4,2048,2048] bf16
# 97.2/95.5/85.0/85.7/88.7 us, [8,1024,768] bf16 61.2/63.6/57.9/57.5/58.2, [8,512,768] f32
# 54.4/58.6/55.4/54.1/52.8 (at 128: 7 spill stores in the sm_90 compile)
_EMBED_SEG_MAXNREG = 128
# `_embed_seg_kernel` looks for NaN and infinite grads in its tile's sums (one add per element)
# rather than in the grads (a conversion and two compares per element): it is ALU-bound (Nsight
# Compute). H200, whole op, grads/sums: [4,2048,2048] bf16 85.0/83.1 us, [8,1024,768] bf16
# 56.8/55.9, f32 cases within 0.4 us
_EMBED_SEG_CHECK_SUMS = True
# `_embed_seg_kernel`: column blocks per program (done in turn; 1: a program per block), and
# how many of them are in flight at once (Triton pipelining). H200, whole op, steps/stages 1/1,
# 2/3, 4/3, 16/3: [4,2048,2048] bf16 82.8/78.7/78.2/82.2 us, [8,1024,768] bf16 55.7/55.2/56.2/
# 54.3; Zipf 1.1 indices, 1/2 and 4/2: 86.9 and 83.0
_EMBED_SEG_COL_STEPS = 2
_EMBED_SEG_STAGES = 3
# `_embed_link_kernel`: rows per program (a divisor of 32), indices per step, warps (H200,
# [4,2048] indices into 32000 rows, whole op: 8-32 rows x 64-256 indices 156-171 us, 16 x 64 best)
_EMBED_LINK_ROWS = 16
_EMBED_LINK_TILE = 64
_EMBED_LINK_WARPS = 4
# output elements zeroed per extra program of the link and rank kernels (`_embed_zero_block`),
# and at most per program of `_embed_zero_rows` (whole rows: D rounded up to a power of two)
_EMBED_ZERO_TILE = 4096
# the sorted path's rank kernel zeroes, in extra programs, 1: only the weight rows no index
# names (the others are written by the segment and fix kernels), 0: the whole output. H200,
# whole op, 0/1: [4,2048,2048] bf16 into 32000 rows 114.1/98.5 us, [8,1024,768] bf16 into 50257
# 76.7/61.4. (Zeroing those rows in the segment kernel's launch instead, interleaved with its
# tiles: 111.7 / 87.2 us; its programs are sized for the tiles' matrix products.)
_EMBED_ZERO_ROWS = 1
# the kernels after the first of the few-index path (term, fold) and of the sorted path (scan,
# rank, segment, fix) as programmatic dependent launches (sm_90+), each launched while the one
# before it finishes, every program of a many-wave grid letting it start once its own work is
# done. H200, whole op, off / on: [4,2048,2048] bf16 into 32000 rows 79.0 /
# 74.0 us, [8,1024,768] bf16 55.4 / 49.0, [8,512,768] f32 53.6 / 48.6; Zipf 1.1 83.3 / 78.6
_EMBED_PDL = True
# dependent kernels whose programs may touch memory before `_pdl_enter(PDL_WAIT, ...)`: each
# reads, before its wait, only what a launch before the one ahead of it wrote (the counts, the
# scan's total, the ranks: see their docstrings), and waits before reading anything else
# (tests/builtin/test_builtin_pdl.py holds every other kernel to waiting first)
_PDL_WAITS_LATER = ("_embed_rank_kernel", "_embed_seg_kernel", "_embed_fix_kernel")
# the sorted path copies each weight row named once (most rows for uniform indices) from its
# grad row, in programs of the rank kernel's launch that read the grad in index order, and
# sorts and sums only the rows of weight rows named twice or more (needs _EMBED_ZERO_ROWS).
# Copies by the zero programs, in weight-row order (a gather of each lone row),
# were slower than the sort: [4,2048,2048] bf16 86-90 us against 74. H200,
# whole op, off / on: [4,2048,2048] bf16 74.0 / 63.7 us, [8,1024,768] bf16 49.6 / 46.7,
# [8,512,768] f32 48.7 / 47.7, Zipf 1.1 78.0 / 77.2
_EMBED_SINGLES = True
# grad elements per program and step of `_embed_copy_singles` (whole rows up to this many).
# H200, 512/1024/2048/4096/8192: [4,2048,2048] bf16 66.3/65.0/63.7/65.3/86.8 us,
# [8,1024,768] bf16 51.4/51.2/46.7/56.6/72.5; since the fill streams beside the scan,
# 1024/2048: [4,2048,2048] bf16 59.5-59.9/62.1-62.4, [8,1024,768] bf16 42.9-43.1/45.8-46.0,
# [8,512,768] f32 44.5-44.6/45.1-45.3
_EMBED_SINGLES_TILE = 1024


def _embed_zero_tile():
    return 256 if _INTERPRET else _EMBED_ZERO_TILE


def _flat_stride(shape, strides):
    """s such that the element at row-major position r of a tensor of `shape` with `strides`
    sits at r * s, or None when no such s exists."""
    s, span = None, 1
    for size, stride in zip(reversed(list(shape)), reversed(list(strides))):
        if size == 1:
            continue
        if s is None:
            s = stride
        elif stride != s * span:
            return None
        span *= size
    return 0 if s is None else s


def _embed_sorted(grad_output, indices, num_weights, padding_idx, geometry, pdl):
    """The sorted path (`_EMBED_SORT_MAX`): count, scan, rank and place, segmented sums, and
    the sums of weight rows whose rows span tiles (pdl: `_EMBED_PDL`'s dependent launches)."""
    R, D = indices.numel(), grad_output.shape[-1]
    dtype, device = grad_output.dtype, grad_output.device
    out = torch.empty((num_weights, D), dtype=dtype, device=device)  # see _EMBED_ZERO_ROWS
    singles = bool(_EMBED_SINGLES and _EMBED_ZERO_ROWS)
    cnt = torch.zeros((num_weights + 1,), dtype=torch.int32, device=device)
    start = torch.empty((num_weights + 2,), dtype=torch.int32, device=device)
    order = torch.empty((2 * R,), dtype=torch.int32, device=device)
    block = max(32, min(_pow2(R), _EMBED_COUNT_BLOCK))
    _embed_sort_count_kernel[(_cdiv(R, block),)](indices, cnt, R, num_weights, padding_idx,
                                                 *geometry[:7], BLOCK=block, PDL_NEXT=pdl,
                                                 num_warps=4)
    scan = max(32, min(_pow2(num_weights + 1), 64 if _INTERPRET else _EMBED_SCAN_BLOCK))
    _embed_scan_kernel[(_cdiv(num_weights + 1, scan),)](cnt, start, num_weights + 1, BLOCK=scan,
                                                        STEP=4 * scan if _INTERPRET else
                                                        _EMBED_SCAN_STEP, SINGLES=singles,
                                                        PDL_NEXT=pdl,
                                                        num_warps=_EMBED_SCAN_WARPS,
                                                        **_pdl_launch(pdl))
    rows = _EMBED_RANK_ROWS
    ranks, zb = _cdiv(R, rows), _embed_zero_tile()
    zc = min(_pow2(D), zb // 4)
    zr = zb // zc  # rows per zero program of `_embed_zero_rows`
    nz = _cdiv(num_weights, zr) if _EMBED_ZERO_ROWS else _cdiv(out.numel(), zb)
    ct = 256 if _INTERPRET else _EMBED_SINGLES_TILE
    cc = min(_pow2(D), ct)
    cr = max(1, ct // cc)  # index positions per program of `_embed_copy_singles`
    copies = _cdiv(R, cr) if singles else 0
    zr = zr if _EMBED_ZERO_ROWS else 0  # (0: `_embed_fill` zeroes flat blocks)
    _embed_rank_kernel[(ranks + copies + nz,)](
        indices, start, order, R, num_weights, padding_idx, *geometry[:7], out, cnt,
        grad_output, *geometry[7:], ranks, copies, out.numel(), D, ROWS=rows,
        BLOCK_Q=_EMBED_RANK_TILE, ZB=zb, ZR=zr, ZC=zc, CR=cr, CC=cc,
        SINGLES=singles, PDL_NEXT=pdl, num_warps=4,
        **_pdl_launch(pdl))
    tile = max(16, _EMBED_SEG_ROWS)
    bc = max(16, min(_pow2(D), _EMBED_SEG_COLS))
    nt, ncb = _cdiv(R, tile), _cdiv(D, bc)
    steps = max(1, min(_EMBED_SEG_COL_STEPS, ncb))
    ncp = _cdiv(ncb, steps)
    part = torch.empty((2, nt, D), dtype=torch.float32, device=device)
    _embed_seg_kernel[(nt * ncp,)](
        grad_output, order, start, out, part, R, D, num_weights, *geometry[:3], *geometry[7:],
        ncp, T=tile, BLOCK_C=bc, TC=not _INTERPRET, CHECK_SUMS=bool(_EMBED_SEG_CHECK_SUMS),
        COL_STEPS=steps, STAGES=_EMBED_SEG_STAGES, SINGLES=singles, num_warps=_EMBED_SEG_WARPS,
        PDL_NEXT=pdl, **_pdl_launch(pdl),
        **({"maxnreg": _EMBED_SEG_MAXNREG} if _EMBED_SEG_MAXNREG else {}))
    _embed_fix_kernel[(nt * ncb,)](order, start, out, part, R, D, num_weights, nt, T=tile,
                                   BLOCK_C=bc, SINGLES=singles, num_warps=4, **_pdl_launch(pdl))
    return out


def _embedding_dense_backward(grad_output, indices, num_weights, padding_idx, scale_grad_by_freq):
    if indices.dtype not in (torch.int64, torch.int32):
        raise RuntimeError(f"embedding_dense_backward: expected indices of type int64 or int32, got {indices.dtype}")
    nd = indices.dim()
    if nd > 4:
        raise NotImplementedError(f"{_OP}: indices with more than 4 dims are not supported by this kernel")
    if grad_output.dim() != nd + 1:
        raise RuntimeError("embedding_dense_backward: grad_output must have one more dim than indices")
    D = grad_output.shape[-1]
    R = indices.numel()
    dtype, device = grad_output.dtype, grad_output.device
    if R == 0 or D == 0 or num_weights == 0:
        return torch.zeros((num_weights, D), dtype=dtype, device=device)
    pad = 4 - nd
    flat_i = _flat_stride(indices.shape, indices.stride())
    flat_g = _flat_stride(indices.shape, grad_output.stride()[:-1])
    if flat_i is not None and flat_g is not None:
        # row r at r * stride: sizes of 1 are specialized by Triton, so `_embed_rows` divides
        # by constants only (64-bit divisions by runtime sizes cost ~30 us per 1024-index scan)
        geometry = [1, 1, 1, flat_i, 0, 0, 0, flat_g, 0, 0, 0, grad_output.stride(-1)]
    else:
        geometry = ([1] * pad + list(indices.shape))[1:] + [0] * pad + list(indices.stride())             + [0] * pad + list(grad_output.stride()[:-1]) + [grad_output.stride(-1)]
    cnt = indices  # read only when scaling by frequency
    if scale_grad_by_freq:
        cnt = torch.zeros((num_weights,), dtype=torch.int32, device=device)
        block, warps = _block1(R)
        _embed_count_kernel[(_cdiv(R, block),)](indices, cnt, R, *geometry[:7],
                                                BLOCK=block, num_warps=warps)
    plain = not scale_grad_by_freq and dtype != torch.float64
    pdl = bool(_EMBED_PDL and _pdl_ok(device))
    if plain and R <= _EAGER_FEATURE_MAX:
        out = torch.empty((num_weights, D), dtype=dtype, device=device)  # zeroed by the links
        link = torch.empty((4 * R,), dtype=torch.int64, device=device)
        term = torch.empty((R, D), dtype=dtype, device=device)  # rows of leaders with peers
        rows = _EMBED_LINK_ROWS
        links, zb = _cdiv(R, rows), _embed_zero_tile()
        _embed_link_kernel[(links + _cdiv(out.numel(), zb),)](
            indices, link, R, padding_idx, *geometry[:7], out, links, out.numel(), CHUNK=32,
            ROWS=rows, BLOCK_Q=_EMBED_LINK_TILE, ZB=zb, PDL_NEXT=pdl,
            num_warps=_EMBED_LINK_WARPS)
        bc = max(16, min(_pow2(D), 128))
        grid = (_cdiv(R, 16), _cdiv(D, bc))
        _embed_term_kernel[grid](grad_output, indices, link, term, R, D, *geometry, CHUNK=32,
                                 BLOCK_R=16, BLOCK_C=bc, PDL_NEXT=pdl, num_warps=4,
                                 **_pdl_launch(pdl))
        _embed_fold_kernel[grid](grad_output, link, term, out, R, D, *geometry, BLOCK_R=16,
                                 BLOCK_C=bc, num_warps=4, **_pdl_launch(pdl))
        return out
    if plain and R <= _EMBED_SORT_MAX:
        return _embed_sorted(grad_output, indices, num_weights, padding_idx, geometry, pdl)
    block_r, block_c, warps = _tile2(R, D)
    ncb = _cdiv(D, block_c)
    grid = (_cdiv(R, block_r) * ncb,)
    if dtype == torch.float64:
        out = torch.zeros((num_weights, D), dtype=dtype, device=device)
        _embed_bwd_f64_kernel[grid](grad_output, indices, out, cnt, R, D, ncb, padding_idx,
                                    *geometry, SCALE=bool(scale_grad_by_freq), BLOCK_R=block_r,
                                    BLOCK_C=block_c, num_warps=warps)
        return out
    # int64 sums, and one more word whose low half holds max |grad| as fp32; with fewer
    # indices than weight rows, a row per index position (weight row w in row slot[w])
    use_slot = R < num_weights
    n = (R if use_slot else num_weights) * D
    acc = torch.zeros((n + 1,), dtype=torch.int64, device=device)
    accf = acc.view(torch.float32)
    amax = 2 * n
    slot = acc
    if use_slot:
        slot = torch.full((num_weights,), R, dtype=torch.int32, device=device)
        block, warps1 = _block1(R)
        _embed_slot_kernel[(_cdiv(R, block),)](indices, slot, R, padding_idx, *geometry[:7],
                                               BLOCK=block, num_warps=warps1)
    _embed_amax_kernel[grid](grad_output, indices, accf, amax, R, D, ncb, padding_idx, *geometry,
                             BLOCK_R=block_r, BLOCK_C=block_c, num_warps=warps)
    _embed_bwd_kernel[grid](grad_output, indices, acc, accf, cnt, slot, amax, R, D, ncb,
                            padding_idx, *geometry, SCALE=bool(scale_grad_by_freq),
                            SLOT=use_slot, BLOCK_R=block_r, BLOCK_C=block_c, num_warps=warps)
    out = torch.empty((num_weights, D), dtype=dtype, device=device)
    if use_slot:
        block_c = max(16, min(_pow2(D), 256))
        block_w = max(1, 2048 // block_c)
        _embed_out_rows_kernel[(_cdiv(num_weights, block_w), _cdiv(D, block_c))](
            acc, accf, slot, out, amax, R, num_weights, D, BLOCK_W=block_w, BLOCK_C=block_c,
            num_warps=4)
        return out
    block, warps = _block1(n)
    _embed_out_kernel[(_cdiv(n, block),)](acc, accf, out, amax, R, n, BLOCK=block,
                                          num_warps=warps)
    return out
