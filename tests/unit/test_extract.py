"""Code extraction on saved, real-looking model answers (tests/fixtures/responses/)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.extract import ExtractError, extract_candidate

RESPONSES = Path(__file__).resolve().parents[1] / "fixtures" / "responses"


def _response(name: str) -> str:
    return (RESPONSES / name).read_text(encoding="utf-8")


def test_good_response_yields_the_whole_file_without_fences() -> None:
    code = extract_candidate(_response("good.md"), "add.Tensor")
    assert code.startswith("import torch\n")
    assert "@triton.jit" in code and "def add__Tensor_kernel_impl(" in code
    assert "```" not in code and "Notes:" not in code
    assert code.endswith("return out\n")


def test_response_without_a_code_block_is_rejected_with_reason() -> None:
    with pytest.raises(ExtractError, match="^no code block in the response$"):
        extract_candidate(_response("no_code.md"), "add.Tensor")


def test_response_without_the_required_function_is_rejected_naming_it() -> None:
    with pytest.raises(ExtractError) as info:
        extract_candidate(_response("no_function.md"), "add.Tensor")
    assert info.value.reason == "the code does not define add__Tensor_kernel_impl"


def test_two_blocks_defining_the_function_give_the_last_one() -> None:
    code = extract_candidate(_response("two_blocks.md"), "add.Tensor")
    assert "corrected version" in code
    assert code.count("def add__Tensor_kernel_impl") == 1


def test_block_that_defines_the_function_wins_over_a_later_usage_block() -> None:
    text = (
        "```python\ndef relu__default_kernel_impl(x):\n    return x\n```\n"
        "Use it:\n```python\ny = relu__default_kernel_impl(x)\n```\n"
    )
    assert "def relu__default_kernel_impl" in extract_candidate(text, "relu.default")


@pytest.mark.parametrize("fence", ["```python", "```py", "```", "```Python3", "~~~python"])
def test_python_py_and_bare_fences_are_accepted(fence: str) -> None:
    closing = fence[:3]
    text = f"Here:\n{fence}\ndef add__Tensor_kernel_impl(a, b):\n    return a\n{closing}\n"
    assert extract_candidate(text, "add.Tensor").startswith("def add__Tensor_kernel_impl")


def test_blocks_in_other_languages_are_not_code() -> None:
    text = "```bash\ndef add__Tensor_kernel_impl(a, b):\n    return a\n```\n"
    with pytest.raises(ExtractError, match="no code block"):
        extract_candidate(text, "add.Tensor")


def test_syntax_error_is_rejected_with_the_line() -> None:
    text = "```python\nimport torch\ndef add__Tensor_kernel_impl(a, b)\n    return a\n```"
    with pytest.raises(ExtractError, match=r"^the code does not parse: .* at line 2$"):
        extract_candidate(text, "add.Tensor")


def test_unclosed_block_that_does_not_parse_says_the_answer_was_cut_off() -> None:
    text = "```python\ndef add__Tensor_kernel_impl(a, b):\n    return foo(a,\n"
    with pytest.raises(ExtractError, match="cut off"):
        extract_candidate(text, "add.Tensor")


def test_function_bound_by_assignment_counts_as_defined() -> None:
    text = "```python\ndef _impl(a, b):\n    return a\n\nadd__Tensor_kernel_impl = _impl\n```"
    assert "add__Tensor_kernel_impl = _impl" in extract_candidate(text, "add.Tensor")


def test_function_nested_in_a_class_is_not_defined_at_top_level() -> None:
    text = "```python\nclass K:\n    def add__Tensor_kernel_impl(self, a):\n        return a\n```"
    with pytest.raises(ExtractError, match="does not define add__Tensor_kernel_impl"):
        extract_candidate(text, "add.Tensor")


def test_windows_line_endings_are_handled() -> None:
    text = "```python\r\ndef add__Tensor_kernel_impl(a, b):\r\n    return a\r\n```\r\n"
    assert (
        extract_candidate(text, "add.Tensor")
        == "def add__Tensor_kernel_impl(a, b):\n    return a\n"
    )


def test_empty_response_has_no_code_block() -> None:
    with pytest.raises(ExtractError, match="no code block"):
        extract_candidate("", "add.Tensor")
