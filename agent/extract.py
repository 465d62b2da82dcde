"""Code extraction: the one place that turns a model's answer into a candidate kernel file.

Contract: `extract_candidate(text, op) -> str` returns the source of the fenced code block that
defines `<folder>_kernel_impl` (e.g. `add__Tensor_kernel_impl`), or raises `ExtractError(reason)`:
- "no code block in the response" when there is no ```python / ```py / bare ``` block;
- "the code does not define add__Tensor_kernel_impl" when no block defines the function at its top
  level (a `def`, or an assignment such as `add__Tensor_kernel_impl = _impl`);
- "the code does not parse: ..." with the line, when the chosen block is not valid Python
  (a fence left open usually means the answer was cut off at max_output_tokens; the reason says so).
When several blocks define the function the last one wins: models put the corrected file last.
Blocks tagged with another language (```bash, ```text) are not code for this purpose.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass

from evaluator import safe_ast
from evaluator.naming import kernel_function_name

_PYTHON_TAGS = {"", "python", "py", "python3", "py3"}
# An opening fence: three or more backticks (or tildes), then an optional info string.
_FENCE = re.compile(r"^[ \t]*(?P<fence>`{3,}|~{3,})[ \t]*(?P<info>[^\n`]*)$", re.MULTILINE)


class ExtractError(ValueError):
    """The answer holds no usable candidate; `reason` says why in one line."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass
class CodeBlock:
    code: str
    closed: bool


def code_blocks(text: str) -> list[CodeBlock]:
    """Every Python (or untagged) fenced block, in order; an unclosed last fence runs to the end."""
    blocks: list[CodeBlock] = []
    pos = 0
    while True:
        opening = _FENCE.search(text, pos)
        if opening is None:
            return blocks
        fence = opening.group("fence")
        tag = (
            opening.group("info").strip().split(" ", 1)[0].lower() if opening.group("info") else ""
        )
        body_start = opening.end() + 1
        closing = re.compile(
            rf"^[ \t]*{re.escape(fence[0])}{{{len(fence)},}}[ \t]*$", re.MULTILINE
        ).search(text, body_start)
        body_end = closing.start() if closing else len(text)
        if tag in _PYTHON_TAGS:
            blocks.append(CodeBlock(text[body_start:body_end], closed=closing is not None))
        if closing is None:
            return blocks
        pos = closing.end()


def _mentions_function(code: str, name: str) -> bool:
    pattern = rf"^(def\s+{re.escape(name)}\s*\(|{re.escape(name)}\s*(:[^=\n]*)?=)"
    return re.search(pattern, code, re.MULTILINE) is not None


def _defines_function(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return True
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            if node.target.id == name and node.value is not None:
                return True
    return False


def _clean(code: str) -> str:
    lines = code.splitlines()
    while lines and not lines[0].strip():
        lines.pop(0)
    while lines and not lines[-1].strip():
        lines.pop()
    return "\n".join(lines) + "\n"


def extract_candidate(text: str, op: str) -> str:
    """The candidate file for `op` from a model's answer; ExtractError(reason) when there is none."""
    name = kernel_function_name(op)
    blocks = code_blocks((text or "").replace("\r\n", "\n"))
    if not blocks:
        raise ExtractError("no code block in the response")
    defining = [b for b in blocks if _mentions_function(b.code, name)]
    if not defining:
        raise ExtractError(f"the code does not define {name}")
    block = defining[-1]
    code = _clean(block.code)
    try:
        tree = safe_ast.parse(code)
    except SyntaxError as exc:
        where = f" at line {exc.lineno}" if exc.lineno else ""
        cut = (
            ""
            if block.closed
            else " (the code block is not closed: the answer was probably cut off)"
        )
        raise ExtractError(f"the code does not parse: {exc.msg}{where}{cut}") from None
    if not _defines_function(tree, name):
        raise ExtractError(f"the code does not define {name}")
    return code
