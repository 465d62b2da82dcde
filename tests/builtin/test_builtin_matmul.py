"""The builtin provider's mm/bmm/addmm kernels against eager ATen (CPU interpreter).

Cases cover sizes that are not multiples of the tiles, transposed operands read through their
strides, long K split over programs, addmm's broadcast bias with beta/alpha (beta == 0 ignores
the bias, NaN included, as eager does), and each float dtype.
"""

from __future__ import annotations

import pytest
import torch
from builtin_support import materialize_case, run_generated

from agent.providers.builtin import codegen, matmul
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.testcase import parse_case

CASES: dict[str, list[str]] = {
    "mm.default": [
        "((T([7, 33], f32), T([33, 5], f32)), {})",
        "((T([40, 33], f16), T([33, 50], f16)), {})",
        "((T([40, 33], bf16), T([33, 50], bf16)), {})",
        "((T([40, 33], f16, [1, 40]), T([33, 50], f16)), {})",
        "((T([20, 200], f32), T([200, 17], f32, [1, 200])), {})",
        "((T([16, 64], f32), T([64, 32], f32)), {})",
        "((T([5, 0], f32), T([0, 3], f32)), {})",
        "((T([8, 5], f64), T([5, 3], f64)), {})",
    ],
    "bmm.default": [
        "((T([3, 7, 33], f32), T([3, 33, 5], f32)), {})",
        "((T([4, 20, 16], f16, [320, 1, 20]), T([4, 16, 24], f16)), {})",
        "((T([2, 20, 16], bf16), T([2, 16, 24], bf16, [384, 1, 16])), {})",
    ],
    "addmm.default": [
        "((T([5], f32), T([7, 33], f32), T([33, 5], f32)), {})",
        "((T([50], f16), T([40, 33], f16), T([33, 50], f16, [1, 33])), {})",
        "((T([40, 50], bf16), T([40, 33], bf16), T([33, 50], bf16)), {'beta': 0.5, 'alpha': 2.0})",
        "((T([1, 9], f32), T([3, 300], f32), T([300, 9], f32)), {'beta': 0})",
    ],
}


def _write(op: str, cases: list, variant: int = 0) -> str:
    request = KernelRequest(op, str(codegen.schema_of(op)), cases, variant)
    text = matmul.WRITERS[op](request)
    assert text is not None, f"the matmul writer declined {op}"
    return text


@pytest.mark.parametrize("op", sorted(CASES))
def test_matmul_matches_eager_on_odd_sizes_strides_and_dtypes(op: str) -> None:
    cases = [parse_case(c) for c in CASES[op]]
    assert run_generated(op, _write(op, cases), cases) == []


def test_conservative_variant_matches_eager() -> None:
    op = "addmm.default"
    cases = [parse_case(c) for c in CASES[op]]
    assert run_generated(op, _write(op, cases, variant=1), cases) == []


def test_addmm_with_beta_zero_ignores_a_nan_bias() -> None:
    op = "addmm.default"
    cases = [parse_case("((T([9], f32), T([6, 20], f32), T([20, 9], f32)), {'beta': 0})")]

    def nan_bias(op: str, case, gen: torch.Generator):
        args, kwargs = materialize_case(op, case, gen)
        return (torch.full((9,), float("nan")), *args[1:]), kwargs

    assert run_generated(op, _write(op, cases), cases, make_args=nan_bias) == []


def test_writer_declines_integer_matrices() -> None:
    op = "mm.default"
    cases = [parse_case("((T([4, 4], i64), T([4, 4], i64)), {})")]
    request = KernelRequest(op, str(codegen.schema_of(op)), cases)
    assert matmul.WRITERS[op](request) is None


def test_same_request_gives_the_same_text() -> None:
    op = "bmm.default"
    cases = [parse_case(c) for c in CASES[op]]
    assert _write(op, cases) == _write(op, cases)


@pytest.mark.slow
def test_matmul_kernels_compile_for_an_sm90_gpu() -> None:
    """The interpreter accepts code the GPU compiler rejects; compile real launches for sm_90
    (transposed operands, addmm's broadcast bias, a split-K shape)."""
    from builtin_support import assert_compiles_for_sm90

    jobs = {
        "mm.default": ["((T([64, 96], f16), T([96, 48], f16)), {})", "((T([33, 17], f32, [1, 33]), T([17, 5], f32)), {})"],
        "bmm.default": ["((T([3, 40, 24], bf16), T([3, 24, 16], bf16, [384, 1, 24])), {})"],
        "addmm.default": ["((T([48], f16), T([64, 96], f16), T([96, 48], f16, [1, 96])), {})", "((T([2048], f32), T([8, 4096], f32), T([4096, 2048], f32)), {})"],
    }  # fmt: skip
    batch = []
    for op, texts in jobs.items():
        cases = [parse_case(t) for t in texts]
        batch.append((op, matmul.WRITERS[op](KernelRequest(op=op, schema="", cases=cases)), cases))
    assert_compiles_for_sm90(batch)


def _module(tmp_path, op: str = "mm.default"):
    """The generated file loaded as a module (its planning functions and constants)."""
    import importlib.util

    path = tmp_path / "mm_module.py"
    path.write_text(_write(op, []), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(f"mm_module_{tmp_path.name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class _FakeCuda:
    """A stand-in CUDA device for `_config` (hashable: the config is cached per device)."""

    type = "cuda"
    index = 0

    def __hash__(self) -> int:
        return 1


# (M, N, K, batch, dtype, B K-contiguous) -> (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages, splits) on
# 132 SMs: the tiles that were fastest on the H200 (docs/history/BENCHMARKS-2026-11-to-12.md §15).
GPU_TILES = [
    ((2048, 14336, 4096, 1, torch.bfloat16, True), (256, 128, 64, 8, 3, 1)),  # many waves
    ((4096, 768, 768, 1, torch.bfloat16, False), (128, 256, 64, 8, 3, 1)),  # 96 tiles, one wave
    ((4096, 768, 768, 1, torch.bfloat16, True), (256, 128, 64, 8, 3, 1)),  # B as nn.Linear's weight
    ((1024, 2048, 2048, 1, torch.bfloat16, True), (128, 128, 64, 4, 4, 1)),
    ((1024, 768, 768, 1, torch.float16, False), (64, 128, 64, 4, 4, 1)),
    ((512, 768, 768, 1, torch.float16, True), (64, 64, 64, 4, 4, 1)),
    ((6304, 768, 768, 1, torch.bfloat16, True), (128, 256, 64, 8, 3, 1)),  # no one-wave fit
    ((1, 14336, 4096, 1, torch.bfloat16, True), (16, 128, 128, 4, 4, 1)),  # GEMV: 112 programs
    ((1, 4096, 4096, 1, torch.bfloat16, True), (16, 32, 128, 4, 4, 1)),  # narrower: 128 programs
    ((128, 64, 128, 96, torch.float32, False), (128, 64, 64, 8, 3, 1)),
    ((512, 512, 512, 16, torch.float64, False), (128, 128, 32, 8, 3, 1)),  # fp64: BLOCK_K 32
]  # fmt: skip


@pytest.mark.parametrize(("problem", "expected"), GPU_TILES)
def test_gpu_tile_choice_follows_the_wave_rules(problem: tuple, expected: tuple, tmp_path) -> None:
    module = _module(tmp_path)
    module._INTERPRET = False
    module._num_sms = lambda index: 132
    M, N, K, batch, dtype, b_k_contiguous = problem
    assert module._config(M, N, K, batch, dtype, _FakeCuda(), b_k_contiguous) == expected


def test_interpreter_tiles_widen_only_when_a_call_has_many(tmp_path) -> None:
    """On the CPU the interpreter pays per program: 32 x 32 tiles while a call has at most 64 of
    them (small test shapes keep several tiles), wider ones (at most 128) past that."""
    module = _module(tmp_path)
    cpu = torch.device("cpu")
    assert module._config(100, 70, 40, 1, torch.float32, cpu)[:3] == (32, 32, 32)
    bm, bn, _bk, *_ = module._config(1000, 2304, 32, 1, torch.bfloat16, cpu)
    assert (bm, bn) == (128, 128)  # 144 tiles: wider would pass the cap
    assert module._config(2, 4096, 32, 1, torch.bfloat16, cpu)[:2] == (16, 64)  # 64 tiles
    assert module._config(2, 8192, 32, 1, torch.bfloat16, cpu)[:2] == (16, 128)  # M cannot grow


def test_fp32_uses_three_tf32_products_except_for_an_m_contiguous_a(tmp_path) -> None:
    """The precision is part of the plan: tf32x3 (as accurate as eager's fp32 GEMM, measured on
    the H200), the FMA product where A is M-contiguous, and no TF32 talk for half precision."""
    module = _module(tmp_path)

    def precision(a, b):
        return module._plan(a, b, None, False, False, False)[4]["PREC"]

    a = torch.randn(8, 16)
    b = torch.randn(16, 4)
    assert precision(a, b) == "tf32x3"
    assert precision(a.t().contiguous().t(), b) == "ieee"  # [8, 16] with strides (1, 8)
    assert precision(a, b.t().contiguous().t()) == "tf32x3"  # B K-contiguous is fine
    assert precision(a.half(), b.half()) == "ieee"  # unused: tensor cores take half as is
    module._F32_PRECISION = "ieee"
    assert precision(a, b) == "ieee"
