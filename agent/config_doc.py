"""`configs/default.toml`, written from the config models: every key, its default, its meaning.

    python -m agent.config_doc --write    # rewrite configs/default.toml from the models
    python -m agent.config_doc --check    # exit 1 when the checked-in file differs

The pydantic models (`agent.config.RunConfig` and the `evaluator.config` models it embeds) are
the one source of defaults and descriptions; the TOML is their rendering, so a reader sees every
key in one file and loading it gives exactly the models' defaults. A key whose default is None is
a commented line (unset). tests/unit/test_config_doc.py holds the checked-in file to this output.
"""

from __future__ import annotations

import argparse
import json
import sys
import textwrap
from typing import Any

from pydantic import BaseModel

from agent.config import RunConfig, default_config_path

WIDTH = 100
HEADER = """\
# atenforge's defaults: every config key with its default value and meaning.
# Generated from the config models (agent/config.py, evaluator/config.py) by
#     python -m agent.config_doc --write
# Do not edit by hand: change a Field's default or description and regenerate. Your own TOML
# (--config FILE) only needs the keys it changes; flags override a few; API keys come from the
# environment only.
"""


def _toml_value(value: Any) -> str:
    if isinstance(value, BaseModel):
        value = value.model_dump()
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        if not value:
            return "{}"
        return "{ " + ", ".join(f"{_key(k)} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def _key(name: str) -> str:
    bare = name.replace("_", "a").replace("-", "a").isalnum()
    return name if bare else json.dumps(name)


def _comment(text: str) -> list[str]:
    return textwrap.wrap(text, WIDTH - 2, initial_indent="# ", subsequent_indent="# ")


def _render_model(model: BaseModel, section: str, out: list[str]) -> None:
    """Scalar keys of `model` first (TOML needs them before any sub-table), then sub-tables."""
    tables: list[tuple[str, BaseModel]] = []
    maps: list[tuple[str, str, dict[str, Any]]] = []
    rows: list[str] = []
    for name, field in type(model).model_fields.items():
        value = getattr(model, name)
        if isinstance(value, BaseModel):
            tables.append((name, value))
            continue
        if isinstance(value, dict) and value:
            maps.append((name, field.description or name, value))
            continue
        rows.extend(_comment(field.description or name))
        if value is None:
            rows.append(f"# {_key(name)} = ...  (unset)")
        else:
            rows.append(f"{_key(name)} = {_toml_value(value)}")
    if section:
        out.extend(["", f"[{section}]"])
    out.extend(rows)
    for name, description, mapping in maps:
        out.extend(["", *_comment(description), f"[{section}.{name}]" if section else f"[{name}]"])
        out.extend(f"{_key(k)} = {_toml_value(v)}" for k, v in mapping.items())
    for name, sub in tables:
        _render_model(sub, f"{section}.{name}" if section else name, out)


def render_default_toml() -> str:
    """The text `configs/default.toml` must hold: the models' defaults with their descriptions."""
    out: list[str] = [HEADER]
    _render_model(RunConfig(), "", out)
    return "\n".join(out) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m agent.config_doc", description=__doc__)
    group = parser.add_mutually_exclusive_group(required=True)
    group.add_argument("--write", action="store_true", help="rewrite configs/default.toml")
    group.add_argument("--check", action="store_true", help="exit 1 if it is out of date")
    group.add_argument("--print", action="store_true", help="print the rendering")
    args = parser.parse_args(argv)
    text = render_default_toml()
    path = default_config_path()
    if args.print:
        sys.stdout.write(text)
        return 0
    if args.write:
        path.write_text(text, encoding="utf-8")
        print(f"wrote {path}")
        return 0
    if path.read_text(encoding="utf-8") != text:
        print(f"{path} is out of date: run `python -m agent.config_doc --write`.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
