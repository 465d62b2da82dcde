"""Where a kept kernel's time goes on the GPU: host (Python wrapper + launch) vs device.

    python benchmarks/kernel_profile.py KERNELS_DIR --ops sqrt.default,mm.default [--cases 3]
        [--largest] [--match TEXT] [--out profile.jsonl]

For each operator (default: every kernel in KERNELS_DIR) and its first torchbench cases, four
numbers per side (eager / kernel), in µs per call:
  flushed   the evaluator's measure (L2 flush, then events around one call);
  stream    events around 50 back-to-back calls / 50 (host-bound calls show their host time here);
  host      wall time of 50 calls without a sync / 50 (the wrapper's Python + launch cost);
  device    sum of GPU kernel durations per call from torch.profiler (what the GPU really ran),
            and below it the kernels themselves, by name, with their µs per call (which library
            path eager took, and every launch of ours).
This runs the kernels in this process: only for kernels you trust (your own kept kernels).
Diagnostic only; speed claims come from evaluations (docs/PERFORMANCE.md).
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from evaluator.cases.inputs import materialize
from evaluator.cases.suites import select_operators
from evaluator.judge.spec_view import aten_overload
from evaluator.naming import folder_to_op, kernel_function_name, op_to_folder

REPS = 50


def load_kept(kernels_dir: Path, op: str) -> Any:
    """The entry point of op's kept kernel in kernels_dir, loaded into this process (trusted
    kernels only: our own writers'). Shared with device_bandwidth.py."""
    folder = op_to_folder(op)
    path = kernels_dir / folder / f"{folder}_implementation_v1.py"
    spec = importlib.util.spec_from_file_location(f"profiled_{folder}", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # type: ignore[union-attr]
    return getattr(mod, kernel_function_name(op))


def _measure(fn: Any, flush: torch.Tensor) -> dict[str, float]:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    flushed = []
    for _ in range(20):
        flush.zero_()
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        flushed.append(s.elapsed_time(e) * 1e3)
    torch.cuda.synchronize()
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    s.record()
    for _ in range(REPS):
        fn()
    e.record()
    e.synchronize()
    stream = s.elapsed_time(e) * 1e3 / REPS
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(REPS):
        fn()
    host = (time.perf_counter() - t0) * 1e6 / REPS
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(10):
            fn()
        torch.cuda.synchronize()
    kernels = [evt for evt in prof.key_averages() if evt.device_time_total]
    device = sum(evt.device_time_total for evt in kernels) / 10
    return {
        "flushed": statistics.median(flushed),
        "stream": stream,
        "host": host,
        "device": device,
        # which GPU kernels one call runs and their µs per call: tells a cuDNN/cuBLAS call, an
        # extra copy or fill, or a second launch apart (eager's side too)
        "kernels": {evt.key[:80]: round(evt.device_time_total / 10, 2) for evt in kernels},
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels_dir", type=Path)
    ap.add_argument("--ops", default="", help="comma-separated overloads (default: all kept)")
    ap.add_argument("--cases", type=int, default=3, help="cases per operator")
    ap.add_argument(
        "--largest", action="store_true", help="take the operator's largest cases (by bytes) first"
    )
    ap.add_argument("--match", default="", help="only cases whose serialized text contains this")
    ap.add_argument("--out", type=Path, default=None, help="also write JSON lines here")
    args = ap.parse_args()
    if args.ops:
        ops = [o.strip() for o in args.ops.split(",") if o.strip()]
    else:
        ops = sorted(folder_to_op(p.name) for p in args.kernels_dir.iterdir() if p.is_dir())
    sel = select_operators("torchbench", ops=ops)
    flush = torch.empty(64 << 20, dtype=torch.int32, device="cuda")
    sink = args.out.open("w") if args.out else None
    print(
        f"{'op':34} {'case':60} | eager flushed/stream/host/device | kernel flushed/stream/host/device"
    )
    for oc in sel.ops:
        try:
            fn = load_kept(args.kernels_dir, oc.op)
        except (OSError, AttributeError) as exc:
            print(f"{oc.op}: cannot load ({exc})", file=sys.stderr)
            continue
        packet = aten_overload(oc.op)
        cases = sorted(oc.cases, key=lambda c: -c.total_bytes()) if args.largest else oc.cases
        cases = [c for c in cases if args.match in c.serialize()]
        for case in cases[: args.cases]:
            a, kw = materialize(oc.op, case, "cuda", 1)
            b = [x.clone() if isinstance(x, torch.Tensor) else x for x in a]
            try:
                eager = _measure(lambda p=packet, b=b, kw=kw: p(*b, **kw), flush)
                kernel = _measure(lambda f=fn, a=a, kw=kw: f(*a, **kw), flush)
            except Exception as exc:  # noqa: BLE001 - report and go on
                print(f"{oc.op}: {type(exc).__name__}: {exc}"[:200], file=sys.stderr)
                continue
            row = {"op": oc.op, "case": case.serialize(), "eager": eager, "kernel": kernel}
            if sink:
                sink.write(json.dumps(row) + "\n")
            fmt = lambda m: "/".join(f"{m[k]:.1f}" for k in ("flushed", "stream", "host", "device"))  # noqa: E731
            print(
                f"{oc.op:34} {case.serialize()[:60]:60} | {fmt(eager):32} | {fmt(kernel)}",
                flush=True,
            )
            for side, m in (("eager", eager), ("kernel", kernel)):
                print(f"    {side} kernels: {m['kernels']}", flush=True)


if __name__ == "__main__":
    main()
