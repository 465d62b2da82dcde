"""Our BackendBench-format reports against BackendBench's own output (tests/fixtures/backendbench):
every key and column of theirs with the same types, on the same cases; a reader written the way
BackendBench's consumers read its files works on ours; and the backendbench profile's scores are
the numbers that reader computes."""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from evaluator.reports import backendbench_report as bb
from evaluator.reports.report import Report, load_report, print_summary, write_reports
from evaluator.reports.runfolder import (
    BB_FAILED_TESTS,
    BB_FULL_RESULTS,
    OPERATOR_CSV,
    RESULTS_JSON,
    SUMMARY_MD,
)
from evaluator.results import Flag, OperatorResult, Status, TestResult

BB = Path(__file__).resolve().parents[1] / "fixtures" / "backendbench"
REFERENCE = {"smoke": BB / "bb_smoketrace_out", "tb": BB / "bb_tb_out"}


# --------------------------------------------------------------------------- a consumer's reader


def read_like_a_backendbench_user(folder: Path) -> dict[str, Any]:
    """What a script written for BackendBench's reports does with a folder of them."""
    records = json.loads((folder / BB_FULL_RESULTS).read_text())
    failed = json.loads((folder / BB_FAILED_TESTS).read_text())
    with open(folder / OPERATOR_CSV, newline="") as f:
        rows = list(csv.DictReader(f))
    md = (folder / SUMMARY_MD).read_text()
    per_op: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for rec in records:
        per_op[rec["op_name"]].append(rec)
    correct = {
        op: all(r["is_correct"] for r in recs if r["test_type"] == "correctness")
        for op, recs in per_op.items()
    }
    table = {}
    for row in rows:
        table[row["operator"]] = {
            "tests": int(row["correctness_tests"]) + int(row["performance_tests"]),
            "passed": int(row["passed_correctness_tests"]),
            "rate": float(row["correctness_rate"]),
            "speedup": float(row["geomean_speedup"]),
            "errors": (float(row["max_absolute_error"]), float(row["max_relative_error"])),
            "num_ops": int(row["total_tests"]),
        }
    score = re.search(r"^\| Correctness Score \| ([0-9.]+) \|$", md, re.M)
    return {
        "correctness": sum(correct.values()) / len(correct) if correct else None,
        "md_correctness": float(score.group(1)) if score else None,
        "table": table,
        "failed": [(r["op_name"], r["args"]) for r in failed],
        "cases": sorted((r["op_name"], r["args"], r["test_type"]) for r in records),
        "worst_error": max(
            (r["max_abs_error"] for r in records if "max_abs_error" in r), default=0
        ),
    }


def _kind(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _number_kind(text: str) -> str:
    """How a CSV cell reads: int, float or text."""
    for kind, parse in (("int", int), ("float", float)):
        try:
            parse(text)
            return kind
        except ValueError:
            pass
    return "text"


# --------------------------------------------------------------------------- end to end


def _evaluate_parquet(name: str, tmp_path: Path) -> Path:
    from agent.providers.builtin.registry import WRITERS
    from agent.providers.builtin.request import KernelRequest
    from evaluator.cases.suites import select_operators
    from evaluator.config import CorrectnessConfig, EvalConfig
    from evaluator.evaluate import evaluate
    from evaluator.naming import kernel_path

    trace = BB / f"{name}.parquet"
    kdir = tmp_path / "kernels"
    for oc in select_operators(None, trace_file=trace).ops:
        text = WRITERS[oc.op](KernelRequest(op=oc.op, schema="", cases=oc.cases))
        path = kernel_path(kdir, oc.op)
        path.parent.mkdir(parents=True)
        path.write_text(text, encoding="utf-8")
    config = EvalConfig(correctness=CorrectnessConfig(tolerance_profile="backendbench"))
    run = tmp_path / "run"
    evaluate(kdir, trace_file=trace, config=config, device="cpu", run_dir=run)
    return run


@pytest.mark.parametrize(
    "name", ["smoke", pytest.param("tb", marks=pytest.mark.slow)], ids=["smoke", "tb"]
)
def test_parquet_sets_evaluate_to_backendbench_format_files_like_theirs(
    name: str, tmp_path: Path
) -> None:
    ref_dir = REFERENCE[name]
    run = _evaluate_parquet(name, tmp_path)

    # full_results.json: the same correctness cases, each with every key of theirs, same types
    theirs = json.loads((ref_dir / BB_FULL_RESULTS).read_text())
    ours = json.loads((run / BB_FULL_RESULTS).read_text())
    ref_corr = {(r["op_name"], r["args"]): r for r in theirs if r["test_type"] == "correctness"}
    our_corr = {(r["op_name"], r["args"]): r for r in ours if r["test_type"] == "correctness"}
    assert set(our_corr) == set(ref_corr)
    for key, ref in ref_corr.items():
        mine = our_corr[key]
        assert list(mine)[: len(ref)] == list(ref)  # their keys first, in their order
        assert {k: _kind(mine[k]) for k in ref} == {k: _kind(v) for k, v in ref.items()}
        assert mine["is_correct"] == ref["is_correct"]  # the same verdict on the same case
    # on the CPU nothing is timed: no performance record is invented
    assert all(r["test_type"] == "correctness" for r in ours)
    assert [r for r in ours] == sorted(ours, key=lambda r: (r["op_name"], r["args"]))

    # operator_summary.csv: their columns, in their order, then ours; the same kinds of values
    with open(ref_dir / OPERATOR_CSV, newline="") as f:
        ref_rows = {row["operator"]: row for row in csv.DictReader(f)}
    with open(run / OPERATOR_CSV, newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames
        our_rows = {row["operator"]: row for row in reader}
    assert header[: len(bb.BB_CSV_COLUMNS)] == list(next(iter(ref_rows.values())))
    assert len(header) == len(set(header))  # no name twice: a DictReader would lose one
    assert set(our_rows) == set(ref_rows)
    for op, ref in ref_rows.items():
        mine = our_rows[op]
        assert {c: _number_kind(mine[c]) for c in ref} == {
            c: _number_kind(v) for c, v in ref.items()
        }
        same = ("total_tests", "correctness_tests", "passed_correctness_tests", "correctness_rate")
        assert {c: mine[c] for c in same} == {c: ref[c] for c in same}

    # failed_tests.json: a list, empty here as in theirs
    assert json.loads((run / BB_FAILED_TESTS).read_text()) == []

    # OVERALL_SUMMARY.md: their sections first, in their order
    headings = [
        line for line in (ref_dir / SUMMARY_MD).read_text().splitlines() if line.startswith("#")
    ]
    our_md = (run / SUMMARY_MD).read_text()
    ours_head = [line for line in our_md.splitlines() if line.startswith("#")][: len(headings)]
    assert ours_head[1:] == headings[1:]
    assert our_md.index("## Results") < our_md.index("# atenforge evaluation")

    # the same reader works on both, and gives the same numbers on the same cases
    mine, ref = read_like_a_backendbench_user(run), read_like_a_backendbench_user(ref_dir)
    assert mine["correctness"] == ref["correctness"] == mine["md_correctness"] == 1.0
    assert {op: (t["passed"], t["rate"], t["num_ops"]) for op, t in mine["table"].items()} == {
        op: (t["passed"], t["rate"], t["num_ops"]) for op, t in ref["table"].items()
    }
    assert load_report(run).scores["correctness_score"] == mine["correctness"]
    assert json.loads((run / RESULTS_JSON).read_text())["schema_version"] == 1


def test_the_reader_works_on_the_reference_outputs() -> None:
    for folder in REFERENCE.values():
        got = read_like_a_backendbench_user(folder)
        assert got["correctness"] == got["md_correctness"] == 1.0 and got["failed"] == []


# --------------------------------------------------------------------------- synthetic reports


def _test(args: str, passed: bool, speedup: float | None = None, **kw: Any) -> TestResult:
    timed = {"speedup": speedup, "kernel_ms": 0.1, "eager_ms": 0.1 * speedup} if speedup else {}
    return TestResult(args=args, passed=passed, max_abs_error=0.0, max_rel_error=0.0, **timed, **kw)


def _op(name: str, status: Status, tests: list[TestResult], **kw: Any) -> OperatorResult:
    return OperatorResult(
        op=name,
        folder=name.replace(".", "__"),
        status=status,
        tests=len(tests),
        passed=sum(t.passed for t in tests),
        results=tests,
        **kw,
    )


A, B = "((T([4], f32),), {})", "((T([8], f32, [2]),), {})"


def timed_report(profile: str) -> Report:
    """A GPU-like run: timed tests, a failure, a rejection, a missing kernel, an import error."""
    fail = TestResult(args=B, passed=False, error_type="WrongResult", error_msg="off by 1",
                      max_abs_error=1.0, max_rel_error=0.5, flags=[Flag.WRONG_VALUES])  # fmt: skip
    ops = [
        _op("relu.default", Status.PASSED, [_test(A, True, 2.0), _test(B, True, 8.0)],
            geomean_speedup=4.0),
        _op("exp.default", Status.FAILED, [_test(A, True, 3.0), fail]),
        _op("sin.default", Status.REJECTED, [_test(A, True)], flags=["aten_fallback:aten.sin"],
            reason="aten_fallback"),
        _op("cos.default", Status.MISSING, [TestResult(args=A, passed=False, error_type="Missing",
            error_msg="no kernel")], reason="no kernel"),
        _op("tan.default", Status.ERROR, [TestResult(args=A, passed=False, error_type="NotRun")],
            flags=[Flag.IMPORT_ERROR], reason="ImportError: x"),
        _op("abs.default", Status.SKIPPED, [TestResult(args=A, passed=False, skipped=True,
            error_msg="too large for the CPU")], reason="no test could run"),
    ]  # fmt: skip
    return Report(run={"command": "python -m agent.run --evaluate-only"}, operators=ops,
                  excluded=[], suite="smoke", device="cuda", profile=profile)  # fmt: skip


def test_performance_records_have_backendbench_keys_and_types(tmp_path: Path) -> None:
    write_reports(tmp_path, timed_report("strict"))
    ours = json.loads((tmp_path / BB_FULL_RESULTS).read_text())
    ref = next(
        r
        for r in json.loads((REFERENCE["smoke"] / BB_FULL_RESULTS).read_text())
        if r["test_type"] == "performance"
    )
    ran = [r for r in ours if r["test_type"] == "performance" and r["successfully_ran"]]
    assert ran
    for mine in ran:
        assert list(mine)[: len(ref)] == list(ref)
        assert {k: _kind(mine[k]) for k in ref} == {k: _kind(v) for k, v in ref.items()}
    not_ran = [r for r in ours if r["test_type"] == "performance" and not r["successfully_ran"]]
    # BackendBench writes a test that did not run as speedup and benchmark time None
    assert not_ran and all(r["speedup"] is None and r["benchmark_time_ms"] is None for r in not_ran)
    assert all(r["error_msg"] for r in not_ran)


def test_backendbench_profile_scores_equal_what_its_reader_computes(tmp_path: Path) -> None:
    report = timed_report("backendbench")
    write_reports(tmp_path, report)
    records = json.loads((tmp_path / BB_FULL_RESULTS).read_text())
    assert {r["op_name"] for r in records} == {"relu.default", "exp.default", "sin.default"}
    scores, theirs = report.scores, bb.bb_scores(records)
    assert scores["num_scored"] == 3 and scores["num_operators"] == 6
    assert scores["correctness_score"] == theirs["correctness_score"] == pytest.approx(1 / 3)
    # relu: geomean(2, 8) = 4; exp: its failed test counts 1.0 -> sqrt(3); sin: rejected -> 1.0
    expected = (4.0 * math.sqrt(3.0) * 1.0) ** (1 / 3)
    assert scores["performance_score"] == pytest.approx(expected)
    assert theirs["performance_score"] == pytest.approx(expected)
    assert scores["fast_1.0"] == theirs["perf@1.0"] == pytest.approx(1 / 3)
    md = (tmp_path / SUMMARY_MD).read_text()
    assert "| Correctness Score | 0.33 |" in md and f"| {expected:.2f} |" in md
    assert "Scored over 3 of 6 operators" in md
    out = io.StringIO()
    print_summary(report, Console(file=out, width=200))
    printed = out.getvalue()
    # the lines BackendBench prints, with its wording and these numbers
    assert "correctness score (mean pass rate over all operators): 0.33" in printed
    assert f"performance score (geomean speedup over all operators): {expected:.2f}" in printed
    assert (
        "perf@p score (rate of correct samples with a speedup greater than p, p=1.0): 0.33"
        in printed
    )


def test_strict_reports_every_operator_so_a_backendbench_reader_counts_it(tmp_path: Path) -> None:
    report = timed_report("strict")
    write_reports(tmp_path, report)
    got = read_like_a_backendbench_user(tmp_path)
    assert set(got["table"]) == {o.op for o in report.operators}
    assert got["correctness"] == report.scores["correctness_score"] == pytest.approx(1 / 6)
    failed_ops = {op for op, _ in got["failed"]}
    assert failed_ops == {"exp.default", "sin.default", "cos.default", "tan.default", "abs.default"}
    perf_ops = {r["op_name"] for r in json.loads((tmp_path / BB_FULL_RESULTS).read_text())
                if r["test_type"] == "performance"}  # fmt: skip
    assert "abs.default" not in perf_ops  # a test that did not run was not timed either
    records = json.loads((tmp_path / BB_FULL_RESULTS).read_text())
    sin = next(
        r for r in records if r["op_name"] == "sin.default" and r["test_type"] == "correctness"
    )
    # a test of a rejected operator is not correct, whatever its own comparison said
    assert sin["is_correct"] is False and sin["operator_status"] == "rejected"
    missing = next(r for r in records if r["op_name"] == "cos.default")
    assert missing["max_abs_error"] == -math.inf and missing["error_type"] == "Missing"


def test_args_are_written_as_backendbench_writes_them() -> None:
    assert bb.bb_args("((T([4], f32), 1, False), {})") == "((T([4], f32), 1, False,), {})"
    assert bb.bb_args("((), {'device': device(type='cuda')})") == "((), {'device': 'cuda'})"
    # strides only where the tensor is not contiguous
    assert bb.bb_args("((T([2, 3], f32, [3, 1]),), {})") == "((T([2, 3], f32),), {})"
    assert bb.bb_args("((T([2, 3], f32, [1, 2]),), {})") == "((T([2, 3], f32, [1, 2]),), {})"
    # BackendBench writes the arguments the call received: the device the test ran on
    cpu = "((T([2], bf16),), {'dtype': torch.float32, 'device': 'cpu'})"
    assert bb.bb_args("((T([2], bf16),), {'dtype': torch.float32, 'device': 'cuda'})", "cpu") == cpu
    assert (
        bb.bb_args(
            "((T([2], bf16),), {'dtype': torch.float32, 'device': device(type='cuda')})", "cpu"
        )
        == cpu
    )
    for folder in REFERENCE.values():
        for rec in json.loads((folder / BB_FULL_RESULTS).read_text()):
            assert bb.bb_args(rec["args"]) == bb.bb_args(rec["args"], "cpu") == rec["args"]


def test_a_run_folder_from_before_the_split_still_loads(tmp_path: Path) -> None:
    report = timed_report("strict")
    write_reports(tmp_path, report)
    (tmp_path / RESULTS_JSON).rename(tmp_path / BB_FULL_RESULTS)  # the old layout
    assert [o.op for o in load_report(tmp_path).operators] == [o.op for o in report.operators]
