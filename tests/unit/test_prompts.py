"""Prompt rendering (prompts/*.j2 through agent.prompts) and the feedback that goes into refine."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.feedback import format_feedback
from agent.prompts import PromptRenderer, build_op_context
from evaluator.cases.testcase import parse_trace_text
from evaluator.errors import UsageError
from evaluator.results import OperatorResult, Status, TestResult

TRACE = """\
Operator: aten.add.Tensor
cnt: 156, ((T([1, 512, 768], f16), T([1, 512, 768], f16)), {})
cnt: 12, ((T([64, 128], f32), T([128], f32)), {'alpha': 2})
cnt: 3, ((T([8, 3, 224, 224], bf16, [150528, 1, 672, 3]), T([8, 3, 224, 224], bf16)), {})
cnt: 0, ((T([10, 10], f16), T([10, 10], f16)), {})
"""
CASES = parse_trace_text(TRACE).cases["add.Tensor"]


@pytest.fixture
def ctx() -> dict:
    return build_op_context("add.Tensor", CASES, 2)


def test_context_has_names_schema_and_signature(ctx: dict) -> None:
    assert ctx["folder"] == "add__Tensor"
    assert ctx["file_name"] == "add__Tensor_implementation_v1.py"
    assert ctx["function_name"] == "add__Tensor_kernel_impl"
    assert (
        ctx["schema"] == "aten::add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
    )
    assert ctx["signature"] == "add__Tensor_kernel_impl(self, other, *, alpha=1)"
    assert ctx["returns_text"] == "Tensor"
    assert not ctx["is_inplace"] and not ctx["is_out"]


def test_context_shows_the_most_frequent_case_first_and_always_the_largest(ctx: dict) -> None:
    shown = [c["args"] for c in ctx["cases"]]
    assert shown[0] == CASES[0].serialize()  # count 156
    assert shown[1] == CASES[2].serialize()  # count 3, but the largest
    assert ctx["cases"][1]["dtypes"] == ["bf16"]
    assert ctx["dtypes"] == ["f16", "f32", "bf16"]
    assert ctx["num_cases"] == 4


def test_context_marks_in_place_and_out_overloads() -> None:
    inplace = build_op_context("add_.Tensor", CASES, 2)
    assert inplace["is_inplace"] and inplace["mutated_args"] == ["self"]
    out = build_op_context("add.out", CASES, 2)
    assert out["is_out"] and out["mutated_args"] == ["out"]
    assert out["signature"] == "add__out_kernel_impl(self, other, *, alpha=1, out)"


def test_context_of_an_op_torch_does_not_know_has_no_schema() -> None:
    ctx = build_op_context("no_such_op_xyz.default", [], 3)
    assert ctx["schema"] is None and ctx["signature"] is None
    assert "no_such_op_xyz__default_kernel_impl" in PromptRenderer().generate(ctx)


def test_system_prompt_states_the_rules_and_the_answer_format(ctx: dict) -> None:
    text = PromptRenderer().system(ctx)
    assert "ONE ```python code block" in text
    assert "add__Tensor_kernel_impl" in text
    assert "tl.int64" in text and "x.device" in text


def test_generate_prompt_carries_schema_contract_and_cases(ctx: dict) -> None:
    text = PromptRenderer().generate(ctx)
    assert ctx["schema"] in text
    assert "def add__Tensor_kernel_impl(self, other, *, alpha=1):" in text
    assert "add__Tensor/add__Tensor_implementation_v1.py" in text
    assert CASES[0].serialize() in text and CASES[2].serialize() in text
    assert "{{" not in text and "{%" not in text


def test_generate_prompt_for_an_out_overload_says_to_write_into_out() -> None:
    text = PromptRenderer().generate(build_op_context("add.out", CASES, 2))
    assert "out= overload" in text and "`out`" in text


def test_refine_prompt_adds_previous_code_and_feedback(ctx: dict) -> None:
    previous = "import torch\n\ndef add__Tensor_kernel_impl(a, b):\n    return a + b\n"
    text = PromptRenderer().refine(ctx, previous, "Status: rejected (0 of 4 tests passed).")
    assert (
        "```python\nimport torch\n\ndef add__Tensor_kernel_impl(a, b):\n    return a + b\n```"
        in text
    )
    assert "Status: rejected (0 of 4 tests passed)." in text
    assert "aten_fallback" in text


def test_refine_prompt_after_an_answer_without_code_shows_no_empty_previous_file(ctx: dict) -> None:
    text = PromptRenderer().refine(ctx, "", "Your answer could not be tested: no code block")
    assert "```python\n```" not in text and "The previous file" not in text
    assert "held no file that could be tested" in text
    assert "Your answer could not be tested: no code block" in text


def test_refine_prompt_after_a_truncated_answer_asks_for_a_shorter_file(ctx: dict) -> None:
    feedback = "Your answer could not be tested: answer truncated at max_output_tokens"
    text = PromptRenderer().refine(ctx, "", feedback, truncated=True)
    assert "cut off at the output token limit" in text
    assert "Write a shorter file" in text
    assert "The previous file" not in text and "```python\n```" not in text


def test_missing_variable_fails_loudly(ctx: dict) -> None:
    del ctx["function_name"]
    with pytest.raises(UsageError, match="function_name"):
        PromptRenderer().generate(ctx)


def test_user_templates_dir_is_used_first(tmp_path: Path, ctx: dict) -> None:
    (tmp_path / "generate.j2").write_text("Custom prompt for {{ op }}.\n")
    renderer = PromptRenderer(tmp_path)
    assert renderer.generate(ctx) == "Custom prompt for add.Tensor.\n"
    assert "ONE ```python code block" in renderer.system(ctx)  # not overridden: shipped one


def test_user_template_with_unknown_variable_names_the_file(tmp_path: Path, ctx: dict) -> None:
    (tmp_path / "system.j2").write_text("{{ no_such_variable }}\n")
    with pytest.raises(UsageError, match=r"system\.j2.*no_such_variable"):
        PromptRenderer(tmp_path).system(ctx)


def test_missing_templates_dir_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="agent.templates_dir"):
        PromptRenderer(tmp_path / "absent")


# ---------------------------------------------------------------- feedback


def _failed_result() -> OperatorResult:
    return OperatorResult(
        op="add.Tensor",
        folder="add__Tensor",
        status=Status.FAILED,
        flags=["wrong_values"],
        tests=3,
        passed=1,
        reason="2 of 3 tests gave wrong values",
        results=[
            TestResult(args="((T([4], f32), T([4], f32)), {})", passed=True, max_abs_error=0.0),
            TestResult(
                args="((T([1, 512, 768], f16), T([1, 512, 768], f16)), {})",
                passed=False,
                max_abs_error=0.5,
                max_rel_error=1.25,
                error_type="AssertionError",
                error_msg="Tensor-likes are not close!\n"
                + "detail " * 800
                + "\nMismatched elements: 7",
                flags=["wrong_values"],
            ),
            TestResult(
                args="((T([64], f32), T([64], f32)), {'alpha': 2})",
                passed=False,
                error_type="RuntimeError",
                error_msg="second failure",
            ),
        ],
    )


def test_feedback_has_status_reason_flags_errors_and_failing_cases() -> None:
    text = format_feedback(_failed_result(), 4000)
    assert text.startswith("Status: failed (1 of 3 tests passed).")
    assert "Reason: 2 of 3 tests gave wrong values" in text
    assert "Flags: wrong_values" in text
    assert "abs 0.5, rel 1.25" in text
    assert "1. args: ((T([1, 512, 768], f16)" in text and "AssertionError" in text
    assert "2. args: ((T([64], f32)" in text and "RuntimeError: second failure" in text
    assert "T([4], f32)" not in text  # passing tests are not listed


@pytest.mark.parametrize("budget", [200, 400, 1000, 4000])
def test_feedback_fits_its_budget(budget: int) -> None:
    assert len(format_feedback(_failed_result(), budget)) <= budget


def test_feedback_keeps_the_first_failure_before_later_ones_when_short() -> None:
    result = _failed_result()
    result.results += [
        TestResult(args=f"((T([{n}], f32),), {{}})", passed=False, error_msg="late " * 100)
        for n in range(5, 10)
    ]
    text = format_feedback(result, 900)
    assert "1. args:" in text and "Mismatched elements: 7" in text  # a message's tail survives
    assert "T([9], f32)" not in text


def test_feedback_for_a_rejected_kernel_shows_the_evidence() -> None:
    result = OperatorResult(
        op="relu.default",
        folder="relu__default",
        status=Status.REJECTED,
        flags=["aten_fallback:aten.relu.default"],
        tests=2,
        reason="computed with PyTorch: aten.relu.default",
    )
    text = format_feedback(result, 1000)
    assert "Status: rejected" in text and "aten_fallback:aten.relu.default" in text
