"""The one template behind the elementwise families (unary, binary, backward).

A family describes an operator with an `Elementwise` spec: which schema parameters are tensor
operands (broadcast together; a Python number in their place is accepted too), which are runtime
scalars, which decide the result dtype (as `torch.result_type`), and a few lines of Triton that
compute `out` from the loaded values. `render` turns a spec into a standalone kernel file:

- the wrapper's own Python signature binds the call (the schema's names and defaults); the
  result/compute dtypes are computed once per dtype signature (`_PLANS`), so a call does no
  promotion logic. Host time is part of every measured call, so the hot path is short: contiguous
  tensors of one shape, 0-d device tensors (read in-kernel) and numbers go straight to
  `_kernel_flat`; everything else (broadcasting, strides) takes the general path below, whose
  launch plan is cached per geometry (`_GEOMETRY`). The output is laid out like the first dense
  input of the output's shape, or is `self` (in-place) / `out` (out=);
- when every tensor operand is laid out exactly like a dense output (the common case) it launches
  `_kernel_flat`: index = offset, few arguments, vectorisable loads. Otherwise `_kernel`: the launch
  plan drops size-1 dims, walks the output's memory order and merges dims that every operand steps
  through as one, so a broadcast or strided case costs at most one div/mod per remaining dim (up
  to 6 dims; more falls back to contiguous copies), and operands laid out like the output are
  still indexed linearly;
- arithmetic runs in f32 for f16/bf16/f32 (f64 stays f64, integers stay integers), values are cast
  back on store; offsets are int64 only when an offset can pass 2**31.

Variants: 0 = strided plan above; 1 = inputs made contiguous first (`.expand().contiguous()`) and a
flat loop; 2 = as 1 with a small fixed block. The wrapper never computes results with PyTorch: it
allocates, reads shapes/strides and, in fallbacks only, makes layout copies.
"""

from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

import torch

from agent.providers.builtin import codegen
from agent.providers.builtin.request import KernelRequest, Writer
from evaluator.naming import normalize_op

MAX_DIMS = 6
NUM_VARIANTS = 3


@dataclass(frozen=True)
class Operand:
    """A tensor parameter the kernel loads. `raw` operands (masks, conditions) keep their dtype."""

    param: str
    var: str
    raw: bool = False


@dataclass(frozen=True)
class Elementwise:
    """How to write one elementwise overload.

    `result` and `compute` are Python expressions evaluated in the wrapper with `a` (bound args)
    and `dtype` (the promoted dtype of `promote`) in scope: `result` gives the output dtype,
    `compute` the dtype whose compute type the arithmetic uses. `constexprs` are (NAME, Python
    expression) pairs passed to the kernel as `tl.constexpr`. `body` assigns `out`; it may use the
    operand vars, scalar vars, constexprs, `CDT` (compute dtype), `FLOAT`, `BLOCK` and the device
    helpers in `HELPERS` by name.
    """

    summary: str
    operands: tuple[Operand, ...]
    body: str
    scalars: tuple[tuple[str, str], ...] = ()
    promote: tuple[str, ...] = ()
    result: str = "dtype"
    compute: str = "out_dtype"
    constexprs: tuple[tuple[str, str], ...] = ()
    float_only: bool = False  # decline cases that would compute in integers
    helpers_src: str = ""  # extra Python helpers the constexpr expressions call


# ---------------------------------------------------------------- device helpers (Triton)

HELPERS: dict[str, str] = {
    "_sigmoid": """
@triton.jit
def _sigmoid(x):
    return 1.0 / (1.0 + tl.exp(-x))
""",
    "_tanh": """
@triton.jit
def _tanh(x):
    # exp of a non-positive argument never overflows; odd symmetry is exact
    t = tl.exp(-2.0 * tl.abs(x))
    y = (1.0 - t) / (1.0 + t)
    return tl.where(x < 0, -y, y)
""",
    "_log1p": """
@triton.jit
def _log1p(x):
    # log(u) * x / (u - 1) with u = 1 + x cancels the rounding of u (accurate for small x)
    u = 1.0 + x
    d = u - 1.0
    y = tl.where(d == 0, x, tl.log(u) * (x / d))
    return tl.where(x == float("inf"), x, y)
""",
    "_expm1": """
@triton.jit
def _expm1(x):
    # (u - 1) * x / log(u) with u = exp(x) cancels the rounding of u (accurate for small x)
    u = tl.exp(x)
    d = u - 1.0
    y = tl.where(d == 0, x, d * (x / tl.log(u)))
    y = tl.where(d == -1.0, -1.0, y)
    return tl.where(u == float("inf"), u, y)
""",
    "_softplus": """
@triton.jit
def _softplus(x, beta, threshold):
    z = x * beta
    return tl.where(z > threshold, x, _log1p(tl.exp(z)) / beta)
""",
    "_pow": """
@triton.jit
def _pow(b, e):
    # b ** e for floats as exp2(e * log2|b|), with C pow's rules for negative bases and 0 ** e
    r = tl.exp2(e * tl.log2(tl.abs(b)))
    e_int = tl.floor(e) == e
    odd = e_int & ((tl.abs(e) % 2.0) == 1.0)
    r = tl.where(b < 0, tl.where(e_int, tl.where(odd, -r, r), float("nan")), r)
    return tl.where((e == 0) | (b == 1), 1.0, r)
""",
    "_ipow": """
@triton.jit
def _ipow(b, e):
    # integer b ** e for one scalar e >= 0: square and multiply
    r = b * 0 + 1
    while e > 0:
        r = tl.where(e % 2 == 1, r * b, r)
        b = b * b
        e = e // 2
    return r
""",
    "_trunc": """
@triton.jit
def _trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))
""",
    "_round_half_even": """
@triton.jit
def _round_half_even(x):
    # torch.round rounds ties to even; x - floor(x) is exact, so ties are detected exactly
    f = tl.floor(x)
    d = x - f
    f_even = (f - 2.0 * tl.floor(f * 0.5)) == 0
    up = (d > 0.5) | ((d == 0.5) & (f_even == 0))
    return tl.where(up, f + 1.0, f)
""",
    "_div": """
@triton.jit
def _div(a, b):
    # IEEE-rounded division: Triton's float32 `/` is approximate (2 ulp) on GPUs, which would
    # break exact quotients (6 / 3 must be 2 before trunc or floor)
    if a.dtype == tl.float32:
        return tl.math.div_rn(a, b)
    else:
        return a / b
""",
    "_div_floor": """
@triton.jit
def _div_floor(a, b):
    # eager's div_floor_floating: exact quotient from fmod, then floor, then fix rounding
    mod = a % b
    div = _div(a - mod, b)
    div = tl.where((mod != 0) & ((b < 0) != (mod < 0)), div - 1.0, div)
    fl = tl.floor(div)
    fl = tl.where(div - fl > 0.5, fl + 1.0, fl)
    return tl.where(b == 0, _div(a, b), fl)
""",
    "_idiv_floor": """
@triton.jit
def _idiv_floor(a, b):
    # Triton's integer // truncates toward zero; step down when the remainder has b's opposite sign
    q = a // b
    r = a - q * b
    return tl.where((r != 0) & ((r < 0) != (b < 0)), q - 1, q)
""",
    "_remainder": """
@triton.jit
def _remainder(a, b):
    # Python-style modulo (sign of b) from Triton's C-style % (sign of a)
    m = a % b
    return tl.where((m != 0) & ((b < 0) != (m < 0)), m + b, m)
""",
}

_HELPER_CALL = re.compile(r"\b(_[a-z0-9_]+)\(")


def _helpers_for(body: str) -> list[str]:
    """Sources of the device helpers `body` calls, dependencies first, in a stable order."""
    needed: list[str] = []
    seen: set[str] = set()

    def visit(text: str) -> None:
        for name in _HELPER_CALL.findall(text):
            if name in HELPERS and name not in seen:
                seen.add(name)
                visit(HELPERS[name])
                needed.append(name)

    visit(body)
    return [HELPERS[name].strip("\n") for name in needed]


# ---------------------------------------------------------------- host runtime (Python)

_RUNTIME = '''\
_MAX_DIMS = 6
_T = torch.Tensor
_NUMBERS = (float, int, bool)
_REQUIRED = object()  # marks a parameter without a default that follows one with a default
_PLANS = {}  # dtype signature of a call -> _dtype_plan(...)
_BROADCAST = {}  # operand shapes -> broadcast shape
_GEOMETRY = {}  # (shape, out strides, operand shapes and strides) -> launch plan of `_kernel`
_empty = torch.empty

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


def _operand(v, lead, kind):
    """(pointer, value, mode) of a non-leading operand on the fast path, or None when it needs
    the general path. Modes: 0 tensor laid out like `lead`, 1 number by value, 2 0-d tensor."""
    if type(v) is _T:
        if v.device != lead.device:
            return None
        if v.shape == lead.shape and v.is_contiguous():
            return v, _scalar(0, kind), 0
        if v.dim() == 0:
            return v, _scalar(0, kind), 2
        return None
    if type(v) in _NUMBERS:
        return lead, _scalar(v, kind), 1
    return None


def _kind(v):
    """What decides a promote parameter's part in the result dtype (the dtype-plan cache key)."""
    if isinstance(v, torch.Tensor):
        return v.dtype, v.dim() > 0
    return type(v)


def _scalar(value, cdt):
    """A Python number as a kernel argument of the compute dtype's kind."""
    if value is None:
        value = 0
    if cdt is tl.float32 or cdt is tl.float64:
        return float(value)
    if cdt is tl.int1:
        return bool(value)
    return int(value)


def _device(operands):
    tensors = [t for t in operands if isinstance(t, torch.Tensor)]
    for t in tensors:
        if t.dim() > 0:
            return t.device
    return tensors[0].device


def _broadcast_shape(operands):
    shapes = tuple(t.shape for t in operands if isinstance(t, torch.Tensor))
    out = _BROADCAST.get(shapes)
    if out is None:
        out = _BROADCAST[shapes] = _broadcast_shapes(shapes)
    return out


def _broadcast_shapes(shapes):
    shapes = [tuple(s) for s in shapes]
    ndim = max((len(s) for s in shapes), default=0)
    out = [1] * ndim
    for s in shapes:
        for i, size in enumerate(s):
            j = ndim - len(s) + i
            if size != 1:
                if out[j] != 1 and out[j] != size:
                    raise RuntimeError(f"{_OP}: shapes {shapes} do not broadcast")
                out[j] = size
    return tuple(out)


def _is_dense(t):
    """Non-overlapping and dense: some permutation of the dims is contiguous."""
    expect = 1
    for stride, size in sorted((st, n) for n, st in zip(t.shape, t.stride()) if n != 1):
        if stride != expect:
            return False
        expect *= size
    return True


def _new_output(operands, shape, dtype, device):
    """Output laid out like the first dense operand of the output's shape (channels-last or
    transposed inputs are then read and written in one order), else contiguous."""
    for t in operands:
        if isinstance(t, torch.Tensor) and t.shape == shape and t.device == device:
            if t.is_contiguous():
                break
            if _is_dense(t):
                return torch.empty_strided(shape, t.stride(), dtype=dtype, device=device)
    return torch.empty(shape, dtype=dtype, device=device)


def _aligned_strides(t, shape):
    """Strides of `t` broadcast to `shape` (0 along broadcast dims), without making a view."""
    strides = [0] * len(shape)
    if t is None:
        return strides
    pad = len(shape) - t.dim()
    for i, (size, stride) in enumerate(zip(t.shape, t.stride())):
        if size != 1:
            strides[pad + i] = stride
    return strides


def _plan(shape, strides):
    """One iteration order for all operands (strides[0] is the output's).

    Drops size-1 dims, walks the output's memory order and merges adjacent dims that every operand
    steps through as one. Returns (ndim, sizes, strides, linear) padded to _MAX_DIMS on the outer
    side, where linear[i] says operand i is contiguous in that order, or None for too many dims.
    """
    dims = [d for d in range(len(shape)) if shape[d] != 1]
    dims.sort(key=lambda d: -strides[0][d])
    sizes, merged = [], [[] for _ in strides]
    for d in reversed(dims):
        if sizes and all(st[d] == m[-1] * sizes[-1] for st, m in zip(strides, merged)):
            sizes[-1] *= shape[d]
        else:
            sizes.append(shape[d])
            for st, m in zip(strides, merged):
                m.append(st[d])
    if not sizes:
        sizes, merged = [1], [[0] for _ in strides]
    if len(sizes) > _MAX_DIMS:
        return None
    sizes.reverse()
    for m in merged:
        m.reverse()
    linear = []
    for m in merged:
        expect, ok = 1, True
        for size, stride in zip(reversed(sizes), reversed(m)):
            if size != 1 and stride != expect:
                ok = False
            expect *= size
        linear.append(ok)
    pad = _MAX_DIMS - len(sizes)
    return len(sizes), [1] * pad + sizes, [[0] * pad + m for m in merged], linear


def _extent(sizes, strides):
    return sum((n - 1) * abs(s) for n, s in zip(sizes, strides))


def _launch(out, operands, raw, scalars, cdt, consts):
    """Run the kernel over every element of `out`; operands are tensors or Python numbers."""
    n = out.numel()
    if n == 0:
        return out
    shape = out.shape
    device = out.device
    tensors, values = [], []
    for v, is_raw in zip(operands, raw):
        if isinstance(v, torch.Tensor) and v.dim() == 0 and v.device != device:
            v = v.item()  # a CPU scalar tensor beside GPU tensors, as eager allows: pass its value
        kind = tl.int32 if is_raw else cdt
        if isinstance(v, torch.Tensor):
            tensors.append(v)
            values.append(_scalar(0, kind))
        else:
            tensors.append(None)
            values.append(_scalar(v, kind))
    is_float = cdt is tl.float32 or cdt is tl.float64  # the only float compute dtypes
    scalar_flags = [t is None for t in tensors]
    tail = [cdt, is_float, out.dtype == torch.bool]
    # fast path (the common case): every tensor operand laid out exactly like a dense output
    stride = out.stride()
    if (out.is_contiguous() or _is_dense(out)) and all(
        t is None or (t.shape == shape and t.stride() == stride) for t in tensors
    ):
        block, num_warps = _launch_config(n, device)
        idx64 = n + block >= 2**31
        args = [out] + [out if t is None else t for t in tensors] + values + list(scalars) + [n]
        args += scalar_flags + tail + [idx64] + list(consts)
        _kernel_flat[(triton.cdiv(n, block),)](*args, BLOCK=block, num_warps=num_warps)
        return out
    shape = tuple(shape)
    target = out
    plan = None
    if not _CONTIGUOUS_INPUTS:
        # the plan depends only on the geometry: cache it (calls repeat the same shapes)
        key = (shape, stride, tuple(None if t is None else (t.shape, t.stride()) for t in tensors))
        cached = _GEOMETRY.get(key)
        if cached is None:
            plan = _plan(shape, [_aligned_strides(t, shape) for t in [out] + tensors])
            if plan is not None:
                ndim, sizes, strides, linear = plan
                wide = any(_extent(sizes, st) >= 2**31 for st in strides)
                flat_strides = [s for st in strides for s in st]
                cached = _GEOMETRY[key] = (ndim, sizes, flat_strides, linear, wide)
        if cached is not None:
            ndim, sizes, flat_strides, linear, wide = cached
            block, num_warps = _launch_config(n, device)
            args = [out] + [out if t is None else t for t in tensors] + values + list(scalars)
            args += [n] + sizes + flat_strides
            args += [ndim] + linear + scalar_flags + tail + [wide or n + block >= 2**31] + list(consts)
            _kernel[(triton.cdiv(n, block),)](*args, BLOCK=block, num_warps=num_warps)
            return out
    if plan is None:
        # fallback: contiguous copies of the inputs (and a contiguous output), one flat loop
        tensors = [
            t if t is None or (tuple(t.shape) == shape and t.is_contiguous())
            else t.expand(shape).contiguous()
            for t in tensors
        ]
        if not out.is_contiguous():
            target = torch.empty(shape, dtype=out.dtype, device=device)
        plan = _plan(shape, [_aligned_strides(t, shape) for t in [target] + tensors])
    ndim, sizes, strides, linear = plan
    block, num_warps = _launch_config(n, device)
    idx64 = n + block >= 2**31 or any(_extent(sizes, st) >= 2**31 for st in strides)
    args = [target] + [target if t is None else t for t in tensors] + values + list(scalars)
    args += [n] + sizes + [s for st in strides for s in st]
    args += [ndim] + linear + scalar_flags + tail + [idx64] + list(consts)
    _kernel[(triton.cdiv(n, block),)](*args, BLOCK=block, num_warps=num_warps)
    if target is not out:
        out.copy_(target)
    return out
'''


def runtime_source(variant: int) -> str:
    """The host-side helpers every elementwise file carries, with the variant's layout policy."""
    contiguous = variant >= 1
    return (
        "# variant policy: True makes contiguous copies of the inputs before the launch\n"
        f"_CONTIGUOUS_INPUTS = {contiguous}\n\n" + _RUNTIME
    )


# ---------------------------------------------------------------- kernel and wrapper text


def _kernel_source(spec: Elementwise, *, flat: bool) -> str:
    """`_kernel_flat` (every tensor operand laid out like the output: index = offset) or
    `_kernel` (N-d coordinates over the merged dims, per-operand strides)."""
    vars_ = [o.var for o in spec.operands]
    scalar_vars = [var for _, var in spec.scalars]
    every = ["out", *vars_]
    params: list[str] = ["out_ptr", *(f"{v}_ptr" for v in vars_), *(f"{v}_val" for v in vars_)]
    params += [*scalar_vars, "n"]
    constexpr: list[str] = []
    if not flat:
        params += [f"size{d}" for d in range(MAX_DIMS)]
        params += [f"{p}_st{d}" for p in every for d in range(MAX_DIMS)]
        constexpr += ["NDIM", "OUT_LIN", *(f"{v.upper()}_LIN" for v in vars_)]
    constexpr += [f"{v.upper()}_SCALAR" for v in vars_]
    constexpr += ["CDT", "FLOAT", "OUT_BOOL", "IDX64", *(name for name, _ in spec.constexprs)]
    constexpr += ["BLOCK"]
    no_spec = [f"{v}_val" for v in vars_] + scalar_vars
    signature = ",\n".join(
        ["    " + p for p in params] + [f"    {c}: tl.constexpr" for c in constexpr]
    )
    lines = [codegen.indent(codegen.OFFSETS_SOURCE).rstrip("\n")]
    if not flat:
        lines.append(
            "    # coordinates along the merged dims (innermost = dim 5; outer dims padded)"
        )
        lines.append("    c5 = offs")
        lines.append("    rest = offs")
        pad = "    "
        for k in range(1, MAX_DIMS):
            d = MAX_DIMS - k
            lines.append(f"{pad}if NDIM > {k}:")
            pad += "    "
            lines += [
                f"{pad}c{d} = rest % size{d}",
                f"{pad}rest = rest // size{d}",
                f"{pad}c{d - 1} = rest",
            ]

    def offset_lines(p: str, pad: str) -> list[str]:
        if flat:
            return [f"{pad}{p}_off = offs"]
        out = [f"{pad}if {p.upper()}_LIN:", f"{pad}    {p}_off = offs", f"{pad}else:"]
        out.append(f"{pad}    {p}_off = c5 * {p}_st5")
        for k in range(1, MAX_DIMS):
            d = MAX_DIMS - 1 - k
            out.append(f"{pad}    if NDIM > {k}:")
            out.append(f"{pad}        {p}_off += c{d} * {p}_st{d}")
        return out

    for operand in spec.operands:
        v = operand.var
        fill = "tl.int32" if operand.raw else "CDT"
        # {V}_SCALAR: 0 (False) = a tensor indexed per element, 1 (True) = a number passed by
        # value, 2 = a 0-d tensor on the device (every lane reads its one element)
        lines.append(f"    if {v.upper()}_SCALAR == 1:")
        lines.append(f"        {v} = tl.full([BLOCK], {v}_val, {fill})")
        lines.append("    else:")
        lines.append(f"        if {v.upper()}_SCALAR == 2:")
        lines.append(f"            {v}_off = offs * 0")
        lines.append("        else:")
        lines += offset_lines(v, "            ")
        lines.append(f"        {v} = tl.load({v}_ptr + {v}_off, mask=mask, other=0)")
        if not operand.raw:
            lines.append(
                f"        if CDT == tl.float64 and {v}_ptr.dtype.element_ty.primitive_bitwidth < 32:"
            )
            lines.append(
                f"            {v} = {v}.to(tl.float32)  # exact; direct half->f64 casts fail on CPU"
            )
            lines.append(f"        {v} = {v}.to(CDT)")
    lines.append(codegen.indent(spec.body.strip("\n")))
    lines += offset_lines("out", "    ")
    lines.append("    if OUT_BOOL:")
    lines.append("        out = out != 0")
    lines.append("    else:")
    lines.append("        out = out.to(CDT)  # int/bool results reach f16/bf16 through f32")
    lines.append(
        "        if CDT == tl.float64 and out_ptr.dtype.element_ty.primitive_bitwidth < 32:"
    )
    lines.append(
        "            out = out.to(tl.float32)  # f64 -> half types through f32, as for loads"
    )
    lines.append("    tl.store(out_ptr + out_off, out.to(out_ptr.dtype.element_ty), mask=mask)")
    decorator = f"@triton.jit(do_not_specialize={no_spec!r})" if no_spec else "@triton.jit"
    name = "_kernel_flat" if flat else "_kernel"
    return f"{decorator}\ndef {name}(\n{signature},\n):\n" + "\n".join(lines) + "\n"


_A_REF = re.compile(r'a\["(\w+)"\]')


def _params(schema) -> list[tuple[str, str | None]]:
    """(name, default source or None) for each schema parameter, in order. Keyword-only
    parameters are accepted positionally too (recorded calls are replayed; lenient costs nothing);
    a parameter without a default after one with a default gets `_REQUIRED`, checked on entry."""
    out: list[tuple[str, str | None]] = []
    for arg in schema.arguments:
        if keyword.iskeyword(arg.name):
            raise ValueError(f"schema parameter {arg.name!r} is a Python keyword")
        if arg.has_default_value():
            out.append((arg.name, codegen.py_literal(arg.default_value)))
        elif type(arg.type).__name__ == "OptionalType":
            out.append((arg.name, "None"))
        else:
            out.append((arg.name, None))
    seen_default = False
    for i, (name, default) in enumerate(out):
        if default is not None:
            seen_default = True
        elif seen_default:
            out[i] = (name, "_REQUIRED")
    return out


def _plain(expr: str) -> str:
    """A spec expression over `a["name"]` rewritten over the wrapper's parameter variables."""
    return _A_REF.sub(lambda m: m.group(1), expr)


def _dtype_plan_source(spec: Elementwise) -> str:
    """`_dtype_plan(a)`: (out_dtype, cdt, is_float, out_bool, operand zero values), computed once
    per dtype signature (the wrapper caches it in `_PLANS`)."""
    promote = ", ".join(f'a["{p}"]' for p in spec.promote)
    zeros = ", ".join(f"_scalar(0, {'tl.int32' if o.raw else 'cdt'})" for o in spec.operands)
    return (
        "def _dtype_plan(a):\n"
        '    """Result and compute dtypes for this call\'s dtypes (cached by the wrapper)."""\n'
        f"    dtype = _result_type({promote})\n"
        f"    out_dtype = {spec.result}\n"
        f"    cdt = _compute_dtype({spec.compute})\n"
        "    is_float = cdt is tl.float32 or cdt is tl.float64\n"
        f"    return out_dtype, cdt, is_float, out_dtype == torch.bool, ({zeros},)\n"
    )


def _wrapper_source(op: str, spec: Elementwise, kind: str) -> str:
    """kind: 'functional' (allocate), 'inplace' (write self) or 'out' (write the out= tensor).

    The wrapper binds arguments through its own Python signature, looks the dtype plan up by the
    operands' dtypes, and takes a fast path (no broadcasting, no layout planning: contiguous
    tensors of one shape, numbers for the others) before the general path."""
    schema = codegen.schema_of(op)
    fn = codegen.function_name(op)
    params = _params(schema)
    names = [n for n, _ in params]
    signature = ", ".join(n if d is None else f"{n}={d}" for n, d in params)
    promote_set = set(spec.promote)
    refs = sorted(set(_A_REF.findall(spec.result + spec.compute)) - promote_set)
    key_items = [f"_kind({p})" for p in spec.promote] + refs
    key = "(" + ", ".join(key_items) + ("," if len(key_items) == 1 else "") + ")"
    scalars = [f"_scalar({p}, cdt)" for p, _ in spec.scalars]
    consts = [_plain(expr) for _, expr in spec.constexprs]
    vars_ = [o.param for o in spec.operands]
    lines = [f"def _op({signature}):"]
    for n, d in params:
        if d == "_REQUIRED":
            lines += [
                f"    if {n} is _REQUIRED:",
                f'        raise TypeError(f"{{_OP}} missing required argument {n!r}")',
            ]
    lines += [
        f"    key = {key}",
        "    plan = _PLANS.get(key)",
        "    if plan is None:",
        "        plan = _PLANS[key] = _dtype_plan({"
        + ", ".join(f'"{n}": {n}' for n in names)
        + "})",
        "    out_dtype, cdt, is_float, out_bool, zeros = plan",
    ]
    types = {a.name: str(a.type) for a in schema.arguments}
    lead_i = next((i for i, v in enumerate(vars_) if types.get(v) == "Tensor"), None)
    if lead_i is not None and not (kind == "inplace" and vars_[lead_i] != "self"):
        lead = vars_[lead_i]
        conds = [f"type({lead}) is _T", f"{lead}.is_contiguous()"]
        if kind == "out":
            conds += ["type(out) is _T", "out.is_contiguous()", f"out.shape == {lead}.shape"]
        lines.append("    # fast path: contiguous tensors of one shape, 0-d tensors and numbers")
        lines.append("    if " + " and ".join(conds) + ":")
        others = [i for i in range(len(vars_)) if i != lead_i]
        prev = None
        for i in others:
            k = "tl.int32" if spec.operands[i].raw else "cdt"
            call = f"_operand({vars_[i]}, {lead}, {k})"
            if prev is None:
                lines.append(f"        o{i} = {call}")
            else:
                lines.append(f"        o{i} = {call} if {prev} is not None else None")
            prev = f"o{i}"
        pad = "        "
        if prev is not None:
            lines.append(f"        if {prev} is not None:")
            pad = "            "
        if kind == "functional":
            lines.append(f"{pad}out = _empty({lead}.shape, dtype=out_dtype, device={lead}.device)")
        elif kind == "inplace":
            lines.append(f"{pad}out = self")
        lines.append(f"{pad}n = {lead}.numel()")
        lines.append(f"{pad}if n:")
        lines.append(f"{pad}    block, warps = _launch_config(n, {lead}.device)")
        ptrs = [lead if i == lead_i else f"o{i}[0]" for i in range(len(vars_))]
        vals = [f"zeros[{i}]" if i == lead_i else f"o{i}[1]" for i in range(len(vars_))]
        flags = ["0" if i == lead_i else f"o{i}[2]" for i in range(len(vars_))]
        args = ["out", *ptrs, *vals, *scalars, "n", *flags, "cdt", "is_float", "out_bool"]
        args += ["n + block >= 2147483648", *consts]
        lines.append(f"{pad}    _kernel_flat[(-(-n // block),)](")
        lines.append(f"{pad}        " + ", ".join(args) + ",")
        lines.append(f"{pad}        BLOCK=block, num_warps=warps)")
        lines.append(f"{pad}return out")
    operands = ", ".join(vars_)
    raw = ", ".join(str(o.raw) for o in spec.operands)
    lines += [
        "    # general path: broadcasting, strides, 0-d and CPU scalar tensors",
        f"    operands = ({operands},)",
        "    shape = _broadcast_shape(operands)",
    ]
    if kind == "inplace":
        lines += [
            "    out = self",
            "    if tuple(out.shape) != shape:",
            '        raise RuntimeError(f"{_OP}: result shape {shape} differs from self {tuple(out.shape)}")',
        ]
    elif kind == "out":
        lines += [
            "    if tuple(out.shape) != shape:",
            "        out.resize_(shape)",
        ]
    else:
        lines.append("    out = _new_output(operands, shape, out_dtype, _device(operands))")
    scalars_t = ", ".join(scalars) + ("," if scalars else "")
    consts_t = ", ".join(consts) + ("," if consts else "")
    lines += [
        f"    return _launch(out, operands, ({raw},), ({scalars_t}), cdt, ({consts_t}))",
        "",
        "",
        f"def {fn}(*args, **kwargs):",
        f'    """aten::{normalize_op(op)} with its exact schema; `_op`\'s signature binds the arguments."""',
        "    return _op(*args, **kwargs)",
    ]
    return "\n".join(lines) + "\n"


def kind_of(op: str) -> str:
    """'inplace' for `add_.Tensor`-style overloads, 'out' for out= ones, else 'functional'."""
    schema = codegen.schema_of(op)
    for arg in schema.arguments:
        if arg.name == "out" and arg.alias_info is not None and arg.alias_info.is_write:
            return "out"
    first = schema.arguments[0] if schema.arguments else None
    if first is not None and first.alias_info is not None and first.alias_info.is_write:
        return "inplace"
    return "functional"


def render(op: str, spec: Elementwise, variant: int) -> str:
    """The whole kernel file for `op` from `spec`."""
    variant = min(max(variant, 0), NUM_VARIANTS - 1)
    schema = codegen.schema_of(op)
    kind = kind_of(op)
    plans = {
        0: "Plan: one launch over the output. Operands laid out like the output use "
        "`_kernel_flat` (index = offset); otherwise `_kernel` reads each operand through its "
        "strides (broadcast = stride 0) after dims are merged in the output's memory order.",
        1: "Plan (fallback): inputs are made contiguous in the output's shape first, then one "
        "flat launch.",
        2: "Plan (fallback): inputs are made contiguous first, then one flat launch with small "
        "fixed blocks.",
    }
    header = codegen.file_header(
        op,
        summary=spec.summary,
        plan=plans[variant]
        + " Arithmetic runs in float32 for float16/bfloat16/float32 (float64 and integers in "
        "their own type); results are cast back on store.",
        variant=variant,
        schema=schema,
    )
    return codegen.render_file(
        header,
        codegen.DTYPE_SOURCE,
        runtime_source(variant),
        _dtype_plan_source(spec),
        codegen.launch_config_source(variant),
        spec.helpers_src,
        *_helpers_for(spec.body),
        _kernel_source(spec, flat=True),
        _kernel_source(spec, flat=False),
        _wrapper_source(op, spec, kind),
    )


# ---------------------------------------------------------------- writers


def _computes_in_integers(case) -> bool:
    """True when no operand of the case is floating (tensor dtype or Python float)."""
    specs = case.tensor_specs()
    if any(s.dtype in codegen.FLOAT_DTYPES for s in specs):
        return False

    def has_float(value) -> bool:
        if isinstance(value, float):
            return True
        if isinstance(value, list | tuple):
            return any(has_float(v) for v in value)
        if isinstance(value, dict):
            return any(has_float(v) for v in value.values())
        return False

    return not has_float((case.args, case.kwargs))


def writer_for(spec: Elementwise) -> Writer:
    """A Writer that renders `spec`, or declines (None) cases the template cannot handle."""

    def write(request: KernelRequest) -> str | None:
        if codegen.unsupported_dtypes(request.cases):
            return None
        if spec.float_only and any(_computes_in_integers(c) for c in request.cases):
            return None
        return render(request.op, spec, request.variant)

    return write


def _signature(schema) -> list[tuple[str, str]]:
    return [(a.name, str(a.type)) for a in schema.arguments if a.name != "out"]


def derived_overloads(op: str) -> list[str]:
    """In-place (`add_.Tensor`) and out= (`add.out`) overloads with the same parameters as `op`."""
    name, _ = op.split(".", 1)
    base = _signature(codegen.schema_of(op))
    found: list[str] = []
    for packet_name in (name + "_", name):
        packet = getattr(torch.ops.aten, packet_name, None)
        if packet is None:
            continue
        for overload in sorted(packet.overloads()):
            candidate = f"{packet_name}.{overload}"
            if candidate == op:
                continue
            schema = codegen.schema_of(candidate)
            if _signature(schema) != base:
                continue
            if packet_name == name and kind_of(candidate) != "out":
                continue
            if packet_name != name and kind_of(candidate) != "inplace":
                continue
            found.append(candidate)
    return found


def writers_for(specs: dict[str, Elementwise], *, derive: bool = True) -> dict[str, Writer]:
    """WRITERS for a family: every spec'd overload plus its in-place and out= forms."""
    writers: dict[str, Writer] = {}
    for op, spec in specs.items():
        writers[op] = writer_for(spec)
        if derive:
            for extra in derived_overloads(op):
                writers.setdefault(extra, writer_for(spec))
    return writers
