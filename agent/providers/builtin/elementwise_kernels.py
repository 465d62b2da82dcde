"""The elementwise template's spec (`Operand`, `Elementwise`) and the text of its Triton kernels.

For one spec: `kernel_source` writes `_kernel_flat` (operands laid out like the output, index =
offset) and `_kernel` (N-d coordinates over the merged dims), `tile_kernel_source` the
[BLOCK_R, BLOCK_C] `_kernel_tile` of strided plans, `store_geometry_source` the one-program kernel
that writes a plan's sizes and strides. The operand count and the spec's parameters decide each
kernel's signature and loads, so these are generated line by line; the per-op arithmetic comes
from the spec's `body` (kernels/unary_ops.py, binary_ops.py, backward_ops.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.providers.builtin import codegen

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


def kernel_source(spec: Elementwise, *, flat: bool) -> str:
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


def tile_kernel_source(spec: Elementwise) -> str:
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


def store_geometry_source(spec: Elementwise) -> str:
    """`_store_geometry(geo_ptr, g0, ...)`: writes a strided plan's sizes and strides (out's and
    each operand's, `MAX_DIMS` each) into the plan's geometry tensor; launched once per plan."""
    names = [f"g{i}" for i in range(MAX_DIMS * (2 + len(spec.operands)))]
    params = "".join(f"    {g}: tl.int64,\n" for g in names)
    stores = "".join(f"    tl.store(geo_ptr + {i}, {g})\n" for i, g in enumerate(names))
    return (
        f"@triton.jit(do_not_specialize={names!r})\n"
        f"def _store_geometry(\n    geo_ptr,\n{params}):\n{stores}"
    )
