"""Write the builtin provider's first-round kernels for a suite into a kernel directory, without
running the agent (no sandbox, no tests): the input of an `--evaluate-only` speed run.

    python benchmarks/write_builtin.py OUT_DIR [--ops add.Tensor,mm.default] [--suite torchbench]

The writer is deterministic, so each file is exactly what `python -m agent.run --provider builtin`
writes in round 1 (variant 0); the agent only asks for another variant after a failed round. On
the H200 every kept kernel of the torchbench suite was a round-1 kernel
(docs/history/BENCHMARKS-2026-11-to-12.md §9),
so `--evaluate-only` on this directory measures the kernels the agent keeps there.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest
from evaluator.cases.suites import select_operators
from evaluator.naming import kernel_file_name, op_to_folder


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("out_dir", type=Path)
    ap.add_argument(
        "--ops", default="", help="comma-separated overloads (default: the whole suite)"
    )
    ap.add_argument("--suite", default="torchbench")
    args = ap.parse_args()
    ops = [o.strip() for o in args.ops.split(",") if o.strip()] or None
    selection = select_operators(args.suite, ops=ops)
    written, declined = 0, []
    for oc in selection.ops:
        writer = WRITERS.get(oc.op)
        text = writer(KernelRequest(op=oc.op, schema="", cases=oc.cases)) if writer else None
        if text is None:
            declined.append(oc.op)
            continue
        folder = args.out_dir / op_to_folder(oc.op)
        folder.mkdir(parents=True, exist_ok=True)
        (folder / kernel_file_name(oc.op)).write_text(text, encoding="utf-8")
        written += 1
    print(f"wrote {written} kernels to {args.out_dir}; no kernel for: {', '.join(declined) or '-'}")
    if not written:
        sys.exit(1)


if __name__ == "__main__":
    main()
