"""Backward elementwise family: the activation gradients that training traces call.

Each entry is an `Elementwise` spec (see elementwise.py) over `g` = grad_output and the saved
input or output. Formulas are eager's (aten/src/ATen/native/cuda/*Activation*.cu), in f32 for
half types; the result dtype is `torch.result_type` of the tensor operands, as in eager.
"""

from __future__ import annotations

from agent.providers.builtin.elementwise import Elementwise, Operand, writers_for
from agent.providers.builtin.request import Writer


def _backward(
    summary: str,
    body: str,
    *,
    saved: str = "self",
    var: str = "x",
    scalars: tuple[tuple[str, str], ...] = (),
    constexprs: tuple[tuple[str, str], ...] = (),
    raw: bool = False,
    promote_saved: bool = True,
) -> Elementwise:
    promote = ("grad_output", saved) if promote_saved else ("grad_output",)
    return Elementwise(
        summary=summary,
        operands=(Operand("grad_output", "g"), Operand(saved, var, raw=raw)),
        body=body,
        scalars=scalars,
        promote=promote,
        constexprs=constexprs,
    )


_GELU_BACKWARD = """\
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
"""

_ELU_BACKWARD = """\
if IS_RESULT:
    neg = g * input_scale * (x + alpha * scale)
else:
    neg = g * input_scale * alpha * scale * tl.exp(x * input_scale)
out = tl.where(x <= 0, neg, g * scale)
"""

SPECS: dict[str, Elementwise] = {
    "threshold_backward.default": _backward(
        "grad where self > threshold, else 0 (relu's backward)",
        "out = tl.where(x <= th, 0, g)",
        scalars=(("threshold", "th"),),
    ),
    "sigmoid_backward.default": _backward(
        "grad * (1 - y) * y", "out = g * (1.0 - y) * y", saved="output", var="y"
    ),
    "tanh_backward.default": _backward(
        "grad * (1 - y * y)", "out = g * (1.0 - y * y)", saved="output", var="y"
    ),
    "gelu_backward.default": _backward(
        "gradient of gelu, exact (erf) or tanh approximation",
        _GELU_BACKWARD,
        constexprs=(("APPROXIMATE", '{"none": 0, "tanh": 1}[a["approximate"]]'),),
    ),
    "silu_backward.default": _backward(
        "grad * s * (1 + x * (1 - s)), s = sigmoid(x)",
        "s = _sigmoid(x)\nout = g * s * (1.0 + x * (1.0 - s))",
    ),
    "hardtanh_backward.default": _backward(
        "grad inside (min_val, max_val), else 0",
        "out = tl.where((x <= lo) | (x >= hi), 0.0, g)",
        scalars=(("min_val", "lo"), ("max_val", "hi")),
    ),
    "leaky_relu_backward.default": _backward(
        "grad if x > 0 else grad * negative_slope",
        "out = tl.where(x > 0, g, g * slope)",
        scalars=(("negative_slope", "slope"),),
    ),
    "elu_backward.default": _backward(
        "gradient of elu from its input or its result",
        _ELU_BACKWARD,
        saved="self_or_result",
        scalars=(("alpha", "alpha"), ("scale", "scale"), ("input_scale", "input_scale")),
        constexprs=(("IS_RESULT", 'bool(a["is_result"])'),),
    ),
    "hardsigmoid_backward.default": _backward(
        "grad / 6 inside (-3, 3), else 0",
        "out = tl.where((x > -3.0) & (x < 3.0), g / 6.0, 0.0)",
    ),
    "hardswish_backward.default": _backward(
        "gradient of hardswish",
        "out = tl.where(x < -3.0, 0.0, tl.where(x <= 3.0, g * (x / 3.0 + 0.5), g))",
    ),
    "softplus_backward.default": _backward(
        "grad * sigmoid(beta x), grad above the threshold",
        "z = tl.exp(x * beta)\nout = tl.where(x * beta > threshold, g, g * z / (z + 1.0))",
        scalars=(("beta", "beta"), ("threshold", "threshold")),
    ),
    "mish_backward.default": _backward(
        "gradient of x * tanh(softplus(x))",
        "s = _sigmoid(x)\nt = _tanh(_softplus(x, 1.0, 20.0))\nout = g * (t + x * s * (1.0 - t * t))",
    ),
    "native_dropout_backward.default": _backward(
        "grad * mask * scale",
        "out = tl.where(m != 0, g * scale, 0.0)",
        saved="mask",
        var="m",
        raw=True,
        promote_saved=False,
        scalars=(("scale", "scale"),),
    ),
}

WRITERS: dict[str, Writer] = writers_for(SPECS, derive=False)
