"""Speed-round proposals of the builtin provider: variants of the kept kernel file, no model needed.

Contract: `knob_variants(code) -> list[(label, code)]` rewrites one tuning constant of a rendered
kernel file at a time: module-level lines `_NAME = <int>` (or `_NAME = <a> if <cond> else <b>`,
whose `else` value is the GPU one) whose name says warps or stages (halved and doubled within
Triton's bounds) or a tile, block, element, chunk, row or column count (a power of two, halved
and doubled), and `_NAME = True|False` code-path switches (flipped; diagnostic and interpreter
switches are left alone). `propose(code, tried, alternatives) -> (label, code) | None` is the
first knob variant, then the first alternative file (the writer's other variants), whose sha256 is
not in `tried`; `speed_completion(...)` wraps it as the provider's answer. Order: warps, then
tile sizes, then stages, then switches, each in file order. Pure and deterministic: the same kept
file and `tried` give the same proposal, so a variant that won becomes the base of the next round
and the change back to the old file is already tried.
"""

from __future__ import annotations

import hashlib
import re
import time
from collections.abc import Iterable

from agent.providers.base import Completion

_INT_LINE = re.compile(
    r"^(?P<name>_[A-Z0-9_]+) = (?:(?P<small>\d+) if (?P<cond>[^#]+?) else )?(?P<value>\d+)"
    r"(?P<rest>\s*(?:#.*)?)$",
    re.MULTILINE,
)
_BOOL_LINE = re.compile(
    r"^(?P<name>_[A-Z0-9_]+) = (?P<value>True|False)(?P<rest>\s*(?:#.*)?)$", re.MULTILINE
)
_SIZE_WORDS = ("TILE", "BLOCK", "ELEMS", "CHUNK", "ROWS", "COLS")
_LEFT_ALONE = ("DEBUG", "INTERPRET", "CPU", "CONSERVATIVE", "MIN", "MAX", "TRITON")
_BOUNDS = {"WARPS": (1, 32), "STAGES": (1, 8)}
_SIZE_BOUNDS = (16, 1 << 16)


def _kind(name: str) -> str | None:
    words = name.strip("_").split("_")
    if any(w in _LEFT_ALONE for w in words):
        return None
    if "WARPS" in words:
        return "WARPS"
    if "STAGES" in words:
        return "STAGES"
    if any(w in _SIZE_WORDS for w in words):
        return "SIZE"
    return None


def _is_power_of_two(n: int) -> bool:
    return n > 0 and n & (n - 1) == 0


def _int_variants(code: str) -> dict[str, list[tuple[str, str]]]:
    found: dict[str, list[tuple[str, str]]] = {"WARPS": [], "SIZE": [], "STAGES": []}
    for m in _INT_LINE.finditer(code):
        kind = _kind(m["name"])
        value = int(m["value"])
        if kind is None or not _is_power_of_two(value):
            continue
        low, high = _BOUNDS.get(kind, _SIZE_BOUNDS)
        for new in (value * 2, value // 2):
            if not low <= new <= high:
                continue
            head = f"{m['name']} = "
            if m["cond"] is not None:
                head += f"{m['small']} if {m['cond']} else "
            line = f"{head}{new}{m['rest']}"
            text = code[: m.start()] + line + code[m.end() :]
            found[kind].append((f"{m['name']} {value} -> {new}", text))
    return found


def _bool_variants(code: str) -> list[tuple[str, str]]:
    out = []
    for m in _BOOL_LINE.finditer(code):
        words = m["name"].strip("_").split("_")
        if any(w in _LEFT_ALONE for w in words):
            continue
        new = "False" if m["value"] == "True" else "True"
        text = code[: m.start()] + f"{m['name']} = {new}{m['rest']}" + code[m.end() :]
        out.append((f"{m['name']} {m['value']} -> {new}", text))
    return out


def knob_variants(code: str) -> list[tuple[str, str]]:
    """Every one-constant rewrite of `code`, in the order they are proposed."""
    ints = _int_variants(code)
    return [*ints["WARPS"], *ints["SIZE"], *ints["STAGES"], *_bool_variants(code)]


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def propose(
    code: str, tried: Iterable[str], alternatives: Iterable[tuple[str, str]] = ()
) -> tuple[str, str] | None:
    """The first variant of `code`, then of `alternatives`, not judged yet (see module doc)."""
    seen = set(tried) | {_sha(code)}
    for label, text in [*knob_variants(code), *alternatives]:
        if _sha(text) not in seen:
            return label, text
    return None


def speed_completion(
    model: str, op: str, speed: dict, alternatives: Iterable[tuple[str, str]]
) -> Completion:
    """The builtin provider's answer in a speed round: one variant file, or a plain 'no more'."""
    start = time.perf_counter()
    best = str(speed.get("best_code") or "")
    choice = propose(best, speed.get("tried") or (), alternatives)
    if choice is None:
        text = f"builtin provider has no untried variant of its kernel for {op}.\n"
    else:
        label, source = choice
        text = f"Builtin variant for aten::{op}: {label}.\n\n```python\n{source.rstrip()}\n```\n"
    return Completion(
        text=text,
        model=model,
        latency_s=time.perf_counter() - start,
        raw={"speed_variant": choice[0] if choice else None, "written": choice is not None},
    )
