"""GPU-only (marker `gpu`): the layer norm backward's column sums, reduced inside the row grid.

Each program of the row kernel stores its partial column sums, then takes a ticket from an
arrival counter; the last programs to arrive wait for every arrival and sum the partial rows in
a fixed order (`_ln_bwd_last_sums`). Triton's interpreter runs programs one after another, so
there only the last program may wait and one reducer sums every column: the waits, the fences,
several reducers splitting the columns and the counters' reset run on the GPU alone. These tests
check, on shapes with many reducers, few programs, ragged column blocks and the multi-warp path
of long rows: results as close to the float64 ones as eager's, the same bits on every call,
counters back at zero after each call, and calls on two streams at once.
"""

from __future__ import annotations

import pytest
import torch
from kernel_loading import load_kernel

from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest

pytestmark = pytest.mark.gpu

OP = "native_layer_norm_backward.default"

_CASES = [  # (leading shape, N, dtype)
    ((32, 197), 768, torch.float32),  # the suite's largest: 96 column blocks, 96 reducers
    ((8, 1024), 768, torch.bfloat16),
    ((8, 512), 128, torch.float32),  # 16 column blocks: 16 reducers
    ((3,), 768, torch.float16),  # fewer programs than column blocks: every program reduces
    ((64,), 300, torch.float32),  # a ragged last column block
    ((16,), 9000, torch.bfloat16),  # rows past a warp's: the multi-warp row kernel
]


def _kernel(tmp_path):
    return load_kernel(OP, WRITERS[OP](KernelRequest(OP, "", [])), tmp_path)


def _inputs(lead, n, dtype, seed):
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*lead, n, generator=gen).to(dtype).cuda()
    g = torch.randn(*lead, n, generator=gen).to(dtype).cuda()
    w = torch.randn(n, generator=gen).to(dtype).cuda()
    b = torch.randn(n, generator=gen).to(dtype).cuda()
    _, mean, rstd = torch.ops.aten.native_layer_norm(x, [n], w, b, 1e-5)
    return (g, x, [n], mean, rstd, w, b, [True, True, True])


def _f64(args):
    return [a.double() if isinstance(a, torch.Tensor) else a for a in args]


@pytest.mark.parametrize(("lead", "n", "dtype"), _CASES)
def test_fused_column_sums_are_as_exact_as_eager_and_repeat_bit_for_bit(
    lead, n, dtype, tmp_path
) -> None:
    kernel = _kernel(tmp_path)
    args = _inputs(lead, n, dtype, 0)
    got = kernel(*args)
    want = torch.ops.aten.native_layer_norm_backward(*args)
    exact = torch.ops.aten.native_layer_norm_backward(*_f64(args))
    for name, o, e, x in zip(
        ("grad_input", "grad_weight", "grad_bias"), got, want, exact, strict=True
    ):
        ours = (o.double() - x).abs().max().item()
        eagers = (e.double() - x).abs().max().item()
        step = torch.finfo(dtype).eps * x.abs().max().item()  # one rounding of the result
        assert ours <= 1.5 * eagers + step, (name, ours, eagers)
    sync = kernel.__globals__["_SYNC"]
    assert sync and all(int(c.abs().sum()) == 0 for c in sync.values())
    for _ in range(4):
        again = kernel(*args)
        assert all(torch.equal(a, b) for a, b in zip(got, again, strict=True))
    torch.cuda.synchronize()
    assert all(int(c.abs().sum()) == 0 for c in sync.values())


def test_fused_column_sums_on_two_streams_at_once(tmp_path) -> None:
    """Two streams running the same plan concurrently each count their own arrivals: with
    shared counters one call's reducers could start on the other's arrivals and sum partial
    rows not yet written."""
    kernel = _kernel(tmp_path)
    lead, n, dtype = _CASES[0]
    sets = [_inputs(lead, n, dtype, seed) for seed in (1, 2)]
    wants = [kernel(*args) for args in sets]
    streams = [torch.cuda.Stream() for _ in sets]
    torch.cuda.synchronize()
    gots: list[list] = [[], []]
    for _ in range(20):
        for s, args, out in zip(streams, sets, gots, strict=True):
            with torch.cuda.stream(s):
                out.append(kernel(*args))
    torch.cuda.synchronize()
    for want, outs in zip(wants, gots, strict=True):
        for got in outs:
            assert all(torch.equal(a, b) for a, b in zip(want, got, strict=True))
    assert len(kernel.__globals__["_SYNC"]) >= 3


def test_fused_column_sums_replay_in_a_cuda_graph(tmp_path) -> None:
    kernel = _kernel(tmp_path)
    args = _inputs((8, 512), 768, torch.float32, 3)
    want = kernel(*args)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = kernel(*args)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    assert all(torch.equal(a, b) for a, b in zip(want, got, strict=True))
