"""Evaluation reports: the scores, and the files every evaluation writes.

Contract:
- `Report` holds one evaluation: run metadata, one `OperatorResult` per *selected* operator
  (missing and crashing kernels included), the exclusions with their reasons, suite, device,
  notes and the scoring profile. `Report.scores` is `compute_scores(operators, profile)`.
- `compute_scores` under `strict` puts every selected operator in the denominator: an operator
  that is missing, errored, was rejected or skipped counts as a failure, never silently dropped.
  Under `backendbench` it scores as BackendBench does: operators whose kernel is missing or does
  not import are left out (`num_scored` says how many count), and an operator's performance is the
  geomean over its timed tests with a test that did not pass counting 1.0. Performance scores are
  `None` (shown as "not measured") when no operator has a measured speedup, as on the CPU: a
  number there would be invented.
- `write_reports(run_dir, report)` writes, each atomically: `atenforge_results.json` (our object,
  schema_version 1), and BackendBench's four files with its content plus ours
  (`full_results.json`, `failed_tests.json`, `operator_summary.csv`, `OVERALL_SUMMARY.md`; see
  evaluator.reports.backendbench_report). `load_report(run_dir)` reads `atenforge_results.json` back into
  a `Report`. The file names live in evaluator.reports.runfolder.
- `print_summary(report, console)` prints a rich table; user text (errors) is never parsed as
  rich markup, and a console that is not a terminal gets plain text.
"""

from __future__ import annotations

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
from evaluator.reports import backendbench_report as bb
from evaluator.reports.backendbench_report import CSV_COLUMNS
from evaluator.reports.runfolder import (
    BB_FAILED_TESTS,
    BB_FULL_RESULTS,
    OPERATOR_CSV,
    RESULTS_JSON,
    SUMMARY_MD,
    results_file,
    write_json,
    write_text,
)
from evaluator.results import OperatorResult, Status, TestResult, flag_name

__all__ = [
    "BB_FAILED_TESTS",
    "BB_FULL_RESULTS",
    "CSV_COLUMNS",
    "OPERATOR_CSV",
    "RESULTS_JSON",
    "SUMMARY_MD",
    "Report",
    "compute_scores",
    "load_report",
    "print_summary",
    "write_reports",
]

SCHEMA_VERSION = 1
PROFILES = ("strict", "backendbench")
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


def compute_scores(results: Sequence[OperatorResult], profile: str = "strict") -> dict[str, Any]:
    """Scores over the selected operators; under `strict` every operator is in the denominator.

    - correctness_score: share with status passed.
    - mean_pass_rate: mean of passed/tests (an operator with 0 tests counts 0).
    - performance_score: geomean of per-operator geomean speedups, an operator that did not pass
      or has no speedup counting 1.0 (it falls back to eager).
    - fast_0, fast_1.0, fast_1.2: share that passed with a speedup above p.
    Under `backendbench` the scores are BackendBench's, computed from the records its readers see
    in full_results.json (evaluator.reports.backendbench_report.bb_scores): only operators with records
    count (a missing kernel, one that does not import, or one no test of which could run here has
    none), and an operator's speedup is the geomean over its tests, a test that did not pass
    counting 1.0.
    The performance scores are None when nothing was timed (e.g. on the CPU).
    Also num_operators (selected), num_scored (in the denominators), num_<status> for each status.
    """
    if profile not in PROFILES:
        raise ValueError(f"unknown scoring profile {profile!r}")
    n = len(results)
    scores: dict[str, Any] = {"num_operators": n, "profile": profile}
    for status in Status:
        scores[f"num_{status}"] = sum(1 for r in results if r.status == status)
    if profile == "backendbench":
        return scores | _backendbench_scores(results)
    scores["num_scored"] = n
    passed = [r for r in results if r.status == Status.PASSED]
    scores["correctness_score"] = len(passed) / n if n else 0.0
    scores["mean_pass_rate"] = sum(r.pass_rate for r in results) / n if n else 0.0
    scores.update(shown_hidden_rates(results))

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


def shown_hidden_rates(results: Sequence[OperatorResult]) -> dict[str, Any]:
    """Pass rates over all tests of shown cases and of hidden ones (None where there were none):
    a kernel fitted to the shown shapes shows as a gap between the two."""
    hidden = sum(r.hidden_tests for r in results)
    hidden_ok = sum(r.hidden_passed for r in results)
    shown = sum(r.tests for r in results) - hidden
    shown_ok = sum(r.passed for r in results) - hidden_ok
    return {
        "shown_pass_rate": shown_ok / shown if shown else None,
        "hidden_pass_rate": hidden_ok / hidden if hidden else None,
        "num_hidden_tests": hidden,
    }


def _backendbench_scores(results: Sequence[OperatorResult]) -> dict[str, Any]:
    records = bb.records(list(results), "backendbench")
    ours = bb.bb_scores(records)
    n = ours["num_operators"]
    rates = [bb.bb_columns(recs, n)["correctness_rate"] for recs in bb.by_op(records).values()]
    scores: dict[str, Any] = {
        "num_scored": n,
        "correctness_score": ours["correctness_score"] or 0.0,
        "mean_pass_rate": sum(rates) / n if n else 0.0,
        "performance_score": ours["performance_score"],
    }
    for key, p in FAST_P.items():
        scores[key] = bb.bb_scores(records, p)[f"perf@{p}"]
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
    profile: str = "strict"  # the scoring profile (evaluator.config tolerance_profile)

    @property
    def scores(self) -> dict[str, Any]:
        return compute_scores(self.operators, self.profile)

    def command(self) -> str:
        """The command line that produced the run, as one string: from the run folder's run.json
        (where the agent records the command it was given), else from the run metadata."""
        command = None
        if self.run_dir is not None:
            try:
                command = json.loads((Path(self.run_dir) / "run.json").read_text()).get("command")
            except (OSError, ValueError, AttributeError):
                command = None
        command = command or _environment(self.run).get("command")
        if isinstance(command, list | tuple):
            return " ".join(str(c) for c in command)
        return str(command or "")

    def to_json(self) -> dict[str, Any]:
        """The `atenforge_results.json` object, plus suite, device, profile, excluded, notes."""
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
            "profile": self.profile,
            "run": self.run,
            "scores": self.scores,
            "operators": operators,
            "excluded": [{"op": op, "reason": reason} for op, reason in self.excluded],
            "notes": list(self.notes),
        }


def write_reports(run_dir: str | Path, report: Report) -> dict[str, Path]:
    """Write atenforge_results.json and BackendBench's four report files into `run_dir`."""
    run_dir = Path(run_dir)
    paths = {
        "json": run_dir / RESULTS_JSON,
        "bb_json": run_dir / BB_FULL_RESULTS,
        "bb_failed": run_dir / BB_FAILED_TESTS,
        "csv": run_dir / OPERATOR_CSV,
        "md": run_dir / SUMMARY_MD,
    }
    records = bb.records(report.operators, report.profile, report.device or None)
    write_json(paths["json"], report.to_json())
    write_text(paths["bb_json"], bb.dump_records(records))
    write_text(paths["bb_failed"], bb.dump_records(bb.failed(records)))
    write_text(paths["csv"], bb.render_csv(report.operators, records))
    write_text(paths["md"], render_markdown(report, records))
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
    """Read `run_dir/atenforge_results.json` back into a Report (scores are recomputed). A run
    folder written before that file existed (the object in full_results.json) also loads."""
    run_dir = Path(run_dir)
    path = results_file(run_dir)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise UsageError(
            f"no {RESULTS_JSON} in '{run_dir}': pass a run folder written by an evaluation."
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
        profile=data.get("profile") if data.get("profile") in PROFILES else "strict",
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
    if r.hidden_tests:
        text += f" (hidden {r.hidden_passed}/{r.hidden_tests})"
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


def render_markdown(report: Report, records: list[dict[str, Any]] | None = None) -> str:
    """OVERALL_SUMMARY.md: BackendBench's sections first, then ours: scores, environment,
    per-operator table, exclusions, notes."""
    scores = report.scores
    if records is None:
        records = bb.records(report.operators, report.profile, report.device or None)
    head = bb.markdown_head(report.command(), scores, records, report.profile)
    n = scores["num_operators"]
    env = _environment(report.run)
    lines: list[str] = [head, f"# atenforge evaluation: {report.suite or 'custom'} suite", ""]
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
    if scores.get("hidden_pass_rate") is not None:
        lines.append(
            f"| shown / hidden pass rate | {_fmt_share(scores['shown_pass_rate'])} / "
            f"{_fmt_share(scores['hidden_pass_rate'])} ({scores['num_hidden_tests']} hidden tests) "
            "| tests passed on cases the prompts showed / on cases no prompt showed |"
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
    if scores["num_scored"] != n:
        lines += [_scored_text(scores), ""]
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
        ("containment", env.get("containment")),
        ("kernels", _first(env, "kernels_dir")),
        ("started", _first(env, "started", "started_at", "start")),
        ("finished", _first(env, "finished", "ended_at", "end")),
    ]
    command = report.command()
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


def backendbench_lines(scores: dict[str, Any]) -> list[str]:
    """The three score lines BackendBench prints, with these scores (N/A where not measured)."""

    def num(value: float | None) -> str:
        return "N/A" if value is None else f"{value:.2f}"

    return [
        f"correctness score (mean pass rate over all operators): {num(scores['correctness_score'])}",
        f"performance score (geomean speedup over all operators): {num(scores['performance_score'])}",
        "perf@p score (rate of correct samples with a speedup greater than p, p=1.0): "
        + num(scores["fast_1.0"]),
    ]


def _scored_text(scores: dict[str, Any]) -> str:
    left_out = scores["num_operators"] - scores["num_scored"]
    return (
        f"Scored over {scores['num_scored']} of {scores['num_operators']} operators: under the "
        f"{scores['profile']} profile the {left_out} whose kernel is missing or does not import "
        "are left out, as BackendBench leaves them out."
    )


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
    if scores["profile"] == "backendbench":
        # BackendBench's own three lines, with its wording, so the numbers compare at a glance.
        for text in backendbench_lines(scores):
            console.print(Text(text))
    if scores["num_scored"] != n:
        console.print(Text(_scored_text(scores)))
    if report.excluded:
        console.print(Text(f"excluded operators: {len(report.excluded)} (listed in {SUMMARY_MD})"))
    for note in report.notes:
        console.print(Text(f"note: {note}", style="dim"))
    if report.run_dir is not None:
        console.print(Text(f"reports: {report.run_dir}"))
