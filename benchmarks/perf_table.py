"""Per-operator speed table of a GPU evaluation (the speed targets of docs/PERFORMANCE.md).

    python benchmarks/perf_table.py RUN_DIR [RUN_DIR ...] [--sort speedup|eager_us|op]
        [--copy-curve copy_bandwidth.json] > table.md

RUN_DIR is an evaluation run folder (its atenforge_results.json); several folders (a suite
evaluated in parts, e.g. over two leases) are read as one, an operator's last folder winning. For every passed operator: geomean
speedup vs eager over its timed cases, median eager and kernel time, and at its largest case (most
bytes that must move) the share of measured HBM bandwidth the kernel reached (bytes / time, the
bytes the evaluator's roofline floor counts) and whether eager's time there is above the launch-
overhead band (only those cases say anything about bandwidth). The summary line gives the geomean
over all passed operators and over those with at least one case that is not overhead-dominated.
Evaluations that measured host time also get each side's median host µs per call and a "loop"
geomean: per case max(GPU time, host time) of eager over the kernel's, the speed of a loop of
calls in which the GPU waits for the host whenever the host is the slower.
With --copy-curve (benchmarks/copy_bandwidth.py's output from the same GPU), each memory-bound
operator's bandwidth is also given as a share of what a plain copy moving the same bytes reaches
(launch, ramp-up and tail included): the ceiling at that size, not at an infinite one.
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
from pathlib import Path
from typing import Any

from evaluator.reports.runfolder import results_file

# A case is memory-bound for the bandwidth target when its kernel moved this many bytes at least
# (below it launch latency, not HBM, sets the time on an H200).
MIN_BANDWIDTH_BYTES = 32 << 20
# Tensor-core bound: their time is FLOPs, not bytes (excluded from the bandwidth count).
COMPUTE_BOUND = {"mm", "bmm", "addmm", "convolution", "convolution_backward", "_grouped_mm"}


def _geomean(xs: list[float]) -> float | None:
    xs = [x for x in xs if x and x > 0]
    return math.exp(sum(map(math.log, xs)) / len(xs)) if xs else None


def operator_rows(results: dict[str, Any]) -> list[dict[str, Any]]:
    bw = results["run"]["eval_config"]["timing"]["hbm_bandwidth_gbps"]
    rows = []
    for o in results["operators"]:
        if o["status"] != "passed":
            continue
        timed = [r for r in o["results"] if r.get("speedup")]
        if not timed:
            continue
        largest = max(timed, key=lambda r: r.get("floor_ms") or 0.0)
        floor = largest.get("floor_ms") or 0.0
        moved = floor * 1e-3 * bw * 1e9
        measured = largest.get("kernel_ms_measured", largest["kernel_ms"])
        hosted = [r for r in timed if r.get("kernel_host_ms") and r.get("eager_host_ms")]
        rows.append(
            {
                "op": o["op"],
                "eager_host_us": statistics.median(r["eager_host_ms"] for r in hosted) * 1e3
                if hosted
                else None,
                "kernel_host_us": statistics.median(r["kernel_host_ms"] for r in hosted) * 1e3
                if hosted
                else None,
                "loop_speedup": _geomean(
                    [
                        max(r["eager_ms"], r["eager_host_ms"])
                        / max(r["kernel_ms"], r["kernel_host_ms"])
                        for r in hosted
                    ]
                ),
                "speedup": _geomean([r["speedup"] for r in timed]),
                "eager_us": statistics.median(r["eager_ms"] for r in timed) * 1e3,
                "kernel_us": statistics.median(r["kernel_ms"] for r in timed) * 1e3,
                "largest_mib": moved / (1 << 20),
                "bw_pct": 100.0 * floor / measured if measured else None,
                "eager_bw_pct": 100.0 * floor / largest["eager_ms"]
                if largest["eager_ms"]
                else None,
                "overhead": all("overhead_dominated" in r.get("flags", []) for r in timed),
                "cases": len(timed),
                "compute": o["op"].split(".")[0] in COMPUTE_BOUND,
            }
        )
    return rows


def copy_pct_at(curve: dict[str, Any], mib: float) -> float:
    """% of HBM bandwidth a copy moving `mib` MiB (read + write) reached, interpolated linearly
    in log(size) between the measured sizes, clamped at both ends."""
    points = sorted((2 * r["mib"], r["copy_pct"]) for r in curve["rows"])
    if mib <= points[0][0]:
        return points[0][1]
    for (m0, p0), (m1, p1) in zip(points, points[1:], strict=False):
        if mib <= m1:
            t = math.log(mib / m0) / math.log(m1 / m0)
            return p0 + t * (p1 - p0)
    return points[-1][1]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dirs", type=Path, nargs="+", metavar="RUN_DIR")
    ap.add_argument("--sort", choices=["speedup", "eager_us", "op"], default="speedup")
    ap.add_argument(
        "--copy-curve", type=Path, default=None, help="copy_bandwidth.py's JSON from the same GPU"
    )
    args = ap.parse_args()
    curve = json.loads(args.copy_curve.read_text()) if args.copy_curve else None
    by_op: dict[str, dict[str, Any]] = {}
    for run_dir in args.run_dirs:
        path = results_file(run_dir)
        if not path.is_file():
            raise SystemExit(f"perf_table: no {path}: give the run folder of an evaluation")
        results = json.loads(path.read_text())
        if results.get("device") != "cuda":
            raise SystemExit(
                f"perf_table: {path} is a {results.get('device')} run: nothing was timed"
            )
        by_op.update({r["op"]: r for r in operator_rows(results)})
    rows = list(by_op.values())
    rows.sort(key=lambda r: r[args.sort])
    print(
        "| operator | cases | geomean speedup | median eager µs | median kernel µs "
        "| largest case MiB | kernel % HBM bw | eager % HBM bw | host µs eager / kernel "
        "| loop speedup |" + (" kernel % of a same-size copy |" if curve else "")
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|" + ("---:|" if curve else ""))
    for r in rows:
        big = r["largest_mib"] >= MIN_BANDWIDTH_BYTES / (1 << 20) and not r["compute"]
        if curve:
            r["copy_rel"] = 100.0 * r["bw_pct"] / copy_pct_at(curve, r["largest_mib"])
        bw = f"{r['bw_pct']:.0f}" if big else f"({r['bw_pct']:.0f})"
        ebw = f"{r['eager_bw_pct']:.0f}" if big else f"({r['eager_bw_pct']:.0f})"
        print(
            f"| {r['op']}{' †' if r['overhead'] else ''} | {r['cases']} | {r['speedup']:.2f}× "
            f"| {r['eager_us']:.1f} | {r['kernel_us']:.1f} | {r['largest_mib']:.1f} | {bw} | {ebw} "
            f"| {_pair(r['eager_host_us'], r['kernel_host_us'])} "
            f"| {'-' if r['loop_speedup'] is None else format(r['loop_speedup'], '.2f') + '×'} |"
            + (f" {r['copy_rel']:.0f} |" if big and curve else " - |" if curve else "")
        )
    all_g = _geomean([r["speedup"] for r in rows])
    real = [r for r in rows if not r["overhead"]]
    big = [
        r for r in rows if r["largest_mib"] >= MIN_BANDWIDTH_BYTES / (1 << 20) and not r["compute"]
    ]
    print()
    print(
        f"{len(rows)} timed operators: geomean {all_g:.3f}×; without the "
        f"{len(rows) - len(real)} whose every case is overhead-dominated (†): "
        f"{_geomean([r['speedup'] for r in real]) or 0:.3f}×; "
        f"{len(big)} memory-bound operators move ≥ {MIN_BANDWIDTH_BYTES >> 20} MiB at their "
        f"largest case (bandwidth in parentheses otherwise, and for the tensor-core-bound "
        f"{', '.join(sorted(COMPUTE_BOUND))}), {sum(r['bw_pct'] >= 80 for r in big)} of them at "
        f"≥ 80% of HBM bandwidth; {sum(r['bw_pct'] >= r['eager_bw_pct'] * 0.9 for r in big)} "
        f"within 10% of eager's bandwidth or above it."
        + (
            f" Against a copy of the same bytes: {sum(r['copy_rel'] >= 80 for r in big)} of "
            f"{len(big)} at ≥ 80% of its bandwidth."
            if curve
            else ""
        )
    )
    loops = [r["loop_speedup"] for r in rows if r["loop_speedup"]]
    if loops:
        print()
        print(
            f"Host time measured for {len(loops)} operators: loop geomean {_geomean(loops):.3f}× "
            f"(per case max(GPU, host) of eager over the kernel's)."
        )


def _pair(a: float | None, b: float | None) -> str:
    return "-" if a is None or b is None else f"{a:.1f} / {b:.1f}"


if __name__ == "__main__":
    main()
