"""Scores and report files: every selected operator counts, CPU performance is never
a number, and the three report files hold what their schemas promise."""

from __future__ import annotations

import csv
import io
import json
import math
from pathlib import Path

import pytest
from rich.console import Console

from evaluator.errors import UsageError
from evaluator.reports.report import (
    CSV_COLUMNS,
    OPERATOR_CSV,
    RESULTS_JSON,
    SUMMARY_MD,
    Report,
    compute_scores,
    host_time_summary,
    load_report,
    print_summary,
    render_markdown,
    write_reports,
)
from evaluator.results import Flag, OperatorResult, Status
from evaluator.results import TestResult as CaseResult  # not "Test*": pytest would collect it


def op(
    name: str,
    status: Status,
    tests: int = 2,
    passed: int | None = None,
    speedup: float | None = None,
    **kw,
) -> OperatorResult:
    if passed is None:
        passed = tests if status == Status.PASSED else 0
    folder = name.replace(".", "__")
    return OperatorResult(
        op=name,
        folder=folder,
        status=status,
        tests=tests,
        passed=passed,
        geomean_speedup=speedup,
        **kw,
    )


def sample_report(device: str = "cpu", run_dir: Path | None = None) -> Report:
    results = [
        CaseResult(
            args="((T([4], f32),), {})", passed=True, max_abs_error=1e-7, max_rel_error=2e-7
        ),
        CaseResult(
            args="((T([5], f32),), {})",
            passed=False,
            max_abs_error=math.inf,
            max_rel_error=0.5,
            error_type="AssertionError",
            error_msg="wrong values at [0, 1]",
            flags=[Flag.WRONG_VALUES],
        ),
    ]
    return Report(
        run={
            "command": ["python", "-m", "agent.run", "--evaluate-only"],
            "started": "2026-11-30T00:00:00+00:00",
            "finished": "2026-11-30T00:01:00+00:00",
            "environment": {
                "project": "0.1.0",
                "python": "3.11.7",
                "torch": "2.13.0+cpu",
                "triton": "3.9.0",
                "gpu": "cpu-interpreter",
            },
        },
        operators=[
            op("relu.default", Status.PASSED, kernel_file="relu__default/x.py"),
            op(
                "add.Tensor",
                Status.FAILED,
                passed=1,
                results=results,
                flags=[Flag.WRONG_VALUES],
                reason="add.Tensor: 1/2 tests wrong | max abs error inf\nsecond line",
            ),
            op("mul.Tensor", Status.MISSING, tests=0, reason="no kernel file"),
            op("sum.dim_IntList", Status.REJECTED, flags=["aten_fallback:aten.sum.dim_IntList"]),
        ],
        excluded=[("randn.default", "random op: output cannot be compared")],
        suite="smoke",
        device=device,
        notes=["bf16 cases are unreliable in the interpreter"],
        run_dir=run_dir,
    )


# --------------------------------------------------------------------------- scores


def test_scores_missing_operator_counts_in_denominator():
    scores = compute_scores([op("a.default", Status.PASSED), op("b.default", Status.MISSING, 0)])
    assert scores["num_operators"] == 2
    assert scores["correctness_score"] == 0.5
    assert scores["num_missing"] == 1 and scores["num_passed"] == 1


def test_scores_without_any_speedup_have_no_performance_number():
    scores = compute_scores([op("a.default", Status.PASSED), op("b.default", Status.FAILED)])
    assert scores["performance_score"] is None
    assert scores["fast_0"] is None and scores["fast_1.0"] is None and scores["fast_1.2"] is None


def test_scores_mean_pass_rate_counts_zero_test_operator_as_zero():
    scores = compute_scores(
        [
            op("a.default", Status.PASSED, tests=4),
            op("b.default", Status.FAILED, tests=4, passed=1),
            op("c.default", Status.SKIPPED, tests=0),
        ]
    )
    assert scores["mean_pass_rate"] == pytest.approx((1.0 + 0.25 + 0.0) / 3)


def test_scores_performance_counts_failed_and_unmeasured_operators_as_one():
    scores = compute_scores(
        [
            op("a.default", Status.PASSED, speedup=4.0),
            op("b.default", Status.FAILED, speedup=100.0),  # did not pass: eager fallback
            op("c.default", Status.PASSED, speedup=None),
            op("d.default", Status.MISSING, tests=0),
        ]
    )
    assert scores["performance_score"] == pytest.approx(4.0 ** (1 / 4))


def test_scores_fast_p_thresholds_are_strict_and_need_a_pass():
    scores = compute_scores(
        [
            op("a.default", Status.PASSED, speedup=0.5),
            op("b.default", Status.PASSED, speedup=1.0),
            op("c.default", Status.PASSED, speedup=1.2),
            op("d.default", Status.PASSED, speedup=2.0),
            op("e.default", Status.FAILED, speedup=3.0),
        ]
    )
    assert scores["fast_0"] == pytest.approx(4 / 5)
    assert scores["fast_1.0"] == pytest.approx(2 / 5)
    assert scores["fast_1.2"] == pytest.approx(1 / 5)


def test_scores_of_empty_selection_are_zero_not_division_error():
    scores = compute_scores([])
    assert scores["num_operators"] == 0
    assert scores["correctness_score"] == 0.0 and scores["performance_score"] is None


def test_report_scores_property_matches_compute_scores():
    report = sample_report()
    assert report.scores == compute_scores(report.operators)


# --------------------------------------------------------------------------- files


def test_csv_has_required_columns_and_one_row_per_operator(tmp_path):
    report = sample_report()
    write_reports(tmp_path, report)
    with open(tmp_path / OPERATOR_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    assert list(rows[0].keys()) == CSV_COLUMNS
    assert [r["operator"] for r in rows] == [o.op for o in report.operators]
    add = rows[1]
    assert add["status"] == "failed" and add["pass_rate"] == "0.5"
    assert add["max_abs_error"] == "inf" and add["flags"] == "wrong_values"
    assert "\n" not in add["reason"]


def test_csv_joins_several_flags_with_semicolons(tmp_path):
    report = sample_report()
    report.operators[0].flags = ["overhead_dominated", "interpreter_bf16"]
    write_reports(tmp_path, report)
    with open(tmp_path / OPERATOR_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    assert rows[0]["flags"] == "overhead_dominated;interpreter_bf16"


def test_json_has_design_schema_keys(tmp_path):
    write_reports(tmp_path, sample_report())
    data = json.loads((tmp_path / RESULTS_JSON).read_text())
    assert data["schema_version"] == 1
    assert {"run", "scores", "operators", "excluded", "notes"} <= data.keys()
    entry = data["operators"][1]
    op_keys = {"op", "folder", "status", "flags", "tests", "passed", "geomean_speedup"}
    assert op_keys | {"kernel_file", "reason", "results"} <= entry.keys()
    result_keys = {"args", "passed", "max_abs_error", "max_rel_error", "error_type", "error_msg"}
    result_keys |= {"speedup", "kernel_ms", "eager_ms", "flags"}
    assert result_keys <= entry["results"][0].keys()
    assert entry["results"][1]["max_abs_error"] == "inf"  # JSON has no inf
    assert data["excluded"] == [
        {"op": "randn.default", "reason": "random op: output cannot be compared"}
    ]


def test_json_scores_performance_is_null_on_cpu(tmp_path):
    write_reports(tmp_path, sample_report(device="cpu"))
    data = json.loads((tmp_path / RESULTS_JSON).read_text())
    assert data["scores"]["performance_score"] is None


def test_load_report_round_trips_write_reports(tmp_path):
    report = sample_report(run_dir=tmp_path)
    write_reports(tmp_path, report)
    loaded = load_report(tmp_path)
    assert loaded.operators == report.operators  # includes inf restored from "inf"
    assert loaded.excluded == report.excluded
    assert (loaded.suite, loaded.device, loaded.notes) == ("smoke", "cpu", report.notes)
    assert loaded.run == report.run
    assert loaded.scores == report.scores


def test_load_report_without_results_is_usage_error(tmp_path):
    with pytest.raises(UsageError, match="atenforge_results.json"):
        load_report(tmp_path)


def test_markdown_lists_every_operator_and_exclusion(tmp_path):
    report = sample_report()
    write_reports(tmp_path, report)
    md = (tmp_path / SUMMARY_MD).read_text()
    for o in report.operators:
        assert f"`{o.op}`" in md
    assert "## Excluded operators" in md
    assert "`randn.default`: random op: output cannot be compared" in md
    assert "bf16 cases are unreliable" in md


def test_markdown_says_performance_not_measured_on_cpu(tmp_path):
    write_reports(tmp_path, sample_report(device="cpu"))
    md = (tmp_path / SUMMARY_MD).read_text()
    assert "not measured (no GPU)" in md
    assert "cpu-interpreter" in md and "2.13.0+cpu" in md and "2026-11-30T00:00:00" in md


def test_markdown_table_escapes_pipes_and_newlines_in_reasons(tmp_path):
    write_reports(tmp_path, sample_report())
    md = (tmp_path / SUMMARY_MD).read_text()
    row = next(line for line in md.splitlines() if line.startswith("| `add.Tensor`"))
    assert "\\|" in row and row.count(" | ") == 7


def test_markdown_shows_performance_number_when_measured(tmp_path):
    report = sample_report(device="cuda")
    report.operators[0].geomean_speedup = 2.0
    write_reports(tmp_path, report)
    md = (tmp_path / SUMMARY_MD).read_text()
    assert f"{2.0 ** (1 / 4):.3f}×" in md and "not measured (no GPU)" not in md


# --------------------------------------------------------------------------- console


def test_print_summary_renders_plain_text_without_terminal():
    buf = io.StringIO()
    console = Console(file=buf, width=160)
    print_summary(sample_report(), console)
    out = buf.getvalue()
    assert "\x1b[" not in out
    assert "relu.default" in out and "missing" in out
    assert "not measured (no GPU)" in out


def test_print_summary_does_not_read_error_text_as_markup():
    report = sample_report()
    report.operators[1].reason = "[bold]IndexError[/bold]: index [0, 1] out of range"
    buf = io.StringIO()
    print_summary(report, Console(file=buf, width=200))
    assert "[bold]IndexError[/bold]" in buf.getvalue()


def test_print_summary_fits_an_80_column_console():
    report = sample_report()
    report.operators[1].reason = "x" * 300
    buf = io.StringIO()
    print_summary(report, Console(file=buf, width=80))
    assert max(len(line) for line in buf.getvalue().splitlines()) <= 80


def test_markdown_reports_host_time_apart_when_measured(tmp_path):
    report = sample_report(device="cuda")
    assert "Host time" not in render_markdown(report)
    timed = [
        # GPU-bound: kernel 10 us vs eager 20 us on the GPU; host 30 vs 10 us per call
        CaseResult(
            args="a",
            passed=True,
            speedup=2.0,
            kernel_ms=0.010,
            eager_ms=0.020,
            kernel_host_ms=0.030,
            eager_host_ms=0.010,
        ),
        CaseResult(
            args="b",
            passed=True,
            speedup=1.0,
            kernel_ms=0.100,
            eager_ms=0.100,
            kernel_host_ms=0.020,
            eager_host_ms=0.020,
        ),
    ]
    report.operators[0].results = timed
    host = host_time_summary(report)
    assert host is not None and host["cases"] == 2
    assert host["host_ratio"] == pytest.approx(math.sqrt(3.0 * 1.0))
    # case a: max(20, 10) / max(10, 30) = 2/3; case b: 1
    assert host["loop_speedup"] == pytest.approx(math.sqrt(2 / 3))
    assert "the geomean speedup would be 0.816×" in render_markdown(report)
