"""The one template behind the elementwise families (unary, binary, backward).

A family describes an operator with an `Elementwise` spec: which schema parameters are tensor
operands (broadcast together; a Python number in their place is accepted too), which are runtime
scalars, which decide the result dtype (as `torch.result_type`), and a few lines of Triton that
compute `out` from the loaded values. `render` turns a spec into a standalone kernel file:

- the wrapper's own Python signature binds the call (the schema's names and defaults). Host time
  is part of every measured call, so everything a call decides (result and compute dtypes,
  broadcast shape, output layout, dim merging, launch config, constexpr flags) is a launch plan
  cached per call geometry (`_PLANS`, keyed by each operand's shape, strides, dtype and device or a
  number's type; bounded). A repeated call builds that key, looks it up, allocates the output
  (`torch.empty_strided`) and launches. The output is laid out like the first dense input of the
  output's shape, or is `self` (in-place) / `out` (out=, resized as eager does); numbers, and 0-d
  tensors on another device (a CPU scalar beside CUDA tensors), are passed by value, 0-d tensors
  on the output's device are read in-kernel;
- when every tensor operand is laid out exactly like a dense output (the common case) it launches
  `_kernel_flat`: index = offset, few arguments, vectorisable loads. Otherwise `_kernel`: the launch
  plan drops size-1 dims, walks the output's memory order and merges dims that every operand steps
  through as one, so a broadcast or strided case costs at most one div/mod per remaining dim (up
  to 6 dims; more falls back to contiguous copies), and operands laid out like the output are
  still indexed linearly. The merged sizes and strides live in a small tensor on the operands'
  device that the plan owns (written once by `_store_geometry`, a one-program kernel: no host-to-
  device copy), so a launch passes one pointer instead of ~6 ints per operand (each launch
  argument costs host time in the launcher); NDIM and which operands are linear are one
  constexpr, LAYOUT. Such plans normally launch `_kernel_tile` instead: the two innermost merged
  dims form a [BLOCK_R, BLOCK_C] tile and outer coordinates are per-program scalars, so no element
  pays a division, rows with unit inner stride are read in 16-byte vectors and operands broadcast
  along the row (stride 0) are loaded and computed once per row (`_TILE*` constants: knobs);
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

from agent.providers.builtin import codegen, kernelsource
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

# name -> source of each device helper (kernels/elementwise_helpers.py)
HELPERS: dict[str, str] = kernelsource.definitions("elementwise_helpers")

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

_RUNTIME = kernelsource.emitted("elementwise", "runtime")


def runtime_source(variant: int) -> str:
    """The host-side helpers every elementwise file carries, with the variant's layout policy."""
    contiguous = variant >= 1
    return (
        "# variant policy: True makes contiguous copies of the inputs before the launch\n"
        f"_CONTIGUOUS_INPUTS = {contiguous}\n\n" + _RUNTIME
    )


# ---------------------------------------------------------------- kernel and wrapper text


def _cast_lines(v: str) -> list[str]:
    """Operand `v` converted to the compute dtype CDT inside the kernel."""
    return [
        f"        if CDT == tl.float64 and {v}_ptr.dtype.element_ty.primitive_bitwidth < 32:",
        f"            {v} = {v}.to(tl.float32)  # exact; direct half->f64 casts fail on CPU",
        f"        {v} = {v}.to(CDT)",
    ]


def _coordinate_lines(lines: list[str], first: int) -> None:
    """Append the nested `if LAYOUT % 8 > k:` blocks that split `rest` into the coordinates
    c{MAX_DIMS - first} ... c0 along the merged dims (sizes read from geo_ptr)."""
    pad = "    "
    for k in range(first, MAX_DIMS):
        d = MAX_DIMS - k
        lines.append(f"{pad}if LAYOUT % 8 > {k}:")
        pad += "    "
        lines += [
            f"{pad}size{d} = tl.load(geo_ptr + {d})",
            f"{pad}c{d} = rest % size{d}",
            f"{pad}rest = rest // size{d}",
            f"{pad}c{d - 1} = rest",
        ]


def _value_params(spec: Elementwise) -> list[str]:
    """The by-value parameters, as pairs (see `_scalar`): per operand `{v}_val` (integer) and
    `{v}_fval: tl.float64`, then per scalar `{s}_i` and `{s}_f: tl.float64`."""
    out = []
    for o in spec.operands:
        out += [f"{o.var}_val", f"{o.var}_fval: tl.float64"]
    for _, var in spec.scalars:
        out += [f"{var}_i", f"{var}_f: tl.float64"]
    return out


def _int_value_params(spec: Elementwise) -> list[str]:
    """The integer halves of the pairs: never specialized on their value (a new scalar must not
    compile a new kernel); the float halves are annotated, which Triton never specializes."""
    return [f"{o.var}_val" for o in spec.operands] + [f"{var}_i" for _, var in spec.scalars]


def _scalar_lines(spec: Elementwise, shape: str) -> list[str]:
    """Each scalar var from its pair, in the compute dtype, converted once per program: a
    `shape` of ones (the interpreter mishandles 0-d `tl.full`)."""
    lines = []
    for _, var in spec.scalars:
        lines += [
            "    if FLOAT:",
            f"        {var} = tl.full({shape}, {var}_f, CDT)",
            "    else:",
            f"        {var} = {var}_i",
        ]
    return lines


def _by_value_lines(operand: Operand, shape: str) -> list[str]:
    """A by-value operand (its `_SCALAR == 1` branch) splat to `shape` from its pair."""
    v = operand.var
    if operand.raw:
        return [f"        {v} = tl.full({shape}, {v}_val, tl.int32)"]
    return [
        "        if FLOAT:",
        f"            {v} = tl.full({shape}, {v}_fval, CDT)",
        "        else:",
        f"            {v} = tl.full({shape}, {v}_val, CDT)",
    ]


def _kernel_source(spec: Elementwise, *, flat: bool) -> str:
    """`_kernel_flat` (every tensor operand laid out like the output: index = offset) or
    `_kernel` (N-d coordinates over the merged dims, per-operand strides)."""
    vars_ = [o.var for o in spec.operands]
    every = ["out", *vars_]
    params: list[str] = ["out_ptr", *(f"{v}_ptr" for v in vars_), *_value_params(spec)]
    params += ["n"]
    constexpr: list[str] = []
    if not flat:
        params.append("geo_ptr")
        constexpr.append("LAYOUT")
    constexpr += [f"{v.upper()}_SCALAR" for v in vars_]
    constexpr += ["CDT", "FLOAT", "OUT_BOOL", "IDX64", *(name for name, _ in spec.constexprs)]
    constexpr += ["BLOCK"]
    no_spec = _int_value_params(spec)
    signature = ",\n".join(
        ["    " + p for p in params] + [f"    {c}: tl.constexpr" for c in constexpr]
    )
    lines = [codegen.indent(codegen.OFFSETS_SOURCE).rstrip("\n")]
    lines += _scalar_lines(spec, "[1]")
    if not flat:
        lines += [
            "    # LAYOUT % 8 = NDIM, the merged dims; bit 3 + i: operand i (0 = out) is linear in",
            "    # them. geo_ptr: sizes then each operand's strides, _MAX_DIMS each (outer dims",
            "    # padded), int64 when IDX64 else int32 (`_store_geometry`, once per plan)",
            "    # coordinates along the merged dims (innermost = dim 5)",
            "    c5 = offs",
            "    rest = offs",
        ]
        _coordinate_lines(lines, 1)

    def offset_lines(p: str, pad: str) -> list[str]:
        if flat:
            return [f"{pad}{p}_off = offs"]
        i = every.index(p)
        base = MAX_DIMS * (1 + i)
        out = [
            f"{pad}if LAYOUT // {8 << i} % 2 == 1:  # {p} linear",
            f"{pad}    {p}_off = offs",
            f"{pad}else:",
            f"{pad}    {p}_off = c5 * tl.load(geo_ptr + {base + MAX_DIMS - 1})",
        ]
        for k in range(1, MAX_DIMS):
            d = MAX_DIMS - 1 - k
            out.append(f"{pad}    if LAYOUT % 8 > {k}:")
            out.append(f"{pad}        {p}_off += c{d} * tl.load(geo_ptr + {base + d})")
        return out

    for operand in spec.operands:
        v = operand.var
        # {V}_SCALAR: 0 (False) = a tensor indexed per element, 1 (True) = a number passed by
        # value, 2 = a 0-d tensor on the device (every lane reads its one element)
        lines.append(f"    if {v.upper()}_SCALAR == 1:")
        lines += _by_value_lines(operand, "[BLOCK]")
        lines.append("    else:")
        lines.append(f"        if {v.upper()}_SCALAR == 2:")
        lines.append(f"            {v}_off = offs * 0")
        lines.append("        else:")
        lines += offset_lines(v, "            ")
        lines.append(f"        {v} = tl.load({v}_ptr + {v}_off, mask=mask, other=0)")
        if not operand.raw:
            lines += _cast_lines(v)
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


def _tile_kernel_source(spec: Elementwise) -> str:
    """`_kernel_tile`: a strided plan's two innermost merged dims as a [BLOCK_R, BLOCK_C] tile.

    The program id splits (scalar math, once per program) into a column block, a row block and
    the outer merged dims; each operand's row starts are its outer offset plus one multiply per
    row. Along the row an operand steps by 1 (contiguous: vector loads, aligned by ALIGN), by 0
    (broadcast: one load per row) or by its stride. `_kernel`'s per-element div/mod per merged
    dim (dozens of integer instructions an element) is what this avoids. Operands keep their
    natural shapes ([BLOCK_R, BLOCK_C], [BLOCK_R, 1] when broadcast along the row, [1, 1] for a
    number or a 0-d tensor), so a body over row-broadcast operands (div.Scalar on an expanded
    input) computes once per row; `out` is broadcast to the tile on store."""
    if re.search(r"\bBLOCK\b", spec.body):
        raise ValueError("a body for `_kernel_tile` must not use BLOCK (use zeros_like(x))")
    vars_ = [o.var for o in spec.operands]
    every = ["out", *vars_]
    params = ["out_ptr", *(f"{v}_ptr" for v in vars_), *_value_params(spec)]
    params += ["rows", "cols", "geo_ptr"]
    constexpr = ["LAYOUT", *(f"{v.upper()}_SCALAR" for v in vars_)]
    constexpr += ["CDT", "FLOAT", "OUT_BOOL", "IDX64", "ALIGN", "EVEN_C"]
    constexpr += [*(name for name, _ in spec.constexprs), "BLOCK_R", "BLOCK_C"]
    no_spec = _int_value_params(spec)
    signature = ",\n".join(
        ["    " + p for p in params] + [f"    {c}: tl.constexpr" for c in constexpr]
    )
    lines = [
        *_scalar_lines(spec, "[1, 1]"),
        "    # LAYOUT % 8 = NDIM, the merged dims (dim 5 = columns, dim 4 = rows, the rest outer);",
        "    # operand i (0 = out): bit 3 + 2i = inner stride 1, bit 4 + 2i = inner stride 0.",
        "    # geo_ptr: sizes then each operand's strides, _MAX_DIMS each (`_store_geometry`)",
        "    pid = tl.program_id(0)",
        "    if IDX64:",
        "        pid = pid.to(tl.int64)",
        "    col_blocks = tl.cdiv(cols, BLOCK_C)",
        "    row_blocks = tl.cdiv(rows, BLOCK_R)",
        "    cc = (pid % col_blocks) * BLOCK_C + tl.arange(0, BLOCK_C)",
        "    rest = pid // col_blocks",
        "    rr = (rest % row_blocks) * BLOCK_R + tl.arange(0, BLOCK_R)",
        "    rest = rest // row_blocks",
        "    rmask = rr < rows",
        "    if EVEN_C:  # no column mask: constant along rows, vector accesses stay legal",
        "        mask = rmask[:, None]",
        "    else:",
        "        mask = rmask[:, None] & (cc < cols)[None, :]",
        "    # outer coordinates: scalars, once per program",
        "    c3 = rest",
    ]
    _coordinate_lines(lines, 3)

    def offset_lines(p: str, pad: str) -> list[str]:
        """{p}_off: [BLOCK_R, BLOCK_C], or [BLOCK_R, 1] for an operand broadcast along rows."""
        i = every.index(p)
        base = MAX_DIMS * (1 + i)
        out = [f"{pad}{p}_row = rr * tl.load(geo_ptr + {base + 4})"]
        for k in range(2, MAX_DIMS):
            d = MAX_DIMS - 1 - k
            out.append(f"{pad}if LAYOUT % 8 > {k}:")
            out.append(f"{pad}    {p}_row += c{d} * tl.load(geo_ptr + {base + d})")
        out += [
            f"{pad}if LAYOUT // {8 << (2 * i)} % 2 == 1:  # {p}: unit inner stride",
            f"{pad}    {p}_off = tl.multiple_of({p}_row, ALIGN)[:, None] + cc[None, :]",
            f"{pad}elif LAYOUT // {16 << (2 * i)} % 2 == 1:  # {p}: broadcast along the row",
            f"{pad}    {p}_off = {p}_row[:, None]",
            f"{pad}else:",
            f"{pad}    {p}_off = {p}_row[:, None] + cc[None, :] * tl.load(geo_ptr + {base + 5})",
        ]
        return out

    for operand in spec.operands:
        v = operand.var
        i = every.index(v)
        lines.append(f"    if {v.upper()}_SCALAR == 1:")
        lines += _by_value_lines(operand, "[1, 1]")
        lines.append("    else:")
        lines.append(f"        if {v.upper()}_SCALAR == 2:")
        lines.append(f"            {v} = tl.load({v}_ptr + tl.zeros([1, 1], tl.int32))")
        lines.append("        else:")
        lines += offset_lines(v, "            ")
        lines.append(f"            if LAYOUT // {16 << (2 * i)} % 2 == 1:")
        lines.append(
            f"                {v} = tl.load({v}_ptr + {v}_off, mask=rmask[:, None], other=0)"
        )
        lines.append("            else:")
        lines.append(f"                {v} = tl.load({v}_ptr + {v}_off, mask=mask, other=0)")
        if not operand.raw:
            lines += _cast_lines(v)
    lines.append(codegen.indent(spec.body.strip("\n")))
    lines += offset_lines("out", "    ")
    lines += [
        "    out = tl.broadcast_to(out, (BLOCK_R, BLOCK_C))",
        "    if OUT_BOOL:",
        "        out = out != 0",
        "    else:",
        "        out = out.to(CDT)  # int/bool results reach f16/bf16 through f32",
        "        if CDT == tl.float64 and out_ptr.dtype.element_ty.primitive_bitwidth < 32:",
        "            out = out.to(tl.float32)  # f64 -> half types through f32, as for loads",
        "    out_off = tl.broadcast_to(out_off, (BLOCK_R, BLOCK_C))",
        "    tl.store(out_ptr + out_off, out.to(out_ptr.dtype.element_ty), mask=mask)",
    ]
    decorator = f"@triton.jit(do_not_specialize={no_spec!r})" if no_spec else "@triton.jit"
    return f"{decorator}\ndef _kernel_tile(\n{signature},\n):\n" + "\n".join(lines) + "\n"


def _store_geometry_source(spec: Elementwise) -> str:
    """`_store_geometry(geo_ptr, g0, ...)`: writes a strided plan's sizes and strides (out's and
    each operand's, `MAX_DIMS` each) into the plan's geometry tensor; launched once per plan."""
    names = [f"g{i}" for i in range(MAX_DIMS * (2 + len(spec.operands)))]
    params = "".join(f"    {g}: tl.int64,\n" for g in names)
    stores = "".join(f"    tl.store(geo_ptr + {i}, {g})\n" for i, g in enumerate(names))
    return (
        f"@triton.jit(do_not_specialize={names!r})\n"
        f"def _store_geometry(\n    geo_ptr,\n{params}):\n{stores}"
    )


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
    per plan (`_build` calls it once per call geometry)."""
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


def _tensor_key(name: str) -> str:
    """The plan-key part of one tensor parameter, inlined for an exact torch.Tensor."""
    return (
        f"({name}.shape, {name}.stride(), {name}.dtype, {name}.device)"
        f" if type({name}) is _T else _key_of({name})"
    )


def _wrapper_source(op: str, spec: Elementwise, kind: str) -> str:
    """kind: 'functional' (allocate), 'inplace' (write self) or 'out' (write the out= tensor).

    The wrapper binds arguments through its own Python signature, builds the call's plan key
    (operand geometries and dtypes, number types, the parameters the dtype depends on), and on a
    hit only allocates the output and launches: every decision (dtypes, broadcasting, layout, dim
    merging, launch config, constexpr flags) lives in the cached plan (`_build`)."""
    schema = codegen.schema_of(op)
    fn = codegen.function_name(op)
    params = _params(schema)
    names = [n for n, _ in params]
    signature = ", ".join(n if d is None else f"{n}={d}" for n, d in params)
    vars_ = [o.param for o in spec.operands]
    refs = sorted(set(_A_REF.findall(spec.result + spec.compute)) - set(spec.promote) - set(vars_))
    key_items = [_tensor_key(v) for v in vars_]
    if kind == "out":
        key_items.append(_tensor_key("out"))
    key_items += [f"_key_of({p})" for p in spec.promote if p not in vars_]  # e.g. clamp's min
    key_items += refs
    scalars = [f"*_scalar({p}, cdt)" for p, _ in spec.scalars]
    consts = [_plain(expr) for _, expr in spec.constexprs]
    raw = ", ".join(str(o.raw) for o in spec.operands)
    out_arg = {"functional": "None", "inplace": "self", "out": "out"}[kind]
    lines = [f'_KIND = "{kind}"', f"_RAW = ({raw},)", "", "", f"def _op({signature}):"]
    for n, d in params:
        if d == "_REQUIRED":
            lines += [
                f"    if {n} is _REQUIRED:",
                f'        raise TypeError(f"{{_OP}} missing required argument {n!r}")',
            ]
    lines.append("    key = (")
    lines += [f"        {item}," for item in key_items]
    lines += [
        "    )",
        "    plan = _PLANS.get(key)",
        "    if plan is None:",
        f"        plan = _build(key, ({', '.join(vars_)},), "
        + "{"
        + ", ".join(f'"{n}": {n}' for n in names)
        + "}"
        + f", {out_arg})",
    ]
    per_operand = [f"m{i}, z{i}" for i in range(len(vars_))]
    lines.append(
        "    launch, cdt, shape, strides, dtype, device, grid, block, warps, mid, "
        + ", ".join(per_operand)
        + " = plan"
    )
    if kind == "functional":
        lines.append("    out = _empty_strided(shape, strides, dtype=dtype, device=device)")
    elif kind == "inplace":
        lines.append("    out = self")
    for i, v in enumerate(vars_):
        lines += [
            f"    if m{i} is None:  # read by the kernel",
            f"        p{i}, v{i} = {v}, z{i}",
            "    else:  # passed by value",
            f"        p{i}, v{i} = out, m{i}({v})",
        ]
    ptrs = [f"p{i}" for i in range(len(vars_))]
    vals = [f"*v{i}" for i in range(len(vars_))]
    args = ", ".join(["out", *ptrs, *vals, *scalars, "*mid", *consts])
    lines += [
        "    if launch == 1:",
        f"        _kernel_flat[grid]({args}, BLOCK=block, num_warps=warps)",
        "    elif launch == 2:",
        f"        _kernel[grid]({args}, BLOCK=block, num_warps=warps)",
        "    elif launch == 4:",
        f"        _kernel_tile[grid]({args}, BLOCK_R=block[0], BLOCK_C=block[1], num_warps=warps)",
        "    elif launch == 3:",
        f"        _launch_copies(out, ({', '.join(ptrs)},), ({''.join(v + ', ' for v in vals)}), "
        f"({''.join(s + ', ' for s in scalars)}), ({''.join(c + ', ' for c in consts)}), plan)",
        "    return out",
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
        _tile_kernel_source(spec),
        _store_geometry_source(spec),
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
