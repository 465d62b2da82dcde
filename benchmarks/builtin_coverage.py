"""Which torchbench operators the builtin provider can write, by family (issue 4).

    python benchmarks/builtin_coverage.py [--results RUN_DIR/full_results.json ...] > table.md

With evaluation results (CPU and/or GPU runs of `agent.run --provider builtin`), each operator's
status and speedup per run are added as columns.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agent.providers.builtin.registry import FAMILY_OF, WRITERS
from evaluator.suites import select_operators


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", nargs="*", type=Path, default=[], help="full_results.json files")
    args = ap.parse_args()
    runs = []
    for path in args.results:
        data = json.loads(path.read_text())
        runs.append((data.get("device", path.parent.name), {o["op"]: o for o in data["operators"]}))
    sel = select_operators("torchbench")
    head = "| operator | models | family |" + "".join(
        f" {dev} status | {dev} speedup |" for dev, _ in runs
    )
    print(head)
    print("|" + " --- |" * (3 + 2 * len(runs)))
    covered = 0
    for oc in sel.ops:
        family = FAMILY_OF.get(oc.op, "") if oc.op in WRITERS else "not covered"
        covered += oc.op in WRITERS
        row = f"| {oc.op} | {oc.models} | {family} |"
        for _, ops in runs:
            o = ops.get(oc.op, {})
            sp = o.get("geomean_speedup")
            row += f" {o.get('status', '—')} | {f'{sp:.2f}×' if isinstance(sp, float) else '—'} |"
        print(row)
    print(f"\n{covered} of {len(sel.ops)} torchbench operators have a builtin writer.")
    for dev, ops in runs:
        passed = sum(1 for oc in sel.ops if ops.get(oc.op, {}).get("status") == "passed")
        print(f"{dev}: {passed} of {len(sel.ops)} pass every test ({passed / len(sel.ops):.0%}).")


if __name__ == "__main__":
    main()
