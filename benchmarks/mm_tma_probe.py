"""Half-precision GEMMs of the torchbench suite: the builtin mm kernel against TMA-descriptor
variants (tiles loaded by the Tensor Memory Accelerator instead of pointer loads) and eager.

Variants: descriptors built in the kernel (`tl.make_tensor_descriptor`: a descriptor written by
every program), built on the host (`TensorDescriptor`), and host-built with persistent programs
that walk the tiles with the tile and K loops flattened (the next tile's loads in flight during
a store). All three matched `a @ b` in Triton's interpreter on odd shapes (edge tiles, K not a
multiple of the tile).

Why: the builtin matmul loses to cuBLAS by 1.1-1.7x on the suite's small bf16/f16 GEMMs (one
wave of tiles or less, docs/BENCHMARKS.md §15), and Triton's fastest Hopper GEMMs load their
tiles through tensor descriptors. This measures, before any change to matmul.py, whether that
alone closes the gap. Times are `triton.testing.do_bench` medians (us), L2 cleared before each
call by do_bench; each case runs the builtin kernel file written by `write_builtin.py` (its
generated function, host side included, as the evaluator calls it).

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
import triton.language as tl

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


@triton.jit
def _tile_origin(tile, M, N, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr):
    """(first row, first column) of output tile `tile`, GROUP_M row tiles at a time (L2 reuse)."""
    num_m = tl.cdiv(M, BLOCK_M)
    per_group = GROUP_M * tl.cdiv(N, BLOCK_N)
    first_m = (tile // per_group) * GROUP_M
    group_m = tl.minimum(num_m - first_m, GROUP_M)
    return (
        (first_m + (tile % per_group) % group_m) * BLOCK_M,
        ((tile % per_group) // group_m) * BLOCK_N,
    )


@triton.jit
def _dot_step(a_desc, b_desc, om, on, k, acc, A_MN: tl.constexpr, B_KN: tl.constexpr):
    """acc + A[om:, k:] @ B[k:, on:] for one K step, each tile loaded through its descriptor
    over the operand's contiguous layout (A_MN: A stored as [K, M]; B_KN: B stored as [K, N],
    else as [N, K])."""
    if A_MN:
        a = a_desc.load([k, om]).T
    else:
        a = a_desc.load([om, k])
    if B_KN:
        b = b_desc.load([k, on])
    else:
        b = b_desc.load([on, k]).T
    return tl.dot(a, b, acc)


@triton.jit
def _mm_tma(
    a_ptr,
    b_ptr,
    c_ptr,
    M,
    N,
    K,
    s_a,
    s_b,
    s_c,
    A_MN: tl.constexpr,
    B_KN: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    STAGES: tl.constexpr,
):
    """C = A @ B, a program per output tile, its descriptors built in the kernel."""
    om, on = _tile_origin(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    if A_MN:
        a_desc = tl.make_tensor_descriptor(a_ptr, [K, M], [s_a, 1], [BLOCK_K, BLOCK_M])
    else:
        a_desc = tl.make_tensor_descriptor(a_ptr, [M, K], [s_a, 1], [BLOCK_M, BLOCK_K])
    if B_KN:
        b_desc = tl.make_tensor_descriptor(b_ptr, [K, N], [s_b, 1], [BLOCK_K, BLOCK_N])
    else:
        b_desc = tl.make_tensor_descriptor(b_ptr, [N, K], [s_b, 1], [BLOCK_N, BLOCK_K])
    c_desc = tl.make_tensor_descriptor(c_ptr, [M, N], [s_c, 1], [BLOCK_M, BLOCK_N])
    acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
    for k in tl.range(0, K, BLOCK_K, num_stages=STAGES):
        acc = _dot_step(a_desc, b_desc, om, on, k, acc, A_MN, B_KN)
    c_desc.store([om, on], acc.to(c_ptr.dtype.element_ty))


@triton.jit
def _mm_tma_host(
    a_desc,
    b_desc,
    c_desc,
    M,
    N,
    K,
    A_MN: tl.constexpr,
    B_KN: tl.constexpr,
    BLOCK_M: tl.constexpr,
    BLOCK_N: tl.constexpr,
    BLOCK_K: tl.constexpr,
    GROUP_M: tl.constexpr,
    STAGES: tl.constexpr,
    PROGRAMS: tl.constexpr,
):
    """`_mm_tma` with descriptors built on the host (no descriptor written by every program).
    PROGRAMS == 0: a program per tile. Else PROGRAMS programs walk the tiles (tile t by program
    t % PROGRAMS), the tile and K loops flattened so that the next tile's loads are in flight
    during a tile's store."""
    if PROGRAMS == 0:
        om, on = _tile_origin(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        for k in tl.range(0, K, BLOCK_K, num_stages=STAGES):
            acc = _dot_step(a_desc, b_desc, om, on, k, acc, A_MN, B_KN)
        c_desc.store([om, on], acc.to(c_desc.dtype))
    else:
        k_tiles = tl.cdiv(K, BLOCK_K)
        tiles = tl.cdiv(M, BLOCK_M) * tl.cdiv(N, BLOCK_N)
        tile = tl.program_id(0) - PROGRAMS
        ki = -1
        om = 0
        on = 0
        acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)
        steps = k_tiles * tl.cdiv(tiles - tl.program_id(0), PROGRAMS)
        for _ in tl.range(0, steps, num_stages=STAGES, flatten=True):
            ki = tl.where(ki == k_tiles - 1, 0, ki + 1)
            if ki == 0:
                tile += PROGRAMS
                om, on = _tile_origin(tile, M, N, BLOCK_M, BLOCK_N, GROUP_M)
            acc = _dot_step(a_desc, b_desc, om, on, ki * BLOCK_K, acc, A_MN, B_KN)
            if ki == k_tiles - 1:
                c_desc.store([om, on], acc.to(c_desc.dtype))
                acc = tl.zeros([BLOCK_M, BLOCK_N], tl.float32)


def _tma(a, b, cfg):
    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk, warps, stages = cfg
    c = torch.empty((M, N), device="cuda", dtype=a.dtype)
    a_mn, b_kn = a.stride(0) == 1, b.stride(1) == 1
    grid = (triton.cdiv(M, bm) * triton.cdiv(N, bn),)
    _mm_tma[grid](
        a,
        b,
        c,
        M,
        N,
        K,
        a.stride(1) if a_mn else a.stride(0),
        b.stride(0) if b_kn else b.stride(1),
        c.stride(0),
        A_MN=a_mn,
        B_KN=b_kn,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=8,
        STAGES=stages,
        num_warps=warps,
    )
    return c


def _tma_host(a, b, cfg, persistent=False):
    from triton.tools.tensor_descriptor import TensorDescriptor

    M, K = a.shape
    N = b.shape[1]
    bm, bn, bk, warps, stages = cfg
    c = torch.empty((M, N), device="cuda", dtype=a.dtype)
    a_mn, b_kn = a.stride(0) == 1, b.stride(1) == 1
    at = a.t() if a_mn else a  # the contiguous storage
    bt = b if b_kn else b.t()
    a_desc = TensorDescriptor.from_tensor(at, [bk, bm] if a_mn else [bm, bk])
    b_desc = TensorDescriptor.from_tensor(bt, [bk, bn] if b_kn else [bn, bk])
    c_desc = TensorDescriptor.from_tensor(c, [bm, bn])
    tiles = triton.cdiv(M, bm) * triton.cdiv(N, bn)
    programs = 0
    if persistent:
        programs = min(torch.cuda.get_device_properties(0).multi_processor_count, tiles)
    _mm_tma_host[(programs or tiles,)](
        a_desc,
        b_desc,
        c_desc,
        M,
        N,
        K,
        A_MN=a_mn,
        B_KN=b_kn,
        BLOCK_M=bm,
        BLOCK_N=bn,
        BLOCK_K=bk,
        GROUP_M=8,
        STAGES=stages,
        PROGRAMS=programs,
        num_warps=warps,
    )
    return c


def _tma_persistent(a, b, cfg):
    return _tma_host(a, b, cfg, persistent=True)


def _alloc(size, alignment, stream):
    return torch.empty(size, device="cuda", dtype=torch.int8)


def _operands(M, K, N, a_mn, b_kn, dtype):
    gen = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn((K, M) if a_mn else (M, K), device="cuda", generator=gen).to(dtype)
    b = torch.randn((K, N) if b_kn else (N, K), device="cuda", generator=gen).to(dtype)
    return (a.t() if a_mn else a), (b if b_kn else b.t())


def _builtin(kernels: Path):
    path = kernels / "mm__default" / "mm__default_implementation_v1.py"
    spec = importlib.util.spec_from_file_location("probe_mm", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module.mm__default_kernel_impl


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels_dir", type=Path)
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    triton.set_allocator(_alloc)
    builtin = _builtin(args.kernels_dir)
    rows = []
    for M, K, N, a_mn, b_kn, dtype in _CASES:
        a, b = _operands(M, K, N, a_mn, b_kn, dtype)
        want = torch.mm(a, b)
        row = {
            "case": [M, K, N, a_mn, b_kn, str(dtype)],
            "eager_us": triton.testing.do_bench(lambda a=a, b=b: torch.mm(a, b)) * 1e3,
            "builtin_us": triton.testing.do_bench(lambda a=a, b=b: builtin(a, b)) * 1e3,
        }
        for name, fn in (("device", _tma), ("host", _tma_host), ("persistent", _tma_persistent)):
            for cfg in _CONFIGS:
                try:
                    got = fn(a, b, cfg)
                    err = (got.float() - want.float()).abs().max().item()
                    us = triton.testing.do_bench(lambda f=fn, a=a, b=b, c=cfg: f(a, b, c)) * 1e3
                except Exception as exc:  # a config the compiler rejects (shared memory)
                    err, us = None, None
                    print(f"  {name} {cfg}: {type(exc).__name__}: {str(exc).splitlines()[0][:100]}")
                row[f"{name} {cfg}"] = us
                row[f"err {name} {cfg}"] = err
            best = min((v, k) for k, v in row.items() if k.startswith(name) and v is not None)
            row[f"{name} best"] = best
        print(
            f"{row['case']}: eager {row['eager_us']:.1f} builtin {row['builtin_us']:.1f} "
            f"tma device {row['device best']} host {row['host best']} "
            f"persistent {row['persistent best']}",
            flush=True,
        )
        rows.append(row)
    if args.out:
        with args.out.open("a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
