"""native_group_norm: the emitted file's knobs, then (after group_norm_kernels.py's kernels) the
plans that pick the whole-group, pipelined or split path per shape."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton.language as tl

from agent.providers.builtin.kernels.pooling_common import _acc
from agent.providers.builtin.kernels.runtime import _INTERPRET, _cdiv, _num_sms, _pow2
from agent.providers.builtin.kernels.tiles import _CONSERVATIVE, _tile_cap
from agent.providers.builtin.kernels.group_norm_kernels import _gn_apply_kernel
from agent.providers.builtin.kernels.group_norm_kernels import _gn_partials_kernel, _gn_pipe_kernel
from agent.providers.builtin.kernels.group_norm_kernels import _gn_whole_kernel


# ---- emitted: knobs ----
import functools  # noqa: F401, I001  (the inlined _num_sms uses it)


# Programs to aim for on a GPU (each (sample, group) is split into chunks until there are about
# this many), elements per loop step and warps per program: module constants so that
# benchmarks/knob_sweep.py can re-measure them. One program per group leaves SMs idle at G=1.
_GN_TARGET_PROGRAMS = 8 if _INTERPRET else 1024
_GN_BLOCK = 2048
_GN_WARPS = 8
# Many groups ([4, 512, 31999]: 2048 groups of 64 KB, about two chunks each): 16 warps per
# program, where the G=1 cases are slower with 16
_GN_WARPS_MANY_GROUPS, _GN_MANY_GROUPS = 16, 256
_GN_STAGES = 1  # > 1: Triton pipelines the loops' loads (prefetch into shared memory)
# Whole groups in registers (one launch, x read once): groups of at most _GN_WHOLE_MAX elements
# (_GN_WHOLE_MAX_MULTI when C/G > 1) when there are at least _GN_WHOLE_MIN_GROUPS of them (fewer
# leave SMs idle; the suite's G=1 cases have 32 groups of 25K-200K elements and keep the split
# path). The limits are what ptxas holds in registers without spilling at 16 / 32 warps. Short
# groups share a program (at most _GN_WHOLE_TILE elements), keeping about _GN_WHOLE_PROGRAMS.
_GN_WHOLE = True
_GN_WHOLE_MAX, _GN_WHOLE_MAX_MULTI = 32768, 16384
_GN_WHOLE_MIN_GROUPS = 256
_GN_WHOLE_WARPS = 8  # upper bound; a program gets at most one warp per 256 elements
_GN_WHOLE_TILE, _GN_WHOLE_PROGRAMS = 4096, 512
# Persistent whole-group kernel (_GN_PIPE; f16/bf16 one-channel groups of at least
# _GN_PIPE_MIN_D elements): about _GN_PIPE_PER_SM programs per SM (_GN_PIPE_CPU_PROGRAMS off a
# GPU), each walking groups pid, pid + P, ... and fetching the NEXT group before it reduces and
# stores the current one, so that a group's DRAM latency hides behind the previous group's work.
# Groups are held as 32-bit words (two elements a register) and moved as _GN_PIPE_VEC-element
# chunks (8: 16-byte loads and stores) although they start anywhere; _GN_PIPE_WARPS caps warps
# (one per 256 elements at most).
_GN_PIPE = True
_GN_PIPE_PER_SM = 2
_GN_PIPE_WARPS = 8
_GN_PIPE_VEC = 8
_GN_PIPE_MIN_D = 1024
_GN_PIPE_CPU_PROGRAMS = 3  # odd and small: every program walks several groups, one the last


# ---- emitted: plans ----


_ROUND_STATS_DEVICES = ("cuda",)  # where eager normalises with statistics in the input dtype


def _gn_split(NG, CPG, HW, D, block):
    """(per_channel, chunk, chunks per channel, chunks per group) for about
    _GN_TARGET_PROGRAMS programs; chunks are whole loop steps."""
    per_channel = HW >= block
    if per_channel:
        spc = max(1, min(_cdiv(_GN_TARGET_PROGRAMS, NG * CPG), _cdiv(HW, block)))
        chunk = _cdiv(_cdiv(HW, spc), block) * block
        spc = _cdiv(HW, chunk)
        return True, chunk, spc, CPG * spc
    s = max(1, min(_cdiv(_GN_TARGET_PROGRAMS, NG), _cdiv(D, block)))
    chunk = _cdiv(_cdiv(D, s), block) * block
    return False, chunk, 1, _cdiv(D, chunk)


def _gn_whole_plan(NG, CPG, D, acc_bytes=4):
    """(groups per program, BLOCK, warps) for the whole-group kernel, or None: the split path.
    fp64 arithmetic (acc_bytes 8) takes two registers an element: half the group size."""
    limit = (_GN_WHOLE_MAX if CPG == 1 else _GN_WHOLE_MAX_MULTI) * 4 // acc_bytes
    if not _GN_WHOLE or _CONSERVATIVE or D > limit or NG < _GN_WHOLE_MIN_GROUPS:
        return None
    block = max(2, _pow2(D))
    packed = 1 << max(0, (NG // _GN_WHOLE_PROGRAMS).bit_length() - 1)  # a power of two <= NG/P
    rows = max(1, min(_GN_WHOLE_TILE // block, packed))
    return rows, block, max(1, min(_GN_WHOLE_WARPS, rows * block // 256))


# inline: _num_sms


def _gn_pipe_plan(NG, CPG, D, x):
    """(words per program, VEC, warps, programs) for the persistent kernel, or None: the plain
    whole-group kernel. f16/bf16 one-channel groups of at least _GN_PIPE_MIN_D elements whose
    plain plan takes one group per program, a 16-byte aligned x (its 32-bit word loads), and at
    least two groups per program (else nothing to overlap)."""
    if (not _GN_PIPE or CPG != 1 or D < max(_GN_PIPE_MIN_D, 2 * _GN_PIPE_VEC)
            or x.dtype not in (torch.float16, torch.bfloat16) or x.data_ptr() % 16 != 0):
        return None
    whole = _gn_whole_plan(NG, CPG, D)
    if whole is None or whole[0] != 1:
        return None
    if _INTERPRET or x.device.type != "cuda":
        programs = _GN_PIPE_CPU_PROGRAMS
    else:
        index = x.device.index if x.device.index is not None else torch.cuda.current_device()
        programs = _GN_PIPE_PER_SM * _num_sms(index)
    if NG < 2 * programs:
        return None
    block = whole[1]
    return block // 2, _GN_PIPE_VEC, max(1, min(_GN_PIPE_WARPS, block // 256)), programs


def _native_group_norm(input, weight, bias, N, C, HxW, group, eps):
    if group <= 0 or C % group != 0:
        raise RuntimeError(f"Expected number of channels in input to be divisible by num_groups, but got input of shape {list(input.shape)} and num_groups={group}")
    if input.numel() != N * C * HxW:
        raise RuntimeError("Expected the input to hold N * C * HxW elements")
    for name, t in (("weight", weight), ("bias", bias)):
        if t is not None and t.numel() != C:
            raise RuntimeError(f"Expected {name} to be a vector of size equal to the number of channels in input, but got {name} of shape {list(t.shape)} and input of shape {list(input.shape)}")
    # the pipelined kernel's word loads need x 16-byte aligned (a non-contiguous input is
    # copied, into an aligned allocation)
    aligned = not input.is_contiguous() or input.data_ptr() % 16 == 0
    key = (input.shape, input.dtype, input.device, N, C, HxW, group, weight is None,
           bias is None, aligned)
    run = _GN_RUNS.get(key)
    if run is None:
        if len(_GN_RUNS) >= 256:
            _GN_RUNS.clear()
        run = _GN_RUNS[key] = _group_norm_plan(input, weight is not None, bias is not None, N,
                                               C, HxW, group)
    return run(input, weight, bias, float(eps))


_GN_RUNS = {}  # (geometry, which of weight/bias are given) -> run(...), planned once


def _group_norm_plan(input, has_w, has_b, N, C, HxW, group):
    """run(input, weight, bias, eps): the one kernel (a whole group in registers, pipelined or
    not) or the two (split partial sums, then the normalization) this geometry takes."""
    shape, dtype, device = input.shape, input.dtype, input.device
    CPG = C // group
    D = CPG * HxW
    NG = N * group
    acc = _acc(dtype)
    round_stats = device.type in _ROUND_STATS_DEVICES and dtype in (torch.float16, torch.bfloat16)
    launch = None
    if NG > 0 and D > 0:
        launch = _group_norm_launch(input.contiguous(), has_w, has_b, NG, group, CPG, HxW, D,
                                    acc, round_stats)

    def run(input, weight, bias, eps):
        x = input.contiguous()
        out = torch.empty(shape, dtype=dtype, device=device)
        mean = torch.empty((N, group), dtype=dtype, device=device)
        rstd = torch.empty((N, group), dtype=dtype, device=device)
        if launch is not None:
            launch(x, weight if has_w else x, bias if has_b else x, out, mean, rstd, eps)
        return out, mean, rstd

    return run


def _group_norm_launch(x, has_w, has_b, NG, group, CPG, HxW, D, acc, round_stats):
    """launch(x, w, b, out, mean, rstd, eps) for a non-empty geometry (w, b contiguous or x)."""
    flags = dict(HAS_W=has_w, HAS_B=has_b, ACC=acc, ROUND_STATS=round_stats)
    whole = _gn_whole_plan(NG, CPG, D, 8 if acc == tl.float64 else 4)
    pipe = _gn_pipe_plan(NG, CPG, D, x) if whole is not None else None
    if pipe is not None:
        block_w, vec, warps, programs = pipe
        kernel = _gn_pipe_kernel[(programs,)]

        def launch(x, w, b, out, mean, rstd, eps):
            kernel(x, w.contiguous(), b.contiguous(), out, mean, rstd, NG, group, D, float(D),
                   eps, VEC=vec, BLOCK_W=block_w, num_warps=warps, num_stages=1, **flags)

        return launch
    if whole is not None:
        rows, block, warps = whole
        kernel = _gn_whole_kernel[(_cdiv(NG, rows),)]

        def launch(x, w, b, out, mean, rstd, eps):
            kernel(x, w.contiguous(), b.contiguous(), out, mean, rstd, NG, group, CPG, HxW, D,
                   float(D), eps, ONE_CHANNEL=CPG == 1, ROWS=rows, BLOCK=block, num_warps=warps,
                   **flags)

        return launch
    cap = _tile_cap() if _INTERPRET else (1024 if _CONSERVATIVE else _GN_BLOCK)
    block = max(32, min(_pow2(D), cap))
    per_channel, chunk, spc, S = _gn_split(NG, CPG, HxW, D, block)
    part_dtype = torch.float64 if acc == tl.float64 else torch.float32
    warps = 4 if block <= 1024 else (_GN_WARPS_MANY_GROUPS if NG >= _GN_MANY_GROUPS else _GN_WARPS)
    stages = 1 if _INTERPRET or _CONSERVATIVE else _GN_STAGES
    partials = _gn_partials_kernel[(NG, S)]
    apply = _gn_apply_kernel[(NG, S)]

    def launch(x, w, b, out, mean, rstd, eps):
        part = torch.empty((NG * S * 2,), dtype=part_dtype, device=x.device)
        partials(x, part, D, HxW, chunk, spc, S, PER_CHANNEL=per_channel, ACC=acc, STAGES=stages,
                 BLOCK=block, num_warps=warps)
        apply(x, w.contiguous(), b.contiguous(), out, part, mean, rstd, group, CPG, HxW, D, chunk,
              spc, S, float(D), eps, PER_CHANNEL=per_channel, SP=_pow2(S), STAGES=stages,
              BLOCK=block, num_warps=warps, **flags)

    return launch
