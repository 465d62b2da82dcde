"""Backward elementwise family: the activation gradients that training traces call.

Each entry is an `Elementwise` spec (see elementwise.py), its kernel body the function named in
kernels/backward_ops.py, over `g` = grad_output and the saved input or output. Formulas are eager's (aten/src/ATen/native/cuda/*Activation*.cu), in f32 for
half types; the result dtype is `torch.result_type` of the tensor operands, as in eager.
"""

from __future__ import annotations

from agent.providers.builtin import kernelsource
from agent.providers.builtin.elementwise import writers_for
from agent.providers.builtin.elementwise_kernels import Elementwise, Operand
from agent.providers.builtin.request import Writer

_BODIES = kernelsource.bodies("backward_ops")


def _backward(
    summary: str,
    kernel: str,
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
        body=_BODIES[kernel],
        scalars=scalars,
        promote=promote,
        constexprs=constexprs,
    )


SPECS: dict[str, Elementwise] = {
    "threshold_backward.default": _backward(
        "grad where self > threshold, else 0 (relu's backward)",
        "threshold_backward",
        scalars=(("threshold", "th"),),
    ),
    "sigmoid_backward.default": _backward(
        "grad * (1 - y) * y", "sigmoid_backward", saved="output", var="y"
    ),
    "tanh_backward.default": _backward(
        "grad * (1 - y * y)", "tanh_backward", saved="output", var="y"
    ),
    "gelu_backward.default": _backward(
        "gradient of gelu, exact (erf) or tanh approximation",
        "gelu_backward",
        constexprs=(("APPROXIMATE", '{"none": 0, "tanh": 1}[a["approximate"]]'),),
    ),
    "silu_backward.default": _backward(
        "grad * s * (1 + x * (1 - s)), s = sigmoid(x)",
        "silu_backward",
    ),
    "hardtanh_backward.default": _backward(
        "grad inside (min_val, max_val), else 0",
        "hardtanh_backward",
        scalars=(("min_val", "lo"), ("max_val", "hi")),
    ),
    "leaky_relu_backward.default": _backward(
        "grad if x > 0 else grad * negative_slope",
        "leaky_relu_backward",
        scalars=(("negative_slope", "slope"),),
    ),
    "elu_backward.default": _backward(
        "gradient of elu from its input or its result",
        "elu_backward",
        saved="self_or_result",
        scalars=(("alpha", "alpha"), ("scale", "scale"), ("input_scale", "input_scale")),
        constexprs=(("IS_RESULT", 'bool(a["is_result"])'),),
    ),
    "hardsigmoid_backward.default": _backward(
        "grad / 6 inside (-3, 3), else 0",
        "hardsigmoid_backward",
    ),
    "hardswish_backward.default": _backward(
        "gradient of hardswish",
        "hardswish_backward",
    ),
    "softplus_backward.default": _backward(
        "grad * sigmoid(beta x), grad above the threshold",
        "softplus_backward",
        scalars=(("beta", "beta"), ("threshold", "threshold")),
    ),
    "mish_backward.default": _backward(
        "gradient of x * tanh(softplus(x))",
        "mish_backward",
    ),
    "native_dropout_backward.default": _backward(
        "grad * mask * scale",
        "native_dropout_backward",
        saved="mask",
        var="m",
        raw=True,
        promote_saved=False,
        scalars=(("scale", "scale"),),
    ),
}

WRITERS: dict[str, Writer] = writers_for(SPECS, derive=False)
