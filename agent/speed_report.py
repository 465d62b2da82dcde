"""The speed rounds in a run's reports: the speedup before and after them, per operator.

Contract: `add_speed_to_reports(runlog, ops, report, run_dir) -> Path | None`. For every selected
operator whose decision.json has a `speed` block (agent.speed), a line goes into the report's
notes (OVERALL_SUMMARY.md, full_results.json, the console summary) and a row into
`speed_rounds.csv` at the run folder's root: the geomean speedup of the first passing kernel and
of the kept one as the speed rounds timed them (vs eager, and vs torch.compile when timed), the
gain, the final evaluation's speedup, how many rounds ran and why they stopped. The reports are
written again with the notes. Returns the CSV's path, or None when no operator had speed rounds.
"""

from __future__ import annotations

import csv
import io
from pathlib import Path
from typing import Any

from evaluator.reports.runfolder import write_text

SPEED_CSV = "speed_rounds.csv"
COLUMNS = [
    "operator",
    "speedup_before",
    "speedup_after",
    "gain",
    "speedup_vs_compile_before",
    "speedup_vs_compile_after",
    "evaluated_speedup",
    "rounds",
    "stopped",
    "kept_worker",
    "kept_speed_round",
    "timing_noise",
]


def _fmt(value: Any) -> str:
    return "" if value is None else f"{float(value):.4g}"


def _x(value: Any) -> str:
    return "n/a" if value is None else f"{float(value):.3f}x"


def speed_note(op: str, speed: dict[str, Any]) -> str:
    kept = speed.get("kept")
    head = f"speed rounds, `{op}`: {_x(speed.get('speedup_before'))} -> "
    head += f"{_x(speed.get('speedup_after'))} eager"
    if speed.get("speedup_vs_compile_after") is not None:
        head += (
            f" ({_x(speed.get('speedup_vs_compile_before'))} -> "
            f"{_x(speed.get('speedup_vs_compile_after'))} torch.compile)"
        )
    where = (
        f"kept speed round {kept['speed_round']}, worker {kept['worker']}"
        if kept
        else "nothing faster kept"
    )
    return f"{head}; {speed.get('rounds', 0)} round(s), {where}, stopped: {speed.get('stopped')}"


def add_speed_to_reports(runlog: Any, ops: list[str], report: Any, run_dir: Path) -> Path | None:
    """See the module docstring."""
    from evaluator.reports.report import write_reports

    evaluated = {r.op: r.geomean_speedup for r in getattr(report, "operators", [])}
    rows = []
    for op in ops:
        speed = (runlog.read_decision(op) or {}).get("speed")
        if not speed:
            continue
        kept = speed.get("kept") or {}
        report.notes.append(speed_note(op, speed))
        rows.append(
            [
                op,
                _fmt(speed.get("speedup_before")),
                _fmt(speed.get("speedup_after")),
                _fmt(speed.get("gain")),
                _fmt(speed.get("speedup_vs_compile_before")),
                _fmt(speed.get("speedup_vs_compile_after")),
                _fmt(evaluated.get(op)),
                speed.get("rounds", 0),
                speed.get("stopped", ""),
                kept.get("worker", ""),
                kept.get("speed_round", ""),
                _fmt(speed.get("noise")),
            ]
        )
    if not rows:
        return None
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(COLUMNS)
    writer.writerows(rows)
    path = Path(run_dir) / SPEED_CSV
    write_text(path, buf.getvalue())
    write_reports(run_dir, report)
    return path
