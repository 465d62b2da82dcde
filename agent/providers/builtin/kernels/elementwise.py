"""Elementwise runtime, first part: limits, knobs and eager's dtype promotion (`_result_type`,
scalars as kernel arguments, plan keys). The writer copies it into every unary, binary and backward
file, then elementwise_plan.py's section.
"""

import torch
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _OP

# Generated per operator by elementwise.py (kernels, dtype plan, launch policy):
_KIND = _RAW = _CONTIGUOUS_INPUTS = None
_dtype_plan = _kernel_flat = _launch_config = _store_geometry = None



# ---- emitted: runtime ----
_MAX_DIMS = 6
_MAX_PLANS = 1024  # launch plans kept per file; the table is emptied when full
_T = torch.Tensor
_REQUIRED = object()  # marks a parameter without a default that follows one with a default
# call geometry -> launch plan (`_build`). The key holds, per operand, (shape, strides, dtype,
# device) for a tensor or the type of a Python number, then the out= tensor's, then the values of
# the parameters the result dtype reads: everything the plan depends on, and no tensor objects.
_PLANS = {}
_empty_strided = torch.empty_strided
_CAPTURED = []  # geometry tensors of plans built during CUDA graph capture (not cached)

# `_kernel_tile` (strided plans): a program owns a [BLOCK_R, BLOCK_C] tile of the two innermost
# merged dims; outer coordinates are per-program scalars, so no element pays a division, and an
# operand with unit inner stride is read in 16-byte vectors. Read by `_build` (once per plan).
_TILE = True  # False: strided plans use `_kernel` (one div/mod per merged dim per element)
_TILE_ELEMS = 2048  # elements per program on a GPU (BLOCK_R * BLOCK_C at most)
_TILE_ELEMS_CPU = 16384  # the interpreter runs programs one by one: fewer, larger tiles
_TILE_WARPS = 4
_TILE_MAX_COLS = 1024  # BLOCK_C at most
_TILE_MAX_WASTE = 0.125  # padding (masked lanes) allowed per tile axis, as a fraction
_TILE_MIN_COLS = 32  # narrower column blocks (uneven widths): `_kernel` instead
_TILE_MIN_ELEMS = 256  # smaller tiles (tiny inner dims) keep `_kernel`

_FLOAT_RANK = {torch.float16: 1, torch.bfloat16: 1, torch.float32: 2, torch.float64: 3}
_INT_BITS = {torch.uint8: 8, torch.int8: 8, torch.int16: 16, torch.int32: 32, torch.int64: 64}


def _promote(a, b):
    """torch.promote_types for real dtypes, in Python (torch's own dispatches an ATen op)."""
    if a is None or a == b:
        return b
    if b is None or b == torch.bool:
        return a
    if a == torch.bool:
        return b
    if a in _FLOAT_RANK and b in _FLOAT_RANK:
        if {a, b} == {torch.float16, torch.bfloat16}:
            return torch.float32
        return a if _FLOAT_RANK[a] > _FLOAT_RANK[b] else b
    if a in _FLOAT_RANK or b in _FLOAT_RANK:
        return a if a in _FLOAT_RANK else b
    if a not in _INT_BITS or b not in _INT_BITS:
        raise TypeError(f"{_OP}: dtypes {a} and {b} are not supported by this kernel")
    if torch.uint8 in (a, b):
        other = b if a == torch.uint8 else a
        return torch.int16 if other == torch.int8 else other
    return a if _INT_BITS[a] > _INT_BITS[b] else b


def _combine(higher, lower):
    """torch's combine_categories: a lower-priority group only wins with a higher category."""
    if higher is None:
        return lower
    if lower is None or higher in _FLOAT_RANK:
        return higher
    if higher == torch.bool or lower in _FLOAT_RANK:
        return _promote(higher, lower)
    return higher


def _result_type(*values):
    """torch.result_type over tensors and Python numbers: dimensioned tensors outrank 0-d tensors,
    which outrank Python numbers, unless the lower group has a higher category (bool<int<float)."""
    dim = zero = wrapped = None
    for v in values:
        if v is None:
            continue
        if isinstance(v, torch.Tensor):
            if v.dim() > 0:
                dim = _promote(dim, v.dtype)
            else:
                zero = _promote(zero, v.dtype)
        elif isinstance(v, bool):
            wrapped = _promote(wrapped, torch.bool)
        elif isinstance(v, int):
            wrapped = _promote(wrapped, torch.int64)
        elif isinstance(v, float):
            wrapped = _promote(wrapped, torch.get_default_dtype())
        else:
            raise TypeError(f"{_OP}: unsupported argument of type {type(v).__name__}")
    return _combine(dim, _combine(zero, wrapped))


def _as_float(dtype):
    return dtype if dtype in _FLOAT_RANK else torch.get_default_dtype()


def _scalar(value, cdt):
    """A Python number as the (integer, float) kernel argument pair of the compute dtype's kind.

    Every number goes to the kernel through two parameters: an unannotated one for integers and
    bools, and one annotated `tl.float64` for floats (Triton's launcher packs an unannotated
    Python float as fp32, which would round the scalar of a float64 computation); the kernel
    reads the one its compute dtype needs and the other is a zero."""
    if value is None:
        value = 0
    if cdt is tl.float32 or cdt is tl.float64:
        return 0, float(value)
    if cdt is tl.int1:
        return bool(value), 0.0
    return int(value), 0.0


def _key_of(v):
    """An operand's part of the plan key when it is not exactly a torch.Tensor (the wrapper
    inlines the exact-tensor case): a tensor subclass keys like a tensor, a number by its type."""
    if isinstance(v, torch.Tensor):
        return v.shape, v.stride(), v.dtype, v.device
    return type(v)
