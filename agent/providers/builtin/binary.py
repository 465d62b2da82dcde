"""Binary (and small n-ary) elementwise family with broadcasting, type promotion and scalars.

Each entry is an `Elementwise` spec (see elementwise.py), its kernel body the function named in
kernels/binary_ops.py. Tensor operands broadcast together; a Scalar overload (`add.Scalar`) uses
the same spec because a Python number in an operand's place becomes a kernel argument. The result dtype follows `torch.result_type` over the promoted
parameters; comparisons and logical ops compute in the promoted dtype and store bool. In-place
(`add_.Tensor`) and out= (`add.out`) overloads are derived from the functional ones.

Division follows eager exactly where it differs from the obvious formula: `rounding_mode="floor"`
on floats uses eager's fmod-based algorithm, integer floor division corrects Triton's truncating
`//`, and `remainder` takes the sign of the divisor.
"""

from __future__ import annotations

from typing import Any

from agent.providers.builtin import kernelsource
from agent.providers.builtin.elementwise import writers_for
from agent.providers.builtin.elementwise_kernels import Elementwise, Operand
from agent.providers.builtin.request import Writer

_XY = (Operand("self", "x"), Operand("other", "y"))
_FLOAT = "_as_float(dtype)"
_BODIES = kernelsource.bodies("binary_ops")


def _binary(
    summary: str,
    kernel: str,
    *,
    operands: tuple[Operand, ...] = _XY,
    promote: tuple[str, ...] = ("self", "other"),
    **fields: Any,
) -> Elementwise:
    """`fields`: Elementwise's optional fields (scalars, result, compute, constexprs, ...)."""
    return Elementwise(summary, operands, _BODIES[kernel], promote=promote, **fields)


_SYMBOLS = {"eq": "==", "ne": "!=", "lt": "<", "le": "<=", "gt": ">", "ge": ">="}


def _compare(kernel: str) -> Elementwise:
    return _binary(f"x {_SYMBOLS[kernel]} y, as bool", kernel, result="torch.bool", compute="dtype")


def _logical(kernel: str, name: str) -> Elementwise:
    return _binary(
        f"logical {name} of (x != 0) and (y != 0), as bool",
        kernel,
        result="torch.bool",
        compute="dtype",
    )


_ALPHA = (("alpha", "alpha"),)

_DIV_MODE = dict(
    result='dtype if a["rounding_mode"] is not None else _as_float(dtype)',
    constexprs=(("ROUNDING", '{None: 0, "trunc": 1, "floor": 2}[a["rounding_mode"]]'),),
)
_WHERE = dict(
    operands=(Operand("condition", "c", raw=True), Operand("self", "x"), Operand("other", "y")),
)
_MASKED_FILL = dict(
    operands=(Operand("self", "x"), Operand("mask", "m", raw=True), Operand("value", "v")),
    promote=("self",),
    result='a["self"].dtype',
)
_ADDC = dict(
    operands=(Operand("self", "x"), Operand("tensor1", "t1"), Operand("tensor2", "t2")),
    promote=("self", "tensor1", "tensor2"),
    scalars=(("value", "value"),),
)
_POW = dict(
    operands=(Operand("self", "x"), Operand("exponent", "y")),
    promote=("self", "exponent"),
    float_only=True,
)
_LERP = dict(
    operands=(Operand("self", "x"), Operand("end", "y"), Operand("weight", "w")),
    promote=("self", "end"),
)
SPECS: dict[str, Elementwise] = {
    "add.Tensor": _binary("x + alpha * y", "add", scalars=_ALPHA),
    "add.Scalar": _binary("x + alpha * y", "add", scalars=_ALPHA),
    "sub.Tensor": _binary("x - alpha * y", "sub", scalars=_ALPHA),
    "sub.Scalar": _binary("x - alpha * y", "sub", scalars=_ALPHA),
    "rsub.Tensor": _binary("y - alpha * x", "rsub", scalars=_ALPHA),
    "rsub.Scalar": _binary("y - alpha * x", "rsub", scalars=_ALPHA),
    "mul.Tensor": _binary("x * y", "mul"),
    "mul.Scalar": _binary("x * y", "mul"),
    "div.Tensor": _binary("x / y (true division)", "div", result=_FLOAT),
    "div.Scalar": _binary("x / y (true division)", "div", result=_FLOAT),
    "div.Tensor_mode": _binary("x / y, rounded as rounding_mode says", "div_mode", **_DIV_MODE),
    "div.Scalar_mode": _binary("x / y, rounded as rounding_mode says", "div_mode", **_DIV_MODE),
    "floor_divide.default": _binary("floor(x / y)", "floor_divide"),
    "floor_divide.Scalar": _binary("floor(x / y)", "floor_divide"),
    "remainder.Tensor": _binary("x mod y (sign of y)", "remainder"),
    "remainder.Scalar": _binary("x mod y (sign of y)", "remainder"),
    "remainder.Scalar_Tensor": _binary("x mod y (sign of y)", "remainder"),
    "fmod.Tensor": _binary("C fmod (sign of x)", "fmod"),
    "fmod.Scalar": _binary("C fmod (sign of x)", "fmod"),
    "maximum.default": _binary("elementwise max, NaN-propagating", "maximum"),
    "minimum.default": _binary("elementwise min, NaN-propagating", "minimum"),
    "pow.Tensor_Tensor": _binary("x ** y", "pow", **_POW),
    "pow.Scalar": _binary("x ** y with a scalar base", "pow", **_POW),
    "eq.Tensor": _compare("eq"),
    "eq.Scalar": _compare("eq"),
    "ne.Tensor": _compare("ne"),
    "ne.Scalar": _compare("ne"),
    "lt.Tensor": _compare("lt"),
    "lt.Scalar": _compare("lt"),
    "le.Tensor": _compare("le"),
    "le.Scalar": _compare("le"),
    "gt.Tensor": _compare("gt"),
    "gt.Scalar": _compare("gt"),
    "ge.Tensor": _compare("ge"),
    "ge.Scalar": _compare("ge"),
    "logical_and.default": _logical("logical_and", "and"),
    "logical_or.default": _logical("logical_or", "or"),
    "logical_xor.default": _logical("logical_xor", "xor"),
    "bitwise_and.Tensor": _binary("x & y", "bitwise_and"),
    "bitwise_and.Scalar": _binary("x & y", "bitwise_and"),
    "bitwise_or.Tensor": _binary("x | y", "bitwise_or"),
    "bitwise_or.Scalar": _binary("x | y", "bitwise_or"),
    "bitwise_xor.Tensor": _binary("x ^ y", "bitwise_xor"),
    "bitwise_xor.Scalar": _binary("x ^ y", "bitwise_xor"),
    "where.self": _binary("condition ? x : y", "where", **_WHERE),
    "where.ScalarSelf": _binary("condition ? x : y", "where", **_WHERE),
    "where.ScalarOther": _binary("condition ? x : y", "where", **_WHERE),
    "where.Scalar": _binary("condition ? x : y", "where", **_WHERE),
    "masked_fill.Scalar": _binary("mask ? value : x", "masked_fill", **_MASKED_FILL),
    "masked_fill.Tensor": _binary("mask ? value : x", "masked_fill", **_MASKED_FILL),
    "addcmul.default": _binary("x + value * t1 * t2", "addcmul", **_ADDC),
    "addcdiv.default": _binary("x + value * t1 / t2", "addcdiv", **_ADDC),
    "lerp.Scalar": _binary("x + weight * (end - x)", "lerp", **_LERP),
    "lerp.Tensor": _binary("x + weight * (end - x)", "lerp", **_LERP),
}

WRITERS: dict[str, Writer] = writers_for(SPECS)
