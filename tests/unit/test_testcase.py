"""The BackendBench case format (evaluator.cases.testcase) and the kernel naming (evaluator.naming)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from evaluator.cases.testcase import (
    CaseSyntaxError,
    Device,
    TensorSpec,
    format_trace,
    load_trace,
    map_values,
    parse_case,
    parse_trace_text,
    serialize_case,
)
from evaluator.naming import (
    folder_to_op,
    kernel_function_name,
    kernel_path,
    normalize_op,
    op_to_folder,
)

DATA = Path(__file__).resolve().parents[2] / "evaluator" / "data"
SHIPPED_TRACES = sorted(DATA.glob("*trace*.txt"))


def _case_lines(path: Path) -> list[tuple[int, str]]:
    return [
        (n, line.rstrip("\n"))
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if line.startswith("cnt:")
    ]


def test_shipped_traces_exist():
    names = {p.name for p in SHIPPED_TRACES}
    assert {"smoke_trace.txt", "torchbench_trace.txt"} <= names


@pytest.mark.parametrize("path", SHIPPED_TRACES, ids=lambda p: p.name)
def test_every_line_of_shipped_trace_round_trips(path: Path):
    lines = _case_lines(path)
    assert lines, f"{path} has no cases"
    for lineno, line in lines:
        case_text = line.split(",", 1)[1].strip()
        assert parse_case(case_text).serialize() == case_text, f"{path}:{lineno}"


@pytest.mark.parametrize("path", SHIPPED_TRACES, ids=lambda p: p.name)
def test_shipped_trace_parses_without_errors(path: Path):
    trace = load_trace(path)
    assert trace.errors == []
    assert all(trace.cases.values())
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.startswith("Operator:"):
            assert line.split(":", 1)[1].strip().startswith("aten.")


@pytest.mark.parametrize("path", SHIPPED_TRACES, ids=lambda p: p.name)
def test_shipped_trace_round_trips_through_format_trace(path: Path):
    trace = load_trace(path)
    again = parse_trace_text(format_trace(trace.cases))
    assert again.errors == []
    assert {op: [c.serialize() for c in cs] for op, cs in again.cases.items()} == {
        op: [c.serialize() for c in cs] for op, cs in trace.cases.items()
    }


def test_parse_case_reads_tensors_strides_and_literals():
    case = parse_case(
        "((T([2, 3], f16, [1, 2]), [T([4], i64), None], -1, 1e-05, inf, torch.float32), "
        "{'device': device(type='cuda'), 'memory_format': torch.contiguous_format})"
    )
    assert case.args[0] == TensorSpec((2, 3), torch.float16, (1, 2))
    assert case.args[1] == [TensorSpec((4,), torch.int64), None]
    assert case.args[2:] == (-1, 1e-05, float("inf"), torch.float32)
    assert case.kwargs == {"device": Device("cuda"), "memory_format": torch.contiguous_format}
    # written back as BackendBench's parser wants it: a string
    assert "{'device': 'cuda', " in case.serialize()


def test_malformed_lines_give_file_line_errors_and_other_ops_still_load(tmp_path: Path):
    path = tmp_path / "bad.txt"
    path.write_text(
        "Operator: aten.add.Tensor\n"
        "cnt: 1, ((T([4], f32), T([4], f32)), {})\n"
        "cnt: x, ((T([4], f32),), {})\n"
        "cnt: 2, ((T([4], f99),), {})\n"
        "this line is garbage\n"
        "Operator: aten.relu.default\n"
        "cnt: 1, ((T([8], f32),), {})\n"
        "cnt: 1, ((__import__('os').system('true'),), {})\n"
        "cnt: -4, ((T([8], f32),), {})\n",
        encoding="utf-8",
    )
    trace = load_trace(path)
    assert [len(trace.cases[op]) for op in ("add.Tensor", "relu.default")] == [1, 1]
    prefixes = [e.split(": ", 1)[0] for e in trace.errors]
    assert prefixes == [f"{path}:{n}" for n in (3, 4, 5, 8, 9)]


def test_case_before_operator_line_is_an_error():
    trace = parse_trace_text("cnt: 1, ((T([4], f32),), {})\n", origin="t.txt")
    assert trace.errors == ["t.txt:1: case before any 'Operator:' line"]


@pytest.mark.parametrize(
    "text",
    [
        "((eval('1'),), {})",
        "((T([2], f32),), {**x})",
        "(({[1]: 2},), {})",
        "((" + "-" * 100_000 + "1,), {})",
        "((1,), {})\x00",
        "((T([2, -1], f32),), {})",
        "((T([2, 3], f32, [1]),), {})",
        "[(1,), {}]",
        "((1,), {1: 2})",
    ],
    ids=[
        "call",
        "dict-unpack",
        "list-key",
        "deep-nesting",
        "null-byte",
        "neg-shape",
        "stride-len",
        "not-pair",
        "int-kwarg",
    ],
)
def test_hostile_or_malformed_case_raises_case_syntax_error(text: str):
    with pytest.raises(CaseSyntaxError):
        parse_case(text)


@pytest.mark.parametrize(
    "value", [1 + 2j, complex(0, -1), complex(float("nan"), float("-inf")), -0.0, float("-inf")]
)
def test_scalars_round_trip_exactly(value: complex | float):
    text = serialize_case((value,), {})
    assert parse_case(text).serialize() == text


def test_repr_style_complex_literal_is_read():
    assert parse_case("(((1+2j),), {})").args == (1 + 2j,)


@pytest.mark.parametrize(
    ("op", "folder"),
    [
        ("add.Tensor", "add__Tensor"),
        ("add_.Tensor", "add___Tensor"),
        ("_softmax.default", "_softmax__default"),
        ("sum.dim_IntList", "sum__dim_IntList"),
    ],
)
def test_directory_naming_of_overloads(op: str, folder: str, tmp_path: Path):
    assert op_to_folder(op) == folder
    assert op_to_folder(f"aten.{op}") == folder
    assert folder_to_op(folder) == op
    assert kernel_function_name(op) == f"{folder}_kernel_impl"
    assert kernel_path(tmp_path, op) == tmp_path / folder / f"{folder}_implementation_v1.py"


def test_normalize_op_accepts_prefixes_and_bare_names():
    assert normalize_op("aten.add.Tensor") == "add.Tensor"
    assert normalize_op("aten::relu") == "relu.default"


def test_map_values_walks_lists_tuples_and_dicts_in_order():
    seen: list[object] = []

    def leaf(value: object) -> object:
        seen.append(value)
        return value * 10 if isinstance(value, int) else value

    spec = TensorSpec((2,), torch.float32)
    pair = torch.return_types.max((1, 2))  # a tuple subclass comes back as a plain tuple
    out = map_values(([1, (2, spec)], {"b": 3, "a": [4]}, pair, "s"), leaf)
    assert out == ([10, (20, spec)], {"b": 30, "a": [40]}, (10, 20), "s")
    assert type(out[2]) is tuple
    assert list(out[1]) == ["b", "a"]
    assert seen == [1, 2, spec, 3, 4, 1, 2, "s"]
