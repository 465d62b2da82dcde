"""Unary elementwise family: activations and math functions of one tensor.

Each entry is an `Elementwise` spec (see elementwise.py) over operand `x` = `self`, its kernel
body the function of that name in kernels/unary_ops.py; in-place
(`relu_.default`) and out= (`exp.out`) overloads are derived from the functional ones. Ops whose
eager result is floating for integer inputs (exp, sigmoid, ...) promote with `_as_float`.
"""

from __future__ import annotations

from typing import Any

from agent.providers.builtin import kernelsource
from agent.providers.builtin.elementwise import writers_for
from agent.providers.builtin.elementwise_kernels import Elementwise, Operand
from agent.providers.builtin.request import Writer

_X = (Operand("self", "x"),)
_FLOAT = "_as_float(dtype)"
_BODIES = kernelsource.bodies("unary_ops")
_POW_MODE = kernelsource.definitions("unary_host")["_pow_mode"]


def _unary(
    summary: str, kernel: str, *, promote_scalars: tuple[str, ...] = (), **fields: Any
) -> Elementwise:
    """`fields`: Elementwise's optional fields (scalars, result, compute, constexprs, ...)."""
    return Elementwise(summary, _X, _BODIES[kernel], promote=("self", *promote_scalars), **fields)


def _float_fn(summary: str, kernel: str) -> Elementwise:
    """A floating result (integer inputs give the default float dtype)."""
    return _unary(summary, kernel, result=_FLOAT)


def _rounding(summary: str, kernel: str) -> Elementwise:
    """floor/ceil/trunc/round: identity on integers, like eager (the body tests FLOAT)."""
    return _unary(summary, kernel)


SPECS: dict[str, Elementwise] = {
    "relu.default": _unary("max(x, 0)", "relu"),
    "gelu.default": _unary(
        "x * Phi(x), exact (erf) or tanh approximation",
        "gelu",
        constexprs=(("APPROXIMATE", '{"none": 0, "tanh": 1}[a["approximate"]]'),),
    ),
    "silu.default": _unary("x * sigmoid(x)", "silu"),
    "mish.default": _unary("x * tanh(softplus(x))", "mish"),
    "softplus.default": _unary(
        "log(1 + exp(beta x)) / beta, linear above the threshold",
        "softplus",
        scalars=(("beta", "beta"), ("threshold", "threshold")),
    ),
    "sigmoid.default": _float_fn("1 / (1 + exp(-x))", "sigmoid"),
    "tanh.default": _float_fn("tanh(x)", "tanh"),
    "hardtanh.default": _unary(
        "clamp(x, min_val, max_val)",
        "hardtanh",
        scalars=(("min_val", "lo"), ("max_val", "hi")),
    ),
    "hardsigmoid.default": _unary(
        "clamp(x + 3, 0, 6) / 6",
        "hardsigmoid",
    ),
    "hardswish.default": _unary(
        "x * clamp(x + 3, 0, 6) / 6",
        "hardswish",
    ),
    "leaky_relu.default": _unary(
        "x if x > 0 else negative_slope * x",
        "leaky_relu",
        scalars=(("negative_slope", "slope"),),
    ),
    "elu.default": _unary(
        "scale * x if x > 0 else alpha * scale * (exp(input_scale * x) - 1)",
        "elu",
        scalars=(("alpha", "alpha"), ("scale", "scale"), ("input_scale", "input_scale")),
    ),
    "exp.default": _float_fn("exp(x)", "exp"),
    "exp2.default": _float_fn("2 ** x", "exp2"),
    "expm1.default": _float_fn("exp(x) - 1, accurate near 0", "expm1"),
    "log.default": _float_fn("natural log", "log"),
    "log2.default": _float_fn("log base 2", "log2"),
    "log10.default": _float_fn("log base 10", "log10"),
    "log1p.default": _float_fn("log(1 + x), accurate near 0", "log1p"),
    "sqrt.default": _float_fn("square root", "sqrt"),
    "rsqrt.default": _float_fn("1 / sqrt(x)", "rsqrt"),
    "reciprocal.default": _float_fn("1 / x", "reciprocal"),
    "sin.default": _float_fn("sine", "sin"),
    "cos.default": _float_fn("cosine", "cos"),
    "tan.default": _float_fn("tangent", "tan"),
    "erf.default": _float_fn("error function", "erf"),
    "abs.default": _unary("|x|", "abs"),
    "neg.default": _unary("-x", "neg"),
    "sign.default": _unary("sign of x (-1, 0, 1)", "sign"),
    "sgn.default": _unary("sign of x (-1, 0, 1)", "sign"),
    "floor.default": _rounding("round down", "floor"),
    "ceil.default": _rounding("round up", "ceil"),
    "trunc.default": _rounding("round toward zero", "trunc"),
    "round.default": _rounding("round half to even", "round"),
    "logical_not.default": _unary(
        "x == 0, as bool", "logical_not", result="torch.bool", compute="dtype"
    ),
    "isnan.default": _unary("x != x, as bool", "isnan", result="torch.bool", compute="dtype"),
    "isinf.default": _unary(
        "|x| == inf, as bool",
        "isinf",
        result="torch.bool",
        compute="dtype",
    ),
    "bitwise_not.default": _unary("~x (logical not for bool)", "bitwise_not"),
    "clamp.default": _unary(
        "min(max(x, min), max), either bound optional",
        "clamp",
        scalars=(("min", "lo"), ("max", "hi")),
        promote_scalars=("min", "max"),
        constexprs=(("HAS_MIN", 'a["min"] is not None'), ("HAS_MAX", 'a["max"] is not None')),
    ),
    "clamp_min.default": _unary(
        "max(x, min)",
        "clamp_min",
        scalars=(("min", "lo"),),
        promote_scalars=("min",),
    ),
    "clamp_max.default": _unary(
        "min(x, max)",
        "clamp_max",
        scalars=(("max", "hi"),),
        promote_scalars=("max",),
    ),
    "pow.Tensor_Scalar": _unary(
        "x ** exponent (exact forms for 0, 1, 2, 3, 0.5, -0.5, -1, -2)",
        "pow",
        scalars=(("exponent", "e"),),
        promote_scalars=("exponent",),
        constexprs=(("MODE", '_pow_mode(a["exponent"])'),),
        helpers_src=_POW_MODE,
    ),
}

WRITERS: dict[str, Writer] = writers_for(SPECS)
