"""What a plain device copy reaches at each size, timed exactly as the evaluator times a case.

    python benchmarks/copy_bandwidth.py [--out copy_bandwidth.json]

Why: the bandwidth target divides bytes by time against one number, the measured HBM
bandwidth (4.26 TB/s on the H200). At tens of MiB a call also pays a launch, the ramp-up of the
first wave and the tail of the last, so even a copy falls short of that number; this curve says
by how much, so that a kernel at "70%" on a 49 MiB case can be told apart from a slow kernel.

Per tensor size (a copy moves it twice: read + write): torch's `copy_` (a read and a write) and `zero_` (writes
only), each timed with the evaluator's method (`timing.time_sides`: the configured L2 state, the
calibrated GPU wait before every call, CUDA events around it), median of the repetitions. GPU
only. `--l2-state flushed` gives the curve as sessions 4-5 measured it.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path

import torch

from evaluator.config import EvalConfig
from evaluator.judge.timing import _wait_cycles, flusher_for, rotation_sets, time_sides

SIZES_MIB = (4, 8, 16, 32, 48, 64, 96, 128, 192, 256, 512, 1024, 2048, 4096)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write the rows here as JSON")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument(
        "--l2-state",
        choices=("steady", "flushed"),
        default=None,
        help="what L2 holds when a timed call starts (default: the evaluator's)",
    )
    args = ap.parse_args()
    timing = EvalConfig().timing
    if args.l2_state:
        timing = timing.model_copy(update={"l2_state": args.l2_state})
    peak = timing.hbm_bandwidth_gbps
    flush = flusher_for(timing)
    wait = _wait_cycles(timing.host_window_us)
    rows = []
    print(
        f"{'tensor MiB':>10} {'copy us':>9} {'copy % peak':>11} {'zero us':>9} {'zero % peak':>11}"
    )
    for mib in SIZES_MIB:
        n = (mib << 20) // 2
        sets = rotation_sets(2 * (mib << 20), timing)
        srcs = [torch.randn(n, dtype=torch.float16, device="cuda") for _ in range(sets)]
        dsts = [torch.empty_like(s) for s in srcs]
        copy, zero, _, _ = time_sides(
            [lambda d=d, s=s: d.copy_(s) for d, s in zip(dsts, srcs, strict=True)],
            [lambda d=d: d.zero_() for d in dsts],
            flush,
            args.reps,
            30.0,
            wait,
        )
        copy_ms, zero_ms = statistics.median(copy), statistics.median(zero)
        row = {
            "mib": mib,
            "copy_us": copy_ms * 1e3,
            "copy_pct": 100 * (2 * (mib << 20)) / (copy_ms * 1e-3) / (peak * 1e9),
            "zero_us": zero_ms * 1e3,
            "zero_pct": 100 * (mib << 20) / (zero_ms * 1e-3) / (peak * 1e9),
        }
        rows.append(row)
        print(
            f"{mib:>10} {row['copy_us']:>9.1f} {row['copy_pct']:>10.0f}% "
            f"{row['zero_us']:>9.1f} {row['zero_pct']:>10.0f}%",
            flush=True,
        )
    if args.out:
        args.out.write_text(
            json.dumps({"peak_gbps": peak, "l2_state": timing.l2_state, "rows": rows}, indent=1)
            + "\n"
        )


if __name__ == "__main__":
    main()
