"""More normalisation kernels for the builtin provider: native_group_norm and
_weight_norm_interface.

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template, e.g. non-float inputs).
Same request -> same text.

How the generated kernels work:
- native_group_norm: with many groups of at most a few ten thousand elements, one launch holds
  whole groups in registers (read once: mean, then the mean of squared deviations from the same
  registers, normalised and stored); f16/bf16 one-channel groups of at least a thousand elements
  take a persistent form of it that fetches the next group (as 16-byte chunks of 32-bit words,
  head and tail elements apart) before reducing and storing the current one. Otherwise each
  (sample, group)'s C/G * HxW contiguous elements are split into chunks (about a thousand programs in all, a chunk inside one channel
  when planes are long): a first kernel writes each chunk's sums shifted by the group's first
  element (no catastrophic cancellation), a second combines a group's sums in a fixed order, writes mean and rstd (in the
  input dtype, shaped [N, group] like eager) and normalises its chunk with the channel's weight
  and bias;
- _weight_norm_interface (dim 0 or last): the input (made contiguous) is read as [A, D, B] with D
  the kept dim; partial sums of squares go to an fp32 buffer with atomic adds (a column tile when
  B == 1, so the last-dim case reads memory in order), then one elementwise launch writes
  w = v * g / ||v|| and the norm (fp32 for f16/bf16, as eager's accumulate type).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from agent.providers.builtin import codegen, kernelsource

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer

NUM_VARIANTS = 2  # 0: big tiles; 1: small tiles


# The accumulate dtype helper both kernels use (the pooling files carry the same one).
_COMMON = kernelsource.definitions("pooling_common")["_acc"]

_GROUP_NORM = (
    kernelsource.emitted("group_norm", "knobs")
    + kernelsource.emitted("group_norm_kernels", "kernels")
    + kernelsource.emitted("group_norm", "plans")
)

_WEIGHT_NORM = kernelsource.emitted("weight_norm", "weight_norm")


_SPECS: dict[str, tuple[str, str, str]] = {
    "native_group_norm.default": (
        "group normalisation with per-channel affine (out, mean, rstd)",
        _GROUP_NORM,
        "def _op(input, weight, bias, N, C, HxW, group, eps):\n"
        "    return _native_group_norm(input, weight, bias, N, C, HxW, group, eps)",
    ),
    "_weight_norm_interface.default": (
        "weight normalisation w = v * g / ||v|| over all dims but `dim` (w, norm)",
        _WEIGHT_NORM,
        "def _op(v, g, dim=0):\n    return _weight_norm_interface(v, g, dim)",
    ),
}

_PLAN = (
    "Plan: kernels over contiguous data with fp32 arithmetic (fp64 for fp64); group norm "
    "holds many short groups whole in registers (one read), else splits each (sample, group) "
    "into chunks: partial shifted sums, then statistics and normalisation per chunk; weight "
    "norm sums squares with atomic adds into an fp32 buffer, then scales v elementwise."
)


def _write(request: KernelRequest) -> str | None:
    return codegen.write_tiled(
        request, _SPECS, NUM_VARIANTS, _PLAN, codegen.FLOATS, common=(_COMMON,)
    )


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
