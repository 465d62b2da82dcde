"""Bandwidth by GPU kernel time: bytes that must move / the device time of the op's kernels.

    python benchmarks/device_bandwidth.py KERNELS_DIR --ops OP[,OP...] [--reps 10]
        [--out bandwidth.jsonl]

Why: the evaluator times a call with CUDA events around it
(docs/history/BENCHMARKS-2026-11-to-12.md §11), which
includes ~3 µs that even an empty kernel costs in that window (§17). For operators whose largest
torchbench case moves 32-64 MiB that fixed cost alone keeps a plain copy below 80% of HBM
bandwidth, so "% of HBM bandwidth" from the evaluator's time mixes kernel quality with per-call
overhead. This measures the other half: the sum of the op's GPU kernel durations per call
(torch.profiler, CUPTI; the union of their intervals per call), with L2 emptied of the op's data before every call by a read of 512 MiB
(clean lines: nothing of the previous call to write back, nothing of the inputs to hit). For each
operator's largest case (by bytes), three rows: eager ATen, the kept kernel, and a byte copy of
the same size (torch `copy_` of a uint8 tensor: what the DRAM gives a plain copy in kernel time).
Runs the kernels in this process: only for kernels you trust (your own kept kernels).
Diagnostic; the verdicts and speedups come from evaluations.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path
from typing import Any

import torch
import triton
import triton.language as tl
from kernel_profile import load_kept  # the sibling script (benchmarks/ is on sys.path)

from evaluator.cases.inputs import materialize
from evaluator.cases.suites import select_operators
from evaluator.config import EvalConfig
from evaluator.judge.spec_view import aten_overload
from evaluator.judge.timing import _bytes_moved

FLUSH_BYTES = 512 << 20


@triton.jit
def _evict_l2_kernel(src, dst, n, BLOCK: tl.constexpr):
    """Read n int32 words (one partial sum per program): replaces L2's contents with clean lines
    of a buffer no operator touches. Its name keeps it out of the measured kernel times."""
    offs = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    v = tl.load(src + offs, mask=offs < n, other=0)
    tl.store(dst + tl.program_id(0), tl.sum(v, axis=0))


def _device_us(fn: Any, evict: Any, reps: int) -> tuple[float, list[str]]:
    """Median over reps of the time the GPU ran fn's kernels per call (µs: the union of their
    intervals, so a dependent launch that overlaps its predecessor's tail is not counted twice,
    and idle gaps between launches are not counted), and their names; L2 is evicted before every
    call (the eviction kernel itself is left out by name and separates the calls)."""
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(reps):
            evict()
            fn()
        torch.cuda.synchronize()
    kernels = sorted(
        (e for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA),
        key=lambda e: e.time_range.start,
    )
    calls: list[list[tuple[float, float]]] = []
    names = set()
    for e in kernels:
        if "_evict_l2_kernel" in e.name:
            calls.append([])
        elif calls:
            calls[-1].append((e.time_range.start, e.time_range.end))
            names.add(e.name[:60])
    busy = []
    for spans in calls:
        total, reach = 0.0, float("-inf")
        for start, end in spans:  # sorted by start
            if end > reach:
                total += end - max(start, reach)
                reach = end
        busy.append(total)
    return statistics.median(busy), sorted(names)


def _measure_op(oc: Any, kernels_dir: Path, evict: Any, reps: int) -> tuple:
    """(largest case, bytes that must move, eager, ours, same-size copy), each side as
    _device_us returns it."""
    fn = load_kept(kernels_dir, oc.op)
    case = max(oc.cases, key=lambda c: c.total_bytes())
    a, kw = materialize(oc.op, case, "cuda", 1)
    b = [x.clone() if isinstance(x, torch.Tensor) else x for x in a]
    packet = aten_overload(oc.op)
    moved = _bytes_moved(oc.op, b, packet(*b, **kw))
    src = torch.empty(max(1, moved // 2), dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    return (
        case,
        moved,
        _device_us(lambda: packet(*b, **kw), evict, reps),
        _device_us(lambda: fn(*a, **kw), evict, reps),
        _device_us(lambda: dst.copy_(src), evict, reps),
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels_dir", type=Path)
    ap.add_argument("--ops", required=True, help="comma-separated overloads")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--out", type=Path, default=None, help="also write JSON lines here")
    args = ap.parse_args()
    if not torch.cuda.is_available():
        raise SystemExit("device_bandwidth: needs a CUDA GPU")
    ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    hbm = EvalConfig().timing.hbm_bandwidth_gbps * 1e9
    words = FLUSH_BYTES // 4
    buf = torch.ones(words, dtype=torch.int32, device="cuda")
    sink_buf = torch.empty(triton.cdiv(words, 8192), dtype=torch.int32, device="cuda")

    def evict() -> None:
        _evict_l2_kernel[(triton.cdiv(words, 8192),)](buf, sink_buf, words, BLOCK=8192)

    sink = args.out.open("a") if args.out else None
    print(
        f"{'op':38} {'MiB':>8} | % HBM by kernel time: eager / ours / copy | µs eager / ours / copy"
    )
    ours_pct: dict[str, float] = {}
    for oc in select_operators("torchbench", ops=ops).ops:
        try:
            case, moved, (eager_us, eager_k), (ours_us, ours_k), (copy_us, _) = _measure_op(
                oc, args.kernels_dir, evict, args.reps
            )
        except Exception as exc:  # noqa: BLE001 - report and go on
            print(f"{oc.op}: {type(exc).__name__}: {exc}"[:200], file=sys.stderr, flush=True)
            continue
        pct = [
            100 * moved / (us * 1e-6) / hbm if us > 0 else 0.0
            for us in (eager_us, ours_us, copy_us)
        ]
        row = {
            "op": oc.op,
            "case": case.serialize(),
            "bytes": moved,
            "eager_us": eager_us,
            "kernel_us": ours_us,
            "copy_us": copy_us,
            "eager_pct": pct[0],
            "kernel_pct": pct[1],
            "copy_pct": pct[2],
            "eager_kernels": eager_k,
            "kernel_kernels": ours_k,
        }
        if sink:
            sink.write(json.dumps(row) + "\n")
            sink.flush()
        print(
            f"{oc.op:38} {moved / 2**20:8.1f} | {pct[0]:5.0f} / {pct[1]:5.0f} / {pct[2]:5.0f}"
            f"                  | {eager_us:.1f} / {ours_us:.1f} / {copy_us:.1f}",
            flush=True,
        )
        ours_pct[oc.op] = pct[1]
    below = sorted(op for op, pct in ours_pct.items() if pct < 80)
    print(
        f"{len(ours_pct) - len(below)} of {len(ours_pct)} operators at >= 80% of HBM bandwidth by "
        f"kernel time" + (f"; below: {', '.join(below)}" if below else "")
    )


if __name__ == "__main__":
    main()
