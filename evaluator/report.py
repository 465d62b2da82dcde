"""Evaluation reports (design §5-6): the scores, and the three files every evaluation writes.

Contract:
- `Report` holds one evaluation: run metadata, one `OperatorResult` per *selected* operator
  (missing and crashing kernels included), the exclusions with their reasons, suite, device,
  notes. `Report.scores` is `compute_scores(report.operators)`.
- `compute_scores` puts every selected operator in the denominator: an operator that is missing,
  errored, was rejected or skipped counts as a failure, never silently dropped. Performance
  scores are `None` (shown as "not measured") when no operator has a measured speedup, as on the
  CPU: a number there would be invented.
- `write_reports(run_dir, report)` writes `full_results.json` (schema_version 1, design §6),
  `operator_summary.csv` and `OVERALL_SUMMARY.md`, each atomically; `load_report(run_dir)` reads
  `full_results.json` back into a `Report`.
- `print_summary(report, console)` prints a rich table; user text (errors) is never parsed as
  rich markup, and a console that is not a terminal gets plain text.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from evaluator.error_text import correctness_config, error_with_tolerance, tolerance_legend
from evaluator.errors import UsageError
from evaluator.results import OperatorResult, Status, TestResult, flag_name
from evaluator.runfolder import write_json, write_text

SCHEMA_VERSION = 1
FULL_RESULTS = "full_results.json"
OPERATOR_CSV = "operator_summary.csv"
SUMMARY_MD = "OVERALL_SUMMARY.md"
CSV_COLUMNS = [
    "operator",
    "status",
    "tests",
    "passed",
    "pass_rate",
    "geomean_speedup",
    "max_abs_error",
    "max_rel_error",
    "flags",
    "skipped_tests",
    "reason",
]
# fast_p thresholds (BackendBench / KernelBench): passed and faster than p x eager.
FAST_P = {"fast_0": 0.0, "fast_1.0": 1.0, "fast_1.2": 1.2}
REASON_CHARS = 120

_STATUS_STYLE = {
    Status.PASSED: "green",
    Status.FAILED: "red",
    Status.REJECTED: "magenta",
    Status.ERROR: "bold red",
    Status.MISSING: "yellow",
    Status.SKIPPED: "dim",
}


# --------------------------------------------------------------------------- scores


def measured_speedup(result: OperatorResult) -> float | None:
    """The operator's geomean speedup when it is a usable number (finite, > 0), else None."""
    value = result.geomean_speedup
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) and value > 0 else None


def compute_scores(results: Sequence[OperatorResult]) -> dict[str, Any]:
    """Scores over the selected operators (design §5); every operator is in the denominator.

    - correctness_score: share with status passed.
    - mean_pass_rate: mean of passed/tests (an operator with 0 tests counts 0).
    - performance_score: geomean of per-operator geomean speedups, an operator that did not pass
      or has no speedup counting 1.0 (it falls back to eager).
    - fast_0, fast_1.0, fast_1.2: share that passed with a speedup above p.
    The performance scores are None when no operator has a measured speedup (e.g. on the CPU).
    Also num_operators and num_<status> for each status.
    """
    n = len(results)
    scores: dict[str, Any] = {"num_operators": n}
    for status in Status:
        scores[f"num_{status}"] = sum(1 for r in results if r.status == status)
    passed = [r for r in results if r.status == Status.PASSED]
    scores["correctness_score"] = len(passed) / n if n else 0.0
    scores["mean_pass_rate"] = sum(r.pass_rate for r in results) / n if n else 0.0

    measured = n > 0 and any(measured_speedup(r) is not None for r in results)
    if not measured:
        scores["performance_score"] = None
        scores.update(dict.fromkeys(FAST_P))
        return scores
    logs = []
    for r in results:
        speedup = measured_speedup(r) if r.status == Status.PASSED else None
        logs.append(math.log(speedup) if speedup is not None else 0.0)
    scores["performance_score"] = math.exp(sum(logs) / n)
    for key, p in FAST_P.items():
        fast = [r for r in passed if (s := measured_speedup(r)) is not None and s > p]
        scores[key] = len(fast) / n
    return scores


# --------------------------------------------------------------------------- report


@dataclass
class Report:
    """One evaluation. `operators` holds every selected operator; `excluded` (op, reason) pairs
    name what the suite left out on purpose."""

    run: dict[str, Any]
    operators: list[OperatorResult]
    excluded: list[tuple[str, str]]
    suite: str
    device: str
    notes: list[str] = field(default_factory=list)
    run_dir: Path | None = None

    @property
    def scores(self) -> dict[str, Any]:
        return compute_scores(self.operators)

    def to_json(self) -> dict[str, Any]:
        """The `full_results.json` object (design §6), plus suite, device, excluded, notes."""
        operators = []
        for r in self.operators:
            entry = r.to_json()
            # Derived columns, for readers of the JSON alone; `load_report` ignores them.
            entry["pass_rate"] = r.pass_rate
            entry["max_abs_error"] = r.max_error("max_abs_error")
            entry["max_rel_error"] = r.max_error("max_rel_error")
            operators.append(entry)
        return {
            "schema_version": SCHEMA_VERSION,
            "suite": self.suite,
            "device": self.device,
            "run": self.run,
            "scores": self.scores,
            "operators": operators,
            "excluded": [{"op": op, "reason": reason} for op, reason in self.excluded],
            "notes": list(self.notes),
        }


def write_reports(run_dir: str | Path, report: Report) -> dict[str, Path]:
    """Write full_results.json, operator_summary.csv and OVERALL_SUMMARY.md into `run_dir`."""
    run_dir = Path(run_dir)
    paths = {
        "json": run_dir / FULL_RESULTS,
        "csv": run_dir / OPERATOR_CSV,
        "md": run_dir / SUMMARY_MD,
    }
    write_json(paths["json"], report.to_json())
    write_text(paths["csv"], render_csv(report))
    write_text(paths["md"], render_markdown(report))
    return paths


_NUMERIC_OP_FIELDS = ("geomean_speedup", "geomean_speedup_vs_compile", "wall_s")
_NUMERIC_TEST_FIELDS = (
    "max_abs_error",
    "max_rel_error",
    "speedup",
    "kernel_ms",
    "eager_ms",
    "floor_ms",
    "compile_ms",
    "speedup_vs_compile",
)
_TEST_FIELDS = {f.name for f in fields(TestResult)}


def _number(value: Any) -> Any:
    """Undo `to_jsonable`: "inf"/"-inf"/"nan" strings back to floats."""
    if isinstance(value, str) and value in ("inf", "-inf", "nan"):
        return float(value)
    return value


def _operator_from_json(data: dict[str, Any]) -> OperatorResult:
    data = dict(data)
    for key in _NUMERIC_OP_FIELDS:
        if key in data:
            data[key] = _number(data[key])
    results = []
    for test in data.get("results", []):
        test = {k: v for k, v in test.items() if k in _TEST_FIELDS}
        for key in _NUMERIC_TEST_FIELDS:
            if key in test:
                test[key] = _number(test[key])
        results.append(test)
    data["results"] = results
    return OperatorResult.from_json(data)


def load_report(run_dir: str | Path) -> Report:
    """Read `run_dir/full_results.json` back into a Report (scores are recomputed)."""
    run_dir = Path(run_dir)
    path = run_dir / FULL_RESULTS
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"no {FULL_RESULTS} in '{run_dir}': pass a run folder written by an evaluation."
        ) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise UsageError(f"'{path}' is not valid JSON ({exc}): re-run the evaluation.") from None
    version = data.get("schema_version") if isinstance(data, dict) else None
    if version != SCHEMA_VERSION:
        raise UsageError(
            f"'{path}' has schema_version {version!r}, expected {SCHEMA_VERSION}: "
            "re-run the evaluation with this version of atenforge."
        )
    run = data.get("run") or {}
    return Report(
        run=run,
        operators=[_operator_from_json(op) for op in data.get("operators", [])],
        excluded=[(e["op"], e["reason"]) for e in data.get("excluded", [])],
        suite=data.get("suite") or run.get("suite") or "",
        device=data.get("device") or run.get("device") or "",
        notes=list(data.get("notes", [])),
        run_dir=run_dir,
    )


# --------------------------------------------------------------------------- formatting


def _fmt_float(value: float | None, spec: str) -> str:
    if value is None:
        return ""
    if not math.isfinite(value):
        return str(value)
    return format(value, spec)


def _fmt_speedup(value: float | None) -> str:
    return "—" if value is None else f"{_fmt_float(value, '.2f')}×"


def _speedup_cell(r: OperatorResult) -> str:
    """The geomean speedup vs eager, and vs torch.compile when that baseline was timed."""
    text = _fmt_speedup(_as_float(r.geomean_speedup))
    vs_compile = _as_float(r.geomean_speedup_vs_compile)
    return text if vs_compile is None else f"{text} ({vs_compile:.2f}× vs compile)"


def _fmt_error(value: float | None) -> str:
    return "—" if value is None else _fmt_float(value, ".2e")


def _fmt_share(value: float | None) -> str:
    return "not measured" if value is None else f"{value:.1%}"


def _fmt_tests(r: OperatorResult) -> str:
    text = f"{r.passed}/{r.tests}"
    return f"{text} (+{r.skipped_tests} skipped)" if r.skipped_tests else text


def _shorten(text: str, limit: int = REASON_CHARS) -> str:
    text = " ".join(str(text).split())  # one line: reasons are often tracebacks
    return text if len(text) <= limit else text[: limit - 1] + "…"


def host_time_summary(report: Report) -> dict[str, Any] | None:
    """Geomeans over the timed cases of passed operators that recorded host time: kernel/eager
    host time per call, and eager/kernel of max(GPU time, host time). None when none did."""
    ratios, loops = [], []
    for r in report.operators:
        if r.status != Status.PASSED:
            continue
        for t in r.results:
            k_host, e_host = _as_float(t.kernel_host_ms), _as_float(t.eager_host_ms)
            k_gpu, e_gpu = _as_float(t.kernel_ms), _as_float(t.eager_ms)
            if not (k_host and e_host and k_gpu and e_gpu) or t.speedup is None:
                continue
            ratios.append(k_host / e_host)
            loops.append(max(e_gpu, e_host) / max(k_gpu, k_host))
    if not ratios:
        return None
    return {
        "cases": len(ratios),
        "host_ratio": math.exp(sum(map(math.log, ratios)) / len(ratios)),
        "loop_speedup": math.exp(sum(map(math.log, loops)) / len(loops)),
    }


def _performance_text(scores: dict[str, Any], device: str) -> str:
    value = scores.get("performance_score")
    if value is not None:
        return f"{value:.3f}× (geomean speedup vs eager)"
    if device == "cpu":
        return "not measured (no GPU)"
    return "not measured (no operator has a measured speedup)"


def render_csv(report: Report) -> str:
    """operator_summary.csv: one row per selected operator (columns in CSV_COLUMNS)."""
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for r in report.operators:
        writer.writerow(
            [
                r.op,
                str(r.status),
                r.tests,
                r.passed,
                round(r.pass_rate, 4),
                _fmt_float(_as_float(r.geomean_speedup), ".4g"),
                _fmt_float(r.max_error("max_abs_error"), ".6g"),
                _fmt_float(r.max_error("max_rel_error"), ".6g"),
                ";".join(r.flags),
                r.skipped_tests,
                " ".join(r.reason.split()),
            ]
        )
    return buf.getvalue()


def _as_float(value: Any) -> float | None:
    try:
        return None if value is None else float(value)
    except (TypeError, ValueError):
        return None


def _md_cell(text: str) -> str:
    return str(text).replace("\\", "\\\\").replace("|", "\\|").replace("\n", " ")


def _environment(run: dict[str, Any]) -> dict[str, Any]:
    """Environment facts may sit in run["environment"] or directly in run."""
    env = run.get("environment")
    return {**run, **env} if isinstance(env, dict) else dict(run)


def _first(mapping: dict[str, Any], *keys: str) -> Any:
    for key in keys:
        if mapping.get(key) not in (None, ""):
            return mapping[key]
    return None


def render_markdown(report: Report) -> str:
    """OVERALL_SUMMARY.md: scores, environment, per-operator table, exclusions, notes."""
    scores = report.scores
    n = scores["num_operators"]
    env = _environment(report.run)
    lines: list[str] = [f"# atenforge evaluation: {report.suite or 'custom'} suite", ""]
    if report.run_dir is not None:
        lines += [f"Run folder: `{report.run_dir}`", ""]

    lines += ["## Scores", "", "| score | value | meaning |", "|---|---|---|"]
    lines.append(
        f"| correctness_score | {scores['correctness_score']:.1%} "
        f"({scores['num_passed']}/{n}) | operators whose every test passed |"
    )
    lines.append(
        f"| mean_pass_rate | {scores['mean_pass_rate']:.1%} | mean share of tests passed per operator |"
    )
    lines.append(
        f"| performance_score | {_performance_text(scores, report.device)} | "
        "geomean speedup; an operator that did not pass counts 1.0 |"
    )
    for key, p in FAST_P.items():
        meaning = f"faster than {p:g}× eager" if p else "with a measured speedup"
        lines.append(f"| {key} | {_fmt_share(scores[key])} | passed and {meaning} |")
    counts = ", ".join(f"{scores[f'num_{s}']} {s}" for s in Status)
    lines += ["", f"{n} operators selected: {counts}; {len(report.excluded)} excluded.", ""]
    host = host_time_summary(report)
    if host is not None:
        lines += [
            f"Host time (kept out of the GPU timings): over {host['cases']} timed cases the kernels "
            f"took {host['host_ratio']:.2f}× eager's host time per call (geomean); counting host "
            f"time wherever it exceeds the GPU time, as a loop of calls on a waiting GPU does, the "
            f"geomean speedup would be {host['loop_speedup']:.3f}×.",
            "",
        ]

    lines += ["## Environment", ""]
    gpu = env.get("gpu") or ("cpu-interpreter" if report.device == "cpu" else "unknown")
    if env.get("gpu_driver"):
        gpu = f"{gpu} (driver {env['gpu_driver']})"
    facts = [
        ("device", f"{report.device} — {gpu}" if report.device else gpu),
        ("atenforge", _first(env, "project", "project_version", "atenforge")),
        ("python", env.get("python")),
        ("torch", env.get("torch")),
        ("triton", env.get("triton")),
        ("numpy", env.get("numpy")),
        ("host", " / ".join(str(x) for x in (env.get("hostname"), env.get("platform")) if x)),
        ("kernels", _first(env, "kernels_dir")),
        ("started", _first(env, "started", "started_at", "start")),
        ("finished", _first(env, "finished", "ended_at", "end")),
    ]
    command = env.get("command")
    if isinstance(command, list | tuple):
        command = " ".join(str(c) for c in command)
    facts.append(("command", f"`{command}`" if command else None))
    lines += [f"- {name}: {value}" for name, value in facts if value not in (None, "")]
    lines.append("")

    lines += [
        "## Operators",
        "",
        "| operator | status | passed/tests | speedup | max abs err | max rel err | flags | reason |",
        "|---|---|---|---|---|---|---|---|",
    ]
    correctness = correctness_config(report.run)
    for r in report.operators:
        cells = [
            f"`{r.op}`",
            f"**{r.status}**" if r.status != Status.PASSED else str(r.status),
            _fmt_tests(r),
            _speedup_cell(r),
            error_with_tolerance(r, correctness),
            _fmt_error(r.max_error("max_rel_error")),
            ", ".join(r.flags),
            _shorten(r.reason),
        ]
        lines.append("| " + " | ".join(_md_cell(c) for c in cells) + " |")
    if not report.operators:
        lines.append("| (no operator selected) | | | | | | | |")
    lines.append("")

    lines += ["## Excluded operators", ""]
    if report.excluded:
        lines += [f"- `{op}`: {_shorten(reason, 300)}" for op, reason in report.excluded]
    else:
        lines.append("None.")
    lines.append("")

    if report.notes:
        lines += ["## Notes", ""] + [f"- {note}" for note in report.notes] + [""]
    return "\n".join(lines)


def print_summary(report: Report, console: Console) -> None:
    """A table of operators and one line of scores on `console` (plain text off a terminal)."""
    scores = report.scores
    table = Table(title=f"atenforge: {report.suite or 'custom'} suite on {report.device}")
    # One line per operator where possible: numbers never wrap, long operator names and flags
    # fold, and the reason is cut with an ellipsis (the full text is in OVERALL_SUMMARY.md).
    # Widths are set here because rich squeezes every column alike once a table is too wide. A
    # console that is not a terminal is 80 columns: there, flag names share the reason's column.
    narrow = console.width < 120
    correctness = correctness_config(report.run)
    rows = []
    for r in report.operators:
        reason = _shorten(r.reason)
        if narrow:
            flags = ", ".join(dict.fromkeys(flag_name(f) for f in r.flags))
            tail = [" · ".join(x for x in (flags, reason) if x)]
        else:
            tail = [", ".join(r.flags), reason]
        rows.append(
            [
                r.op,
                str(r.status),
                _fmt_tests(r),
                _fmt_speedup(_as_float(r.geomean_speedup)),
                _fmt_error(r.max_error("max_abs_error"))
                if narrow
                else error_with_tolerance(r, correctness),
                *tail,
            ]
        )
    headers = ["operator", "status", "passed", "speedup", "max err"]
    headers += ["flags · reason"] if narrow else ["flags", "reason"]
    widths = [max([len(h)] + [len(row[i]) for row in rows]) for i, h in enumerate(headers)]
    if not narrow:
        widths[5] = min(widths[5], 30)
    # The operator and the last column share what the others (and padding, borders) leave.
    available = console.width - sum(widths[1:-1]) - (3 * len(headers) + 1)
    widths[0] = min(widths[0], 40, max(12, available // 2))
    widths[-1] = max(12, min(widths[-1], available - widths[0]))
    for i, header in enumerate(headers):
        last = i == len(headers) - 1
        table.add_column(
            header,
            width=widths[i],
            justify="right" if 2 <= i <= 4 else "left",
            overflow="ellipsis" if last else "fold",
            no_wrap=last,
        )
    for r, row in zip(report.operators, rows, strict=True):
        # Text(), not str: an error message like "[0, 1]" must not be read as rich markup.
        cells = [Text(cell) for cell in row]
        cells[1].stylize(_STATUS_STYLE.get(r.status, ""))
        table.add_row(*cells)
    console.print(table)
    legend = tolerance_legend(report.operators, correctness) if narrow else ""
    if legend:
        console.print(Text(legend, style="dim"))
    n = scores["num_operators"]
    line = (
        f"correctness {scores['num_passed']}/{n} ({scores['correctness_score']:.1%})"
        f" · mean pass rate {scores['mean_pass_rate']:.1%}"
        f" · performance {_performance_text(scores, report.device)}"
    )
    if scores["performance_score"] is not None:
        line += "".join(f" · {k} {_fmt_share(scores[k])}" for k in FAST_P)
    console.print(Text(line))
    if report.excluded:
        console.print(Text(f"excluded operators: {len(report.excluded)} (listed in {SUMMARY_MD})"))
    for note in report.notes:
        console.print(Text(f"note: {note}", style="dim"))
    if report.run_dir is not None:
        console.print(Text(f"reports: {report.run_dir}"))
