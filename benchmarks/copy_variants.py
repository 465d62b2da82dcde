"""Can a Triton copy beat torch's copy at the sizes where the bandwidth target is judged?

    python benchmarks/copy_variants.py [--mib 8,16,18.5,24,32] [--fill] [--out copy_variants.json]

Why: eight of the operators below 80% of HBM bandwidth run within a few percent of
torch's `copy_` of the same bytes, and that copy itself stays under 80% at 30-60 MiB moved
(`copy_bandwidth.py`). If some launch shape (bigger blocks, more warps, a persistent grid, cache
hints) moved the same bytes markedly faster than torch's copy, the elementwise writers should use
it; if none does, the gap is the fixed cost of one kernel (launch, ramp-up, tail), not the kernels.

Each variant copies an f32 tensor of the given size, timed as the evaluator times a case
(`timing.time_sides`: steady L2 state, the calibrated GPU wait, CUDA events). Also timed: an
empty kernel (one element), the fixed cost any call pays. GPU only.

--fill times zero fills instead (torch's `zero_` against Triton store kernels, with and without
cache hints): the embedding backward writes 100 of its 157 MiB as zeros, and `copy_bandwidth.py`
had once measured torch's fill at ~73% of a copy's rate (here: 96% of HBM bandwidth for 100 MiB,
docs/history/BENCHMARKS-2026-11-to-12.md §30).
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch
import triton
import triton.language as tl

from evaluator.config import EvalConfig
from evaluator.judge.timing import _wait_cycles, flusher_for, rotation_sets, time_sides


@triton.jit
def _flat_copy(src, dst, n, BLOCK: tl.constexpr, HINTS: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    if HINTS:
        x = tl.load(src + offs, mask=mask, eviction_policy="evict_first")
        tl.store(dst + offs, x, mask=mask, cache_modifier=".cs")
    else:
        x = tl.load(src + offs, mask=mask)
        tl.store(dst + offs, x, mask=mask)


@triton.jit
def _flat_copy_nomask(src, dst, BLOCK: tl.constexpr):
    """Whole blocks only (the size is a multiple of BLOCK): no predicates."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    tl.store(dst + offs, tl.load(src + offs))


@triton.jit
def _persistent_copy(src, dst, n, BLOCK: tl.constexpr, STAGES: tl.constexpr):
    pid = tl.program_id(0)
    nprog = tl.num_programs(0)
    tiles = tl.cdiv(n, BLOCK)
    for t in tl.range(pid, tiles, nprog, num_stages=STAGES):
        offs = tl.cast(t, tl.int64) * BLOCK + tl.arange(0, BLOCK)
        mask = offs < n
        tl.store(dst + offs, tl.load(src + offs, mask=mask), mask=mask)


@triton.jit
def _flat_fill(dst, n, BLOCK: tl.constexpr, HINTS: tl.constexpr):
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    zero = tl.zeros([BLOCK], dst.dtype.element_ty)
    if HINTS:
        tl.store(dst + offs, zero, mask=offs < n, cache_modifier=".cs")
    else:
        tl.store(dst + offs, zero, mask=offs < n)


def fill_variants(sms: int) -> dict[str, object]:
    """name -> fn(dst) filling dst with zeros."""
    out: dict[str, object] = {"torch zero_": lambda d: d.zero_()}
    for block, warps in ((1024, 4), (4096, 8), (8192, 16), (16384, 16)):
        for hints in (False, True):

            def flat(d, block=block, warps=warps, hints=hints):
                n = d.numel()
                _flat_fill[(triton.cdiv(n, block),)](
                    d, n, BLOCK=block, HINTS=hints, num_warps=warps
                )

            out[f"fill {block}/{warps}w" + (" .cs" if hints else "")] = flat
    return out


def variants(sms: int) -> dict[str, object]:
    """name -> fn(src, dst) launching one copy."""
    out: dict[str, object] = {"torch copy_": lambda s, d: d.copy_(s)}
    for block, warps in ((1024, 4), (2048, 8), (4096, 8), (4096, 16), (8192, 16), (16384, 32)):

        def flat(s, d, block=block, warps=warps):
            n = s.numel()
            _flat_copy[(triton.cdiv(n, block),)](s, d, n, BLOCK=block, HINTS=False, num_warps=warps)

        out[f"flat {block}/{warps}w"] = flat
    for block, warps in ((1024, 4), (2048, 8), (4096, 8)):

        def hinted(s, d, block=block, warps=warps):
            n = s.numel()
            _flat_copy[(triton.cdiv(n, block),)](s, d, n, BLOCK=block, HINTS=True, num_warps=warps)

        out[f"flat {block}/{warps}w evict_first+.cs"] = hinted

    def nomask(s, d):
        _flat_copy_nomask[(s.numel() // 2048,)](s, d, BLOCK=2048, num_warps=8)

    out["flat 2048/8w no mask"] = nomask
    for per_sm, block, warps, stages in (
        (1, 4096, 16, 3),
        (2, 4096, 8, 2),
        (4, 2048, 8, 2),
        (8, 2048, 8, 1),
        (16, 1024, 4, 1),
    ):

        def persistent(s, d, per_sm=per_sm, block=block, warps=warps, stages=stages):
            n = s.numel()
            grid = (min(sms * per_sm, triton.cdiv(n, block)),)
            _persistent_copy[grid](s, d, n, BLOCK=block, STAGES=stages, num_warps=warps)

        out[f"persistent {per_sm}/SM {block}/{warps}w {stages} stages"] = persistent
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--mib", default="8,16,18.5,24,32", help="tensor sizes in MiB (moved twice)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", type=Path, default=None, help="write the rows here as JSON")
    ap.add_argument("--fill", action="store_true", help="time zero fills, not copies")
    args = ap.parse_args()
    timing = EvalConfig().timing
    peak = timing.hbm_bandwidth_gbps
    flush = flusher_for(timing)
    wait = _wait_cycles(timing.host_window_us)
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    tiny = torch.zeros(1, device="cuda")
    empty, _, _, _ = time_sides([tiny.zero_], [tiny.zero_], flush, args.reps, 10.0, wait)
    empty_us = statistics.median(empty) * 1e3
    print(f"empty kernel (zero_ of 1 element): {empty_us:.2f} us", flush=True)
    rows = []
    fns = fill_variants(sms) if args.fill else variants(sms)
    for mib in (float(m) for m in args.mib.split(",")):
        n = int(mib * (1 << 20)) // 4 // 2048 * 2048
        moved = (1 if args.fill else 2) * 4 * n
        sets = rotation_sets(moved, timing)
        srcs = [torch.randn(n, device="cuda") for _ in range(sets)]
        dsts = [torch.empty_like(s) for s in srcs]
        base_us = None
        for name, fn in fns.items():
            if args.fill:
                calls = [lambda d=d, fn=fn: fn(d) for d in dsts]
                for d in dsts:
                    d.fill_(1.0)
                    fn(d)  # compile and warm up
                    assert not d.any(), name
            else:
                calls = [lambda s=s, d=d, fn=fn: fn(s, d) for s, d in zip(srcs, dsts, strict=True)]
                for s, d in zip(srcs, dsts, strict=True):
                    fn(s, d)  # compile and warm up
                    assert torch.equal(s, d), name
            times, _, _, _ = time_sides(
                calls,
                [lambda: None],
                flush,
                args.reps,
                20.0,
                wait,
            )
            us = statistics.median(times) * 1e3
            base_us = base_us or us
            row = {
                "mib": mib,
                "variant": name,
                "us": us,
                "pct_hbm": 100 * moved / (us * 1e-6) / (peak * 1e9),
                "vs_torch": base_us / us,
            }
            rows.append(row)
            print(
                f"{mib:>6} MiB  {name:<40} {us:8.2f} us  {row['pct_hbm']:5.1f}% HBM  "
                f"{row['vs_torch']:.3f}x torch",
                flush=True,
            )
    if args.out:
        args.out.write_text(
            json.dumps({"peak_gbps": peak, "empty_us": empty_us, "rows": rows}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
