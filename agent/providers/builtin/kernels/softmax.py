"""Softmax family (_softmax, _log_softmax and their backward): the emitted file's header and the
planner that picks a kernel per shape; the kernels live in softmax_rows.py, softmax_windows.py,
softmax_long_rows.py, softmax_smem.py and softmax_cols.py.

Placeholders the writer sets: `_CONSERVATIVE` (variant >= 1: smaller tiles) and `_MODE` (0 softmax,
1 log_softmax, 2 softmax backward, 3 log_softmax backward). Above the first marker: what the emitted
file's header and the runtime module provide.
"""

import torch  # noqa: I001  (the emitted part's own imports follow the marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _cdiv, _num_sms, _pow2, gl, gluon
from agent.providers.builtin.kernels.softmax_cols import _cols_kernel
from agent.providers.builtin.kernels.softmax_rows import _flat_rows_kernel, _rows_const_kernel
from agent.providers.builtin.kernels.softmax_rows import _rows_kernel
from agent.providers.builtin.kernels.softmax_long_rows import _long_rows_kernel, _row_body_kernel
from agent.providers.builtin.kernels import softmax_smem
from agent.providers.builtin.kernels.softmax_windows import _window_rows_kernel
from agent.providers.builtin.kernels.softmax_windows import _window_stream_kernel


_smem_rows = getattr(softmax_smem, "_smem_rows", None)  # Gluon only


# ---- emitted: main ----
import functools  # noqa: F401  (the inlined _num_sms uses it)
import os

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CONSERVATIVE = False  # variant >= 1: smaller tiles
_MODE = 0  # 0 softmax, 1 log_softmax, 2 softmax backward, 3 log_softmax backward


# inline: _cdiv, _num_sms


def _target_programs(x):
    """Programs that keep the device busy (a few per SM); irrelevant on the interpreter."""
    if _INTERPRET or x.device.type != "cuda":
        return 1
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    return 4 * _num_sms(index)


def _persistent_programs(x, per_sm):
    """Programs of a persistent grid: per_sm per SM on a GPU. The interpreter runs programs one
    after another, so any count costs the same there; a few make programs share the work as
    they do on a GPU."""
    if _INTERPRET or x.device.type != "cuda":
        return _INTERPRET_PROGRAMS
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    return max(1, int(per_sm * _num_sms(index)))


# inline: _pow2


# ---- emitted: plans ----


# Tile limits (module constants so that a benchmark can sweep them; plans read them once). A
# whole row of up to 32768 elements held in registers (one program of 16 warps per row) is the
# fastest when rows are 16-element aligned, so that every load is a 16-byte vector; over rows
# that are not aligned it loads them unvectorized: long unaligned rows take `_row_body_kernel`
# (below), short ones small tiles; aligned rows like larger tiles.
_SMALL = _INTERPRET or _CONSERVATIVE
_ONE_PASS_MAX = 256 if _SMALL else 8192  # row held in registers
# 16-aligned rows held in registers: softmax and log_softmax with fp32 statistics, and the
# log_softmax backward (softmax backward holds two tensors: it stays at _ONE_PASS_MAX)
_ONE_PASS_MAX_ALIGNED = 256 if _SMALL else 32768
# Forward rows that are not 16-element aligned, longer than _ONE_PASS_MAX and up to
# _BODY_MAX (padded) elements, fp32 statistics: `_row_body_kernel`, one program of _BODY_WARPS
# warps per row (faster than the two-pass kernel and eager). 0 turns it off.
_BODY_MAX = 1024 if _SMALL else 32768
_BODY_WARPS = 16
# The log_softmax backward's 16-bit rows through the same kernel (grad and output held in
# registers: 128 registers at 16 warps, no spill for sm_90; fp32 rows and the softmax backward
# spill there and keep the two-pass kernel)
_BODY_BWD = True
_TILE = 1024 if _SMALL else 4096  # elements per loop step / short-row tile
_TILE_UNALIGNED = 1024  # short-row tile when rows are not a multiple of 16 long
_MIN_TILE = 64 if _SMALL else 1024  # short rows: at least this many elements per program
# Short rows that are not a multiple of 16 bytes long, up to _FLAT_MAX_N (padded) elements:
# `_flat_rows_kernel`, about _FLAT_ROWS_TILE tile elements (at least 8 rows) per program and
# _FLAT_WARPS warps; _FLAT_ROWS_TILE = 0 turns it off (`_rows_kernel` with _TILE_UNALIGNED).
_FLAT_ROWS_TILE = 256 if _SMALL else 2048
_FLAT_MAX_N = 128  # 49-wide rows gain; 196-wide rows are slower flat, so they stay out
_FLAT_WARPS = 2
# The same rows through aligned per-row windows (`_window_rows_kernel`), rows of at least one
# 16-byte vector and up to _WIN_MAX_N (padded) elements: about _WIN_TILE window elements (at
# least 8 rows) per program, _WIN_WARPS warps; _WIN_TILE = 0 leaves them to the kernels above.
_WIN_TILE = 256 if _SMALL else 1024
_WIN_MAX_N = 128
_WIN_WARPS = 4
_WIN_FTZ = True  # `_exp_fast`'s FTZ on the GPU
_WIN_PROGRAMS_PER_SM = 8  # > 0: `_window_stream_kernel`, persistent
_WIN_DEBUG_COPY = False  # diagnostic: the windows copied, no math (wrong results)
# the forward window math's masks as arithmetic on opaque 0/1 and 0/-inf values instead of
# compares and selects (`_window_math`'s ARITH; fp32 statistics only): fewer ALU-pipe instructions
_WIN_ARITH = True
# softmax: one exp per element, times 1/s per row, not exp again divided by s
_FLAT_RECIP = True
# Short rows of an even length that is not a multiple of 16 elements, not taken by the flat
# kernel (196-wide f16: 392-byte rows, 8-byte aligned), go to `_rows_const_kernel` (the row
# length a constexpr: vector accesses of the rows' alignment), _ROWS_CONST_M rows per program
# (0: as `_rows_kernel` picks them) and _ROWS_CONST_WARPS warps (0: by tile size), the row held
# as two halves with _ROWS_CONST_SPLIT.
_ROWS_CONST_N = True
_ROWS_CONST_M = 0
_ROWS_CONST_WARPS = 2
_ROWS_CONST_SPLIT = True
# Long rows (`_long_rows_kernel`): programs per SM of the persistent grid (about that many rows
# per SM are live: keep grid * row bytes under the 50 MB L2; 1 for f32 50257-long rows, 26 MB),
# elements per loop step, warps, pipeline stages and their shared-memory budget, and the
# alignment of the vectorized row body in elements (1: no split, every access masked per element).
_LONG_PROGRAMS_PER_SM = 1
_LONG_TILE = 1024 if _SMALL else 8192
_LONG_WARPS = 4 if _SMALL else 16
_LONG_STAGES = 1 if _CONSERVATIVE else 3  # loop pipelining (fewer where the buffers pass the budget)
_LONG_SMEM_PER_SM = 192 * 1024  # of the H100/H200's 227 KB
_ROW_ALIGN = 16
# Long rows on the persistent grid, L2 reuse between the passes (switches to sweep on the GPU):
# bytes of each row kept in registers between the passes (forward: the input; backward: both
# inputs together; 0: none; rounded down to a power-of-two element count, at most the row),
# the writing pass walking the row backwards, the first pass's loads marked evict_last and the
# writing pass's loads and stores evict_first, and the writing pass's store cache modifier
# ("", ".cs" streaming, ".cg", ".wt").
_LONG_HEAD_BYTES = 1024 if _INTERPRET else 0  # 0 on a GPU: a head before the aligned body gains nothing there
_LONG_HEAD_BYTES_BWD = 1024 if _INTERPRET else 0
_LONG_REVERSE = True
_LONG_EVICT_LAST = True
_LONG_EVICT_FIRST = True
_LONG_STORE_CACHE = ""
# Rows shorter than this (bytes of input) skip the persistent grid: one program per row with
# _LONG_WARPS_SHORT warps. The persistent grid wins for f32 rows of 30000-50257 elements and loses
# for bf16 rows of about 32000, which stay in L2 between the passes without it.
_PERSIST_MIN_ROW_BYTES = 96 * 1024
_LONG_WARPS_SHORT = 4
_LONG_STAGES_SHORT = 1
# Long f32 forward rows held in shared memory (`_smem_rows_kernel`, Gluon; GPU only), when a
# row's chunks and _SMEM_SCRATCH bytes for the reductions fit a block's shared memory: one
# program of _SMEM_WARPS warps per SM, rows in chunks of _SMEM_CHUNK elements (a multiple of
# 128 * _SMEM_WARPS: one 16-byte vector per thread per chunk at the least).
_SMEM_ROWS = True
_SMEM_CHUNK = 2048
_SMEM_WARPS = 16
_SMEM_SCRATCH = 4096
_INTERPRET_PROGRAMS = 3  # interpreter grid for long rows: a few, so that programs take turns

_PLANS = {}  # (shape, dtypes, dim, device) -> (kernel launcher, constexprs, make output)


def _warps(tile):
    return 2 if tile <= 256 else (4 if tile <= 1024 else (8 if tile <= 4096 else 16))


def _long_pipeline(bytes_per_element, wide_acc):
    """(BLOCK_N, STAGES) for `_long_rows_kernel`: the pipeliner buffers STAGES - 1 chunks of every
    load of a loop step in shared memory, which must fit each program's share of an SM; fp64
    statistics take half the tile (the per-lane running max and sum spill otherwise)."""
    budget = _LONG_SMEM_PER_SM // max(1, int(_LONG_PROGRAMS_PER_SM))
    block_n = max(1024, _LONG_TILE // 2) if wide_acc else _LONG_TILE
    stages = max(1, _LONG_STAGES)
    while stages > 1 and (stages - 1) * block_n * bytes_per_element > budget:
        if block_n > 1024:
            block_n //= 2
        else:
            stages -= 1
    return block_n, stages


def _long_head(red, element_size, wide_acc):
    """Elements of a long row kept in registers between the passes (0: none): a power of two, a
    multiple of _ROW_ALIGN, no longer than the row rounded up to a power of two. The budget is
    in registers: a 2-byte element is held as 4 bytes. None with fp64 statistics, which take
    the whole register file already (a head spills)."""
    budget = _LONG_HEAD_BYTES_BWD if _MODE >= 2 else _LONG_HEAD_BYTES
    n = int(budget) // (max(element_size, 4) * (2 if _MODE >= 2 else 1))
    if wide_acc or n < max(16, _ROW_ALIGN):
        return 0
    return min(1 << (n.bit_length() - 1), _pow2(red))


def _smem_rows_plan(a, outer, red, out_dtype):
    """(launcher, sizes, constexprs) of `_smem_rows_kernel` for these rows, or None: f32
    softmax / log_softmax rows on an NVIDIA GPU with cp.async (sm_80+) whose shared memory
    per block holds a row's aligned superset in whole chunks."""
    if not (_SMEM_ROWS and gluon is not None and not _INTERPRET and _MODE < 2
            and a.device.type == "cuda" and torch.version.hip is None
            and a.dtype == torch.float32 and out_dtype == torch.float32
            and _SMEM_CHUNK % (128 * _SMEM_WARPS) == 0):
        return None
    index = a.device.index if a.device.index is not None else torch.cuda.current_device()
    if torch.cuda.get_device_capability(index)[0] < 8:
        return None
    consts, chunk_bytes = _smem_rows_consts(red)
    shared = triton.runtime.driver.active.utils.get_device_properties(index)["max_shared_mem"]
    if chunk_bytes + _SMEM_SCRATCH > shared:
        return None
    return _smem_rows, (outer, red), dict(GRID=min(outer, _num_sms(index)), **consts)


def _smem_rows_consts(red):
    """`_smem_rows_kernel`'s constexprs for rows of `red` f32 elements, and the shared memory
    its chunks take (bytes)."""
    nchunk = _cdiv(red + 3, _SMEM_CHUNK)
    consts = dict(MODE=_MODE, CHUNK=_SMEM_CHUNK, NCHUNK=nchunk,
                  L=gl.BlockedLayout([4], [32], [_SMEM_WARPS], [0]),
                  SL=gl.SwizzledSharedLayout(1, 1, 1, [0]), num_warps=_SMEM_WARPS)
    return consts, nchunk * _SMEM_CHUNK * 4


def _plan(a, dim, out_dtype):
    ndim = a.dim()
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})")
    dim = dim % rank
    shape = list(a.shape) if ndim > 0 else [1]
    outer = 1
    for s in shape[:dim]:
        outer *= s
    red = shape[dim]
    inner = 1
    for s in shape[dim + 1:]:
        inner *= s
    acc = tl.float64 if torch.float64 in (a.dtype, out_dtype) else tl.float32
    if inner == 1:
        aligned = red % 16 == 0
        wide = _MODE == 3 or (_MODE < 2 and acc == tl.float32)
        one_pass_max = _ONE_PASS_MAX_ALIGNED if aligned and wide else _ONE_PASS_MAX
        body_mode = _MODE < 2 or (_MODE == 3 and _BODY_BWD and a.element_size() == 2)
        if (not aligned and body_mode and acc == tl.float32
                and _ONE_PASS_MAX < _pow2(red) <= _BODY_MAX):
            consts = dict(MODE=_MODE, ACC=acc, BLOCK_N=_pow2(red), ALIGN=_ROW_ALIGN,
                          num_warps=_BODY_WARPS if not _SMALL else 4)
            return _row_body_kernel[(outer,)], (outer, red), consts
        if _pow2(red) > one_pass_max:
            smem_plan = _smem_rows_plan(a, outer, red, out_dtype)
            if smem_plan is not None:
                return smem_plan
            block_n, stages = _long_pipeline(a.element_size() * (2 if _MODE >= 2 else 1),
                                             acc == tl.float64)
            warps = _LONG_WARPS
            head = 0
            if _INTERPRET or red * a.element_size() >= _PERSIST_MIN_ROW_BYTES:
                grid = (max(1, min(outer, _persistent_programs(a, _LONG_PROGRAMS_PER_SM))),)
                head = _long_head(red, a.element_size(), acc == tl.float64)
            else:  # rows that stay in L2 anyway: one program per row, several per SM
                grid = (outer,)
                warps = _LONG_WARPS_SHORT
                stages = min(stages, _LONG_STAGES_SHORT)
            consts = dict(MODE=_MODE, ACC=acc, BLOCK_N=block_n, ALIGN=_ROW_ALIGN, STAGES=stages,
                          HEAD=head, REVERSE=bool(_LONG_REVERSE),
                          EV_KEEP="evict_last" if _LONG_EVICT_LAST else "",
                          EV_DONE="evict_first" if _LONG_EVICT_FIRST else "",
                          ST_CACHE=_LONG_STORE_CACHE, num_warps=warps)
            # a store takes a cache modifier or an eviction hint, not both (ptxas)
            consts["ST_EV"] = "" if consts["ST_CACHE"] else consts["EV_DONE"]
            return _long_rows_kernel[grid], (outer, red), consts
        block_n = max(2, _pow2(red))
        chunk = 16 // a.element_size()
        if _WIN_TILE and red * a.element_size() % 16 and red >= chunk and block_n <= _WIN_MAX_N:
            window = _pow2(red + chunk - 1)
            rows = max(8, _pow2(_WIN_TILE // window))
            consts = dict(R=red, MODE=_MODE, ACC=acc, RB=rows, W=window, CH=chunk,
                          FTZ=bool(_WIN_FTZ) and not _INTERPRET and acc == tl.float32,
                          DEBUG=bool(_WIN_DEBUG_COPY), num_warps=_WIN_WARPS,
                          ARITH=bool(_WIN_ARITH) and acc == tl.float32, GPU=not _INTERPRET)
            last = (outer - 1) // rows
            if _WIN_PROGRAMS_PER_SM:
                grid = max(1, min(last, _persistent_programs(a, _WIN_PROGRAMS_PER_SM)))
                return _window_stream_kernel[(grid,)], (outer, outer * red, last), consts
            return _window_rows_kernel[(last + 1,)], (outer, outer * red, last), consts
        if _FLAT_ROWS_TILE and red * a.element_size() % 16 and block_n <= _FLAT_MAX_N:
            rows = _pow2(max(8, _FLAT_ROWS_TILE // block_n))  # a power of two, at least 8
            full = outer // rows
            consts = dict(R=red, MODE=_MODE, ACC=acc, ROWS=rows, BLOCK_N=block_n,
                          FLAT=_pow2(rows * red), RECIP=bool(_FLAT_RECIP), num_warps=_FLAT_WARPS)
            return _flat_rows_kernel[(_cdiv(outer, rows),)], (outer * red, full), consts
        tile = _TILE if aligned else min(_TILE, _TILE_UNALIGNED)
        block_m = max(1, min(_pow2(outer), tile // block_n))
        target = _target_programs(a)
        # short rows: more programs for a full GPU, but not fewer than _MIN_TILE elements each
        while block_m > 1 and _cdiv(outer, block_m) < target and block_m * block_n > _MIN_TILE:
            block_m //= 2
        warps = _warps(block_m * block_n)
        # a runtime R is known aligned only when a multiple of 16; an even one has vectors of 2+
        if _ROWS_CONST_N and not aligned and red % 2 == 0:
            if _ROWS_CONST_M:
                block_m = _pow2(_ROWS_CONST_M)
            warps = int(_ROWS_CONST_WARPS) or _warps(block_m * block_n)
            if _ROWS_CONST_SPLIT and not _ROWS_CONST_WARPS:
                warps = max(1, min(warps, block_m))  # more warps than rows split a half-row
            consts = dict(R=red, MODE=_MODE, ACC=acc, BLOCK_M=block_m, BLOCK_N=block_n,
                          SPLIT=bool(_ROWS_CONST_SPLIT), num_warps=warps)
            return _rows_const_kernel[(_cdiv(outer, block_m),)], (outer,), consts
        grid = (_cdiv(outer, block_m),)
        consts = dict(MODE=_MODE, ACC=acc, BLOCK_M=block_m, BLOCK_N=block_n, num_warps=warps)
        return _rows_kernel[grid], (outer, red), consts
    block_i = max(2, min(_pow2(inner), 32 if _SMALL else 64))
    one_pass = _pow2(red) * block_i <= (_TILE if _SMALL else 8192)
    block_r = max(2, _pow2(red)) if one_pass else max(2, _TILE // block_i)
    nib = _cdiv(inner, block_i)
    consts = dict(MODE=_MODE, ACC=acc, ONE_PASS=one_pass, BLOCK_R=block_r, BLOCK_I=block_i,
                  num_warps=_warps(block_r * block_i))
    return _cols_kernel[(outer * nib,)], (inner, red, nib), consts


def _launch(a, b, dim, out_dtype):
    """Softmax-like op of `a` (and `b`) along `dim`; returns a new contiguous tensor."""
    key = (a.shape, a.dtype, out_dtype, dim, a.device)
    plan = _PLANS.get(key)
    if plan is None:
        if not a.is_floating_point():
            raise RuntimeError(f"softmax: expected a floating point tensor, got {a.dtype}")
        plan = _PLANS[key] = _plan(a, dim, out_dtype)
    launch, sizes, consts = plan
    a = a.contiguous()
    b = a if b is None else b.contiguous()
    # empty_like: the cheapest allocation call (a is contiguous, so is out)
    out = torch.empty_like(a) if out_dtype == a.dtype else torch.empty_like(a, dtype=out_dtype)
    if out.numel():
        launch(a, b, out, *sizes, **consts)
    return out
