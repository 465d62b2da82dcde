"""Which torchbench operators the builtin provider writes, and which of them passed.

    python benchmarks/builtin_coverage.py [--run LABEL=RUN_DIR ...] > table.md

Each `--run` is an agent run folder of `python -m agent.run --provider builtin --suite torchbench`;
its per-operator decisions (ops/*/decision.json) become a column: `passed` (a kernel passed every
test on that device), `untestable` (no case could run there: too large for the CPU rule, or no
eager kernel on that device), `failed` (every round's kernel failed a test) or `no writer`.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from agent.providers.builtin.registry import FAMILY_OF, WRITERS
from evaluator.cases.suites import select_operators


def decisions(run_dir: Path) -> dict[str, str]:
    out = {}
    for path in run_dir.glob("ops/*/decision.json"):
        d = json.loads(path.read_text())
        reason = d.get("reason", "")
        if d.get("status") == "kept":
            out[d["op"]] = "passed"
        elif "untestable" in reason:
            out[d["op"]] = "untestable"
        elif "no code block" in reason:
            out[d["op"]] = "no writer"
        else:
            out[d["op"]] = "failed"
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--run", action="append", default=[], help="LABEL=RUN_DIR")
    args = ap.parse_args()
    runs = [
        (label, decisions(Path(path))) for label, _, path in (r.partition("=") for r in args.run)
    ]
    sel = select_operators("torchbench")
    print("| operator | models | family |" + "".join(f" {label} |" for label, _ in runs))
    print("|" + " --- |" * (3 + len(runs)))
    for oc in sel.ops:
        family = FAMILY_OF.get(oc.op, "") if oc.op in WRITERS else "**not covered**"
        print(
            f"| {oc.op} | {oc.models} | {family} |"
            + "".join(f" {d.get(oc.op, '—')} |" for _, d in runs)
        )
    covered = sum(oc.op in WRITERS for oc in sel.ops)
    print(f"\n{covered} of {len(sel.ops)} torchbench operators have a builtin writer.")
    for label, d in runs:
        passed = sum(1 for oc in sel.ops if d.get(oc.op) == "passed")
        untestable = sum(1 for oc in sel.ops if d.get(oc.op) == "untestable")
        print(
            f"{label}: {passed} of {len(sel.ops)} operators passed every test ({passed / len(sel.ops):.0%});"
            f" {untestable} untestable there."
        )


if __name__ == "__main__":
    main()
