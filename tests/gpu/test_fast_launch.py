"""The builtin writer's fast launcher (codegen.FAST_LAUNCH_SOURCE) and the evaluator's count of
launches that bypass `kernel[grid](...)`.

CPU: which kernels a file wraps, and that the interpreter keeps Triton's own path. GPU (marker
`gpu`): repeated calls take the cached launcher and stay exact across dtypes, odd sizes and
misaligned views (a key that missed Triton's alignment specialization would read wrong data or
fault), and the sandbox's launch counter sees launches made through the launcher.
"""

from __future__ import annotations

import textwrap

import pytest
import torch
from kernel_loading import load_kernel

from agent.providers.builtin import codegen
from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.testcase import parse_case
from evaluator.judge.guards import LaunchCounter, launcher_classes

# The CPU tests here run in the interpreter without a GPU and on CUDA with one.
pytestmark = pytest.mark.on_gpu_when_present

HAS_GPU = torch.cuda.is_available()


def _write(op: str, texts: list[str]) -> str:
    cases = [parse_case(t) for t in texts]
    source = WRITERS[op](KernelRequest(op=op, schema="", cases=cases, variant=0))
    assert source is not None
    return source


def test_only_launched_plain_jit_kernels_are_wrapped() -> None:
    text = textwrap.dedent(
        """
        import triton

        @triton.jit
        def _helper(x):
            return x

        @triton.jit
        def _kernel(x_ptr):
            _helper(x_ptr)

        @triton.jit
        def _stored(x_ptr):
            pass

        @triton.autotune(configs=[], key=[])
        @triton.jit
        def _tuned(x_ptr):
            pass

        def run(x):
            _kernel[(1,)](x)
            _tuned[(1,)](x)
            chosen = _stored if x else _kernel
            chosen[(1,)](x)
        """
    )
    assert codegen.launched_jit_kernels(text) == ["_kernel", "_stored"]
    rendered = codegen.render_file(text)
    assert rendered.rstrip().endswith("_stored = _fast_launch(_stored)")
    assert "_helper = _fast_launch" not in rendered and "_tuned = _fast_launch" not in rendered


def test_every_elementwise_file_routes_its_kernels_through_the_fast_launcher() -> None:
    source = _write("add.Tensor", ["((T([4, 5], f32), T([5], f32)), {})"])
    assert "_kernel_flat = _fast_launch(_kernel_flat)" in source
    assert "_kernel = _fast_launch(_kernel)" in source


@pytest.mark.skipif(HAS_GPU, reason="interpreter behaviour")
def test_interpreter_kernels_stay_unwrapped(tmp_path) -> None:
    fn = load_kernel("relu.default", _write("relu.default", ["((T([7], f32),), {})"]), tmp_path)
    module = __import__(fn.__module__)
    assert type(module._kernel_flat).__name__ == "InterpretedFunction"
    x = torch.randn(7)
    assert torch.equal(fn(x), torch.relu(x))


@pytest.mark.gpu
def test_cached_launches_stay_exact_on_misaligned_and_odd_inputs(tmp_path) -> None:
    fn = load_kernel(
        "add.Tensor", _write("add.Tensor", ["((T([4, 5], f32), T([5], f32)), {})"]), tmp_path
    )
    module = __import__(fn.__module__)
    base = torch.randn(4099, device="cuda")
    problems = []
    for dtype in (torch.float32, torch.float16, torch.bfloat16):
        b = base.to(dtype)
        for offset in (0, 1, 3, 0, 1):  # offset 1/3 elements: pointers no longer 16-byte aligned
            for n in (4096, 4095, 1, 17):
                x, y = b[offset : offset + n], b[:n].flip(0).contiguous()
                first = fn(x, y)  # Triton's own path on a miss
                want = torch.add(x, y)
                if not torch.allclose(first.float(), want.float(), rtol=1e-2, atol=1e-2):
                    problems.append(f"{dtype} offset {offset} n {n}: first call != eager")
                for call in (2, 3):  # the cached launcher must give the very same bits
                    if not torch.equal(fn(x, y), first):
                        problems.append(f"{dtype} offset {offset} n {n}: call {call} != call 1")
    assert not problems, problems
    cache = module._kernel_flat.cache
    assert cache, "no launch was served from the fast path's cache"
    # key = ((out dtype, on cuda, aligned), (x dtype, on cuda, aligned), ...): misaligned
    # operands are never cached (they keep Triton's own path)
    assert all(
        spec[2]
        for key in cache
        for spec in key
        if type(spec) is tuple and len(spec) == 3 and spec[1] is True
    ), list(cache)


@pytest.mark.gpu
def test_launch_counter_counts_direct_launcher_calls(tmp_path) -> None:
    fn = load_kernel("relu.default", _write("relu.default", ["((T([7], f32),), {})"]), tmp_path)
    counter = LaunchCounter()
    counter.install()
    try:
        x = torch.randn(1000, device="cuda")
        fn(x)  # Triton's path (compiles): counted once, not twice
        assert counter.launches == 1
        fn(x)
        fn(x)  # the cached launcher's path
        assert counter.launches == 3
    finally:
        for cls, attr, original in counter._originals:
            setattr(cls, attr, original)
    assert launcher_classes()


# suite cases of the ops whose second kernel is a programmatic dependent launch on sm_90+
PDL_CASES = {
    "mm.default": "((T([1, 2048], bf16), T([2048, 2048], bf16, [1, 2048])), {})",  # split-K
    "sum.dim_IntList": "((T([4096, 768], f32), [0], True), {})",  # split reduction
    "argmax.default": "((T([1, 1, 256000], bf16), -1), {})",
    "native_layer_norm_backward.default": (
        "((T([8, 512, 768], f32), T([8, 512, 768], f32), [768], T([8, 512, 1], f32),"
        " T([8, 512, 1], f32), T([768], f32), T([768], f32), [True, True, True]), {})"
    ),
}


@pytest.mark.gpu
@pytest.mark.parametrize("op", sorted(PDL_CASES))
def test_dependent_launches_replay_in_a_cuda_graph(op: str, tmp_path) -> None:
    """A kernel launched as a programmatic dependent must also work when captured into a CUDA
    graph (as torch.compile's cudagraphs and serving stacks do): a replay gives the bits of a
    plain call. (Session 9 ran the same check as a script on the H200: all equal.)"""
    from evaluator.cases.inputs import materialize

    fn = load_kernel(op, _write(op, [PDL_CASES[op]]), tmp_path)
    args, kwargs = materialize(op, parse_case(PDL_CASES[op]), "cuda", 5)
    want = fn(*args, **kwargs)  # also compiles and plans outside the capture
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        fn(*args, **kwargs)
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        got = fn(*args, **kwargs)
    for _ in range(3):
        graph.replay()
    torch.cuda.synchronize()
    wants = want if isinstance(want, (tuple, list)) else (want,)
    gots = got if isinstance(got, (tuple, list)) else (got,)
    for w, g in zip(wants, gots, strict=True):
        assert (w is None and g is None) or torch.equal(w, g)
