"""Prompt rendering: the jinja2 templates in `prompts/` (or the user's own) and the data they see.

Contract:
- `build_op_context(op, cases, num_prompt_cases) -> dict`: everything a template may say about
  one operator: names from `evaluator.naming`, the ATen schema from torch, the Python signature
  the kernel must have, what it returns and mutates, representative serialized test cases (most
  frequent first, the largest always among them) with their dtypes.
- `PromptRenderer(templates_dir).system(ctx) / .generate(ctx) / .refine(ctx, previous_code,
  feedback, truncated=False) -> str`, through one `Environment(undefined=StrictUndefined, trim_blocks=True,
  lstrip_blocks=True)`: a variable a template uses but the context lacks fails loudly.

Prompt text lives only in the templates. A user's `templates_dir` is searched first, the shipped
`prompts/` second, so overriding one template does not mean copying all three. A broken template
(missing file, syntax error, unknown variable) is a UsageError naming it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import jinja2
import torch

from agent.config import PROMPTS_DIR
from evaluator.cases.testcase import CODE_OF_DTYPE, TestCase
from evaluator.errors import UsageError
from evaluator.naming import (
    base_name,
    kernel_file_name,
    kernel_function_name,
    normalize_op,
    op_to_folder,
)

TEMPLATE_NAMES = ("system.j2", "generate.j2", "refine.j2", "speed.j2")

# A case can list a hundred tensors (cat, _foreach_*); past this it costs tokens and teaches nothing.
MAX_CASE_CHARS = 1500

# Beyond this many elements a 32-bit offset overflows (an illegal memory access).
INT32_LIMIT = 2**31


def aten_schema(op: str) -> torch.FunctionSchema | None:
    """torch's schema of the overload, or None when this torch build does not know it."""
    base, overload = normalize_op(op).split(".", 1)
    try:
        packet = getattr(torch.ops.aten, base)
        return getattr(packet, overload)._schema
    except (AttributeError, RuntimeError):
        return None


def _is_mutated(arg: Any) -> bool:
    return bool(arg.alias_info is not None and arg.alias_info.is_write)


def _signature(function_name: str, schema: torch.FunctionSchema) -> str:
    """The Python signature of the kernel entry point, e.g. `f(self, other, *, alpha=1)`."""
    parts: list[str] = []
    star = False
    for arg in schema.arguments:
        if arg.kwarg_only and not star:
            parts.append("*")
            star = True
        default = f"={arg.default_value!r}" if arg.has_default_value() else ""
        parts.append(f"{arg.name}{default}")
    return f"{function_name}({', '.join(parts)})"


def _case_dtypes(case: TestCase) -> list[str]:
    seen: list[str] = []
    for spec in case.tensor_specs():
        code = CODE_OF_DTYPE.get(spec.dtype, str(spec.dtype))
        if code not in seen:
            seen.append(code)
    return seen


def _largest_numel(case: TestCase) -> int:
    return max((spec.numel() for spec in case.tensor_specs()), default=0)


def _shorten(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def representative_cases(cases: Sequence[TestCase], num: int) -> list[TestCase]:
    """Most frequent first (ties: larger first); the largest case always makes the cut."""
    ranked = sorted(cases, key=lambda c: (-c.count, -c.total_bytes()))
    chosen = ranked[:num]
    if cases and num >= 2:
        largest = max(cases, key=lambda c: c.total_bytes())
        # The largest shapes are where offsets overflow and blocks tile badly: always show one.
        if not any(c is largest for c in chosen) and len(chosen) == num:
            chosen[-1] = largest
    return chosen


def build_op_context(op: str, cases: Sequence[TestCase], num_prompt_cases: int) -> dict[str, Any]:
    """The template variables for one operator (see the module docstring)."""
    op = normalize_op(op)
    function_name = kernel_function_name(op)
    schema = aten_schema(op)
    arguments: list[dict[str, Any]] = []
    returns: list[dict[str, Any]] = []
    if schema is not None:
        arguments = [
            {
                "name": a.name,
                "type": str(a.type),
                "default": repr(a.default_value) if a.has_default_value() else None,
                "kwarg_only": bool(a.kwarg_only),
                "mutated": _is_mutated(a),
            }
            for a in schema.arguments
        ]
        returns = [
            {"name": r.name, "type": str(r.type), "mutated": _is_mutated(r)} for r in schema.returns
        ]
    mutated_args = [a for a in arguments if a["mutated"]]
    schema_text = str(schema) if schema is not None else None
    all_dtypes: list[str] = []
    for case in cases:
        for code in _case_dtypes(case):
            if code not in all_dtypes:
                all_dtypes.append(code)
    max_numel = max((_largest_numel(c) for c in cases), default=0)
    shown = representative_cases(cases, num_prompt_cases)
    return {
        "op": op,
        "aten_name": f"aten.{op}",
        "base_name": base_name(op),
        "overload": op.split(".", 1)[1],
        "folder": op_to_folder(op),
        "file_name": kernel_file_name(op),
        "function_name": function_name,
        "schema": schema_text,
        "signature": _signature(function_name, schema) if schema is not None else None,
        "arguments": arguments,
        "returns": returns,
        "returns_text": schema_text.rsplit(" -> ", 1)[-1] if schema_text else None,
        "mutated_args": [a["name"] for a in mutated_args],
        "is_inplace": any(not a["kwarg_only"] for a in mutated_args),
        "is_out": any(a["kwarg_only"] for a in mutated_args),
        "cases": [
            {
                "args": _shorten(c.serialize(), MAX_CASE_CHARS),
                "count": c.count,
                "dtypes": _case_dtypes(c),
                "numel": _largest_numel(c),
            }
            for c in shown
        ],
        "num_cases": len(cases),
        "dtypes": all_dtypes,
        "max_numel": max_numel,
        "needs_int64": max_numel >= INT32_LIMIT,
        "torch_version": torch.__version__.split("+", 1)[0],
    }


class PromptRenderer:
    """Renders system / generate / refine prompts from templates (user's first, then shipped)."""

    def __init__(self, templates_dir: Path | str | None = None) -> None:
        search: list[str] = []
        if templates_dir is not None:
            user_dir = Path(templates_dir).expanduser()
            if not user_dir.is_dir():
                raise UsageError(
                    f"templates dir '{templates_dir}' does not exist: set agent.templates_dir to "
                    f"a folder holding any of {', '.join(TEMPLATE_NAMES)}."
                )
            search.append(str(user_dir))
        search.append(str(PROMPTS_DIR))
        self.search_path = [Path(p) for p in search]
        self.env = jinja2.Environment(
            loader=jinja2.FileSystemLoader(search),
            undefined=jinja2.StrictUndefined,
            trim_blocks=True,
            lstrip_blocks=True,
            keep_trailing_newline=True,
            autoescape=False,
        )

    def template_path(self, name: str) -> Path:
        """Where `name` is read from (the first folder of the search path that has it)."""
        for folder in self.search_path:
            if (folder / name).is_file():
                return folder / name
        raise UsageError(f"prompt template {name} is missing from {self.search_path[-1]}.")

    def render(self, name: str, variables: dict[str, Any]) -> str:
        try:
            text = self.env.get_template(name).render(**variables)
        except jinja2.TemplateNotFound:
            raise UsageError(
                f"prompt template {name} is missing from {self.search_path[-1]}."
            ) from None
        except jinja2.TemplateSyntaxError as exc:
            raise UsageError(
                f"prompt template {exc.filename or name}:{exc.lineno}: {exc.message}."
            ) from None
        except jinja2.UndefinedError as exc:
            raise UsageError(
                f"prompt template {self.template_path(name)} uses an unknown variable: {exc.message}."
            ) from None
        return text.strip() + "\n"

    def system(self, ctx: dict[str, Any]) -> str:
        return self.render("system.j2", ctx)

    def generate(self, ctx: dict[str, Any]) -> str:
        return self.render("generate.j2", ctx)

    def refine(
        self, ctx: dict[str, Any], previous_code: str, feedback: str, *, truncated: bool = False
    ) -> str:
        """The next round's prompt. `previous_code` is "" when the last answer held no usable
        file; `truncated` when that answer was cut off at the output token limit."""
        variables = {
            **ctx,
            "previous_code": previous_code.rstrip("\n"),
            "feedback": feedback,
            "truncated": truncated,
        }
        return self.render("refine.j2", variables)
