"""Binary (and small n-ary) elementwise family with broadcasting, type promotion and scalars.

Each entry is an `Elementwise` spec (see elementwise.py). Tensor operands broadcast together; a
Scalar overload (`add.Scalar`) uses the same spec because a Python number in an operand's place
becomes a kernel argument. The result dtype follows `torch.result_type` over the promoted
parameters; comparisons and logical ops compute in the promoted dtype and store bool. In-place
(`add_.Tensor`) and out= (`add.out`) overloads are derived from the functional ones.

Division follows eager exactly where it differs from the obvious formula: `rounding_mode="floor"`
on floats uses eager's fmod-based algorithm, integer floor division corrects Triton's truncating
`//`, and `remainder` takes the sign of the divisor.
"""

from __future__ import annotations

import textwrap

from agent.providers.builtin.elementwise import Elementwise, Operand, writers_for
from agent.providers.builtin.request import Writer

_XY = (Operand("self", "x"), Operand("other", "y"))
_FLOAT = "_as_float(dtype)"


def _binary(
    summary: str,
    body: str,
    *,
    operands: tuple[Operand, ...] = _XY,
    promote: tuple[str, ...] = ("self", "other"),
    result: str = "dtype",
    compute: str = "out_dtype",
    scalars: tuple[tuple[str, str], ...] = (),
    constexprs: tuple[tuple[str, str], ...] = (),
    float_only: bool = False,
) -> Elementwise:
    return Elementwise(
        summary=summary,
        operands=operands,
        body=body,
        scalars=scalars,
        promote=promote,
        result=result,
        compute=compute,
        constexprs=constexprs,
        float_only=float_only,
    )


def _compare(symbol: str) -> Elementwise:
    return _binary(
        f"x {symbol} y, as bool", f"out = x {symbol} y", result="torch.bool", compute="dtype"
    )


def _logical(symbol: str, name: str) -> Elementwise:
    return _binary(
        f"logical {name} of (x != 0) and (y != 0), as bool",
        f"out = (x != 0) {symbol} (y != 0)",
        result="torch.bool",
        compute="dtype",
    )


_ALPHA = (("alpha", "alpha"),)

# True division. Eager (div_true_kernel_cuda) divides by a CPU scalar (a Python number, a 0-d
# CPU tensor: here the by-value operand) as x * (1 / y), the reciprocal rounded once in the
# compute dtype; this repeats it, bits included.
_TRUE_DIV_BODY = """\
if Y_SCALAR == 1:
    out = x * _recip(y_fval, CDT)
else:
    out = _div(x, y)
"""
_DIV_MODE_BODY = (
    "if ROUNDING == 0:\n"
    + textwrap.indent(_TRUE_DIV_BODY, "    ")
    + """\
elif ROUNDING == 1:
    if FLOAT:
        out = _trunc(_div(x, y))
    else:
        out = x // y
else:
    if FLOAT:
        out = _div_floor(x, y)
    else:
        out = _idiv_floor(x, y)
"""
)
_DIV_MODE = dict(
    result='dtype if a["rounding_mode"] is not None else _as_float(dtype)',
    constexprs=(("ROUNDING", '{None: 0, "trunc": 1, "floor": 2}[a["rounding_mode"]]'),),
)
_FLOOR_DIV_BODY = "if FLOAT:\n    out = _div_floor(x, y)\nelse:\n    out = _idiv_floor(x, y)"
_MAXIMUM_BODY = "out = tl.where((x > y) | (x != x), x, y)  # NaN wins, as in eager"
_MINIMUM_BODY = "out = tl.where((x < y) | (x != x), x, y)  # NaN wins, as in eager"

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
_LERP = dict(
    operands=(Operand("self", "x"), Operand("end", "y"), Operand("weight", "w")),
    promote=("self", "end"),
)
_LERP_BODY = """\
d = y - x
out = tl.where(w < 0.5, x + w * d, y - d * (1.0 - w))
"""

SPECS: dict[str, Elementwise] = {
    "add.Tensor": _binary("x + alpha * y", "out = x + y * alpha", scalars=_ALPHA),
    "add.Scalar": _binary("x + alpha * y", "out = x + y * alpha", scalars=_ALPHA),
    "sub.Tensor": _binary("x - alpha * y", "out = x - y * alpha", scalars=_ALPHA),
    "sub.Scalar": _binary("x - alpha * y", "out = x - y * alpha", scalars=_ALPHA),
    "rsub.Tensor": _binary("y - alpha * x", "out = y - x * alpha", scalars=_ALPHA),
    "rsub.Scalar": _binary("y - alpha * x", "out = y - x * alpha", scalars=_ALPHA),
    "mul.Tensor": _binary("x * y", "out = x * y"),
    "mul.Scalar": _binary("x * y", "out = x * y"),
    "div.Tensor": _binary("x / y (true division)", _TRUE_DIV_BODY, result=_FLOAT),
    "div.Scalar": _binary("x / y (true division)", _TRUE_DIV_BODY, result=_FLOAT),
    "div.Tensor_mode": _binary("x / y, rounded as rounding_mode says", _DIV_MODE_BODY, **_DIV_MODE),
    "div.Scalar_mode": _binary("x / y, rounded as rounding_mode says", _DIV_MODE_BODY, **_DIV_MODE),
    "floor_divide.default": _binary("floor(x / y)", _FLOOR_DIV_BODY),
    "floor_divide.Scalar": _binary("floor(x / y)", _FLOOR_DIV_BODY),
    "remainder.Tensor": _binary("x mod y (sign of y)", "out = _remainder(x, y)"),
    "remainder.Scalar": _binary("x mod y (sign of y)", "out = _remainder(x, y)"),
    "remainder.Scalar_Tensor": _binary("x mod y (sign of y)", "out = _remainder(x, y)"),
    "fmod.Tensor": _binary("C fmod (sign of x)", "out = x % y"),
    "fmod.Scalar": _binary("C fmod (sign of x)", "out = x % y"),
    "maximum.default": _binary("elementwise max, NaN-propagating", _MAXIMUM_BODY),
    "minimum.default": _binary("elementwise min, NaN-propagating", _MINIMUM_BODY),
    "pow.Tensor_Tensor": _binary(
        "x ** y",
        "out = _pow(x, y)",
        operands=(Operand("self", "x"), Operand("exponent", "y")),
        promote=("self", "exponent"),
        float_only=True,
    ),
    "pow.Scalar": _binary(
        "x ** y with a scalar base",
        "out = _pow(x, y)",
        operands=(Operand("self", "x"), Operand("exponent", "y")),
        promote=("self", "exponent"),
        float_only=True,
    ),
    "eq.Tensor": _compare("=="),
    "eq.Scalar": _compare("=="),
    "ne.Tensor": _compare("!="),
    "ne.Scalar": _compare("!="),
    "lt.Tensor": _compare("<"),
    "lt.Scalar": _compare("<"),
    "le.Tensor": _compare("<="),
    "le.Scalar": _compare("<="),
    "gt.Tensor": _compare(">"),
    "gt.Scalar": _compare(">"),
    "ge.Tensor": _compare(">="),
    "ge.Scalar": _compare(">="),
    "logical_and.default": _logical("&", "and"),
    "logical_or.default": _logical("|", "or"),
    "logical_xor.default": _logical("!=", "xor"),
    "bitwise_and.Tensor": _binary("x & y", "out = x & y"),
    "bitwise_and.Scalar": _binary("x & y", "out = x & y"),
    "bitwise_or.Tensor": _binary("x | y", "out = x | y"),
    "bitwise_or.Scalar": _binary("x | y", "out = x | y"),
    "bitwise_xor.Tensor": _binary("x ^ y", "out = x ^ y"),
    "bitwise_xor.Scalar": _binary("x ^ y", "out = x ^ y"),
    "where.self": _binary("condition ? x : y", "out = tl.where(c != 0, x, y)", **_WHERE),
    "where.ScalarSelf": _binary("condition ? x : y", "out = tl.where(c != 0, x, y)", **_WHERE),
    "where.ScalarOther": _binary("condition ? x : y", "out = tl.where(c != 0, x, y)", **_WHERE),
    "where.Scalar": _binary("condition ? x : y", "out = tl.where(c != 0, x, y)", **_WHERE),
    "masked_fill.Scalar": _binary(
        "mask ? value : x", "out = tl.where(m != 0, v, x)", **_MASKED_FILL
    ),
    "masked_fill.Tensor": _binary(
        "mask ? value : x", "out = tl.where(m != 0, v, x)", **_MASKED_FILL
    ),
    "addcmul.default": _binary("x + value * t1 * t2", "out = x + value * (t1 * t2)", **_ADDC),
    "addcdiv.default": _binary("x + value * t1 / t2", "out = x + value * (t1 / t2)", **_ADDC),
    "lerp.Scalar": _binary("x + weight * (end - x)", _LERP_BODY, **_LERP),
    "lerp.Tensor": _binary("x + weight * (end - x)", _LERP_BODY, **_LERP),
}

WRITERS: dict[str, Writer] = writers_for(SPECS)
