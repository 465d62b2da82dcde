"""Batch norm backward: chooses the shared-memory kernel or the plain kernels (partial sums,
channel kernel, elementwise pass) and plans the launches."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _cdiv, _num_sms, _pdl_launch, _pdl_ok, _pow2
from agent.providers.builtin.kernels.runtime import gl, gluon
from agent.providers.builtin.kernels.batch_norm import _BN_APPLY_REVERSE, _BN_EAGER_INCR
from agent.providers.builtin.kernels.batch_norm import _BN_EAGER_SPLIT, _BN_EAGER_UNROLL
from agent.providers.builtin.kernels.batch_norm import _BN_EAGER_WARPS, _BN_FUSED_MAX, _BN_PDL
from agent.providers.builtin.kernels.batch_norm import _bn_apply_plan, _bn_channel, _bn_geometry
from agent.providers.builtin.kernels.batch_norm import _bn_plan, _eager_block, _eager_nchw
from agent.providers.builtin.kernels.norm_shared import _INTERPRET, _acc, _warps
from agent.providers.builtin.kernels.batch_norm_partials import _bn_eager_partials, _bn_partials
from agent.providers.builtin.kernels import batch_norm_smem


_bn_smem_kernel = getattr(batch_norm_smem, "_bn_smem_kernel", None)  # Gluon only


# ---- emitted: backward ----

# grad_input wanted, f16/bf16/f32 NCHW, channels of more than 256 positions: each channel held in
# shared memory by `_bn_smem_kernel` (Gluon; NVIDIA sm_80+), its inputs read from HBM once, when
# both of its planes fit a block's shared memory; else the plain kernels: sums, the channel kernel
# and the elementwise pass, which read them twice
_BN_SMEM = True
_BN_SMEM_DTYPES = (torch.float16, torch.bfloat16, torch.float32)
# channels per program at most: each costs a copy's latency and the sums' barriers, which many
# small channels do not repay
_BN_SMEM_MAX_ROUNDS = 4
_BN_SMEM_SCRATCH = 4096  # bytes of shared memory besides the channel's planes (the sums' tree)
# groups the sums wait for at a time (a barrier each time), and whether a group's slot is refilled
# with the next channel's as soon as it is written (a barrier each) or all at the channel's end
_BN_SMEM_WAIT = 4
_BN_SMEM_REFILL_EACH = False


def _bn_smem_plan(x, N, C, HW, want_dx):
    """(grid, constexprs) of `_bn_smem_kernel` for this input, or None where it does not apply:
    f16/bf16/f32 NCHW, grad_input wanted, more than 256 positions per channel (eager's one-row
    block of 512 threads) and a multiple of 8 of them (16-byte copies), on an NVIDIA GPU of
    compute capability 8.0 or more whose shared memory per block holds the channel, at most
    _BN_SMEM_MAX_ROUNDS channels per program."""
    if not (_BN_SMEM and gluon is not None and not _INTERPRET and want_dx
            and x.device.type == "cuda" and torch.version.hip is None
            and x.dtype in _BN_SMEM_DTYPES and _eager_nchw(x)
            and HW > 256 and HW % 8 == 0 and N * C * HW > 0):
        return None
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    if torch.cuda.get_device_capability(index)[0] < 8:
        return None
    consts, planes = _bn_smem_consts(N, HW, x.element_size())
    shared = triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"]
    if planes + _BN_SMEM_SCRATCH > shared or _cdiv(C, _num_sms(index)) > _BN_SMEM_MAX_ROUNDS:
        return None
    return min(C, _num_sms(index)), consts


def _bn_smem_consts(N, HW, element_size):
    """`_bn_smem_kernel`'s constexprs for channels of N x HW elements, and the shared memory its
    two planes take (bytes): groups of 8 rows of 512, a row per batch and block of positions."""
    groups = _cdiv(N * _cdiv(HW, 512), 8)
    consts = dict(N=N, HW=HW, G=groups, WAIT=max(1, _BN_SMEM_WAIT),
                  REFILL_EACH=_BN_SMEM_REFILL_EACH,
                  CL=gl.BlockedLayout([1, 1, 8], [1, 8, 4], [8, 2, 1], [2, 1, 0]),
                  B3=gl.BlockedLayout([1, 1, 1], [1, 1, 32], [1, 16, 1], [2, 1, 0]),
                  WL=gl.BlockedLayout([16, 1], [1, 32], [1, 16], [0, 1]),
                  SL3=gl.SwizzledSharedLayout(1, 1, 1, [2, 1, 0]),
                  SL2=gl.SwizzledSharedLayout(1, 1, 1, [1, 0]), num_warps=16)
    return consts, 2 * groups * 8 * 512 * element_size


_BN_BWD_RUNS = {}  # (geometry, arguments) -> run(...): the launches, planned once


def _batch_norm_backward(grad_out, input, weight, running_mean, running_var, save_mean,
                         save_invstd, train, eps, output_mask):
    key = (input.shape, input.dtype, input.device, _eager_nchw(input), bool(train),
           tuple(bool(v) for v in output_mask),
           weight is None, None if weight is None else weight.dtype, running_mean is None,
           running_var is None, save_mean is None, save_invstd is None)
    run = _BN_BWD_RUNS.get(key)
    if run is None:
        run = _BN_BWD_RUNS[key] = _batch_norm_backward_plan(
            input, weight, running_mean, running_var, save_mean, save_invstd, train, output_mask)
    return run(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, eps)


def _batch_norm_backward_plan(input, weight, running_mean, running_var, save_mean, save_invstd,
                              train, output_mask):
    """The backward's `run(...)`: partial sums of g and g*(x-mean), the per-channel kernel
    (grad_weight, grad_bias and the coefficients), the elementwise grad_input."""
    N, C, HW = _bn_geometry(input)
    want_dx, want_dw, want_db = (bool(v) for v in output_mask)
    acc = _acc(input.dtype)
    dev = input.device
    shape = tuple(input.shape)
    pdt = weight.dtype if weight is not None else input.dtype
    if train:
        if save_mean is None or save_invstd is None:
            raise RuntimeError("batch norm backward in train mode needs save_mean and save_invstd")
    elif running_mean is None or running_var is None:
        raise RuntimeError("batch norm backward in eval mode needs running_mean and running_var")
    wd = torch.float64 if acc == tl.float64 else torch.float32
    empty = N * C * HW == 0
    pdl1, pdl2 = (_BN_PDL >= level and _pdl_ok(dev) for level in (1, 2))
    if not empty:
        # f16/bf16 NCHW: eager's summation order, which its roundings make part of the result
        # (f32 keeps the split partial sums: fused, its N=1 suite cases took 43-133 us on the
        # H200 against 11-13, unexplained)
        eager_order = _eager_nchw(input) and input.dtype in (torch.float16, torch.bfloat16)
        fused = eager_order and want_dx and N * HW <= _BN_FUSED_MAX and input.numel() < 2**31
        if eager_order:
            tx, ty = _eager_block(N, HW, want_dx)
            split = 1 if fused else max(1, min(_BN_EAGER_SPLIT, tx * ty // 32))
            split = 1 << (split.bit_length() - 1)  # a power of two: whole warps per program
            # split: the channel kernel reduces each channel's warp sums (S of them)
            S = tx * ty // 32 if split > 1 else 1
            ts = tx * ty // split
            partials = _bn_eager_partials[(C * split,)]
            # an fp64 quotient rounded to the fp32 argument is the fp32 quotient eager divides
            partials_ints = (N, C, HW, 1.0 / (N * HW))
            warps = _BN_EAGER_WARPS or (4 if C <= 128 else 2 if C <= 512 else 1)
            warps = max(1, min(warps, tx * ty // 32))
            unroll = _BN_EAGER_UNROLL or (2 if warps == 1 else 8)
            partials_consts = dict(TX=tx, TY=ty, FUSED=fused, TRAIN=bool(train),
                                   HAS_W=weight is not None, WANT_DW=want_dw, WANT_DB=want_db,
                                   PDL_NEXT=pdl1 and not fused, UNROLL=unroll,
                                   SPLIT=split, TXS=min(tx, ts), TYS=max(1, ts // tx),
                                   INCR=_BN_EAGER_INCR and not fused, num_warps=warps)
        else:
            S, nb_per, j_per, sj, block_n, block_j = _bn_plan(input, N, C, HW)
            partials = _bn_partials[(C, S)]
            partials_ints = (N, C, HW, nb_per, j_per, sj, S)
            partials_consts = dict(BACKWARD=True, ACC=acc, BLOCK_N=block_n, BLOCK_J=block_j,
                                   PDL_NEXT=pdl1, num_warps=_warps(block_n * block_j))
        block_c = max(2, min(_pow2(C), 64))
        channel = _bn_channel[(_cdiv(C, block_c),)]
        channel_consts = dict(
            MODE=2 if train else 3, HAS_W=weight is not None, HAS_B=False, UPDATE=False,
            WANT_DW=want_dw, WANT_DB=want_db, ACC=acc, BLOCK_C=block_c,
            BLOCK_S=max(2, _pow2(S)), SAVE_EVAL=False, PDL_NEXT=pdl2 and want_dx,
            TREE=eager_order and S > 1,
            **_pdl_launch(pdl1))
        count = float(N * HW)
        reverse = _BN_APPLY_REVERSE and eager_order
        apply = _bn_apply_plan(N, C, HW, True, acc, pdl2, reverse) if want_dx else None

    smem = _bn_smem_plan(input, N, C, HW, want_dx)

    def run(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd, eps):
        x = input.contiguous()
        g = grad_out.contiguous()
        dx = torch.empty(shape, dtype=x.dtype, device=dev) if want_dx else None
        dw = torch.empty((C,), dtype=pdt, device=dev) if want_dw else None
        db = torch.empty((C,), dtype=pdt, device=dev) if want_db else None
        if empty:
            return dx, dw, db
        mean_src = (save_mean if train else running_mean).contiguous()
        if smem is not None and x.data_ptr() % 16 == 0 and g.data_ptr() % 16 == 0:
            grid, consts = smem  # absent tensors are never read (x stands in for them)
            _bn_smem_kernel[(grid,)](
                x, g, mean_src, x if save_invstd is None else save_invstd.contiguous(),
                x if running_var is None else running_var.contiguous(),
                x if weight is None else weight.contiguous(), dx, x if dw is None else dw,
                x if db is None else db, C, 1.0 / (N * HW), float(eps), TRAIN=bool(train),
                HAS_W=weight is not None, WANT_DW=want_dw, WANT_DB=want_db, **consts)
            return dx, dw, db
        if fused:  # one launch; absent tensors are never read (x stands in for them)
            partials(x, g, mean_src, x, x if save_invstd is None else save_invstd.contiguous(),
                     x if running_var is None else running_var.contiguous(),
                     x if weight is None else weight.contiguous(), dx,
                     x if dw is None else dw, x if db is None else db, *partials_ints,
                     float(eps), **partials_consts)
            return dx, dw, db
        coefs = tuple(torch.empty((C,), dtype=wd, device=dev) for _ in range(4))
        w = weight.contiguous() if weight is not None else coefs[0]
        rm = running_mean.contiguous() if running_mean is not None else coefs[0]
        rv = running_var.contiguous() if running_var is not None else coefs[0]
        istd = save_invstd.contiguous() if save_invstd is not None else coefs[0]
        if eager_order:
            part = torch.empty((C * S * 2,), dtype=torch.float32, device=dev)
            partials(x, g, mean_src, part, istd, rv, w, part, part, part, *partials_ints,
                     float(eps), **partials_consts)
        else:
            part = torch.empty((C * S * 2,), dtype=wd, device=dev)
            partials(x, g, mean_src, part, *partials_ints, **partials_consts)
        channel(x, part, w, coefs[0], rm, rv, mean_src, istd, coefs[0], coefs[0],
                dw if want_dw else coefs[0], db if want_db else coefs[0], *coefs,
                C, HW, S, count, 0.0, float(eps), **channel_consts)
        if apply is not None:
            apply(x, g, dx, coefs)
        return dx, dw, db

    return run
