"""BackendBench's report files from an atenforge evaluation: its names, keys, columns and types, plus ours.

A script written for BackendBench's reports reads ours unchanged. What BackendBench writes (checked
against its output at commit 66e0dbc):
- `full_results.json`: a flat list of per-test records sorted by (op_name, args). A correctness
  record has `op_name, args, is_correct, error_msg, error_type, traceback, max_abs_error,
  max_rel_error, test_type="correctness"`; a performance record `op_name, args, speedup,
  benchmark_time_ms, reference_time_ms, error_msg, successfully_ran, test_type="performance"`.
  Error numbers a test did not produce are -inf, as in BackendBench (Python's json writes
  `-Infinity`); `args` is BackendBench's serialization (`serialize_case_backendbench`).
- `failed_tests.json`: the records that did not pass (not correct / not successfully run).
- `operator_summary.csv`: one row per operator, BackendBench's columns in its order
  (`BB_CSV_COLUMNS`; its `total_tests` holds the number of operators with records, as its code
  computes it), followed by ours (`OUR_CSV_COLUMNS`).
- `OVERALL_SUMMARY.md` starts with its sections (`markdown_head`).

Contract:
- `in_run(result, profile)`: whether an operator has records. Under `backendbench` an operator
  whose kernel is missing or does not import is left out, as BackendBench's DirectoryBackend never
  loads it; under `strict` every operator is in (a missing one has one failed record per case).
- `records(report)`: correctness records for every test that ran (under `strict` also the tests
  of an operator none of whose tests could run, not correct), then, when the run measured
  performance, one performance record per test that ran; each record carries our fields after
  BackendBench's (`flags`, `operator_status`, and timing details on performance records).
- `bb_scores(records)`: correctness, performance and perf@1.0 computed from the records as
  BackendBench computes them (performance None when no performance record exists).
- Performance is never invented: a CPU run writes no performance records.
"""

from __future__ import annotations

import csv
import io
import json
import math
from collections import defaultdict
from typing import Any

from evaluator.cases.testcase import (
    CaseSyntaxError,
    Device,
    parse_case,
    serialize_case_backendbench,
)
from evaluator.reports.runfolder import (
    BB_FAILED_TESTS,
    BB_FULL_RESULTS,
    OPERATOR_CSV,
    RESULTS_JSON,
    SUMMARY_MD,
)
from evaluator.results import Flag, OperatorResult, Status, TestResult, flag_name

BB_CSV_COLUMNS = [
    "operator",
    "total_tests",
    "correctness_tests",
    "performance_tests",
    "passed_correctness_tests",
    "passed_performance_tests",
    "failed_correctness_tests",
    "failed_performance_tests",
    "correctness_rate",
    "avg_speedup",
    "geomean_speedup",
    "max_absolute_error",
    "max_relative_error",
]
OUR_CSV_COLUMNS = [
    "status",
    "tests",
    "passed",
    "pass_rate",
    "max_abs_error",
    "max_rel_error",
    "flags",
    "skipped_tests",
    "reason",
    "kernel_file",
    "hidden_tests",
    "hidden_passed",
]
CSV_COLUMNS = BB_CSV_COLUMNS + OUR_CSV_COLUMNS
PERF_P = 1.0  # BackendBench's default perf@p threshold
_LOAD_FLAGS = {Flag.IMPORT_ERROR, Flag.MISSING_FUNCTION}


def in_run(result: OperatorResult, profile: str) -> bool:
    """Whether the operator counts (has records) under `profile`."""
    if profile != "backendbench":
        return True
    if result.status == Status.MISSING:
        return False
    loads = not any(flag_name(f) in _LOAD_FLAGS for f in result.flags)
    return loads or result.status != Status.ERROR


def bb_args(text: str, device: str | None = None) -> str:
    """Our case text in BackendBench's record form (unchanged when it does not parse). BackendBench
    writes the arguments the call received, so with `device` a device in the case is written as the
    device the test ran on."""
    try:
        case = parse_case(text)
    except CaseSyntaxError:
        return text
    if device is None:
        return serialize_case_backendbench(case.args, case.kwargs)
    args = _on_device(case.args, device)
    kwargs = {
        k: device if k == "device" and isinstance(v, str) else _on_device(v, device)
        for k, v in case.kwargs.items()
    }
    return serialize_case_backendbench(args, kwargs)


def _on_device(value: Any, device: str) -> Any:
    if isinstance(value, Device):
        return device
    if isinstance(value, list | tuple):
        return type(value)(_on_device(v, device) for v in value)
    return value


def _error_number(value: float | None) -> float:
    return -math.inf if value is None else float(value)


def correctness_record(
    result: OperatorResult, test: TestResult, device: str | None = None
) -> dict[str, Any]:
    """A test of a rejected operator is not correct, whatever its own comparison said: the
    operator's kernel cheated."""
    rejected = result.status == Status.REJECTED
    message = test.error_msg or ""
    if rejected and test.passed:
        message = f"operator rejected: {result.reason or ', '.join(result.flags)}"
    if test.skipped:
        message = f"not run here: {test.error_msg or result.reason}"
    return {
        "op_name": result.op,
        "args": bb_args(test.args, device),
        "is_correct": bool(test.passed) and not rejected and not test.skipped,
        "error_msg": message,
        "error_type": test.error_type
        or ("Rejected" if rejected else "Skipped" if test.skipped else ""),
        "traceback": "",
        "max_abs_error": _error_number(test.max_abs_error),
        "max_rel_error": _error_number(test.max_rel_error),
        "test_type": "correctness",
        "flags": list(test.flags),
        "operator_status": str(result.status),
    }


def performance_record(
    result: OperatorResult, test: TestResult, device: str | None = None
) -> dict[str, Any]:
    ran = (
        bool(test.passed)
        and result.status != Status.REJECTED
        and test.speedup is not None
        and test.kernel_ms is not None
    )
    if ran:
        message = ""
    elif test.passed:
        message = test.error_msg or "not timed"
    else:
        message = f"not timed: the test did not pass ({test.error_type or 'failed'})"
    return {
        "op_name": result.op,
        "args": bb_args(test.args, device),
        "speedup": test.speedup if ran else None,
        "benchmark_time_ms": test.kernel_ms if ran else None,
        "reference_time_ms": test.eager_ms,
        "error_msg": message,
        "successfully_ran": ran,
        "test_type": "performance",
        "floor_ms": test.floor_ms,
        "kernel_host_ms": test.kernel_host_ms,
        "eager_host_ms": test.eager_host_ms,
        "l2_state": test.l2_state,
        "flags": list(test.flags),
        "operator_status": str(result.status),
    }


def performance_measured(operators: list[OperatorResult]) -> bool:
    """Whether any test was timed: only then are performance records written."""
    return any(t.speedup is not None for r in operators for t in r.results)


def records(
    operators: list[OperatorResult], profile: str, device: str | None = None
) -> list[dict[str, Any]]:
    """BackendBench's `full_results.json` list for these operators (see the module contract);
    `device` is where the tests ran (devices in the cases are written as that device)."""
    timed = performance_measured(operators)
    correctness: list[dict[str, Any]] = []
    performance: list[dict[str, Any]] = []
    for r in operators:
        if not in_run(r, profile):
            continue
        # Tests that could not run here have no record, as BackendBench has none for them; but
        # under strict an operator none of whose tests ran counts as a failure, so its tests
        # appear, not correct, and a reader of the records counts it as we do.
        show_skipped = profile != "backendbench" and r.status == Status.SKIPPED
        for t in r.results:
            if t.skipped and not show_skipped:
                continue
            correctness.append(correctness_record(r, t, device))
            if t.skipped:
                continue
            if timed:
                performance.append(performance_record(r, t, device))
    out = correctness + performance
    out.sort(key=lambda x: (x["op_name"], x["args"]))  # stable: correctness first on ties
    return out


def failed(all_records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """BackendBench's `failed_tests.json`: records that are not correct or did not run."""
    return [
        rec
        for rec in all_records
        if (rec["test_type"] == "correctness" and not rec["is_correct"])
        or (rec["test_type"] == "performance" and not rec["successfully_ran"])
    ]


def by_op(all_records: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in all_records:
        grouped[rec["op_name"]].append(rec)
    return grouped


def _geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def bb_columns(op_records: list[dict[str, Any]], num_ops: int) -> dict[str, Any]:
    """BackendBench's summary columns for one operator, computed as its code does (errors and
    speedups that are 0 or missing are left out; 0.0 when nothing is left)."""
    corr = [x for x in op_records if x["test_type"] == "correctness"]
    perf = [x for x in op_records if x["test_type"] == "performance"]
    good = sum(1 for x in corr if x["is_correct"])
    ran = sum(1 for x in perf if x["successfully_ran"])
    errors = [x for x in corr if x["max_abs_error"] and x["max_rel_error"]]
    speedups = [float(x["speedup"]) for x in perf if x["speedup"]]
    return {
        "total_tests": num_ops,
        "correctness_tests": len(corr),
        "performance_tests": len(perf),
        "passed_correctness_tests": good,
        "passed_performance_tests": ran,
        "failed_correctness_tests": len(corr) - good,
        "failed_performance_tests": len(perf) - ran,
        "correctness_rate": good / len(corr) if corr else 0.0,
        "avg_speedup": sum(speedups) / len(speedups) if speedups else 0.0,
        "geomean_speedup": _geomean(speedups) if speedups and min(speedups) > 0 else 0.0,
        "max_absolute_error": max((float(x["max_abs_error"]) for x in errors), default=0.0),
        "max_relative_error": max((float(x["max_rel_error"]) for x in errors), default=0.0),
    }


def _op_performance(op_records: list[dict[str, Any]]) -> float | None:
    """BackendBench's per-operator performance: geomean over its timed tests, a test that did not
    run successfully counting 1.0 (the backend falls back to eager). None without any."""
    perf = [x for x in op_records if x["test_type"] == "performance"]
    if not perf:
        return None
    return _geomean([float(x["speedup"]) if x["successfully_ran"] else 1.0 for x in perf])


def bb_scores(all_records: list[dict[str, Any]], p: float = PERF_P) -> dict[str, Any]:
    """BackendBench's three numbers from its records: mean over operators of "every correctness
    test passed", geomean over operators of their performance, and the share of operators that are
    correct with performance above p. Performance numbers are None when nothing was timed."""
    grouped = by_op(all_records)
    correct = {
        op: all(x["is_correct"] for x in recs if x["test_type"] == "correctness")
        for op, recs in grouped.items()
    }
    perf = {op: _op_performance(recs) for op, recs in grouped.items()}
    n = len(grouped)
    scores: dict[str, Any] = {
        "num_operators": n,
        "correctness_score": sum(correct.values()) / n if n else None,
        "performance_score": None,
        f"perf@{p}": None,
    }
    if n and all(v is not None for v in perf.values()):
        values = [v for v in perf.values() if v is not None]
        scores["performance_score"] = _geomean(values)
        scores[f"perf@{p}"] = sum(1 for op in grouped if correct[op] and perf[op] > p) / n
    return scores


# --------------------------------------------------------------------------- files


def render_csv(operators: list[OperatorResult], all_records: list[dict[str, Any]]) -> str:
    """operator_summary.csv: a row per operator, BackendBench's columns then ours. Numbers are
    written as Python's `str` writes them (BackendBench's csv.DictWriter does the same)."""
    grouped = by_op(all_records)
    buf = io.StringIO()
    writer = csv.writer(buf, lineterminator="\r\n")
    writer.writerow(CSV_COLUMNS)
    for r in operators:
        bb = bb_columns(grouped.get(r.op, []), len(grouped))
        ours = {
            "status": str(r.status),
            "tests": r.tests,
            "passed": r.passed,
            "pass_rate": round(r.pass_rate, 4),
            "max_abs_error": _csv_float(r.max_error("max_abs_error")),
            "max_rel_error": _csv_float(r.max_error("max_rel_error")),
            "flags": ";".join(r.flags),
            "skipped_tests": r.skipped_tests,
            "reason": " ".join(r.reason.split()),
            "kernel_file": r.kernel_file or "",
            "hidden_tests": r.hidden_tests,
            "hidden_passed": r.hidden_passed,
        }
        writer.writerow([r.op] + [bb[c] for c in BB_CSV_COLUMNS[1:]] + list(ours.values()))
    return buf.getvalue()


def _csv_float(value: float | None) -> str:
    if value is None:
        return ""
    return str(value) if not math.isfinite(value) else format(value, ".6g")


def dump_records(data: list[dict[str, Any]]) -> str:
    """JSON as BackendBench writes it (indent 2; -inf as `-Infinity`, which Python's json reads)."""
    return json.dumps(data, indent=2)


def _percent(share: float) -> str:
    return f"{share * 100:.4f}%"


def _speedup_rows(all_records: list[dict[str, Any]]) -> list[tuple[str, str, str]]:
    """(operator, correctness ratio, speedup) strings, sorted as BackendBench sorts them (by the
    strings, descending)."""
    rows = []
    for op, recs in by_op(all_records).items():
        corr = [x for x in recs if x["test_type"] == "correctness"]
        ratio = _percent(sum(1 for x in corr if x["is_correct"]) / len(corr)) if corr else "N/A"
        perf = _op_performance(recs)
        rows.append((op, ratio, f"{perf:.4f}x" if perf is not None else "N/A"))
    rows.sort(key=lambda x: (x[2], x[1]), reverse=True)
    return rows


def markdown_head(
    command: str, scores: dict[str, Any], all_records: list[dict[str, Any]], profile: str
) -> str:
    """BackendBench's OVERALL_SUMMARY.md sections with this run's numbers (the profile's scores);
    a number that was not measured is `N/A`, as BackendBench writes a missing speedup."""

    def num(value: float | None) -> str:
        return "N/A" if value is None else f"{value:.2f}"

    lines = [
        "# atenforge Run Summary (BackendBench format)\n",
        "## Command",
        "```bash",
        command,
        "```\n",
        "## Results\n",
        "| Metric | Value |",
        "|--------|-------|",
        f"| Correctness Score | {num(scores.get('correctness_score'))} |",
        f"| Performance Score (geomean speedup) | {num(scores.get('performance_score'))} |",
        f"| Perf@{PERF_P} Score | {num(scores.get('fast_1.0'))} |",
        "",
        "### Metric Descriptions\n",
        "- **Correctness Score**: Mean pass rate over all operators",
        "- **Performance Score**: Geometric mean speedup over all operators",
        f"- **Perf@{PERF_P} Score**: Rate of correct samples with a speedup greater than {PERF_P}",
        f"- Scored under the `{profile}` profile",
        "",
        "## Output Files\n",
        "The following files are saved in this directory:\n",
        f"- `{BB_FULL_RESULTS}`: Complete test results for all operators",
        f"- `{OPERATOR_CSV}`: Operator-level summary statistics",
        f"- `{BB_FAILED_TESTS}`: Log of failed tests (if any)",
        f"- `{SUMMARY_MD}`: This file",
        f"- `{RESULTS_JSON}`: atenforge's results: statuses, flags, reasons, timings",
        "### Operator Speedups vs Eager in Descending Order\n",
        "| Operator | Correctness Ratio | Speedup vs Eager |",
        "|----------|-----------|----------------|",
    ]
    lines += [f"| {op} | {ratio} | {speedup}|" for op, ratio, speedup in _speedup_rows(all_records)]
    lines.append("")
    return "\n".join(lines)
