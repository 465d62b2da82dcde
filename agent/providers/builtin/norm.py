"""Normalization family of the builtin provider: native_layer_norm (+ backward) and batch norm
(native_batch_norm, _native_batch_norm_legit, _native_batch_norm_legit_no_training, and
native_batch_norm_backward).

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template, e.g. non-float inputs).
Same request -> same text.

How the generated kernels work (all arithmetic in fp32, fp64 for fp64 inputs):
- layer norm: rows of N = prod(normalized_shape) elements, BLOCK_M rows per program. A row that
  fits in one tile is loaded once (exact two-pass mean/variance in registers); a longer row
  takes a pass of shifted sums and a writing pass. mean/rstd come back in eager's dtype: fp32 for
  half inputs on CUDA (ATen's accumulate type), the input dtype on the CPU.
  The backward computes grad_input per row and, for grad_weight/grad_bias, per-program partial
  column sums in an fp32 workspace that a second kernel reduces in a fixed order (no atomics).
  A program's row steps are pipelined (the next steps' loads in flight during this one's math)
  and its column sums stay tile-shaped until after the loop; the _LNB_* constants of the
  generated file are its tuning knobs.
- batch norm: per-channel statistics over (N, H*W) by split programs that write partial shifted
  sums, one small kernel that combines them per channel (mean, invstd, running-stat update in
  place as eager does, and the affine coefficients), then one elementwise pass.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.providers.builtin import codegen, kernelsource

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer


# ---------------------------------------------------------------- layer norm

_LN_COMMON = kernelsource.emitted("layer_norm", "common")

_LN_FWD = kernelsource.emitted("layer_norm", "forward")

_LN_BWD = kernelsource.emitted("layer_norm_backward", "backward")

# ---------------------------------------------------------------- batch norm

_BN = kernelsource.emitted("batch_norm_partials", "partials") + kernelsource.emitted(
    "batch_norm", "main"
)

_BN_SMEM = kernelsource.emitted("batch_norm_smem", "smem")

_BN_BWD = kernelsource.emitted("batch_norm_backward", "backward")

_LN_PLAN = (
    "Plan: rows of N = prod(normalized_shape) elements, BLOCK_M rows per program; a row that fits "
    "one tile is loaded once (two-pass mean/variance in registers), a longer one takes a pass of "
    "shifted sums and a writing pass. The backward writes grad_input per row and per-program "
    "partial column sums for grad_weight/grad_bias, reduced in a fixed order by a second kernel. "
    "Arithmetic is fp32 (fp64 for fp64)."
)
_BN_PLAN = (
    "Plan: per-channel statistics over (N, H*W) from split programs writing partial shifted sums, "
    "a per-channel kernel combining them (mean, invstd, running-stat update in place, affine "
    "coefficients), then one elementwise pass. Arithmetic is fp32 (fp64 for fp64)."
)
NUM_VARIANTS = 2  # 0: big tiles, split statistics; 1: small tiles, one program per channel

_SPECS: dict[str, tuple[str, str, str]] = {
    "native_layer_norm.default": (
        _LN_COMMON + _LN_FWD,
        "layer norm over the trailing dims, returning (out, mean, rstd)",
        "def _op(input, normalized_shape, weight, bias, eps):\n"
        "    return _layer_norm(input, normalized_shape, weight, bias, eps)",
    ),
    "native_layer_norm_backward.default": (
        _LN_COMMON + _LN_BWD,
        "layer norm backward: (grad_input, grad_weight, grad_bias) per output_mask",
        "def _op(grad_out, input, normalized_shape, mean, rstd, weight, bias, output_mask):\n"
        "    return _layer_norm_backward(grad_out, input, normalized_shape, mean, rstd, weight,"
        " bias, output_mask)",
    ),
    "native_batch_norm.default": (
        _BN,
        "batch norm over (N, *spatial) per channel; updates running stats in place when training",
        "def _op(input, weight, bias, running_mean, running_var, training, momentum, eps):\n"
        "    return _batch_norm(input, weight, bias, running_mean, running_var, training,"
        " momentum, eps)",
    ),
    "_native_batch_norm_legit.default": (
        _BN,
        "batch norm over (N, *spatial) per channel; updates running stats in place when training",
        "def _op(input, weight, bias, running_mean, running_var, training, momentum, eps):\n"
        "    return _batch_norm(input, weight, bias, running_mean, running_var, training,"
        " momentum, eps)",
    ),
    "_native_batch_norm_legit_no_training.default": (
        _BN,
        "batch norm with running statistics (inference)",
        "def _op(input, weight, bias, running_mean, running_var, momentum, eps):\n"
        "    return _batch_norm(input, weight, bias, running_mean, running_var, False,"
        " momentum, eps)",
    ),
    "native_batch_norm_backward.default": (
        _BN + "\n\n" + codegen.GLUON_SOURCE + _BN_SMEM + "\n\n" + _BN_BWD,
        "batch norm backward: (grad_input, grad_weight, grad_bias) per output_mask",
        "def _op(grad_out, input, weight, running_mean, running_var, save_mean, save_invstd,"
        " train, eps, output_mask):\n"
        "    return _batch_norm_backward(grad_out, input, weight, running_mean, running_var,"
        " save_mean, save_invstd, train, eps, output_mask)",
    ),
}


def _write(request: KernelRequest) -> str | None:
    picked = codegen.pick(request, _SPECS, NUM_VARIANTS, codegen.FLOATS)
    if picked is None:
        return None
    (kernels, summary, body), variant = picked
    plan = _LN_PLAN if "layer_norm" in request.op else _BN_PLAN
    header = kernelsource.emitted(
        "norm_shared", "header", values={"_CONSERVATIVE": str(variant >= 1)}
    )
    sections = (header, codegen.PDL_SOURCE, kernels)
    return codegen.render_family(
        request, variant, summary=summary, plan=plan, sections=sections, body=body
    )


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
