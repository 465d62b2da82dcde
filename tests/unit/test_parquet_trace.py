"""BackendBench's trace formats: its parquet test sets read and written, and our text traces read
by a parser that follows BackendBench's rules (the reference files are in fixtures/backendbench)."""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest
import torch

pa = pytest.importorskip("pyarrow")
import pyarrow.parquet as pq  # noqa: E402

from evaluator.cases.parquet_trace import (  # noqa: E402
    case_uuid,
    load_parquet_trace,
    write_parquet_trace,
)
from evaluator.cases.suites import select_operators  # noqa: E402
from evaluator.cases.testcase import format_trace, load_trace, parse_case  # noqa: E402
from evaluator.cases.trace import main as trace_main  # noqa: E402
from evaluator.errors import UsageError  # noqa: E402

BB = Path(__file__).resolve().parents[1] / "fixtures" / "backendbench"
DATA = Path(__file__).resolve().parents[2] / "evaluator" / "data"

# --------------------------------------------------------------------------- BackendBench's rules

# What BackendBench's `deserialize_args` can evaluate: its globals (T, th, torch, inf, the dtype
# codes) and Python's builtins; anything else (`device(...)`, `nan`) is a NameError there.
_BB_NAMES = {"T", "th", "torch", "inf", "True", "False", "None"} | {
    "bf16", "f64", "f32", "f16", "c32", "c64", "c128", "i8", "i16", "i32", "i64", "b8", "u8",
}  # fmt: skip
_BB_CALLS = {"T", "complex"}


def bb_check_args(text: str) -> None:
    """Raise ValueError where BackendBench's parser would fail on `text` (one case's args)."""
    tree = ast.parse(text.strip().strip("'").strip('"'), mode="eval")
    for node in ast.walk(tree):
        if isinstance(node, ast.Name) and node.id not in _BB_NAMES | _BB_CALLS:
            raise ValueError(f"name {node.id!r} is not defined for BackendBench")
        if isinstance(node, ast.Call) and not (
            isinstance(node.func, ast.Name) and node.func.id in _BB_CALLS
        ):
            raise ValueError(f"call {ast.unparse(node.func)!r} is not available to BackendBench")
        if isinstance(node, ast.Attribute):
            if not (isinstance(node.value, ast.Name) and node.value.id in ("torch", "th")):
                raise ValueError(f"attribute {ast.unparse(node)!r}")
            if not hasattr(torch, node.attr):
                raise ValueError(f"torch has no {node.attr!r}")


def bb_parse_trace(text: str) -> list[tuple[str, int, str]]:
    """(op, count, args) per case, read with BackendBench's two line patterns; every args string
    must pass `bb_check_args`."""
    rows, op = [], None
    for line in text.splitlines():
        if m := re.match("Operator: (.*)", line):
            op = m.group(1)
        if m := re.match("cnt: \\d+, (.*)", line):
            assert op is not None
            count = int(m.group(0).split(",")[0].split(":")[1])
            bb_check_args(m.group(1))
            rows.append((op, count, m.group(1)))
    return rows


def test_the_strict_parser_rejects_what_backendbench_cannot_read() -> None:
    bb_check_args("((T([2], f32),), {'device': 'cuda', 'dtype': torch.float16})")
    with pytest.raises(ValueError, match="device"):
        bb_check_args("((T([2], f32),), {'device': device(type='cuda')})")
    with pytest.raises(ValueError, match="nan"):
        bb_check_args("((T([2], f32), nan), {})")


def _without_comments(text: str) -> str:
    return "".join(line for line in text.splitlines(keepends=True) if not line.startswith("#"))


@pytest.mark.parametrize("path", sorted(DATA.glob("*trace*.txt")), ids=lambda p: p.name)
def test_shipped_traces_read_with_backendbench_rules(path: Path) -> None:
    text = path.read_text(encoding="utf-8")
    rows = bb_parse_trace(text)
    ours = load_trace(path)
    assert ours.errors == []
    assert len(rows) == sum(len(c) for c in ours.cases.values())
    # and our writer gives the file back byte for byte (its comment lines aside)
    assert format_trace(ours.cases) == _without_comments(text)


def test_shipped_sidecar_has_no_device_calls() -> None:
    assert "device(type=" not in (DATA / "torchbench_trace.json").read_text(encoding="utf-8")


# --------------------------------------------------------------------------- parquet


@pytest.mark.parametrize(("name", "ops", "cases"), [("smoke", 8, 20), ("tb", 8, 75)])
def test_reference_parquet_test_sets_load(name: str, ops: int, cases: int) -> None:
    trace = load_parquet_trace(BB / f"{name}.parquet")
    assert trace.errors == []
    assert len(trace.cases) == ops and sum(map(len, trace.cases.values())) == cases
    rows = pq.read_table(BB / f"{name}.parquet").to_pylist()
    counts = {(r["op_name"].removeprefix("aten."), r["args"]): r["count"] for r in rows}
    for op, op_cases in trace.cases.items():
        for case in op_cases:
            assert counts[(op, case.source)] == case.count


def test_written_parquet_matches_backendbench_schema_and_ids(tmp_path: Path) -> None:
    ref = pq.read_table(BB / "tb.parquet")
    out = write_parquet_trace(load_parquet_trace(BB / "tb.parquet").cases, tmp_path / "tb.parquet")
    ours = pq.read_table(out)
    assert ours.schema.names == ref.schema.names
    assert [f.type for f in ours.schema] == [f.type for f in ref.schema]
    # Same cases and ids. The reference file has `device(type='cuda')` in some rows, which
    # BackendBench's own parser cannot read: those are written with the device as a string.
    key = ("op_name", "args", "uuid", "count", "is_synthetic")
    expected = []
    for row in ref.to_pylist():
        fixed = row["args"].replace("device(type='cuda')", "'cuda'")
        assert row["uuid"] == case_uuid(row["op_name"], row["args"])
        row.update(args=fixed, uuid=case_uuid(row["op_name"], fixed))
        expected.append(tuple(row[k] for k in key))
    assert sorted(tuple(r[k] for k in key) for r in ours.to_pylist()) == sorted(expected)
    for row in ours.to_pylist():
        bb_check_args(row["args"])


def test_rows_outside_the_benchmark_are_left_out_and_bad_rows_reported(tmp_path: Path) -> None:
    table = pa.table(
        {
            "op_name": ["aten.relu.default", "aten.relu.default", "aten.add.Tensor", "aten.relu.default"],
            "args": ["((T([4], f32),), {})", "((T([8], f32),), {})", "((T([4], f99),), {})", "((T([4], f32),), {})"],
            "count": [3, 1, 1, 3],
            "included_in_benchmark": [True, False, True, True],
        }
    )  # fmt: skip
    pq.write_table(table, tmp_path / "t.parquet")
    trace = load_parquet_trace(tmp_path / "t.parquet")
    assert [c.source for c in trace.cases["relu.default"]] == ["((T([4], f32),), {})"]
    assert len(trace.errors) == 1 and ":row 3:" in trace.errors[0]


def test_a_parquet_without_the_columns_is_a_usage_error(tmp_path: Path) -> None:
    pq.write_table(pa.table({"x": [1]}), tmp_path / "t.parquet")
    with pytest.raises(UsageError, match="no column op_name, args"):
        select_operators(None, trace_file=tmp_path / "t.parquet")


def test_without_pyarrow_the_error_says_how_to_install_it(monkeypatch, capsys) -> None:
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # import pyarrow now raises ImportError
    monkeypatch.setitem(sys.modules, "pyarrow.parquet", None)
    with pytest.raises(UsageError, match=re.escape("pip install 'atenforge[parquet]'")):
        select_operators(None, trace_file=BB / "smoke.parquet")
    argv = ["--convert", str(BB / "smoke.parquet"), "--out", "x.txt"]
    assert trace_main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "pip install 'atenforge[parquet]'" in err[0]


def test_trace_file_parquet_selects_operators_like_a_text_trace(tmp_path: Path) -> None:
    sel = select_operators(None, trace_file=BB / "smoke.parquet")
    assert sorted(o.op for o in sel.ops) == sorted(load_parquet_trace(BB / "smoke.parquet").cases)


def test_convert_cli_round_trips_the_shipped_trace_through_parquet(tmp_path: Path) -> None:
    src = DATA / "smoke_trace.txt"
    assert trace_main(["--convert", str(src), "--format", "parquet", "--out", str(tmp_path / "s.parquet")]) == 0  # fmt: skip
    rows = pq.read_table(tmp_path / "s.parquet").to_pylist()
    assert all(r["uuid"] == case_uuid(r["op_name"], r["args"]) for r in rows)
    for r in rows:
        bb_check_args(r["args"])
        parse_case(r["args"])
    assert trace_main(["--convert", str(tmp_path / "s.parquet"), "--out", str(tmp_path / "s.txt")]) == 0  # fmt: skip
    assert (tmp_path / "s.txt").read_text() == _without_comments(src.read_text())


def test_out_suffix_must_match_the_format(tmp_path: Path, capsys) -> None:
    argv = ["--convert", str(DATA / "smoke_trace.txt"), "--format", "parquet"]
    assert trace_main([*argv, "--out", str(tmp_path / "x.txt")]) == 2
    assert ".parquet" in capsys.readouterr().err
