"""Loss family of the builtin provider: nll_loss_forward and nll_loss_backward.

Contract: `WRITERS` maps a normalized overload name to a Writer (KernelRequest -> text of a whole
kernel file, or None when the request is outside this template, e.g. non-float inputs).
Same request -> same text.

How the generated kernels work (self is [N, C] or [C], target [N] or []):
- forward, reduction none: one flat launch over N writes -w[t] * self[i, t] (0 where the target
  is ignore_index); total_weight is 0, as in eager;
- forward, mean/sum: one program walks N in blocks summing the loss and the weights in fp32
  (fp64 for fp64) in a fixed order (deterministic), then divides by total_weight for mean
  (0/0 -> NaN, as in eager);
- backward: one flat walk over grad_input writes every element once (16-byte vector stores, odd
  class counts included): the target column gets -w[t] * grad (grad / total_weight for mean),
  every other element 0, so no separate zero fill is needed.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

from agent.providers.builtin import codegen, kernelsource

if TYPE_CHECKING:
    from agent.providers.builtin.request import KernelRequest, Writer

NUM_VARIANTS = 2  # 0: big tiles; 1: small tiles

_TARGETS = (torch.int64, torch.int32, torch.uint8)

_NLL_SOURCE = kernelsource.emitted("loss", "nll")


_SPECS: dict[str, tuple[str, str, str]] = {
    "nll_loss_forward.default": (
        "negative log-likelihood loss (none/mean/sum, weight, ignore_index)",
        _NLL_SOURCE,
        "def _op(self, target, weight, reduction, ignore_index):\n"
        "    return _nll_loss_forward(self, target, weight, reduction, ignore_index)",
    ),
    "nll_loss_backward.default": (
        "gradient of the negative log-likelihood loss",
        _NLL_SOURCE,
        "def _op(grad_output, self, target, weight, reduction, ignore_index, total_weight):\n"
        "    return _nll_loss_backward(grad_output, self, target, weight, reduction,\n"
        "                              ignore_index, total_weight)",
    ),
}

_PLAN = (
    "Plan: the forward gathers self[i, target[i]] (one program summing in a fixed order for "
    "mean/sum, accumulating in fp32); the backward writes every element of grad_input once in a "
    "flat walk, the target column holding -weight * grad."
)


def _write(request: KernelRequest) -> str | None:
    return codegen.write_tiled(request, _SPECS, NUM_VARIANTS, _PLAN, codegen.FLOATS + _TARGETS)


WRITERS: dict[str, Writer] = {op: _write for op in _SPECS}
