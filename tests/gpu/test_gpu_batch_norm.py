"""GPU-only (marker `gpu`): batch norm backward through the shared-memory kernel
(`_bn_smem_kernel`, Gluon), which the interpreter cannot run.

f16/bf16 NCHW channels of more than 256 positions are held in shared memory; the kernel must
give CUDA eager's grad_weight and grad_bias bit for bit (the same per-thread order, roundings and
shuffle tree) and its grad_input within a unit of the last place, whether a program takes one
channel or several (channel counts below and above the SM count), whatever the number of rows
(a multiple of the 8-row group or not), in train and eval mode, with or without a weight and for
each output mask. Misaligned inputs keep the other path.
"""

from __future__ import annotations

import sys

import pytest
import torch
from kernel_loading import load_kernel

from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest

_OP = "native_batch_norm_backward.default"


def _kernel(tmp_path):
    kernel = load_kernel(_OP, WRITERS[_OP](KernelRequest(_OP, "", [])), tmp_path)
    return kernel, sys.modules[kernel.__module__]


def _args(shape, dtype, train, weight, seed):
    gen = torch.Generator().manual_seed(seed)
    C = shape[1]
    x = (torch.randn(shape, generator=gen) * 2 + 0.5).to(dtype).cuda()
    g = torch.randn(shape, generator=gen).to(dtype).cuda()
    w = torch.randn(C, generator=gen).cuda() if weight else None
    rm = torch.randn(C, generator=gen).cuda()
    rv = torch.rand(C, generator=gen).cuda() + 0.5
    dims = [0] + list(range(2, len(shape)))
    if train:
        mean = x.float().mean(dims)
        istd = (x.float().var(dims, unbiased=False) + 1e-5).rsqrt()
    else:  # as the forward saves them in eval mode (eager's eval paths read one or the other)
        mean, istd = rm.clone(), 1 / (rv + 1e-5).sqrt()
    return [g, x, w, rm, rv, mean, istd, train, 1e-5]


def _check(kernel, args, mask, exact=True):
    """Eager's grad_input within a unit of the last place, its grad_weight and grad_bias bit for
    bit (exact; f32 through the plain kernels: their split sums, within f32 rounding)."""
    try:
        want = torch.ops.aten.native_batch_norm_backward(*args, mask)
    except RuntimeError as exc:  # eval mode, some masks: "tensor does not have a device"
        pytest.skip(f"eager fails here: {exc}")
    got = kernel(*args, mask)
    for k, (a, b) in enumerate(zip(got, want, strict=True)):
        if not mask[k]:
            assert a is None and b is None
        elif k == 0:
            torch.testing.assert_close(a, b, rtol=1e-2, atol=1e-2, equal_nan=True)
        elif exact:  # eager's own sums, bit for bit
            torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)
        else:
            torch.testing.assert_close(a, b, rtol=1e-4, atol=1e-4, equal_nan=True)
    return got


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32])
@pytest.mark.parametrize(
    "shape",
    [(32, 128, 28, 28), (32, 300, 28, 28), (7, 5, 24, 24), (3, 140, 264), (2, 3, 40, 16, 2),
     (1, 384, 576)],
)
def test_channels_held_in_shared_memory_match_eager(shape, dtype, tmp_path) -> None:
    kernel, module = _kernel(tmp_path)
    args = _args(shape, dtype, True, True, sum(shape))
    N, HW = shape[0], args[1][0, 0].numel()
    groups = -(-N * -(-HW // 512) // 8)  # of 8 rows of 512 positions, x and grad_out
    fits = 2 * groups * 8 * 512 * args[1].element_size() + 4096 <= 227 * 1024
    assert (module._bn_smem_plan(args[1], N, shape[1], HW, True) is not None) == fits
    _check(kernel, args, [True, True, True], exact=fits or dtype != torch.float32)


@pytest.mark.parametrize(("train", "weight"), [(True, True), (True, False), (False, True), (False, False)])
@pytest.mark.parametrize("mask", [[True, False, False], [True, True, False], [True, False, True]])
def test_modes_weights_and_masks_match_eager(train, weight, mask, tmp_path) -> None:
    kernel, _ = _kernel(tmp_path)
    _check(kernel, _args((4, 200, 20, 20), torch.bfloat16, train, weight, 3), mask)


def test_special_values_and_a_second_call(tmp_path) -> None:
    kernel, _ = _kernel(tmp_path)
    args = _args((8, 150, 32, 30), torch.bfloat16, True, True, 5)
    args[0][0, 1, 3, 3] = float("inf")
    args[0][2, 7, 0, 0] = float("nan")
    first = _check(kernel, args, [True, True, True])
    second = kernel(*args, [True, True, True])
    for a, b in zip(first, second, strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0, equal_nan=True)


def test_misaligned_inputs_and_other_shapes_take_the_other_path(tmp_path) -> None:
    kernel, module = _kernel(tmp_path)
    args = _args((4, 16, 20, 20), torch.bfloat16, True, True, 7)
    # a view one element into its storage: 16-byte copies cannot take it
    base = torch.randn(1 + args[1].numel(), device="cuda").to(torch.bfloat16)
    args[1] = base[1:].view(args[1].shape).copy_(args[1])
    _check(kernel, args, [True, True, True])
    x = args[1]
    assert module._bn_smem_plan(x, 4, 16, 400, False) is None  # no grad_input
    assert module._bn_smem_plan(x.double(), 4, 16, 400, True) is None  # f64
    many = torch.empty(1, 1536, 384, device="cuda")
    assert module._bn_smem_plan(many, 1, 1536, 384, True) is None  # many small channels
    small = torch.empty(4, 16, 16, 16, device="cuda", dtype=torch.bfloat16)
    assert module._bn_smem_plan(small, 4, 16, 256, True) is None  # eager's block is not 512 x 1
    big = torch.empty(32, 4, 56, 56, device="cuda", dtype=torch.bfloat16)
    assert module._bn_smem_plan(big, 32, 4, 3136, True) is None  # past shared memory
    last = torch.empty(4, 16, 20, 20, device="cuda", dtype=torch.bfloat16)
    last = last.to(memory_format=torch.channels_last)
    assert module._bn_smem_plan(last, 4, 16, 400, True) is None  # eager's channels-last kernels
