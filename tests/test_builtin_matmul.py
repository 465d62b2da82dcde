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
from evaluator.testcase import parse_case

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
# 132 SMs: the tiles that were fastest on the H200 (docs/BENCHMARKS.md section 15).
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


# (M, N, K, A stored M-contiguous, B stored N-contiguous, programs: 0 = one per tile)
TMA_CASES = [
    (100, 72, 96, False, True, 0),
    (64, 48, 40, True, False, 3),  # K past the last full step: zeros loaded beyond it
    (104, 72, 96, True, True, 2),
    (100, 72, 96, False, False, 5),
]


@pytest.mark.parametrize(("M", "N", "K", "a_mn", "b_kn", "programs"), TMA_CASES)
def test_tma_kernel_matches_the_product_in_the_interpreter(
    M, N, K, a_mn, b_kn, programs, tmp_path
) -> None:
    """`_HALF_TMA`'s kernel (GPU only in the plan; here launched directly in Triton's
    interpreter, f16: its bf16 dots are wrong): every layout of A and B a descriptor spans,
    edge tiles on M and N, a K that ends mid-step, addmm's alpha and broadcast bias, one
    program per tile and programs walking several tiles."""
    module = _module(tmp_path, "addmm.default")
    gen = torch.Generator().manual_seed(M + K)
    a = torch.randn((K, M) if a_mn else (M, K), generator=gen).half()
    b = torch.randn((K, N) if b_kn else (N, K), generator=gen).half()
    a, b = (a.t() if a_mn else a), (b if b_kn else b.t())
    bias = torch.randn(N, generator=gen).half()
    tma = module._tma_plan(M, N, K, *a.stride(), *b.stride(), 32, 32, 32, 4, 2, programs)
    tiles = -(-M // 32) * -(-N // 32)
    assert tma[0] == (min(programs, tiles) or tiles,)  # the grid
    c = torch.empty(M, N, dtype=torch.float16)
    module._tma_run(a, b, c, bias, 0.5, 2.0, tma, True, True, 0, 1)
    want = 0.5 * (a.float() @ b.float()) + 2.0 * bias.float()
    assert torch.allclose(c.float(), want, atol=2e-2, rtol=1e-2)


def test_tma_plan_declines_what_descriptors_cannot_span(tmp_path) -> None:
    """A descriptor needs its operand's contiguous dim and 16-byte aligned other stride; the
    output's rows are N long, so N must be a multiple of 8 half-precision elements."""
    module = _module(tmp_path)

    def plan(M, N, K, sa, sb):
        return module._tma_plan(M, N, K, *sa, *sb, 64, 64, 64, 4, 3, 0)

    assert plan(64, 64, 64, (64, 1), (64, 1)) is not None
    assert plan(100, 64, 64, (1, 100), (64, 1)) is None  # A M-contiguous, 200-byte columns
    assert plan(64, 60, 64, (64, 1), (60, 1)) is None  # N = 60
    assert plan(64, 64, 64, (128, 2), (64, 1)) is None  # no contiguous dim
    assert plan(64, 64, 0, (1, 64), (64, 1)) is None  # K = 0: nothing to describe
    grid, a_desc, b_desc, c_block, meta = plan(64, 64, 96, (1, 64), (1, 96))
    assert a_desc == ([96, 64], [64, 1], [64, 64]) and not meta["B_KN"]
    assert b_desc == ([64, 96], [96, 1], [64, 64]) and meta["A_MN"]


_TMA_CHILD = r"""
import importlib.util, json, os, re, subprocess, sys, tempfile
os.environ["TRITON_INTERPRET"] = "0"
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource

spec = importlib.util.spec_from_file_location("tma_child", sys.argv[1])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
cuobjdump = os.path.join(os.path.dirname(triton.__file__), "backends", "nvidia", "bin", "cuobjdump")
out = []
for a_block, b_block, c_block, meta, bias, bias_row in json.loads(sys.argv[2]):
    options = dict(num_warps=meta.pop("num_warps"), num_stages=meta["STAGES"])
    signature = {"a_desc": f"tensordesc<bf16{a_block}>", "b_desc": f"tensordesc<bf16{b_block}>",
                 "c_desc": f"tensordesc<bf16{c_block}>", "bias_ptr": "*bf16", "M": "i32",
                 "N": "i32", "K": "i32", "s_xm": "i32", "s_xn": "i32", "alpha": "fp64",
                 "beta": "fp64"}
    constexprs = dict(meta, HAS_BIAS=bias, BIAS_ROW=bias_row, SCALE=bias)
    signature.update({name: "constexpr" for name in constexprs})
    compiled = triton.compile(ASTSource(fn=module._mm_tma_kernel, signature=signature,
                                        constexprs=constexprs),
                              target=GPUTarget("cuda", 90, 32), options=options)
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(compiled.asm["cubin"])
        f.flush()
        sass = subprocess.run([cuobjdump, "-sass", f.name], capture_output=True, text=True,
                              check=True).stdout
    out.append({"tile": c_block, "stages": meta["STAGES"], "programs": meta["PROGRAMS"],
                "tma_loads": len(re.findall(r"\bUTMALDG\b", sass)),
                "wgmma": len(re.findall(r"\bHGMMA\b", sass)),
                "spills": len(re.findall(r"\bSTL\b", sass)), "shared": compiled.metadata.shared})
print(json.dumps(out))
"""


def test_tma_kernel_compiles_for_sm90_with_tma_loads_and_wgmma(tmp_path) -> None:
    """`_mm_tma_kernel` as `_tma_plan` launches it on an H200 (its stages cut to fit shared
    memory) compiles for sm_90 with this Triton: tiles arrive by TMA loads (UTMALDG) and
    multiply on warpgroup tensor cores (HGMMA), for both layouts of each operand, with and
    without the persistent tile walk and addmm's epilogue (a bias row, a bias tile), without
    register spills and within a block's shared memory."""
    import json
    import os
    import subprocess
    import sys

    module = _module(tmp_path, "addmm.default")
    launches = []
    for M, N, K, sa, sb, tile, programs, bias, bias_row in [
        (6304, 768, 768, (768, 1), (1, 768), (256, 128, 64, 8, 3), 132, True, True),
        (4096, 768, 768, (768, 1), (768, 1), (128, 256, 64, 8, 3), 0, False, False),
        (768, 768, 4096, (1, 768), (768, 1), (64, 128, 64, 4, 4), 132, True, False),
        (1024, 768, 768, (1, 1024), (1, 768), (64, 64, 64, 4, 4), 0, False, False),
    ]:
        _grid, a_desc, b_desc, c_block, meta = module._tma_plan(M, N, K, *sa, *sb, *tile, programs)
        launches.append((a_desc[2], b_desc[2], c_block, meta, bias, bias_row))
    assert launches[0][3]["STAGES"] == 2  # 3 would not fit beside two staged 256x128 tiles
    path = tmp_path / "addmm_tma.py"
    path.write_text(_write("addmm.default", []), encoding="utf-8")
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    proc = subprocess.run(
        [sys.executable, "-c", _TMA_CHILD, str(path), json.dumps(launches)],
        capture_output=True, text=True, env=env, timeout=600,
    )  # fmt: skip
    if proc.returncode != 0 and ("ptxas" in proc.stderr or "cuobjdump" in proc.stderr):
        pytest.skip(f"Triton's CUDA tools are not usable here: {proc.stderr[-300:]}")
    assert proc.returncode == 0, proc.stderr[-2000:]
    for k in json.loads(proc.stdout.strip().splitlines()[-1]):
        assert k["tma_loads"] >= 2 and k["wgmma"] >= 1 and k["spills"] == 0, k
        assert k["shared"] <= 227 * 1024, k
