"""Bodies of the unary elementwise kernels (unary.py): each function's statements, without its
closing `return out`, become the body of one operator's kernel (`kernelsource.bodies`). The
parameters name what the body reads: the operand `x`, scalar arguments and the constexprs the
generated kernel defines (`CDT` compute dtype, `FLOAT`, ...). NaN propagates as in eager: clamps
compare (`tl.where(x < lo, lo, x)`, false for NaN), never `tl.maximum`, which drops NaN on GPUs.
"""

import triton.language as tl

from agent.providers.builtin.kernels.elementwise_helpers import (
    _expm1,
    _ipow,
    _log1p,
    _normal_tail,
    _pow,
    _round_half_even,
    _sigmoid,
    _softplus,
    _tanh,
    _trunc,
)


def relu(x):
    out = tl.where(x < 0, 0, x)
    return out


def gelu(x, APPROXIMATE, CDT):
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
    return out


def silu(x):
    out = x / (1.0 + tl.exp(-x))
    return out


def mish(x):
    out = x * _tanh(_softplus(x, 1.0, 20.0))
    return out


def softplus(x, beta, threshold):
    out = _softplus(x, beta, threshold)
    return out


def sigmoid(x):
    out = _sigmoid(x)
    return out


def tanh(x):
    out = _tanh(x)
    return out


def hardtanh(lo, x, hi):
    out = tl.where(x < lo, lo, tl.where(x > hi, hi, x))
    return out


def hardsigmoid(x):
    t = x + 3.0
    t = tl.where(t < 0, 0.0, t)
    out = tl.where(t > 6.0, 6.0, t) / 6.0
    return out


def hardswish(x):
    t = x + 3.0
    t = tl.where(t < 0, 0.0, t)
    out = x * tl.where(t > 6.0, 6.0, t) / 6.0
    return out


def leaky_relu(x, slope):
    out = tl.where(x > 0, x, x * slope)
    return out


def elu(x, scale, alpha, input_scale):
    out = tl.where(x > 0, x * scale, _expm1(x * input_scale) * alpha * scale)
    return out


def exp(x):
    out = tl.exp(x)
    return out


def exp2(x):
    out = tl.exp2(x)
    return out


def expm1(x):
    out = _expm1(x)
    return out


def log(x):
    out = tl.log(x)
    return out


def log2(x):
    out = tl.log2(x)
    return out


def log10(x):
    out = tl.log(x) * 0.4342944819032518
    return out


def log1p(x):
    out = _log1p(x)
    return out


def sqrt(x):
    out = tl.sqrt(x)
    return out


def rsqrt(x):
    out = 1.0 / tl.sqrt(x)
    return out


def reciprocal(x):
    out = 1.0 / x
    return out


def sin(x):
    out = tl.sin(x)
    return out


def cos(x):
    out = tl.cos(x)
    return out


def tan(x):
    out = tl.sin(x) / tl.cos(x)
    return out


def erf(x):
    out = tl.erf(x)
    return out


def abs(x):
    out = tl.abs(x)
    return out


def neg(x):
    out = -x
    return out


def sign(x, CDT):
    out = (x > 0).to(CDT) - (x < 0).to(CDT)
    return out


def floor(x, FLOAT):
    if FLOAT:
        out = tl.floor(x)
    else:
        out = x
    return out


def ceil(x, FLOAT):
    if FLOAT:
        out = tl.ceil(x)
    else:
        out = x
    return out


def trunc(x, FLOAT):
    if FLOAT:
        out = _trunc(x)
    else:
        out = x
    return out


def round(x, FLOAT):
    if FLOAT:
        out = _round_half_even(x)
    else:
        out = x
    return out


def logical_not(x):
    out = x == 0
    return out


def isnan(x):
    out = x != x
    return out


def isinf(x):
    out = tl.abs(x) == float("inf")
    return out


def bitwise_not(x, OUT_BOOL):
    if OUT_BOOL:
        out = x == 0
    else:
        out = ~x
    return out


def clamp(x, lo, hi, HAS_MIN, HAS_MAX):
    out = x
    if HAS_MIN:
        out = tl.where(out < lo, lo, out)
    if HAS_MAX:
        out = tl.where(out > hi, hi, out)
    return out


def clamp_min(lo, x):
    out = tl.where(x < lo, lo, x)
    return out


def clamp_max(hi, x):
    out = tl.where(x > hi, hi, x)
    return out


def pow(x, e, MODE, FLOAT):
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
    return out
