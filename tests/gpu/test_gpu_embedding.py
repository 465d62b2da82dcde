"""GPU-only (marker `gpu`): the embedding backward's sorted path on the GPU's own arithmetic,
and its few-index path (eager's chunk by chunk arithmetic) on skewed indices.

Past 3072 indices the rows are sorted by weight row and each tile of sorted rows is summed by a
0/1 matrix product on tensor cores (f32 grads as three exact bf16 pieces). The interpreter runs
that product as an fp32 dot (its bf16 dots are wrong), so only the GPU checks the tensor-core
path: sums as close to the exact ones as eager's, the same bits on every call, NaN and infinity
where eager has them, on uniform and on Zipf-distributed (token-stream-like) indices.
"""

from __future__ import annotations

import sys

import pytest
import torch
from kernel_loading import load_kernel

from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest

OP = "embedding_dense_backward.default"

_CASES = [  # (indices, columns, weight rows, dtype, Zipf exponent (0: uniform), padding_idx)
    (8192, 2048, 32000, torch.bfloat16, 1.1, -1),
    (8192, 768, 50257, torch.float16, 1.1, 0),
    (4096, 768, 30522, torch.float32, 0.0, 0),
    (16384, 256, 1000, torch.float32, 1.3, 5),
    (3100, 64, 7, torch.bfloat16, 0.0, 2),
]


def _run(rows, cols, weights, dtype, zipf, pad, tmp_path, seed):
    """(kernel, grad, index, the kernel's result, eager's) for seeded grads and indices drawn
    uniformly or from a Zipf law of exponent `zipf` over the weight rows."""
    kernel = load_kernel(OP, WRITERS[OP](KernelRequest(OP, "", [])), tmp_path)
    gen = torch.Generator().manual_seed(seed)
    grad = torch.randn(rows, cols, generator=gen).to(dtype).cuda()
    if zipf:
        law = 1.0 / torch.arange(1, weights + 1, dtype=torch.float64) ** zipf
        index = torch.multinomial(law, rows, replacement=True, generator=gen).cuda()
    else:
        index = torch.randint(0, weights, (rows,), generator=gen).cuda()
    got = kernel(grad, index, weights, pad, False)
    want = torch.ops.aten.embedding_dense_backward(grad, index, weights, pad, False)
    return kernel, grad, index, got, want


@pytest.mark.parametrize(("rows", "cols", "weights", "dtype", "zipf", "pad"), _CASES)
def test_sorted_path_sums_like_eager_on_skewed_indices(
    rows, cols, weights, dtype, zipf, pad, tmp_path
) -> None:
    kernel, grad, index, got, want = _run(rows, cols, weights, dtype, zipf, pad, tmp_path, 0)
    keep = index != pad
    exact = torch.zeros(weights, cols, dtype=torch.float64, device="cuda")
    exact.index_add_(0, index[keep], grad[keep].double())
    ours = (got.double() - exact).abs().max().item()
    eagers = (want.double() - exact).abs().max().item()
    assert ours <= 1.5 * eagers + 1e-6, (ours, eagers)
    assert torch.equal(kernel(grad, index, weights, pad, False), got)
    grad[3, 1] = float("nan")
    grad[7, 2] = float("inf")
    got = kernel(grad, index, weights, pad, False)
    want = torch.ops.aten.embedding_dense_backward(grad, index, weights, pad, False)
    assert torch.equal(got.isnan(), want.isnan())
    assert torch.equal(got.isinf(), want.isinf())


_BITS = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}


@pytest.mark.parametrize("every", [500, 50000])
@pytest.mark.parametrize(("rows", "cols", "weights", "dtype", "zipf", "pad"), _CASES[:3])
def test_sorted_path_non_finite_grads_in_many_tiles_on_every_call(
    rows, cols, weights, dtype, zipf, pad, every, tmp_path
) -> None:
    """One grad in `every` NaN, +inf or -inf, spread over the tiles and column blocks: the
    segment kernel's non-finite branch reads the grad tile in registers beside its pipelined
    tile products (the pattern that raced in the convolution's weight kernel). Eager's NaN and
    infinities, finite sums as close to the exact ones as eager's, and the same bits on five
    calls."""
    kernel, grad, index = _run(rows, cols, weights, dtype, zipf, pad, tmp_path, 2)[:3]
    gen = torch.Generator().manual_seed(3)
    spots = torch.randperm(grad.numel(), generator=gen)[: max(3, grad.numel() // every)]
    bad = torch.tensor([float("nan"), float("inf"), -float("inf")])
    grad.view(-1)[spots.cuda()] = bad[torch.arange(len(spots)) % 3].to(dtype).cuda()
    got = kernel(grad, index, weights, pad, False)
    want = torch.ops.aten.embedding_dense_backward(grad, index, weights, pad, False)
    for check in (torch.isnan, torch.isposinf, torch.isneginf):
        assert torch.equal(check(got), check(want)), check.__name__
    keep = index != pad
    exact = torch.zeros(weights, cols, dtype=torch.float64, device="cuda")
    exact.index_add_(0, index[keep], grad[keep].double())
    finite = want.isfinite() & exact.isfinite()
    ours = (got.double() - exact)[finite].abs().max().item()
    eagers = (want.double() - exact)[finite].abs().max().item()
    assert ours <= 1.5 * eagers + 1e-6, (ours, eagers)
    for _ in range(4):
        again = kernel(grad, index, weights, pad, False)
        assert torch.equal(again.view(_BITS[dtype]), got.view(_BITS[dtype]))


_FEW = [  # up to 3072 indices: eager's per-chunk rounding; Zipf indices name one row in most chunks
    (1024, 768, 1024, torch.bfloat16, 1.1, -1),
    (1024, 1024, 32000, torch.bfloat16, 1.5, -1),
    (512, 768, 512, torch.float32, 1.1, 0),
    (3072, 256, 50, torch.float16, 0.0, 3),
]


@pytest.mark.parametrize(("rows", "cols", "weights", "dtype", "zipf", "pad"), _FEW)
def test_few_index_path_repeats_eager_on_skewed_indices(
    rows, cols, weights, dtype, zipf, pad, tmp_path
) -> None:
    """The chunks' terms summed ahead, then added per weight row in index order: the same bits
    as CUDA eager's feature kernel, however many chunks name a row."""
    got, want = _run(rows, cols, weights, dtype, zipf, pad, tmp_path, 1)[3:]
    assert torch.equal(got, want)


def test_sorted_path_zeros_unnamed_rows_of_reused_memory_on_any_stream(tmp_path) -> None:
    """The sorted path zeroes only the rows no index names (the others are written by its sums),
    so its output must not depend on what the memory held. Here it comes from freed memory
    full of NaN (the caching allocator hands the same block back), on the default stream, on
    another stream and in a CUDA graph: every unnamed row zero, every named row eager's. (An
    attempt to zero those rows on a second stream, docs/history/BENCHMARKS-2026-11-to-12.md §30,
    once left them stale.)"""
    rows, cols, weights, dtype = 8192, 768, 50257, torch.bfloat16
    kernel, grad, index, first, want = _run(rows, cols, weights, dtype, 0.0, -1, tmp_path, 4)
    assert torch.equal(first, want)

    def on_junk():  # the caching allocator keeps a pool per stream: junk on the current one
        junk = torch.full((weights, cols), float("nan"), dtype=dtype, device="cuda")
        del junk  # its block goes to the kernel's output next
        return kernel(grad, index, weights, -1, False)

    outs = [on_junk()]
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        outs.append(on_junk())
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):  # (its own pool: the output is filled with NaN below)
        out = kernel(grad, index, weights, -1, False)
    out.fill_(float("nan"))
    graph.replay()
    outs.append(out)
    torch.cuda.synchronize()
    for where, got in zip(("default", "side", "graph"), outs, strict=True):
        assert torch.equal(got, want), where


@pytest.mark.parametrize(
    ("rows", "cols", "weights", "dtype", "zipf", "pad"), [_CASES[0], _CASES[2], _FEW[1]]
)
def test_dependent_launches_give_the_bits_of_launches_in_turn(
    rows, cols, weights, dtype, zipf, pad, tmp_path
) -> None:
    """With `_EMBED_PDL` each kernel after a chain's first is launched while the one before it
    finishes and waits on the device for its results; a kernel that read too early would race.
    The same bits as the kernels launched one after another, on every one of five calls."""
    kernel, grad, index, got, _ = _run(rows, cols, weights, dtype, zipf, pad, tmp_path, 5)
    module = sys.modules[kernel.__module__]
    assert module._EMBED_PDL and module._pdl_ok(grad.device)
    module._EMBED_PDL = False
    try:
        serial = kernel(grad, index, weights, pad, False)
    finally:
        module._EMBED_PDL = True
    bits = _BITS[dtype]
    assert torch.equal(got.view(bits), serial.view(bits))
    for _ in range(5):
        assert torch.equal(kernel(grad, index, weights, pad, False).view(bits), serial.view(bits))


@pytest.mark.parametrize("pairs", [0, 64])
def test_sorted_path_output_is_whole_for_the_next_kernel_on_the_stream(pairs, tmp_path) -> None:
    """The segment and fix programs with nothing to sum leave without waiting for the kernel
    before them (docs/history/BENCHMARKS-2026-11-to-12.md §35); their first program always waits,
    so that the op's last
    grid ends after all the others. With every index distinct (nothing sorted: no program
    waits but those) or a few pairs, a clone launched right after the op on the same stream
    must see every row: the copies and zeros of the rank kernel's launch included."""
    rows, cols, weights = 8192, 2048, 32000
    gen = torch.Generator().manual_seed(7)
    grad = torch.randn(rows, cols, generator=gen).to(torch.bfloat16).cuda()
    index = torch.randperm(weights, generator=gen)[:rows]
    index[rows - pairs:] = index[:pairs]
    index = index.cuda()
    kernel = load_kernel(OP, WRITERS[OP](KernelRequest(OP, "", [])), tmp_path)
    want = torch.ops.aten.embedding_dense_backward(grad, index, weights, -1, False)
    for _ in range(5):
        seen = kernel(grad, index, weights, -1, False).clone()
        assert torch.equal(seen, want)
