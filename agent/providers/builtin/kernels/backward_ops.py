"""Bodies of the activation-gradient kernels (backward.py): each function's statements,
without its closing `return out`, become the body of one operator's kernel
(`kernelsource.bodies`). `g` is grad_output, `x`/`y`/`m` the saved input, output or mask; the
formulas are eager's, computed in float32 for half types.
"""

import triton.language as tl

from agent.providers.builtin.kernels.elementwise_helpers import (
    _normal_tail,
    _sigmoid,
    _softplus,
    _tanh,
)


def threshold_backward(g, x, th):
    out = tl.where(x <= th, 0, g)
    return out


def sigmoid_backward(y, g):
    out = g * (1.0 - y) * y
    return out


def tanh_backward(g, y):
    out = g * (1.0 - y * y)
    return out


def gelu_backward(x, g, APPROXIMATE, CDT):
    if APPROXIMATE == 1:
        k_beta = 0.7978845608028654
        k_kappa = 0.044715
        x_sq = x * x
        t = _tanh(k_beta * (x + k_kappa * x_sq * x))
        left_derivative = 0.5 * (1.0 + t)
        right_derivative = 0.5 * x * (1.0 - t * t) * k_beta * (1.0 + 3.0 * k_kappa * x_sq)
        out = g * (left_derivative + right_derivative)
    else:
        if CDT == tl.float64:
            cdf = 0.5 * (1.0 + tl.erf(x * 0.7071067811865476))
        else:
            # Phi(x) from one exp2 of a polynomial (`_normal_tail`) instead of erf's ~25 instructions
            h = _normal_tail(tl.abs(x))
            cdf = tl.where(x < 0, h, 1.0 - h)
        pdf = tl.exp(-0.5 * x * x) * 0.3989422804014327
        out = g * (cdf + x * pdf)
    return out


def silu_backward(x, g):
    s = _sigmoid(x)
    out = g * s * (1.0 + x * (1.0 - s))
    return out


def hardtanh_backward(g, x, lo, hi):
    out = tl.where((x <= lo) | (x >= hi), 0.0, g)
    return out


def leaky_relu_backward(g, x, slope):
    out = tl.where(x > 0, g, g * slope)
    return out


def elu_backward(x, g, scale, input_scale, alpha, IS_RESULT):
    if IS_RESULT:
        neg = g * input_scale * (x + alpha * scale)
    else:
        neg = g * input_scale * alpha * scale * tl.exp(x * input_scale)
    out = tl.where(x <= 0, neg, g * scale)
    return out


def hardsigmoid_backward(g, x):
    out = tl.where((x > -3.0) & (x < 3.0), g / 6.0, 0.0)
    return out


def hardswish_backward(x, g):
    out = tl.where(x < -3.0, 0.0, tl.where(x <= 3.0, g * (x / 3.0 + 0.5), g))
    return out


def softplus_backward(g, x, beta, threshold):
    z = tl.exp(x * beta)
    out = tl.where(x * beta > threshold, g, g * z / (z + 1.0))
    return out


def mish_backward(x, g):
    s = _sigmoid(x)
    t = _tanh(_softplus(x, 1.0, 20.0))
    out = g * (t + x * s * (1.0 - t * t))
    return out


def native_dropout_backward(m, g, scale):
    out = tl.where(m != 0, g * scale, 0.0)
    return out
