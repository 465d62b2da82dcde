"""Unary elementwise family: activations and math functions of one tensor.

Each entry is an `Elementwise` spec (see elementwise.py) over operand `x` = `self`; in-place
(`relu_.default`) and out= (`exp.out`) overloads are derived from the functional ones. Ops whose
eager result is floating for integer inputs (exp, sigmoid, ...) promote with `_as_float`. NaN
propagates as in eager: clamps are written with `tl.where(x < lo, lo, x)` (a NaN compare is
false), never with `tl.maximum`, which drops NaN on GPUs.
"""

from __future__ import annotations

from agent.providers.builtin.elementwise import Elementwise, Operand, writers_for
from agent.providers.builtin.request import Writer

_X = (Operand("self", "x"),)
_FLOAT = "_as_float(dtype)"


def _unary(
    summary: str,
    body: str,
    *,
    result: str = "dtype",
    scalars: tuple[tuple[str, str], ...] = (),
    promote_scalars: tuple[str, ...] = (),
    constexprs: tuple[tuple[str, str], ...] = (),
    helpers_src: str = "",
    compute: str = "out_dtype",
) -> Elementwise:
    return Elementwise(
        summary=summary,
        operands=_X,
        body=body,
        scalars=scalars,
        promote=("self", *promote_scalars),
        result=result,
        compute=compute,
        constexprs=constexprs,
        helpers_src=helpers_src,
    )


def _float_fn(summary: str, expr: str) -> Elementwise:
    """out = expr(x), floating result (integer inputs give the default float dtype)."""
    return _unary(summary, f"out = {expr}", result=_FLOAT)


def _rounding(summary: str, fn: str) -> Elementwise:
    """floor/ceil/trunc/round: identity on integers, like eager."""
    return _unary(summary, f"if FLOAT:\n    out = {fn}(x)\nelse:\n    out = x")


_POW_MODE = '''\
def _pow_mode(exponent):
    """Exponents eager special-cases get exact formulas (x*x, sqrt, ...); 0 = general pow."""
    special = {0: 1, 1: 2, 2: 3, 3: 4, 0.5: 5, -0.5: 6, -1: 7, -2: 8}
    return special.get(exponent, 0)
'''

_POW_BODY = """\
if MODE == 1:
    out = tl.zeros_like(x) + 1  # x ** 0 is 1, NaN included
elif MODE == 2:
    out = x
elif MODE == 3:
    out = x * x
elif MODE == 4:
    out = x * x * x
elif MODE == 5:
    out = tl.sqrt(x)
elif MODE == 6:
    out = 1.0 / tl.sqrt(x)
elif MODE == 7:
    out = 1.0 / x
elif MODE == 8:
    out = 1.0 / (x * x)
elif FLOAT:
    out = _pow(x, e)
else:
    out = _ipow(x, e)
"""

_SIGN_BODY = "out = (x > 0).to(CDT) - (x < 0).to(CDT)"

_CLAMP_BODY = """\
out = x
if HAS_MIN:
    out = tl.where(out < lo, lo, out)
if HAS_MAX:
    out = tl.where(out > hi, hi, out)
"""

SPECS: dict[str, Elementwise] = {
    "relu.default": _unary("max(x, 0)", "out = tl.where(x < 0, 0, x)"),
    "gelu.default": _unary(
        "x * Phi(x), exact (erf) or tanh approximation",
        """\
if APPROXIMATE == 1:
    inner = 0.7978845608028654 * (x + 0.044715 * x * x * x)
    out = 0.5 * x * (1.0 + _tanh(inner))
elif CDT == tl.float64:
    out = 0.5 * x * (1.0 + tl.erf(x * 0.7071067811865476))
else:
    # x * Phi(x) with Phi from one exp2 of a polynomial (`_normal_tail`): about half of erf's
    # instructions, and this op is instruction-bound on an H200
    h = _normal_tail(tl.abs(x))
    out = x * tl.where(x < 0, h, 1.0 - h)
""",
        constexprs=(("APPROXIMATE", '{"none": 0, "tanh": 1}[a["approximate"]]'),),
    ),
    "silu.default": _unary("x * sigmoid(x)", "out = x / (1.0 + tl.exp(-x))"),
    "mish.default": _unary("x * tanh(softplus(x))", "out = x * _tanh(_softplus(x, 1.0, 20.0))"),
    "softplus.default": _unary(
        "log(1 + exp(beta x)) / beta, linear above the threshold",
        "out = _softplus(x, beta, threshold)",
        scalars=(("beta", "beta"), ("threshold", "threshold")),
    ),
    "sigmoid.default": _float_fn("1 / (1 + exp(-x))", "_sigmoid(x)"),
    "tanh.default": _float_fn("tanh(x)", "_tanh(x)"),
    "hardtanh.default": _unary(
        "clamp(x, min_val, max_val)",
        "out = tl.where(x < lo, lo, tl.where(x > hi, hi, x))",
        scalars=(("min_val", "lo"), ("max_val", "hi")),
    ),
    "hardsigmoid.default": _unary(
        "clamp(x + 3, 0, 6) / 6",
        "t = x + 3.0\nt = tl.where(t < 0, 0.0, t)\nout = tl.where(t > 6.0, 6.0, t) / 6.0",
    ),
    "hardswish.default": _unary(
        "x * clamp(x + 3, 0, 6) / 6",
        "t = x + 3.0\nt = tl.where(t < 0, 0.0, t)\nout = x * tl.where(t > 6.0, 6.0, t) / 6.0",
    ),
    "leaky_relu.default": _unary(
        "x if x > 0 else negative_slope * x",
        "out = tl.where(x > 0, x, x * slope)",
        scalars=(("negative_slope", "slope"),),
    ),
    "elu.default": _unary(
        "scale * x if x > 0 else alpha * scale * (exp(input_scale * x) - 1)",
        "out = tl.where(x > 0, x * scale, _expm1(x * input_scale) * alpha * scale)",
        scalars=(("alpha", "alpha"), ("scale", "scale"), ("input_scale", "input_scale")),
    ),
    "exp.default": _float_fn("exp(x)", "tl.exp(x)"),
    "exp2.default": _float_fn("2 ** x", "tl.exp2(x)"),
    "expm1.default": _float_fn("exp(x) - 1, accurate near 0", "_expm1(x)"),
    "log.default": _float_fn("natural log", "tl.log(x)"),
    "log2.default": _float_fn("log base 2", "tl.log2(x)"),
    "log10.default": _float_fn("log base 10", "tl.log(x) * 0.4342944819032518"),
    "log1p.default": _float_fn("log(1 + x), accurate near 0", "_log1p(x)"),
    "sqrt.default": _float_fn("square root", "tl.sqrt(x)"),
    "rsqrt.default": _float_fn("1 / sqrt(x)", "1.0 / tl.sqrt(x)"),
    "reciprocal.default": _float_fn("1 / x", "1.0 / x"),
    "sin.default": _float_fn("sine", "tl.sin(x)"),
    "cos.default": _float_fn("cosine", "tl.cos(x)"),
    "tan.default": _float_fn("tangent", "tl.sin(x) / tl.cos(x)"),
    "erf.default": _float_fn("error function", "tl.erf(x)"),
    "abs.default": _unary("|x|", "out = tl.abs(x)"),
    "neg.default": _unary("-x", "out = -x"),
    "sign.default": _unary("sign of x (-1, 0, 1)", _SIGN_BODY),
    "sgn.default": _unary("sign of x (-1, 0, 1)", _SIGN_BODY),
    "floor.default": _rounding("round down", "tl.floor"),
    "ceil.default": _rounding("round up", "tl.ceil"),
    "trunc.default": _rounding("round toward zero", "_trunc"),
    "round.default": _rounding("round half to even", "_round_half_even"),
    "logical_not.default": _unary(
        "x == 0, as bool", "out = x == 0", result="torch.bool", compute="dtype"
    ),
    "isnan.default": _unary(
        "x != x, as bool", "out = x != x", result="torch.bool", compute="dtype"
    ),
    "isinf.default": _unary(
        "|x| == inf, as bool",
        'out = tl.abs(x) == float("inf")',
        result="torch.bool",
        compute="dtype",
    ),
    "bitwise_not.default": _unary(
        "~x (logical not for bool)", "if OUT_BOOL:\n    out = x == 0\nelse:\n    out = ~x"
    ),
    "clamp.default": _unary(
        "min(max(x, min), max), either bound optional",
        _CLAMP_BODY,
        scalars=(("min", "lo"), ("max", "hi")),
        promote_scalars=("min", "max"),
        constexprs=(("HAS_MIN", 'a["min"] is not None'), ("HAS_MAX", 'a["max"] is not None')),
    ),
    "clamp_min.default": _unary(
        "max(x, min)",
        "out = tl.where(x < lo, lo, x)",
        scalars=(("min", "lo"),),
        promote_scalars=("min",),
    ),
    "clamp_max.default": _unary(
        "min(x, max)",
        "out = tl.where(x > hi, hi, x)",
        scalars=(("max", "hi"),),
        promote_scalars=("max",),
    ),
    "pow.Tensor_Scalar": _unary(
        "x ** exponent (exact forms for 0, 1, 2, 3, 0.5, -0.5, -1, -2)",
        _POW_BODY,
        scalars=(("exponent", "e"),),
        promote_scalars=("exponent",),
        constexprs=(("MODE", '_pow_mode(a["exponent"])'),),
        helpers_src=_POW_MODE,
    ),
}

WRITERS: dict[str, Writer] = writers_for(SPECS)
