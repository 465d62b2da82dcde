"""Source text of the real kernel modules in `kernels/`, cut and specialised for one emitted file.

A kernel module is ordinary Python that ruff and an editor read. The writer copies text out of it:

- `emitted(name, section, values=...)`: the text of `kernels/<name>.py` from its
  line `# ---- emitted: SECTION ----` to the next such line or the end (trailing blank lines
  dropped). Above the first marker: the module docstring and the imports that let a linter
  resolve what the emitted file gets from its header, the runtime module or another section
  emitted with it. The section is copied with
  - each line `# inline: A, B` replaced by runtime definitions (see `runtime`), one blank line
    pair between them;
  - each top-level `NAME = value` whose NAME is in `values` given that value's source text
    instead (the module holds a placeholder: the writer specialises it);
  - `  # noqa...` comments dropped (they speak to the module's linter, not to the emitted file).
- `definitions(name)`: each top-level function, class or assignment of `kernels/<name>.py` by
  its name (decorators and all), and each region between `# region NAME` and `# endregion NAME`;
- `bodies(name)`: the statements of each top-level function of `kernels/<name>.py` without its
  closing `return out`, dedented: the body of one elementwise kernel (the parameters only name
  what the body reads, for the linter);
- `runtime(*names)`: those of `kernels/runtime.py`, the one copy of the helpers every emitted
  file may need, joined;
- `expand(text, ...)`: a kernel written for one canonical case (one operand, one scalar),
  specialised: regions between `# begin TAG` and `# end TAG` lines repeated once per `Copy`
  (`per NAME` tags) with names replaced, kept or dropped by a flag (`FLAG`, `not FLAG`), or
  replaced by a text (a kernel's body).

Emitted files stay self-contained: they get copies of this text, never an import of atenforge.
"""

from __future__ import annotations

import ast
import functools
import re
import textwrap
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from evaluator import safe_ast

KERNELS_DIR = Path(__file__).resolve().parent / "kernels"
_SECTION = re.compile(r"^# ---- emitted: (\w+) ----\n", re.MULTILINE)
_INLINE = re.compile(r"^# inline: (.+)$", re.MULTILINE)
_NOQA = re.compile(r"  # noqa\b.*$", re.MULTILINE)


@functools.cache
def _text(name: str) -> str:
    return (KERNELS_DIR / f"{name}.py").read_text(encoding="utf-8")


@functools.cache
def _sections(name: str) -> dict[str, str]:
    text = _text(name)
    marks = list(_SECTION.finditer(text))
    ends = [m.start() for m in marks[1:]] + [len(text)]
    return {
        m.group(1): text[m.end() : end].rstrip("\n") + "\n"
        for m, end in zip(marks, ends, strict=True)
    }


def _top_level(name: str) -> tuple[str, list[str], list[ast.stmt]]:
    """kernels/<name>.py as text, lines (ends kept) and top-level statements."""
    text = _text(name)
    return text, text.splitlines(keepends=True), safe_ast.parse(text).body


@functools.cache
def definitions(name: str) -> dict[str, str]:
    """Name -> source text of each top-level definition and region of kernels/<name>.py."""
    text, lines, nodes = _top_level(name)
    parts: dict[str, str] = {}
    for node in nodes:
        if isinstance(node, ast.FunctionDef | ast.ClassDef):
            names = [node.name]
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            names = [t.id for t in targets if isinstance(t, ast.Name)]
        else:
            continue
        first = min([node.lineno] + [d.lineno for d in getattr(node, "decorator_list", [])])
        for name in names:
            parts[name] = "".join(lines[first - 1 : node.end_lineno]).rstrip("\n")
    for match in re.finditer(
        r"^# region (\w+)\n(.*?)^# endregion \1\n", text, re.MULTILINE | re.DOTALL
    ):
        parts[match.group(1)] = match.group(2).rstrip("\n")
    return parts


@functools.cache
def bodies(name: str) -> dict[str, str]:
    """Function name -> its statements, dedented, without the closing `return out`."""
    _, lines, nodes = _top_level(name)
    parts: dict[str, str] = {}
    for node in nodes:
        if not isinstance(node, ast.FunctionDef):
            continue
        last = node.body[-1]
        if not (isinstance(last, ast.Return) and ast.unparse(last) == "return out"):
            raise ValueError(f"kernels/{name}.py: {node.name} must end with `return out`")
        if not lines[node.lineno - 1].rstrip().endswith(":"):
            raise ValueError(
                f"kernels/{name}.py: the signature of {node.name} must fit on one line"
            )
        body = "".join(lines[node.lineno : last.lineno - 1])
        parts[node.name] = textwrap.dedent(body).strip("\n")
    return parts


def runtime(*names: str) -> str:
    """The runtime definitions `names`, in that order, separated by two blank lines."""
    parts = definitions("runtime")
    missing = [n for n in names if n not in parts]
    if missing:
        raise KeyError(f"kernels/runtime.py defines no {', '.join(missing)}")
    return "\n\n\n".join(parts[n] for n in names)


def _set_values(text: str, values: dict[str, str]) -> str:
    """Replace the value of each top-level single-line `NAME = value` named in `values`."""
    lines = text.splitlines(keepends=True)
    seen = set()
    for node in safe_ast.parse(text).body:
        if not (
            isinstance(node, ast.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id in values
        ):
            continue
        value = node.value
        if value.lineno != value.end_lineno:
            raise ValueError(f"placeholder {node.targets[0].id} must fit on one line")
        raw = lines[value.lineno - 1].encode()
        new = values[node.targets[0].id].encode()
        lines[value.lineno - 1] = (
            raw[: value.col_offset] + new + raw[value.end_col_offset :]
        ).decode()
        seen.add(node.targets[0].id)
    if missing := set(values) - seen:
        raise KeyError(f"no top-level placeholder {', '.join(sorted(missing))}")
    return "".join(lines)


def emitted(
    name: str,
    section: str,
    values: dict[str, str] | None = None,
) -> str:
    """Section `section` of kernels/<name>.py, specialised (see the module docstring)."""
    sections = _sections(name)
    if section not in sections:
        raise KeyError(f"kernels/{name}.py has no line '# ---- emitted: {section} ----'")
    text = _NOQA.sub("", sections[section])
    if values:
        text = _set_values(text, values)
    return _INLINE.sub(lambda m: runtime(*(n.strip() for n in m.group(1).split(","))), text)


_BEGIN = re.compile(r"^( *)# begin (.+)$")
_END = re.compile(r"^ *# end (.+)$")


@dataclass(frozen=True)
class Copy:
    """One copy of a repeated region: whole-word renames (a name or placeholder -> its text)
    and the flags read by the conditional regions inside it."""

    names: Mapping[str, str]
    flags: Mapping[str, bool] = field(default_factory=dict)


def _renamer(names: Mapping[str, str]):
    """A function that replaces each of `names` in a line, as a whole word, in one pass."""
    if not names:
        return lambda line: line
    words = re.compile(
        r"\b(" + "|".join(re.escape(n) for n in sorted(names, key=len, reverse=True)) + r")\b"
    )
    return lambda line: words.sub(lambda m: names[m.group(1)], line)


def expand(
    text: str,
    *,
    names: Mapping[str, str] | None = None,
    flags: Mapping[str, bool] | None = None,
    repeat: Mapping[str, Sequence[Copy]] | None = None,
    replace: Mapping[str, str] | None = None,
) -> str:
    """`text` with its regions resolved and marker lines dropped. A region runs from a line
    `# begin TAG` to the next line `# end TAG`; by TAG:

    - `per NAME`: written once per Copy of `repeat[NAME]` (none: dropped), with that copy's
      names and flags added to the outer ones;
    - `FLAG` / `not FLAG`: kept when `flags[FLAG]` is true / false;
    - a key of `replace`: that text instead, each non-blank line indented as the marker.

    Every line outside a replaced region gets each name of `names` (and of the enclosing
    copies) replaced by its text, as a whole word, in one pass. An unknown tag or a region
    without its end raises ValueError.
    """
    repeat = repeat or {}
    replace = replace or {}

    def resolve(lines: list[str], names: dict[str, str], flags: dict[str, bool]) -> list[str]:
        out: list[str] = []
        rename = _renamer(names)
        i = 0
        while i < len(lines):
            begin = _BEGIN.match(lines[i])
            if begin is None:
                out.append(rename(lines[i]))
                i += 1
                continue
            pad, tag = begin.groups()
            end = _region_end(lines, i, tag)
            inner = lines[i + 1 : end]
            negated = tag.startswith("not ")
            flag = tag.removeprefix("not ")
            if tag.startswith("per ") and tag[4:] in repeat:
                for copy in repeat[tag[4:]]:
                    out += resolve(inner, {**names, **copy.names}, {**flags, **copy.flags})
            elif tag in replace:
                text = textwrap.indent(replace[tag], pad, lambda line: bool(line.strip()))
                out += text.split("\n")
            elif flag in flags:
                if flags[flag] != negated:
                    out += resolve(inner, names, flags)
            else:
                raise ValueError(f"no copies, flag or text for region '{tag}'")
            i = end + 1
        return out

    return "\n".join(resolve(text.split("\n"), dict(names or {}), dict(flags or {})))


def _region_end(lines: list[str], begin: int, tag: str) -> int:
    """Index of the line `# end TAG` that closes the region opened at lines[begin]."""
    for j in range(begin + 1, len(lines)):
        end = _END.match(lines[j])
        if end is not None and end[1] == tag:
            return j
    raise ValueError(f"line '# begin {tag}' has no '# end {tag}'")
