"""Half-precision GEMMs of the torchbench suite: the builtin mm kernel's pointer loads against
its tensor-descriptor path (`_HALF_TMA`: tiles loaded by the Tensor Memory Accelerator, one
program per tile or, persistent, one per SM walking the tiles) and eager.

Why: the builtin matmul loses to cuBLAS by 1.1-1.7x on the suite's small bf16/f16 GEMMs (one
wave of tiles or less, docs/BENCHMARKS.md §15). Each descriptor variant runs the generated
file's own `_tma_plan` and `_tma_run` with seven tiles forced, so the best tile per case shows
whether the path pays before `_config`'s rules are trusted with it. (Session 19 also measured
descriptors built inside the kernel, `tl.make_tensor_descriptor`: slower on every case, BENCHMARKS
§27; that variant is in this file's history at commit c7d48ca.) Times are
`triton.testing.do_bench` medians (us), L2 cleared before each call by do_bench; the builtin
column is the generated entry point, host side included, as the evaluator calls it.

Usage (GPU): python3 benchmarks/write_builtin.py gk --ops mm.default
             python3 benchmarks/mm_tma_probe.py gk [--out FILE.jsonl]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
from pathlib import Path

import torch
import triton

# (M, K, N, A M-contiguous, B K-contiguous, dtype): the suite's mm and addmm shapes
_CASES = [
    (2048, 4096, 14336, False, True, torch.bfloat16),
    (768, 4096, 768, True, False, torch.bfloat16),
    (1024, 2048, 2048, False, True, torch.bfloat16),
    (4096, 768, 768, False, False, torch.bfloat16),
    (4096, 768, 768, False, True, torch.bfloat16),
    (768, 1024, 768, True, False, torch.bfloat16),
    (1024, 768, 768, False, False, torch.bfloat16),
    (1024, 768, 768, False, True, torch.bfloat16),
    (6304, 768, 768, False, True, torch.bfloat16),
    (4096, 896, 128, False, True, torch.bfloat16),
    (4096, 768, 768, False, True, torch.float16),
    (2048, 768, 768, False, True, torch.float16),
    (1232, 512, 512, False, True, torch.float16),
]

# (BLOCK_M, BLOCK_N, BLOCK_K, warps, stages)
_CONFIGS = [
    (128, 256, 64, 8, 3),
    (256, 128, 64, 8, 3),
    (128, 128, 64, 8, 4),
    (128, 128, 64, 4, 4),
    (128, 64, 64, 4, 4),
    (64, 128, 64, 4, 4),
    (64, 64, 64, 4, 4),
]


def _descriptors(module, a, b, cfg, persistent):
    """The generated file's descriptor path for a @ b with tile `cfg`, or None where it declines."""
    M, K = a.shape
    N = b.shape[1]
    programs = torch.cuda.get_device_properties(0).multi_processor_count if persistent else 0
    tma = module._tma_plan(M, N, K, *a.stride(), *b.stride(), *cfg, programs)
    if tma is None:
        return None

    def run():
        c = torch.empty((M, N), device="cuda", dtype=a.dtype)
        return module._tma_run(a, b, c, c, 1, 0, tma, False, False, 0, 0)

    return run


def _operands(M, K, N, a_mn, b_kn, dtype):
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((K, M) if a_mn else (M, K), device="cuda", generator=gen).to(dtype)
    b = torch.randn((K, N) if b_kn else (N, K), device="cuda", generator=gen).to(dtype)
    return (a.t() if a_mn else a), (b if b_kn else b.t())


def _generated(kernels: Path):
    """The generated mm file as a module (its entry point and its descriptor path)."""
    path = kernels / "mm__default" / "mm__default_implementation_v1.py"
    spec = importlib.util.spec_from_file_location("probe_mm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels_dir", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    module = _generated(args.kernels_dir)
    builtin = module.mm__default_kernel_impl
    rows = []
    for M, K, N, a_mn, b_kn, dtype in _CASES:
        a, b = _operands(M, K, N, a_mn, b_kn, dtype)
        want = torch.mm(a, b)
        row = {
            "case": [M, K, N, a_mn, b_kn, str(dtype)],
            "eager_us": triton.testing.do_bench(lambda a=a, b=b: torch.mm(a, b)) * 1e3,
            "builtin_us": triton.testing.do_bench(lambda a=a, b=b: builtin(a, b)) * 1e3,
        }
        for name, persistent in (("tile", False), ("persistent", True)):
            for cfg in _CONFIGS:
                run = _descriptors(module, a, b, cfg, persistent)
                err = us = None
                try:
                    if run is not None:
                        err = (run().float() - want.float()).abs().max().item()
                        us = triton.testing.do_bench(run) * 1e3
                except Exception as exc:  # a config the GPU rejects (shared memory)
                    print(f"  {name} {cfg}: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
                row[f"{name} {cfg}"] = us
                row[f"err {name} {cfg}"] = err
            timed = [(v, k) for k, v in row.items() if k.startswith(name) and v is not None]
            row[f"{name} best"] = min(timed) if timed else None
        print(
            f"{row['case']}: eager {row['eager_us']:.1f} builtin {row['builtin_us']:.1f} "
            f"tma per tile {row['tile best']} persistent {row['persistent best']}",
            flush=True,
        )
        rows.append(row)
    if args.out:
        with args.out.open("a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
