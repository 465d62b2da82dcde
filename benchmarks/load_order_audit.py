"""Which builtin kernels read a global load's result before issuing their block's other loads
(SASS for sm_90, compiled on the CPU: no GPU needed).

    python benchmarks/load_order_audit.py [--ops _softmax.default,...] [--cases 2] [--all]
        [--sass-dir DIR]

Each kernel launch the operator's largest cases make is compiled as Triton's launcher would
compile it for an H100/H200 and read with the cuobjdump that ships with Triton (each line also
gives the launch's registers per thread, spill stores, SASS size and shared memory: what a warp
or tile knob changes, without a GPU; plans are the CPU's, 4 programs in all). Per
straight-line block of SASS, a load counts as read early when an instruction uses its result
before the block's last global load is issued: the warp stalls there for a memory latency
before the rest go out. Harmless where many warps share an SM (elementwise kernels at copy
speed show many); costly where one or two large programs fill an SM: a one-tile softmax row ran
1.75x slower on the H200 for it (docs/history/BENCHMARKS-2026-11-to-12.md §22). Prints the launches
with at least one
load read early (--all: every launch), most first. The whole suite takes ~8 minutes here.
--sass-dir also writes each launch's SASS there (OP.CASE.KERNEL.sass), for counting
instructions by kind.
"""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path

_TESTS = Path(__file__).resolve().parent.parent / "tests"
sys.path[:0] = [str(_TESTS / "builtin"), str(_TESTS)]

from builtin_support import load_order_many  # noqa: E402

from agent.providers.builtin.registry import WRITERS  # noqa: E402
from agent.providers.builtin.request import KernelRequest  # noqa: E402
from evaluator.cases.suites import select_operators  # noqa: E402


def _elements(case) -> int:
    return sum(math.prod(a.shape) for a in case.args if hasattr(a, "shape"))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", default="", help="comma-separated overloads (default: the suite)")
    ap.add_argument("--suite", default="torchbench")
    ap.add_argument("--cases", type=int, default=2, help="largest cases per operator")
    ap.add_argument("--all", action="store_true", help="also launches with no load read early")
    ap.add_argument("--sass-dir", type=Path, default=None, help="write each launch's SASS here")
    args = ap.parse_args()
    if args.sass_dir:
        args.sass_dir.mkdir(parents=True, exist_ok=True)
        os.environ["ATENFORGE_SASS_DIR"] = str(args.sass_dir.resolve())
    ops = [o.strip() for o in args.ops.split(",") if o.strip()] or None
    jobs = []
    for oc in select_operators(args.suite, ops=ops).ops:
        writer = WRITERS.get(oc.op)
        text = writer(KernelRequest(op=oc.op, schema="", cases=oc.cases)) if writer else None
        if text is not None:
            cases = sorted(oc.cases, key=_elements, reverse=True)[: max(1, args.cases)]
            jobs.append((oc.op, text, cases))
    if not jobs:
        sys.exit("no builtin kernel for these operators")
    try:
        out = load_order_many(jobs)
    except RuntimeError as exc:
        sys.exit(f"cannot compile for sm_90 here: {str(exc)[-300:]}")
    rows = [
        (early, loads, op, index, kernel, rest)
        for op, launches in out["load_order"].items()
        for index, kernel, early, loads, *rest in launches
        if early or args.all
    ]
    for early, loads, op, index, kernel, (sass, regs, spills, smem) in sorted(rows, reverse=True):
        print(
            f"{early:4d} of {loads:4d} loads read early  {op} case {index}  {kernel}"
            f"  ({regs} registers, {spills} spill stores, {sass} SASS, {smem} B shared)"
        )
    for op, problems in out["problems"].items():
        for line in problems:
            print(f"problem: {op}: {line}")


if __name__ == "__main__":
    main()
