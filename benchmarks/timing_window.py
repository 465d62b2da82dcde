"""How much host time the evaluator's L2-flushed measurement hides, and whether it is stable.

    python benchmarks/timing_window.py [--out window.json]

A call = a busy-wait of X µs on the host (a stand-in for a wrapper's Python) followed by one tiny
launch. For each X the call is timed three ways, 200 repetitions each, median and the spread
(10th-90th percentile):
  synced     flush; events around the call; sync after every repetition (the evaluator up to
             session 3);
  pipelined  flush; events around the call; no sync until the end, so the GPU queue stays ahead
             of the host while the host keeps up with the flush;
  host       wall time of the call alone.
Also reported: the flush's own GPU time. GPU only; diagnostic for
docs/history/BENCHMARKS-2026-11-to-12.md §11.
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path

import torch

FLUSH_MIB = 256
REPS = 200


def _busy(us: float) -> None:
    end = time.perf_counter() + us * 1e-6
    while time.perf_counter() < end:
        pass


def _stats(values: list[float]) -> dict[str, float]:
    values = sorted(values)
    n = len(values)
    return {
        "median_us": round(statistics.median(values) * 1e3, 2),
        "p10_us": round(values[n // 10] * 1e3, 2),
        "p90_us": round(values[(9 * n) // 10] * 1e3, 2),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    flush = torch.empty(FLUSH_MIB * (1 << 20) // 4, dtype=torch.int32, device="cuda")
    tiny = torch.zeros(1, device="cuda")
    for _ in range(20):
        flush.zero_()
        tiny.add_(1)
    torch.cuda.synchronize()

    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    flush_times = []
    for _ in range(50):
        s.record()
        flush.zero_()
        e.record()
        e.synchronize()
        flush_times.append(s.elapsed_time(e))
    report: dict = {"flush_mib": FLUSH_MIB, "flush": _stats(flush_times), "calls": []}

    for busy_us in (0, 5, 10, 15, 20, 30, 40, 60, 100):

        def call(b: float = busy_us) -> None:
            _busy(b)
            tiny.add_(1)

        synced = []
        for _ in range(REPS):
            flush.zero_()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            call()
            b.record()
            b.synchronize()
            synced.append(a.elapsed_time(b))
        pairs = []
        for i in range(REPS):
            flush.zero_()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            call()
            b.record()
            pairs.append((a, b))
            if i % 10 == 9:
                b.synchronize()
        torch.cuda.synchronize()
        pipelined = [a.elapsed_time(b) for a, b in pairs]
        host = []
        for _ in range(REPS):
            t0 = time.perf_counter()
            call()
            host.append((time.perf_counter() - t0) * 1e3)
        torch.cuda.synchronize()
        row = {
            "busy_us": busy_us,
            "synced": _stats(synced),
            "pipelined": _stats(pipelined),
            "host": _stats(host),
        }
        report["calls"].append(row)
        print(json.dumps(row), flush=True)
    print("flush", json.dumps(report["flush"]))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()
