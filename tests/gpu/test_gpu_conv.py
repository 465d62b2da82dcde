"""GPU-only (marker `gpu`): the builtin convolution's autotuned path.

On the GPU the convolution picks its tile per shape with Triton's autotuner, ranking configs by
the file's own `_quick_bench` (GPU time, the host's launch time hidden behind a GPU wait). The
interpreter never autotunes, so only the GPU checks that bench's contract with the autotuner
(one time per asked quantile, in ms, ordered like the quantiles), that the picked config is
cached for the fast launch path, and that the cached launch computes what eager does. The 1x1
backward's weight gradient, which sums grad_bias beside its dot, is checked against fp64 on
every call with tiles whose register sums once raced with that dot
(docs/history/BENCHMARKS-2026-11-to-12.md §29).
"""

from __future__ import annotations

import sys

import pytest
import torch
from kernel_loading import load_kernel

from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest

OP = "convolution.default"


def _module(tmp_path):
    kernel = load_kernel(OP, WRITERS[OP](KernelRequest(OP, "", [])), tmp_path)
    return kernel, sys.modules[kernel.__module__]


def test_quick_bench_gives_each_quantile_of_the_gpu_time(tmp_path) -> None:
    _, module = _module(tmp_path)
    cycles = 200_000  # ~100 us of GPU time on an H200

    def call():
        torch.cuda._sleep(cycles)

    p50, p20, p80 = module._quick_bench(call, (0.5, 0.2, 0.8))
    assert 0 < p20 <= p50 <= p80
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    start.record()
    torch.cuda._sleep(cycles)
    end.record()
    end.synchronize()
    assert p50 == pytest.approx(start.elapsed_time(end), rel=0.25)


# (input shape, weight shape, padding, groups, dtype, channels_last input): a GEMM tile picked
# among several configs, a 1x1 one, and the depthwise direct kernel
_CASES = [
    ((32, 128, 7, 7), (32, 128, 3, 3), 1, 1, torch.float16, False),
    ((64, 116, 14, 14), (116, 116, 1, 1), 0, 1, torch.float16, False),
    ((8, 384, 14, 14), (384, 1, 7, 7), 3, 384, torch.bfloat16, True),
]


@pytest.mark.parametrize(("xs", "ws", "pad", "groups", "dtype", "nhwc"), _CASES)
def test_autotuned_pick_is_cached_and_computes_like_eager(
    xs, ws, pad, groups, dtype, nhwc, tmp_path
) -> None:
    kernel, module = _module(tmp_path)
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(xs, generator=gen).to(dtype).cuda()
    if nhwc:
        x = x.contiguous(memory_format=torch.channels_last)
    w = torch.randn(ws, generator=gen).to(dtype).cuda()
    args = (x, w, None, [1, 1], [pad, pad], [1, 1], False, [0, 0], groups)
    tuned = kernel(*args)  # autotunes
    assert len(module._BEST) == 1
    cached = kernel(*args)  # launches the cached pick
    want = torch.ops.aten.convolution.default(*args)
    exact = torch.ops.aten.convolution.default(
        x.double(), w.double(), None, [1, 1], [pad, pad], [1, 1], False, [0, 0], groups
    )
    ours = (cached.double() - exact).abs().max().item()
    eagers = (want.double() - exact).abs().max().item()
    assert ours <= 2 * eagers + 1e-3, (ours, eagers)
    assert torch.equal(tuned, cached)


BWD = "convolution_backward.default"


# (weight-gradient tiles or None for the file's choice, programs per SM): forced tiles with
# which grad_weight came out wrong while grad_bias was summed in registers beside the dot
@pytest.mark.parametrize(
    ("tiles", "waves"), [(None, 2), ((64, 128, 64, 4, 3), 2), ((128, 128, 128, 8, 2), 1)]
)
def test_pointwise_backward_with_bias_matches_fp64_on_every_call(tiles, waves, tmp_path) -> None:
    kernel = load_kernel(BWD, WRITERS[BWD](KernelRequest(BWD, "", [])), tmp_path)
    module = sys.modules[kernel.__module__]
    module._PW_WEIGHT_TILES, module._PW_WEIGHT_WAVES = tiles, waves
    gen = torch.Generator().manual_seed(0)
    go = torch.randn(32, 1536, 14, 14, generator=gen).to(torch.bfloat16).cuda()
    x = torch.randn(32, 384, 14, 14, generator=gen).to(torch.bfloat16).cuda()
    w = torch.randn(1536, 384, 1, 1, generator=gen).to(torch.bfloat16).cuda()
    rest = ([1536], [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, True, True])
    exact = torch.ops.aten.convolution_backward.default(go.double(), x.double(), w.double(), *rest)
    for _ in range(3):
        got = kernel(go, x, w, *rest)
        for ours, want in zip(got, exact, strict=True):
            err = (ours.double() - want).abs().max() / want.abs().max()
            assert err < 1e-2, err.item()
