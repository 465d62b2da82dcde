"""Batch norm forward: the per-channel kernel (mean, invstd, running stats, affine coefficients),
the elementwise pass and the launch plans (the backward's plain path reuses them)."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _cdiv, _pdl_enter, _pdl_launch, _pdl_ok, _pow2
from agent.providers.builtin.kernels.norm_shared import _CONSERVATIVE, _INTERPRET, _acc
from agent.providers.builtin.kernels.norm_shared import _stat_dtype, _target_programs, _warps
from agent.providers.builtin.kernels.batch_norm_partials import _bn_partials, _bn_warp_tree


# ---- emitted: main ----


@triton.jit
def _bn_channel(x_ptr, part_ptr, w_ptr, b_ptr, rm_ptr, rv_ptr, mean_ptr, istd_ptr,
                save_mean_ptr, save_istd_ptr, dw_ptr, db_ptr, ca_ptr, cb_ptr, cc_ptr, cm_ptr,
                C, HW, S, count: tl.float64, momentum: tl.float64, eps: tl.float64,
                MODE: tl.constexpr, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                UPDATE: tl.constexpr, WANT_DW: tl.constexpr, WANT_DB: tl.constexpr,
                ACC: tl.constexpr, BLOCK_C: tl.constexpr, BLOCK_S: tl.constexpr,
                SAVE_EVAL: tl.constexpr, PDL_WAIT: tl.constexpr, PDL_NEXT: tl.constexpr,
                TREE: tl.constexpr):
    """Per channel: MODE 0 train forward, 1 eval forward, 2 train backward, 3 eval backward.
    TREE: the S partials of a channel are the per-warp sums of `_bn_eager_partials` (SPLIT),
    added as eager's warp 0 adds them (`_bn_warp_tree`), not as a plain sum.
    SAVE_EVAL (MODE 1): also write the running mean and its invstd as the saved statistics.
    PDL_WAIT: launched as a dependent of the partial sums; PDL_NEXT: the elementwise launch may
    start now.

    Writes the coefficients of the elementwise pass: forward y = x*A + B; backward
    dx = g*A + (x - M)*B + Cc."""
    _pdl_enter(PDL_WAIT, PDL_NEXT)
    count = tl.full([], count, ACC)  # double arguments (a plain float is packed as fp32)
    momentum = tl.full([], momentum, ACC)
    eps = tl.full([], eps, ACC)
    c = tl.program_id(0).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    ok = c < C
    w = tl.full([BLOCK_C], 1.0, ACC)
    if HAS_W:
        w = tl.load(w_ptr + c, mask=ok, other=1).to(ACC)
    if MODE == 0 or MODE == 2 or MODE == 3:
        s = tl.arange(0, BLOCK_S)
        m = ok[:, None] & (s[None, :] < S)
        slot = (c[:, None] * S + s[None, :]) * 2
        if TREE:
            DT: tl.constexpr = x_ptr.dtype.element_ty
            t1 = _bn_warp_tree(tl.load(part_ptr + slot, mask=m, other=0), DT, BLOCK_C, BLOCK_S)
            t2 = _bn_warp_tree(tl.load(part_ptr + slot + 1, mask=m, other=0), DT, BLOCK_C,
                               BLOCK_S)
        else:
            t1 = tl.sum(tl.load(part_ptr + slot, mask=m, other=0), axis=1)
            t2 = tl.sum(tl.load(part_ptr + slot + 1, mask=m, other=0), axis=1)
    if MODE == 0:
        shift = tl.load(x_ptr + c * HW, mask=ok, other=0).to(ACC)
        mean_s = t1 / count
        var = t2 / count - mean_s * mean_s
        var = tl.where(var < 0, 0.0, var)
        mean = shift + mean_s
        istd = 1.0 / tl.sqrt(var + eps)
        tl.store(save_mean_ptr + c, mean.to(save_mean_ptr.dtype.element_ty), mask=ok)
        tl.store(save_istd_ptr + c, istd.to(save_istd_ptr.dtype.element_ty), mask=ok)
        if UPDATE:
            rm = tl.load(rm_ptr + c, mask=ok, other=0).to(ACC)
            rv = tl.load(rv_ptr + c, mask=ok, other=0).to(ACC)
            unbiased = var * count / (count - 1)
            tl.store(rm_ptr + c, ((1 - momentum) * rm + momentum * mean).to(rm_ptr.dtype.element_ty), mask=ok)
            tl.store(rv_ptr + c, ((1 - momentum) * rv + momentum * unbiased).to(rv_ptr.dtype.element_ty), mask=ok)
    elif MODE == 1:
        mean = tl.load(rm_ptr + c, mask=ok, other=0).to(ACC)
        istd = 1.0 / tl.sqrt(tl.load(rv_ptr + c, mask=ok, other=1).to(ACC) + eps)
        if SAVE_EVAL:
            tl.store(save_mean_ptr + c, mean.to(save_mean_ptr.dtype.element_ty), mask=ok)
            tl.store(save_istd_ptr + c, istd.to(save_istd_ptr.dtype.element_ty), mask=ok)
    elif MODE == 2:
        mean = tl.load(mean_ptr + c, mask=ok, other=0).to(ACC)
        istd = tl.load(istd_ptr + c, mask=ok, other=0).to(ACC)
    else:
        mean = tl.load(rm_ptr + c, mask=ok, other=0).to(ACC)
        istd = 1.0 / tl.sqrt(tl.load(rv_ptr + c, mask=ok, other=1).to(ACC) + eps)
    if MODE < 2:
        a = w * istd
        b = -mean * a
        if HAS_B:
            b = b + tl.load(b_ptr + c, mask=ok, other=0).to(ACC)
        tl.store(ca_ptr + c, a, mask=ok)
        tl.store(cb_ptr + c, b, mask=ok)
    else:
        a = w * istd
        if MODE == 2:
            k = -a * istd * istd * t2 / count
            cc = -a * t1 / count
        else:
            k = tl.zeros([BLOCK_C], ACC)
            cc = tl.zeros([BLOCK_C], ACC)
        tl.store(ca_ptr + c, a, mask=ok)
        tl.store(cb_ptr + c, k, mask=ok)
        tl.store(cc_ptr + c, cc, mask=ok)
        tl.store(cm_ptr + c, mean, mask=ok)
        if WANT_DW:
            tl.store(dw_ptr + c, (t2 * istd).to(dw_ptr.dtype.element_ty), mask=ok)
        if WANT_DB:
            tl.store(db_ptr + c, t1.to(db_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _bn_apply(x_ptr, g_ptr, out_ptr, ca_ptr, cb_ptr, cc_ptr, cm_ptr, ROWS, C, HW,
              BACKWARD: tl.constexpr, ACC: tl.constexpr,
              BLOCK_R: tl.constexpr, BLOCK_J: tl.constexpr, PDL_WAIT: tl.constexpr,
              REVERSE: tl.constexpr):
    """Tile [BLOCK_R (n, c) rows, BLOCK_J spatial]: y = x*A + B, or dx = g*A + (x-M)*B + Cc.
    PDL_WAIT: launched as a dependent of the channel kernel, whose coefficients it waits for.
    REVERSE (a 1-D grid): the first programs take the last tiles in memory, which the sums
    before this pass read last (every channel's program walks the batch in order, all at once),
    so they may still be in L2."""
    _pdl_enter(PDL_WAIT, False)
    if REVERSE:
        nj = tl.cdiv(HW, BLOCK_J)
        rev = tl.num_programs(0) - 1 - tl.program_id(0)
        rb = rev // nj
        jb = rev - rb * nj
    else:
        rb = tl.program_id(0)
        jb = tl.program_id(1)
    rows = rb.to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    j = jb.to(tl.int64) * BLOCK_J + tl.arange(0, BLOCK_J)
    row_ok = rows < ROWS
    c = rows % C
    a = tl.load(ca_ptr + c, mask=row_ok, other=0)[:, None]
    b = tl.load(cb_ptr + c, mask=row_ok, other=0)[:, None]
    m = row_ok[:, None] & (j[None, :] < HW)
    offs = rows[:, None] * HW + j[None, :]
    x = tl.load(x_ptr + offs, mask=m, other=0).to(ACC)
    if BACKWARD:
        cc = tl.load(cc_ptr + c, mask=row_ok, other=0)[:, None]
        mu = tl.load(cm_ptr + c, mask=row_ok, other=0)[:, None]
        g = tl.load(g_ptr + offs, mask=m, other=0).to(ACC)
        y = g * a + (x - mu) * b + cc
    else:
        y = x * a + b
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)


def _bn_geometry(x):
    if x.dim() < 2:
        raise RuntimeError(f"batch norm expects an input of at least 2 dims, got {list(x.shape)}")
    N, C = x.shape[0], x.shape[1]
    HW = 1
    for s in x.shape[2:]:
        HW *= s
    return N, C, HW


def _eager_nchw(x):
    """Whether CUDA eager's batch norm backward takes its NCHW kernels (one block per channel)
    for x, rather than its channels-last ones."""
    channels_last = (
        (x.dim() == 4 and x.is_contiguous(memory_format=torch.channels_last))
        or (x.dim() == 5 and x.is_contiguous(memory_format=torch.channels_last_3d))
        or (x.is_contiguous() and x.dim() > 1 and x.stride(1) == 1)
    )
    return not channels_last


def _eager_block(N, HW, fused):
    """(TX, TY): the thread block CUDA eager reduces one channel with. The fused backward
    (grad_input wanted): getNumThreads(HW) x 512/that; the reduce-only kernel: min(lastPow2(N),
    16) rows and min(getNumThreads(HW), 512/rows) columns."""
    tx = next((t for t in (32, 64, 128, 256) if HW <= t), 512)
    if fused:
        return tx, max(1, 512 // tx)
    ty = min(1 << (max(N, 1).bit_length() - 1), 16)
    return min(tx, 512 // ty), ty


def _bn_plan(x, N, C, HW):
    """Split each channel's (N, HW) plane over programs so that the GPU is busy."""
    small = _INTERPRET or _CONSERVATIVE
    block_j = max(2, min(_pow2(HW), 128 if small else 1024))
    want = 1 if _CONSERVATIVE else max(1, _cdiv(_target_programs(x), C))
    want = min(want, max(1, (N * HW) // 4096) if not _INTERPRET else want, 1024)
    sn = max(1, min(want, N))
    nb_per = _cdiv(N, sn)
    sn = _cdiv(N, nb_per)
    sj = max(1, min(_cdiv(want, sn), _cdiv(HW, block_j)))
    j_per = _cdiv(_cdiv(HW, sj), block_j) * block_j
    sj = max(1, _cdiv(HW, j_per))
    block_n = max(1, min(_pow2(nb_per), (1024 if small else 4096) // block_j))
    return sn * sj, nb_per, j_per, sj, block_n, block_j


def _bn_apply_plan(N, C, HW, backward, acc, pdl, reverse=False):
    """`launch(x, g, out, coefs)` of the elementwise pass; pdl: launched as a dependent of the
    channel kernel; reverse: last tiles first (`_bn_apply`'s REVERSE)."""
    small = _INTERPRET or _CONSERVATIVE
    block_j = max(2, min(_pow2(HW), 256 if small else 1024))
    block_r = max(1, min(_pow2(N * C), (1024 if small else 4096) // block_j))
    grid = (_cdiv(N * C, block_r), _cdiv(HW, block_j))
    kernel = _bn_apply[(grid[0] * grid[1],) if reverse else grid]
    consts = dict(BACKWARD=backward, ACC=acc, BLOCK_R=block_r, BLOCK_J=block_j,
                  num_warps=_warps(block_r * block_j), REVERSE=reverse, **_pdl_launch(pdl))

    def launch(x, g, out, coefs):
        kernel(x, g, out, *coefs, N * C, C, HW, **consts)

    return launch


# Programmatic dependent launches (sm_90+): 0 none, 1 the channel kernel after the partial sums,
# 2 also the elementwise pass after the channel kernel. Off: level 2 slows eval-mode cases down.
_BN_PDL = 0
# warps per `_bn_eager_partials` program (0: by channel count: 4 warps up to 128 channels)
_BN_EAGER_WARPS = 0
# `_bn_eager_partials` steps walked per loop iteration (tiles whose loads are in flight at once;
# 0: 8, or 2 with one warp, whose lanes hold 16 elements per tile)
_BN_EAGER_UNROLL = 0
# up to this many elements per channel, grad_input is written by the channel's program too (one
# launch instead of three); beyond, a separate elementwise pass
_BN_FUSED_MAX = 8192
# programs per channel of the eager-order sums when grad_input is not fused (a power of two, at
# most the block's warps); each takes a part of eager's block, whole warps, their per-thread sums
# in eager's order
_BN_EAGER_SPLIT = 2
# unfused sums: their steps walked by counters (batch block, position block), not by dividing a
# flat step number (fewer instructions); the fused kernel is slower with it and keeps divisions
_BN_EAGER_INCR = True
# the backward's elementwise pass after eager-order sums walks the tensor from its end (what the
# sums read last, perhaps still in L2)
_BN_APPLY_REVERSE = True
_EVAL_SAVE_DEVICES = ("cuda",)  # where eager's eval mode returns [C] saved statistics


_BN_RUNS = {}  # (geometry, arguments) -> run(...): the launches, planned once


def _batch_norm(input, weight, bias, running_mean, running_var, training, momentum, eps):
    key = (input.shape, input.dtype, input.device, bool(training), weight is None, bias is None,
           running_mean is None, running_var is None)
    run = _BN_RUNS.get(key)
    if run is None:
        run = _BN_RUNS[key] = _batch_norm_plan(input, weight, bias, running_mean, running_var,
                                               training)
    return run(input, weight, bias, running_mean, running_var, momentum, eps)


def _batch_norm_plan(input, weight, bias, running_mean, running_var, training):
    """Everything that depends only on the geometry and on which arguments are None, as a
    `run(...)`: per call, the allocations and two or three launches."""
    N, C, HW = _bn_geometry(input)
    acc = _acc(input.dtype)
    dev = input.device
    shape = tuple(input.shape)
    sdt = _stat_dtype(input)
    # Eval mode: CUDA eager returns the running mean and its invstd as the saved statistics
    # (shape [C], the H200 evaluation showed the shape), the CPU returns empty tensors.
    eval_saves = not training and dev.type in _EVAL_SAVE_DEVICES
    saved = (C,) if training or eval_saves else (0,)
    if not training and (running_mean is None or running_var is None):
        raise RuntimeError("batch norm in eval mode needs running_mean and running_var")
    update = training and running_mean is not None and running_var is not None
    wd = torch.float64 if acc == tl.float64 else torch.float32
    empty = N * C * HW == 0
    pdl1, pdl2 = (_BN_PDL >= level and _pdl_ok(dev) for level in (1, 2))
    S = 1
    partials = None
    if training and not empty:
        S, nb_per, j_per, sj, block_n, block_j = _bn_plan(input, N, C, HW)
        partials = (_bn_partials[(C, S)], (N, C, HW, nb_per, j_per, sj, S),
                    dict(BACKWARD=False, ACC=acc, BLOCK_N=block_n, BLOCK_J=block_j,
                         PDL_NEXT=pdl1, num_warps=_warps(block_n * block_j)))
    block_c = max(2, min(_pow2(C), 64))
    channel = _bn_channel[(_cdiv(C, block_c),)]
    channel_consts = dict(
        MODE=0 if training else 1, HAS_W=weight is not None, HAS_B=bias is not None,
        UPDATE=update, WANT_DW=False, WANT_DB=False, ACC=acc, BLOCK_C=block_c,
        BLOCK_S=max(2, _pow2(S)), SAVE_EVAL=eval_saves, PDL_NEXT=pdl2, TREE=False,
        **_pdl_launch(pdl1 and training))
    count = float(N * HW)
    apply = None if empty else _bn_apply_plan(N, C, HW, False, acc, pdl2)

    def run(input, weight, bias, running_mean, running_var, momentum, eps):
        x = input.contiguous()
        out = torch.empty(shape, dtype=x.dtype, device=dev)
        save_mean = torch.empty(saved, dtype=sdt, device=dev)
        save_istd = torch.empty(saved, dtype=sdt, device=dev)
        if update and not (running_mean.is_contiguous() and running_var.is_contiguous()):
            raise RuntimeError("running statistics must be contiguous")
        if empty:
            return out, save_mean, save_istd
        ca = torch.empty((C,), dtype=wd, device=dev)
        cb = torch.empty((C,), dtype=wd, device=dev)
        w = weight.contiguous() if weight is not None else ca
        b = bias.contiguous() if bias is not None else ca
        rm = running_mean if running_mean is not None else ca
        rv = running_var if running_var is not None else ca
        part = ca
        if partials is not None:
            kernel, ints, consts = partials
            part = torch.empty((C * S * 2,), dtype=wd, device=dev)
            kernel(x, x, ca, part, *ints, **consts)
        channel(x, part, w, b, rm, rv, ca, ca, save_mean, save_istd, ca, ca, ca, cb, ca, ca,
                C, HW, S, count, float(momentum), float(eps), **channel_consts)
        apply(x, x, out, (ca, cb, ca, ca))
        return out, save_mean, save_istd

    return run
