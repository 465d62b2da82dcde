"""Batch norm per-channel partial sums: split programs writing shifted sums, and for f16/bf16 NCHW
backward the emulation of CUDA eager's block reduction (`_bn_eager_partials`)."""

import triton  # noqa: I001  (one line per import, lint-only)
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _pdl_enter

# ---- emitted: partials ----


@triton.jit
def _bn_partials(x_ptr, g_ptr, mean_ptr, part_ptr, N, C, HW, NB_PER, J_PER, SJ, S,
                 BACKWARD: tl.constexpr, ACC: tl.constexpr,
                 BLOCK_N: tl.constexpr, BLOCK_J: tl.constexpr, PDL_NEXT: tl.constexpr):
    """Per (channel, slice): forward -> sums of x-x0 and (x-x0)^2 (x0 = the channel's first
    element); backward -> sums of g and g*(x-mean). PDL_NEXT: the channel launch may start now."""
    _pdl_enter(False, PDL_NEXT)
    c = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    n_start = (s // SJ).to(tl.int64) * NB_PER
    n_end = tl.minimum(n_start + NB_PER, N)
    j_start = (s % SJ).to(tl.int64) * J_PER
    j_end = tl.minimum(j_start + J_PER, HW)
    chan = c * HW
    if BACKWARD:
        shift = tl.load(mean_ptr + c).to(ACC)
    else:
        shift = tl.load(x_ptr + chan).to(ACC)
    a1 = tl.zeros([BLOCK_N, BLOCK_J], ACC)
    a2 = tl.zeros([BLOCK_N, BLOCK_J], ACC)
    for n0 in range(n_start, n_end, BLOCK_N):
        n = n0 + tl.arange(0, BLOCK_N)
        row = n[:, None] * C * HW + chan
        for j0 in range(j_start, j_end, BLOCK_J):
            j = j0 + tl.arange(0, BLOCK_J)
            m = (n[:, None] < n_end) & (j[None, :] < j_end)
            x = tl.load(x_ptr + row + j[None, :], mask=m, other=0).to(ACC)
            d = tl.where(m, x - shift, 0.0)
            if BACKWARD:
                g = tl.load(g_ptr + row + j[None, :], mask=m, other=0).to(ACC)
                a1 += g
                a2 += g * d
            else:
                a1 += d
                a2 += d * d
    slot = (c * S + s) * 2
    tl.store(part_ptr + slot, tl.sum(tl.sum(a1, axis=1), axis=0))
    tl.store(part_ptr + slot + 1, tl.sum(tl.sum(a2, axis=1), axis=0))


@triton.jit
def _bn_halve(v, DT: tl.constexpr, W: tl.constexpr, L: tl.constexpr):
    """One shuffle-down step of a warp reduction over v [W warps, L lanes]: lane i < L/2 gets
    v[i] + v[i + L/2], the received value passed through DT first (see _bn_eager_partials)."""
    lo, hi = tl.split(tl.permute(tl.reshape(v, [W, 2, L // 2]), [0, 2, 1]))
    return lo + hi.to(DT).to(tl.float32)


@triton.jit
def _bn_warp_sums(v, DT: tl.constexpr, W: tl.constexpr):
    """[W, 32] -> [W, 1]: each warp's shuffle-down reduction, lane 0's result."""
    v = _bn_halve(_bn_halve(v, DT, W, 32), DT, W, 16)
    v = _bn_halve(_bn_halve(v, DT, W, 8), DT, W, 4)
    return _bn_halve(v, DT, W, 2)


@triton.jit
def _bn_block_sum(a, DT: tl.constexpr, W: tl.constexpr):
    """The block's reduction of per-thread sums a [TY, TX] (thread id tx + ty * TX, W warps):
    each warp's shuffle tree, then warp 0's over the W results (its lanes past W hold zeros,
    and adding them changes nothing)."""
    v = tl.reshape(_bn_warp_sums(tl.reshape(a, [W, 32]), DT, W), [1, W])
    if W >= 16:
        v = _bn_halve(v, DT, 1, 16)
    if W >= 8:
        v = _bn_halve(v, DT, 1, 8)
    if W >= 4:
        v = _bn_halve(v, DT, 1, 4)
    if W >= 2:
        v = _bn_halve(v, DT, 1, 2)
    return tl.sum(tl.sum(v, axis=1), axis=0)


@triton.jit
def _bn_warp_tree(v, DT: tl.constexpr, R: tl.constexpr, L: tl.constexpr):
    """[R, L] -> [R]: each row's L warp results (L a power of two up to 32, zeros past the
    channel's warps) reduced as `_bn_block_sum`'s warp 0 does. (`_bn_block_sum` written with
    it compiles the fused kernel differently for sm_90: 32 of its 64 loads read early, not 0.)"""
    if L >= 32:
        v = _bn_halve(v, DT, R, 32)
    if L >= 16:
        v = _bn_halve(v, DT, R, 16)
    if L >= 8:
        v = _bn_halve(v, DT, R, 8)
    if L >= 4:
        v = _bn_halve(v, DT, R, 4)
    if L >= 2:
        v = _bn_halve(v, DT, R, 2)
    return tl.sum(v, axis=1)


@triton.jit
def _bn_block_tile(b0, x0, c, N, C, HW, TX: tl.constexpr, TY: tl.constexpr):
    """Offsets and mask of channel c's [TY batches from b0, TX positions from x0] tile: what
    eager's TX x TY thread block (or a TX x TY part of it) reads in one step of its loops."""
    b = b0 + tl.arange(0, TY)
    j = x0 + tl.arange(0, TX)
    offs = ((b.to(tl.int64) * C + c) * HW)[:, None] + j[None, :]
    return offs, (b[:, None] < N) & (j[None, :] < HW)


@triton.jit
def _bn_step_tile(s, nx, c, N, C, HW, TX: tl.constexpr, TY: tl.constexpr, ty0, tx0,
                  TXS: tl.constexpr, TYS: tl.constexpr):
    """`_bn_block_tile` of eager's step s (batch outer, nx position steps inner) for the block's
    threads (ty0.., tx0..) of a TXS x TYS part; past the last step, the batch index reaches N
    and masks the whole tile."""
    bi = s // nx
    return _bn_block_tile(bi * TY + ty0, (s - bi * nx) * TX + tx0, c, N, C, HW, TXS, TYS)


@triton.jit
def _bn_eager_partials(x_ptr, g_ptr, mean_ptr, part_ptr, istd_ptr, rv_ptr, w_ptr, dx_ptr, dw_ptr,
                       db_ptr, N, C, HW, inv_count: tl.float64, eps: tl.float64,
                       TX: tl.constexpr, TY: tl.constexpr, FUSED: tl.constexpr,
                       TRAIN: tl.constexpr, HAS_W: tl.constexpr, WANT_DW: tl.constexpr,
                       WANT_DB: tl.constexpr, PDL_NEXT: tl.constexpr, UNROLL: tl.constexpr,
                       SPLIT: tl.constexpr, TXS: tl.constexpr, TYS: tl.constexpr,
                       INCR: tl.constexpr):
    """Per channel, CUDA eager's backward sums of g and g*(x-mean) for NCHW inputs, step by
    step (one program per channel, as eager's one block per plane):
    - thread (tx, ty) of a TX x TY block sums, in fp32, the elements of batches ty, ty+TY, ...
      and positions tx, tx+TX, ... (batch outer, position inner), each term passed through the
      input dtype first (eager builds each pair with `Float2(input_t, input_t)`);
    - the block's reduction then halves each warp's 32 lanes five times, and the warps' results
      the same way in one warp, every value received by a shuffle again passing through the
      input dtype (its `warp_shfl_down` rebuilds the pair with the same constructor).
    For f16/bf16 these roundings move grad_weight and grad_bias by a few units (H200,
    [32,128,28,28] bf16: eager off float64 by 6.1); only the same steps agree with eager. For
    fp32 they are no-ops.
    Not FUSED: the two sums go to part[c]. FUSED (grad_input wanted): the rest of eager's
    kernel too, in the same program: grad_weight, grad_bias, and grad_input from the channel's
    data read again, with eager's formula (one launch instead of three).

    The block's steps (its tile at batch b0, position x0, in eager's order) are walked UNROLL
    at a time, so that a program has UNROLL tiles' loads in flight rather than one (one tile of
    a few KB per step left most of the HBM bandwidth unused).

    SPLIT > 1 (not FUSED): SPLIT programs per channel, each with W / SPLIT of the block's warps
    (its threads TXS x TYS, consecutive in thread order), so that few channels of many elements
    still fill the GPU. Each thread's sums keep eager's order; each program does its warps'
    shuffle trees and leaves their results in part[(c * W + warp) * 2 + {0, 1}], for
    `_bn_channel` (TREE) to do warp 0's tree over them."""
    _pdl_enter(False, PDL_NEXT)
    inv_count = tl.full([], inv_count, tl.float32)  # eager's float math, from double arguments
    eps = tl.full([], eps, tl.float32)
    DT: tl.constexpr = x_ptr.dtype.element_ty
    W: tl.constexpr = TX * TY // 32
    c = tl.program_id(0).to(tl.int64) // SPLIT
    k = tl.program_id(0) % SPLIT
    first = k * (TXS * TYS)  # the program's first thread
    ty0 = first // TX
    tx0 = first - ty0 * TX
    mean = tl.load(mean_ptr + c).to(tl.float32)
    a1 = tl.zeros([TYS, TXS], tl.float32)
    a2 = tl.zeros([TYS, TXS], tl.float32)
    nx = tl.cdiv(HW, TX)
    steps = tl.cdiv(N, TY) * nx
    bi = 0  # INCR: the step's batch block and position block, counted up (no divisions)
    xi = 0
    for s0 in range(0, steps, UNROLL):
        for u in tl.static_range(UNROLL):
            if INCR:
                offs, m = _bn_block_tile(bi * TY + ty0, xi * TX + tx0, c, N, C, HW, TXS, TYS)
                xi += 1
                bi = tl.where(xi == nx, bi + 1, bi)
                xi = tl.where(xi == nx, 0, xi)
            else:
                offs, m = _bn_step_tile(s0 + u, nx, c, N, C, HW, TX, TY, ty0, tx0, TXS, TYS)
            g = tl.load(g_ptr + offs, mask=m, other=0).to(tl.float32)
            x = tl.load(x_ptr + offs, mask=m, other=0).to(tl.float32)
            a1 += g
            a2 += (g * (x - mean)).to(DT).to(tl.float32)
    if SPLIT > 1:
        WS: tl.constexpr = TXS * TYS // 32
        warp = c * W + k * WS + tl.arange(0, WS)
        w1 = _bn_warp_sums(tl.reshape(a1, [WS, 32]), DT, WS)
        w2 = _bn_warp_sums(tl.reshape(a2, [WS, 32]), DT, WS)
        tl.store(part_ptr + warp * 2, tl.reshape(w1, [WS]))
        tl.store(part_ptr + warp * 2 + 1, tl.reshape(w2, [WS]))
    else:
        gsum = _bn_block_sum(a1, DT, W)
        dot = _bn_block_sum(a2, DT, W)
        if not FUSED:
            tl.store(part_ptr + c * 2, gsum)
            tl.store(part_ptr + c * 2 + 1, dot)
        else:
            if TRAIN:
                istd = tl.load(istd_ptr + c).to(tl.float32)
            else:
                istd = tl.div_rn(1.0, tl.sqrt_rn(tl.load(rv_ptr + c).to(tl.float32) + eps))
            w = 1.0
            if HAS_W:
                w = tl.load(w_ptr + c).to(tl.float32)
            grad_mean = gsum * inv_count
            proj_scale = dot * inv_count * istd * istd
            grad_scale = istd * w
            if WANT_DW:
                tl.store(dw_ptr + c, (dot * istd).to(dw_ptr.dtype.element_ty))
            if WANT_DB:
                tl.store(db_ptr + c, gsum.to(db_ptr.dtype.element_ty))
            for s0 in range(0, steps, UNROLL):
                for u in tl.static_range(UNROLL):
                    offs, m = _bn_step_tile(s0 + u, nx, c, N, C, HW, TX, TY, 0, 0, TX, TY)
                    go = tl.load(g_ptr + offs, mask=m, other=0).to(tl.float32)
                    if TRAIN:
                        x = tl.load(x_ptr + offs, mask=m, other=0).to(tl.float32)
                        dx = (go - (x - mean) * proj_scale - grad_mean) * grad_scale
                    else:
                        dx = go * grad_scale
                    tl.store(dx_ptr + offs, dx.to(DT), mask=m)
