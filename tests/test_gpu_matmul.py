"""GPU-only (marker `gpu`): the half-precision products through tensor descriptors
(`_HALF_TMA`, sm_90+), which the plan takes only on the GPU.

With the knob on, 2-D fp16/bf16 mm and addmm whose operands a descriptor can span go through
`_mm_tma_kernel` (one program per tile, or programs walking the tiles): the results must be as
close to a float64 product as eager's, on the suite's shapes and layouts (B as nn.Linear's
K-contiguous weight, A transposed), with addmm's bias row or tile, alpha and beta; misaligned
operands, odd N and batched products keep the pointer kernel.
"""

from __future__ import annotations

import sys

import pytest
import torch
from kernel_loading import load_kernel

from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest

pytestmark = pytest.mark.gpu


def _module(op, tmp_path, persistent):
    kernel = load_kernel(op, WRITERS[op](KernelRequest(op, "", [])), tmp_path)
    module = sys.modules[kernel.__module__]
    if torch.cuda.get_device_capability()[0] < 9 or module.TensorDescriptor is None:
        pytest.skip("tensor descriptors need sm_90+ and Triton 3.3+")
    module._HALF_TMA = True
    module._HALF_TMA_PERSISTENT = persistent
    return kernel, module


def _operand(rows, cols, transposed, dtype, gen):
    """A [rows, cols] matrix, stored transposed (columns contiguous) when asked."""
    if transposed:
        return torch.randn(cols, rows, generator=gen).to(dtype).cuda().t()
    return torch.randn(rows, cols, generator=gen).to(dtype).cuda()


def _close_as_eager(got, want, exact):
    ours = (got.double() - exact).abs().max().item()
    eagers = (want.double() - exact).abs().max().item()
    assert ours <= 2 * eagers + 1e-3, (ours, eagers)


# (M, K, N, A stored transposed, B stored transposed (K-contiguous), dtype)
_SHAPES = [
    (6304, 768, 768, False, True, torch.bfloat16),
    (768, 4096, 768, True, False, torch.bfloat16),
    (4096, 768, 768, False, False, torch.float16),
    (1024, 2048, 2048, False, True, torch.bfloat16),
    (1000, 96, 200, True, True, torch.float16),  # edge tiles on M and N
]


@pytest.mark.parametrize("persistent", [False, True])
@pytest.mark.parametrize(("M", "K", "N", "a_t", "b_t", "dtype"), _SHAPES)
def test_mm_through_descriptors_is_as_close_as_eager(
    M, K, N, a_t, b_t, dtype, persistent, tmp_path
) -> None:
    kernel, module = _module("mm.default", tmp_path, persistent)
    gen = torch.Generator().manual_seed(M + N)
    a, b = _operand(M, K, a_t, dtype, gen), _operand(K, N, b_t, dtype, gen)
    got = kernel(a, b)
    plan = next(iter(module._PLANS.values()))
    assert plan[-1] is not None  # the descriptor path was planned
    _close_as_eager(got, torch.mm(a, b), a.double() @ b.double())
    assert torch.equal(kernel(a, b), got)


@pytest.mark.parametrize("persistent", [False, True])
def test_addmm_through_descriptors_adds_a_bias_row_or_tile(persistent, tmp_path) -> None:
    kernel, module = _module("addmm.default", tmp_path, persistent)
    gen = torch.Generator().manual_seed(3)
    a = _operand(4096, 768, False, torch.bfloat16, gen)
    b = _operand(768, 768, True, torch.bfloat16, gen)
    for bias in (torch.randn(768, generator=gen), torch.randn(4096, 768, generator=gen)):
        bias = bias.to(torch.bfloat16).cuda()
        got = kernel(bias, a, b, beta=0.5, alpha=2.0)
        exact = 0.5 * bias.double() + 2.0 * (a.double() @ b.double())
        _close_as_eager(got, torch.addmm(bias, a, b, beta=0.5, alpha=2.0), exact)
    assert all(plan[-1] is not None for plan in module._PLANS.values())


def test_what_descriptors_cannot_span_keeps_the_pointer_kernel(tmp_path) -> None:
    kernel, module = _module("mm.default", tmp_path, True)
    gen = torch.Generator().manual_seed(5)
    a = _operand(512, 256, False, torch.float16, gen)
    b = _operand(256, 260, False, torch.float16, gen)  # N = 260: rows not 16-byte multiples
    _close_as_eager(kernel(a, b), torch.mm(a, b), a.double() @ b.double())
    assert all(plan[-1] is None for plan in module._PLANS.values())
    base = torch.randn(512 * 256 + 1, generator=gen).half().cuda()
    a = base[1:].view(512, 256)  # 2 bytes past an aligned address: planned, not launched
    b = _operand(256, 256, False, torch.float16, gen)
    _close_as_eager(kernel(a, b), torch.mm(a, b), a.double() @ b.double())
    bmm, bmm_module = _module("bmm.default", tmp_path, True)
    a3 = torch.randn(4, 128, 64, generator=gen).half().cuda()
    b3 = torch.randn(4, 64, 128, generator=gen).half().cuda()
    _close_as_eager(bmm(a3, b3), torch.bmm(a3, b3), a3.double() @ b3.double())
    assert all(plan[-1] is None for plan in bmm_module._PLANS.values())  # batched
