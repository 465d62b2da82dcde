"""How much of a timed call is the L2 flush's own traffic: a copy and a zero-fill timed three ways.

    python benchmarks/flush_effect.py [--out flush_effect.json]

Why: the evaluator flushes L2 by zeroing 256 MiB before each timed call. That leaves L2 full of
the flush's dirty lines, and every line the timed call brings in evicts one of them, so the call
may also pay for writing the flush's data back to HBM. At tens of MiB that could be a large part
of the "copy ceiling" (docs/history/BENCHMARKS-2026-11-to-12.md §12). Three ways to time the same
call:

- write:  the evaluator's way (zero the flush buffer, GPU wait, events around one call);
- read:   the flush reads its buffer instead (L2 left clean; the call's own dirty output is never
          written back inside its window, so this one can flatter);
- steady: a read flush, then N calls on N distinct buffer sets, each after the GPU wait; the
          median of calls 2..N. Each call finds L2 as a model's next op would: holding the
          previous call's data (its output dirty), and pays for evicting it, about its own
          write-back.

GPU only.
"""

from __future__ import annotations

import argparse
import json
import statistics
from pathlib import Path
from typing import Any

import torch

from evaluator.config import EvalConfig
from evaluator.judge.timing import _time_pair, _wait_cycles, l2_flusher, time_sides

SIZES_MIB = (8, 16, 24, 32, 48, 64, 96, 128, 256)
ROTATE = 6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument("--reps", type=int, default=20)
    args = ap.parse_args()
    timing = EvalConfig().timing
    peak = timing.hbm_bandwidth_gbps
    wait = _wait_cycles(timing.host_window_us)
    flushes = {m: l2_flusher(timing.flush_l2_mib, m) for m in ("write", "read")}
    rows = []
    print(f"{'MiB':>5} | copy % peak: write read steady | zero % peak: write read steady")
    for mib in SIZES_MIB:
        n = (mib << 20) // 2
        srcs = [torch.randn(n, dtype=torch.float16, device="cuda") for _ in range(ROTATE)]
        dsts = [torch.empty_like(s) for s in srcs]
        copies = [lambda d=d, s=s: d.copy_(s) for d, s in zip(dsts, srcs, strict=True)]
        zeros = [lambda d=d: d.zero_() for d in dsts]
        row: dict[str, Any] = {"mib": mib}
        for mode, flush in flushes.items():
            c, z, _, _ = _time_pair(copies[0], zeros[0], flush, args.reps, 30.0, wait)
            row[f"copy_{mode}_us"] = statistics.median(c) * 1e3
            row[f"zero_{mode}_us"] = statistics.median(z) * 1e3
        c, z, _, _ = time_sides(copies, zeros, flushes["read"], args.reps, 30.0, wait)
        row["copy_steady_us"] = statistics.median(c) * 1e3
        row["zero_steady_us"] = statistics.median(z) * 1e3
        for kind, moved in (("copy", 2 * (mib << 20)), ("zero", mib << 20)):
            for mode in ("write", "read", "steady"):
                row[f"{kind}_{mode}_pct"] = (
                    100 * moved / (row[f"{kind}_{mode}_us"] * 1e-6) / (peak * 1e9)
                )
        rows.append(row)
        print(
            f"{mib:>5} | "
            + " ".join(f"{row[f'copy_{m}_pct']:5.0f}%" for m in ("write", "read", "steady"))
            + " | "
            + " ".join(f"{row[f'zero_{m}_pct']:5.0f}%" for m in ("write", "read", "steady")),
            flush=True,
        )
        del srcs, dsts, copies, zeros
    if args.out:
        args.out.write_text(
            json.dumps({"peak_gbps": peak, "rotate": ROTATE, "rows": rows}, indent=1) + "\n"
        )


if __name__ == "__main__":
    main()
