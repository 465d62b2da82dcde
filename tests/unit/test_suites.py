"""Operator selection (evaluator.cases.suites) and the opinfo suite (evaluator.cases.opinfo_suite)."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest
import torch

from evaluator.cases import suites
from evaluator.cases.suites import EXCLUDED_OPS, cpu_runnable, rank_cases, select_operators
from evaluator.cases.testcase import TestCase, parse_case
from evaluator.errors import UsageError
from evaluator.naming import base_name

TRACE = """\
Operator: aten.add.Tensor
cnt: 5, ((T([4], f32), T([4], f32)), {})
cnt: 6, ((T([64], f32), T([64], f32)), {})
cnt: 9, ((T([2], f32), T([2], f32)), {})
cnt: 1, ((T([4], f32), T([4], f32)), {})
Operator: aten.add_.Tensor
cnt: 3, ((T([4], f32), T([4], f32)), {})
Operator: aten.relu.default
cnt: 50, ((T([8], f32),), {})
Operator: aten.mul.Tensor
cnt: 12, ((T([8], f32), T([8], f32)), {})
Operator: aten.mul.Scalar
cnt: 12, ((T([8], f32), 2.0), {})
Operator: aten.view.default
cnt: 99, ((T([8], f32), [2, 4]), {})
Operator: aten.native_dropout.default
cnt: 7, ((T([8], f32), 0.1, True), {})
"""


@pytest.fixture
def trace(tmp_path: Path) -> Path:
    path = tmp_path / "t.txt"
    path.write_text(TRACE, encoding="utf-8")
    return path


def _names(selection) -> list[str]:
    return [oc.op for oc in selection.ops]


# ---------------------------------------------------------------- ranking and selection


def test_trace_ops_rank_by_total_count_then_name(trace: Path):
    sel = select_operators(trace_file=trace)
    assert _names(sel) == ["relu.default", "add.Tensor", "mul.Scalar", "mul.Tensor", "add_.Tensor"]
    assert sel.suite == f"trace:{trace}"


def test_sidecar_model_counts_rank_first(trace: Path):
    sidecar = {
        "schema_version": 1,
        "command": "test",
        "models": ["a", "b", "c"],
        "ops": {
            "add_.Tensor": {"models": ["a", "b", "c"], "count": 3, "cases": []},
            "mul.Tensor": {"models": ["a", "b"], "count": 12, "cases": []},
        },
    }
    trace.with_suffix(".json").write_text(json.dumps(sidecar), encoding="utf-8")
    sel = select_operators(trace_file=trace)
    assert _names(sel)[:3] == ["add_.Tensor", "mul.Tensor", "relu.default"]
    assert sel.ops[0].models == 3


def test_unreadable_sidecar_is_reported_not_fatal(trace: Path):
    trace.with_suffix(".json").write_text("{not json", encoding="utf-8")
    sel = select_operators(trace_file=trace)
    assert _names(sel)[0] == "relu.default"
    assert any("sidecar" in e for e in sel.errors)


def test_num_operators_takes_most_used_deterministically(trace: Path):
    first = select_operators(trace_file=trace, num_operators=2)
    again = select_operators(trace_file=trace, num_operators=2)
    assert _names(first) == _names(again) == ["relu.default", "add.Tensor"]


def test_num_operators_below_one_is_usage_error(trace: Path):
    with pytest.raises(UsageError, match="num-operators"):
        select_operators(trace_file=trace, num_operators=0)


def test_ops_by_base_name_selects_every_overload(trace: Path):
    sel = select_operators(trace_file=trace, ops=["mul"])
    assert sorted(_names(sel)) == ["mul.Scalar", "mul.Tensor"]


def test_ops_by_exact_name_with_or_without_aten_prefix(trace: Path):
    sel = select_operators(trace_file=trace, ops=["aten.add.Tensor", "relu.default"])
    assert _names(sel) == ["relu.default", "add.Tensor"]


def test_base_name_add_does_not_pull_in_add_(trace: Path):
    assert _names(select_operators(trace_file=trace, ops=["add"])) == ["add.Tensor"]


def test_unknown_op_is_one_line_usage_error_with_suggestions(trace: Path):
    with pytest.raises(UsageError) as info:
        select_operators(trace_file=trace, ops=["relu", "reluu"])
    message = str(info.value)
    assert "'reluu'" in message and "relu" in message and "\n" not in message


def test_excluded_op_requested_explicitly_is_usage_error(trace: Path):
    with pytest.raises(UsageError, match="view.default is excluded"):
        select_operators(trace_file=trace, ops=["view"])


def test_exclusions_present_in_source_are_listed_with_reasons(trace: Path):
    sel = select_operators(trace_file=trace)
    assert [op for op, _ in sel.excluded] == ["native_dropout.default", "view.default"]
    assert all(reason for _, reason in sel.excluded)
    assert "view.default" not in _names(sel)


def test_exclusions_follow_the_ops_filter(trace: Path):
    assert select_operators(trace_file=trace, ops=["add"]).excluded == []


def test_excluded_ops_cover_random_creation_and_views():
    for op in ("bernoulli_.float", "native_dropout.default", "randn.default", "normal_.default"):
        assert "random" in EXCLUDED_OPS[op]
    for op in ("empty.memory_format", "zeros.default", "arange.start", "scalar_tensor.default"):
        assert op in EXCLUDED_OPS
    for op in ("view.default", "_unsafe_view.default", "t.default", "permute.default"):
        assert "view" in EXCLUDED_OPS[op]


def test_excluded_names_are_real_aten_overloads():
    for op in EXCLUDED_OPS:
        base, _, overload = op.partition(".")
        getattr(getattr(torch.ops.aten, base), overload)


# ---------------------------------------------------------------- cases per operator


def test_cases_deduplicated_then_most_frequent_then_largest(trace: Path):
    sel = select_operators(trace_file=trace, ops=["add.Tensor"])
    cases = sel.ops[0].cases
    assert [c.serialize() for c in cases] == [
        "((T([2], f32), T([2], f32)), {})",
        "((T([64], f32), T([64], f32)), {})",
        "((T([4], f32), T([4], f32)), {})",
    ]
    assert [c.count for c in cases] == [9, 6, 6]  # the two T([4]) lines merged: 5 + 1


def test_max_cases_per_op_caps(trace: Path):
    sel = select_operators(trace_file=trace, ops=["add.Tensor"], max_cases_per_op=1)
    assert len(sel.ops[0].cases) == 1


def test_prefer_ranks_accepted_cases_first():
    cases = [TestCase((), {}, 10), parse_case("((T([4], f32),), {})")]
    cases[1].count = 1
    ranked = rank_cases(cases, 2, prefer=lambda c: c.total_numel() > 0)
    assert ranked[0].total_numel() == 4


def test_cpu_runnable_counts_all_input_elements():
    case = parse_case("((T([8, 8], f32), [T([4], i64), None], T([2, 3], f16, [0, 1])), {})")
    assert cpu_runnable(case, 64 + 4 + 6)
    assert not cpu_runnable(case, 64 + 4 + 5)


def test_cpu_runnable_rule_is_documented():
    assert "max_case_numel" in suites.__doc__ and "total number of elements" in suites.__doc__


# ---------------------------------------------------------------- bad input


def test_malformed_lines_become_errors_and_the_rest_loads(tmp_path: Path):
    path = tmp_path / "bad.txt"
    path.write_text(
        "Operator: aten.relu.default\ncnt: 1, ((T([8], f32),), {})\ncnt: 2, ((T([8], zz),), {})\n"
        "Operator: aten.neg.default\ncnt: 1, ((T(",
        encoding="utf-8",
    )
    sel = select_operators(trace_file=path)
    assert _names(sel) == ["relu.default"]
    assert sel.errors[0].startswith(f"{path}:3: ")
    assert any(e.startswith(f"{path}:5: ") for e in sel.errors)
    assert any("neg.default has no valid cases" in e for e in sel.errors)


def test_missing_trace_file_is_usage_error(tmp_path: Path):
    with pytest.raises(UsageError, match="does not exist"):
        select_operators(trace_file=tmp_path / "nope.txt")


def test_trace_file_without_valid_operators_is_usage_error(tmp_path: Path):
    path = tmp_path / "empty.txt"
    path.write_text("# nothing here\nOperator: aten.relu.default\ncnt: 1, nope\n", encoding="utf-8")
    with pytest.raises(UsageError, match="no valid operators"):
        select_operators(trace_file=path)


def test_binary_trace_file_is_usage_error(tmp_path: Path):
    path = tmp_path / "bin.txt"
    path.write_bytes(b"\xff\xfe\x00garbage")
    with pytest.raises(UsageError):
        select_operators(trace_file=path)


def test_unknown_suite_is_usage_error_listing_valid_ones():
    with pytest.raises(UsageError) as info:
        select_operators("torchbnech")
    assert all(name in str(info.value) for name in ("smoke", "torchbench", "opinfo"))


def test_trace_file_takes_precedence_over_suite(trace: Path):
    assert select_operators("no-such-suite", trace_file=trace).suite == f"trace:{trace}"


# ---------------------------------------------------------------- shipped suites


def test_smoke_suite_has_eight_small_operators():
    sel = select_operators("smoke")
    assert len(sel.ops) == 8 and sel.errors == [] and sel.excluded == []
    assert {"add.Tensor", "mm.default", "_softmax.default", "native_layer_norm.default"} <= set(
        _names(sel)
    )
    assert all(cpu_runnable(c, 1 << 16) for oc in sel.ops for c in oc.cases)


def test_smoke_suite_has_broadcast_and_odd_sizes():
    cases = [c for oc in select_operators("smoke").ops for c in oc.cases]
    shapes = [[s.shape for s in c.tensor_specs()] for c in cases]
    assert any(len(set(s)) > 1 and len(s) == 2 for s in shapes)  # broadcasting binary op
    assert any(any(n % 16 for n in shape) for s in shapes for shape in s)


def test_torchbench_suite_loads_with_exclusions_and_is_deterministic():
    sel = select_operators("torchbench")
    assert sel.errors == []
    assert len(sel.ops) >= 25
    assert {op for op, _ in sel.excluded} >= {"view.default", "native_dropout.default"}
    assert _names(select_operators("torchbench", num_operators=5)) == _names(sel)[:5]
    assert all(1 <= len(oc.cases) <= 10 for oc in sel.ops)


def test_torchbench_ops_by_base_name():
    sel = select_operators("torchbench", ops=["add", "relu_"])
    assert {base_name(op) for op in _names(sel)} == {"add", "relu_"}
    assert {"add.Tensor", "relu_.default"} <= set(_names(sel))
    assert {base_name(op) for op in _names(select_operators("torchbench", ops=["add_"]))} == {
        "add_"
    }


# ---------------------------------------------------------------- opinfo


def test_opinfo_suite_is_wired_through_opinfo_cases(monkeypatch: pytest.MonkeyPatch):
    from evaluator.cases import opinfo_suite

    fake = {
        "relu.default": [parse_case("((T([8], f32),), {})")],
        "view.default": [parse_case("((T([8], f32), [2, 4]), {})")],
    }
    monkeypatch.setattr(opinfo_suite, "opinfo_cases", lambda: fake)
    sel = select_operators("opinfo")
    assert sel.suite == "opinfo" and _names(sel) == ["relu.default"]
    assert [op for op, _ in sel.excluded] == ["view.default"]


def test_opinfo_suite_module_is_not_imported_by_suites():
    import subprocess
    import sys

    code = "import sys, evaluator.cases.suites; print('evaluator.cases.opinfo_suite' in sys.modules)"
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=root
    )
    assert out.stdout.strip() == "False"


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("expecttest") is None, reason="needs expecttest")
def test_opinfo_collect_yields_single_overload_cases():
    from torch.testing._internal.common_methods_invocations import op_db

    from evaluator.cases.opinfo_suite import collect

    wanted = {"add", "gather", "log", "nn.functional.relu", "linspace"}
    subset = [o for o in op_db if o.name in wanted and not o.variant_test_name]
    first = collect(subset)
    assert {"add.Tensor", "gather.default", "log.default", "relu.default"} <= set(first)
    assert all(cases for cases in first.values())
    assert {op: [c.serialize() for c in cs] for op, cs in collect(subset).items()} == {
        op: [c.serialize() for c in cs] for op, cs in first.items()
    }
