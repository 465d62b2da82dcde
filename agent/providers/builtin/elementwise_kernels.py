"""The elementwise template's spec (`Operand`, `Elementwise`) and the text of its Triton kernels.

For one spec: `kernel_source` writes `_kernel_flat` (operands laid out like the output, index =
offset) and `_kernel` (N-d coordinates over the merged dims), `tile_kernel_source` the
[BLOCK_R, BLOCK_C] `_kernel_tile` of strided plans, `store_geometry_source` the one-program kernel
that writes a plan's sizes and strides. Each is a real kernel of kernels/elementwise_template.py,
written for one operand `x` and one scalar `alpha`, that `kernelsource.expand` repeats per operand,
scalar and constexpr of the spec (that module's docstring lists its regions and placeholders);
the per-op arithmetic is the spec's `body` (kernels/unary_ops.py, binary_ops.py,
backward_ops.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from agent.providers.builtin import kernelsource
from agent.providers.builtin.kernelsource import Copy

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


def _template(section: str) -> str:
    """`_kernel`, `_kernel_tile` or `_store_geometry` written for the canonical spec."""
    return kernelsource.emitted("elementwise_template", section).strip("\n")


# the canonical operand's names that each operand's copy renames (x -> its var)
_OPERAND_NAMES = ("x", "x_ptr", "x_val", "x_fval", "x_off", "x_row")


def _operand_copy(index: int, operand: Operand) -> Copy:
    """The renames of operand `index` (out is 0): its names, and its LAYOUT bits and geo_ptr
    slots in place of the template's placeholders."""
    v = operand.var
    names = {name: v + name[1:] for name in _OPERAND_NAMES}
    names["X_SCALAR"] = f"{v.upper()}_SCALAR"
    names["X_LINEAR"] = str(8 << index)
    names["X_UNIT"] = str(8 << (2 * index))
    names["X_BCAST"] = str(16 << (2 * index))
    for d in range(MAX_DIMS):
        names[f"X_STRIDE{d}"] = str(MAX_DIMS * (1 + index) + d)
    return Copy(names, {"raw": operand.raw})


def _int_value_params(spec: Elementwise) -> list[str]:
    """The integer halves of the by-value pairs, never specialized on their value."""
    return [f"{o.var}_val" for o in spec.operands] + [f"{var}_i" for _, var in spec.scalars]


def _expand(kernel: str, spec: Elementwise, name: str, flat: bool = False) -> str:
    if not spec.operands:
        raise ValueError("an elementwise spec needs at least one operand")
    repeat = {
        "operand": [_operand_copy(i + 1, o) for i, o in enumerate(spec.operands)],
        "scalar": [
            Copy({"alpha": v, "alpha_i": f"{v}_i", "alpha_f": f"{v}_f"}) for _, v in spec.scalars
        ],
        "constexpr": [Copy({"MODE": c}) for c, _ in spec.constexprs],
    }
    names = {kernel: name, "NO_SPECIALIZE": repr(_int_value_params(spec))}
    text = kernelsource.expand(
        _template(kernel.removeprefix("_")),
        names=names,
        flags={"flat": flat},
        repeat=repeat,
        replace={"body": spec.body.strip("\n")},
    )
    return text + "\n"


def kernel_source(spec: Elementwise, *, flat: bool) -> str:
    """`_kernel_flat` (every tensor operand laid out like the output: index = offset) or
    `_kernel` (N-d coordinates over the merged dims, per-operand strides)."""
    return _expand("_kernel", spec, "_kernel_flat" if flat else "_kernel", flat)


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
    return _expand("_kernel_tile", spec, "_kernel_tile")


def store_geometry_source(spec: Elementwise) -> str:
    """`_store_geometry(geo_ptr, g0, ...)`: writes a strided plan's sizes and strides (out's and
    each operand's, `MAX_DIMS` each) into the plan's geometry tensor; launched once per plan."""
    slots = range(MAX_DIMS * (2 + len(spec.operands)))
    text = kernelsource.expand(
        _template("store_geometry"),
        names={"GEOMETRY_ARGS": repr([f"g{k}" for k in slots])},
        repeat={"slot": [Copy({"g": f"g{k}", "SLOT": str(k)}) for k in slots]},
    )
    return text + "\n"
