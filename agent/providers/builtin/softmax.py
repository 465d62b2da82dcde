"""Softmax family of the builtin provider: _softmax, _log_softmax and their backward
(_softmax_backward_data, _log_softmax_backward_data), over any dim, with half_to_float.

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template, e.g. non-float inputs).
Same request -> same text.

How the generated kernels work. The input is read as a row-major `[outer, R, inner]` array (a
non-contiguous input is first made contiguous: eager returns a contiguous result anyway), R being
the softmax dim:
- `inner == 1` (the usual dim=-1): a row kernel, BLOCK_M rows per program. A row that fits in one
  tile is loaded once (max, exp, sum, write); a longer row (a 50k vocabulary) takes an online
  pass (running max and rescaled sum) and a writing pass;
- `inner > 1`: the same on a column tile, coalesced along inner.
Arithmetic is fp32 (fp64 for fp64 inputs), whatever the storage dtype; the result is stored in
eager's dtype (fp32 for half_to_float, `input_dtype` for the backward ops).
"""

from __future__ import annotations

from string import Template
from typing import TYPE_CHECKING

import torch

from agent.providers.builtin import codegen

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)

_TEMPLATE = '''import functools
import os

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CONSERVATIVE = $conservative  # variant >= 1: smaller tiles
_MODE = $mode  # 0 softmax, 1 log_softmax, 2 softmax backward, 3 log_softmax backward


def _cdiv(a, b):
    return -(-a // b)


@functools.lru_cache(maxsize=None)
def _num_sms(index):
    return torch.cuda.get_device_properties(index).multi_processor_count


def _target_programs(x):
    """Programs that keep the device busy (a few per SM); irrelevant on the interpreter."""
    if _INTERPRET or x.device.type != "cuda":
        return 1
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    return 4 * _num_sms(index)


def _pow2(n):
    return 1 << max(0, int(n) - 1).bit_length()


@triton.jit
def _finish(a, b, mx, s, MODE: tl.constexpr):
    """The elementwise tail: a = input (fwd) or grad (bwd); b = output (bwd only)."""
    if MODE == 0:
        y = tl.exp(a - mx) / s
    elif MODE == 1:
        y = a - mx - tl.log(s)
    elif MODE == 2:
        y = b * (a - s)
    else:
        y = a - tl.exp(b) * s
    return y


@triton.jit
def _rows_kernel(a_ptr, b_ptr, out_ptr, ROWS, R, MODE: tl.constexpr, ACC: tl.constexpr,
                 ONE_PASS: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK_M + tl.arange(0, BLOCK_M)
    row_ok = rows < ROWS
    row_off = rows[:, None] * R
    if ONE_PASS:
        cols = tl.arange(0, BLOCK_N)
        m = row_ok[:, None] & (cols[None, :] < R)
        offs = row_off + cols[None, :]
        if MODE < 2:
            # -inf pads the row; padding rows read 0 so that they stay finite
            a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
            a = tl.where(cols[None, :] < R, a, float("-inf"))
            b = a
            mx = tl.max(a, axis=1)
            s = tl.sum(tl.exp(a - mx[:, None]), axis=1)
        else:
            a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
            mx = tl.zeros([BLOCK_M], ACC)
            if MODE == 2:
                b = tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
                s = tl.sum(a * b, axis=1)
            else:  # the output is needed only after the sum: fewer live registers
                s = tl.sum(a, axis=1)
                b = tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
        y = _finish(a, b, mx[:, None], s[:, None], MODE)
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)
    else:
        mx = tl.full([BLOCK_M], float("-inf"), ACC)
        s = tl.zeros([BLOCK_M], ACC)
        acc = tl.zeros([BLOCK_M, BLOCK_N], ACC)
        for c0 in range(0, R, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            m = row_ok[:, None] & (cols[None, :] < R)
            offs = row_off + cols[None, :]
            if MODE < 2:
                a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
                a = tl.where(cols[None, :] < R, a, float("-inf"))
                new_mx = tl.maximum(mx, tl.max(a, axis=1))
                safe = tl.where(new_mx == float("-inf"), 0.0, new_mx)
                s = s * tl.exp(mx - safe) + tl.sum(tl.exp(a - safe[:, None]), axis=1)
                mx = new_mx
            else:
                a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
                if MODE == 2:
                    acc += a * tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
                else:
                    acc += a
        if MODE >= 2:
            s = tl.sum(acc, axis=1)
        for c0 in range(0, R, BLOCK_N):
            cols = c0 + tl.arange(0, BLOCK_N)
            m = row_ok[:, None] & (cols[None, :] < R)
            offs = row_off + cols[None, :]
            a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
            b = a
            if MODE >= 2:
                b = tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
            y = _finish(a, b, mx[:, None], s[:, None], MODE)
            tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def _cols_kernel(a_ptr, b_ptr, out_ptr, INNER, R, NIB, MODE: tl.constexpr, ACC: tl.constexpr,
                 ONE_PASS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    pid = tl.program_id(0)
    o = (pid // NIB).to(tl.int64)
    i = (pid % NIB).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < INNER
    base = o * R * INNER + i[None, :]
    if ONE_PASS:
        r = tl.arange(0, BLOCK_R)
        m = (r[:, None] < R) & i_ok[None, :]
        offs = base + r[:, None] * INNER
        if MODE < 2:
            a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
            a = tl.where(r[:, None] < R, a, float("-inf"))
            b = a
            mx = tl.max(a, axis=0)
            s = tl.sum(tl.exp(a - mx[None, :]), axis=0)
        else:
            a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
            b = tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
            mx = tl.zeros([BLOCK_I], ACC)
            if MODE == 2:
                s = tl.sum(a * b, axis=0)
            else:
                s = tl.sum(a, axis=0)
        y = _finish(a, b, mx[None, :], s[None, :], MODE)
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)
    else:
        mx = tl.full([BLOCK_I], float("-inf"), ACC)
        s = tl.zeros([BLOCK_I], ACC)
        acc = tl.zeros([BLOCK_R, BLOCK_I], ACC)
        for r0 in range(0, R, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            m = (r[:, None] < R) & i_ok[None, :]
            offs = base + r[:, None] * INNER
            if MODE < 2:
                a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
                a = tl.where(r[:, None] < R, a, float("-inf"))
                new_mx = tl.maximum(mx, tl.max(a, axis=0))
                safe = tl.where(new_mx == float("-inf"), 0.0, new_mx)
                s = s * tl.exp(mx - safe) + tl.sum(tl.exp(a - safe[None, :]), axis=0)
                mx = new_mx
            else:
                a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
                if MODE == 2:
                    acc += a * tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
                else:
                    acc += a
        if MODE >= 2:
            s = tl.sum(acc, axis=0)
        for r0 in range(0, R, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            m = (r[:, None] < R) & i_ok[None, :]
            offs = base + r[:, None] * INNER
            a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
            b = a
            if MODE >= 2:
                b = tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
            y = _finish(a, b, mx[None, :], s[None, :], MODE)
            tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)


# Tile limits (module constants so that a benchmark can sweep them; plans read them once).
# Measured on an H200 (CUDA graphs): holding a whole 32k row in registers loses to the online
# two-pass loop in the forward (bf16 30522: 887 vs 252 us), wins in the backward when rows are
# 16-element aligned (f32 32000: 799 vs 982 us) and loses when they are not (bf16 30522: 784 vs
# 309 us). Rows that are not 16-aligned load unvectorized: small tiles do better there
# (49-wide rows: 49 vs 63 us at 1024 vs 4096 elements), aligned rows like larger tiles.
_SMALL = _INTERPRET or _CONSERVATIVE
_ONE_PASS_MAX = 256 if _SMALL else 8192  # row held in registers
_ONE_PASS_MAX_BWD_ALIGNED = 256 if _SMALL else 32768  # log_softmax backward, 16-aligned rows
_TILE = 1024 if _SMALL else 4096  # elements per loop step / short-row tile
_TILE_UNALIGNED = 1024  # short-row tile when rows are not a multiple of 16 long
_MIN_TILE = 64 if _SMALL else 1024  # short rows: at least this many elements per program

_PLANS = {}  # (shape, dtypes, dim, device) -> (kernel launcher, constexprs, make output)


def _warps(tile):
    return 2 if tile <= 256 else (4 if tile <= 1024 else (8 if tile <= 4096 else 16))


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
        one_pass_max = _ONE_PASS_MAX_BWD_ALIGNED if _MODE == 3 and aligned else _ONE_PASS_MAX
        one_pass = _pow2(red) <= one_pass_max
        block_n = max(2, _pow2(red)) if one_pass else _TILE
        tile = _TILE if aligned else min(_TILE, _TILE_UNALIGNED)
        block_m = max(1, min(_pow2(outer), tile // block_n))
        target = _target_programs(a)
        # short rows: more programs for a full GPU, but not fewer than _MIN_TILE elements each
        while block_m > 1 and _cdiv(outer, block_m) < target and block_m * block_n > _MIN_TILE:
            block_m //= 2
        grid = (_cdiv(outer, block_m),)
        consts = dict(MODE=_MODE, ACC=acc, ONE_PASS=one_pass, BLOCK_M=block_m, BLOCK_N=block_n,
                      num_warps=_warps(block_m * block_n))
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


$body


def $fn(*args, **kwargs):
    """aten::$op with its exact schema; the Python signature of `_op` binds the arguments."""
    return _op(*args, **kwargs)
'''

_PLAN = (
    "Plan: the input (made contiguous) is read as a row-major [outer, R, inner] array, R the "
    "softmax dim; inner == 1 runs a row kernel (BLOCK_M rows per program), inner > 1 a column "
    "kernel coalesced along inner. A row that fits one tile is loaded once; a longer one takes an "
    "online pass (running max, rescaled sum) and a writing pass. Arithmetic is fp32 (fp64 for "
    "fp64 inputs)."
)
NUM_VARIANTS = 2  # 0: big tiles; 1: small tiles

_FORWARD = """def _op(self, dim, half_to_float):
    out_dtype = self.dtype
    if half_to_float and self.dtype in (torch.float16, torch.bfloat16):
        out_dtype = torch.float32
    return _launch(self, None, dim, out_dtype)"""

_BACKWARD = """def _op(grad_output, output, dim, input_dtype):
    return _launch(grad_output, output, dim, input_dtype)"""

_SPECS: dict[str, tuple[int, str, str]] = {
    "_softmax.default": (0, "softmax along one dim (half_to_float: fp32 result)", _FORWARD),
    "_log_softmax.default": (1, "log-softmax along one dim (half_to_float: fp32 result)", _FORWARD),
    "_softmax_backward_data.default": (
        2,
        "softmax backward: output * (grad - sum(grad * output, dim))",
        _BACKWARD,
    ),
    "_log_softmax_backward_data.default": (
        3,
        "log-softmax backward: grad - exp(output) * sum(grad, dim)",
        _BACKWARD,
    ),
}


def _write(request: KernelRequest) -> str | None:
    spec = _SPECS.get(request.op)
    if spec is None:
        return None
    if any(dt not in _FLOATS for dt in codegen.case_dtypes(request.cases)):
        return None
    mode, summary, body = spec
    variant = min(max(request.variant, 0), NUM_VARIANTS - 1)
    return codegen.render_file(
        codegen.file_header(
            request.op, summary=summary, plan=_PLAN, variant=variant, schema=request.schema
        ),
        Template(_TEMPLATE).substitute(
            conservative=str(variant >= 1),
            mode=mode,
            body=body,
            fn=codegen.function_name(request.op),
            op=request.op,
        ),
    )


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
