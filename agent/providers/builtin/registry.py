"""Which operators the builtin provider can write: one plain dict merged from the family modules.

`WRITERS` maps a normalized overload (`add.Tensor`) to its Writer; `FAMILIES` maps each family's
name to the overloads it covers. Family modules each export `WRITERS` (and optionally `FAMILY`, a
display name). The elementwise families (unary, binary, backward) always load; the others are
imported when present, so this works while they are being written (a missing module is logged at
debug level; a module that exists but fails to import is logged as a warning). The first family
to claim an overload keeps it.
"""

from __future__ import annotations

import importlib
import logging

from agent.providers.builtin import backward, binary, unary
from agent.providers.builtin.request import Writer

log = logging.getLogger(__name__)

# Optional family modules, imported if present (written separately).
OPTIONAL_FAMILIES = (
    "reduction", "softmax", "norm", "matmul", "copy", "gather",
    "movement", "loss", "pooling", "scan", "norm_extra", "conv", "grouped_mm",
)  # fmt: skip


def _optional_modules() -> list[object]:
    modules = []
    for name in OPTIONAL_FAMILIES:
        qualified = f"{__package__}.{name}"
        try:
            modules.append(importlib.import_module(qualified))
        except ImportError as exc:
            if exc.name == qualified:
                log.debug("builtin family %s is not available", name)
            else:
                log.warning("builtin family %s failed to import: %s", name, exc)
    return modules


def _merge() -> tuple[dict[str, Writer], dict[str, list[str]]]:
    writers: dict[str, Writer] = {}
    families: dict[str, list[str]] = {}
    for module in [unary, binary, backward, *_optional_modules()]:
        family = getattr(module, "FAMILY", module.__name__.rsplit(".", 1)[-1])
        claimed = []
        for op, writer in getattr(module, "WRITERS", {}).items():
            if op in writers:
                log.debug("builtin: %s already written by another family; %s skipped", op, family)
                continue
            writers[op] = writer
            claimed.append(op)
        families[family] = sorted(claimed)
    return writers, families


WRITERS, FAMILIES = _merge()
FAMILY_OF: dict[str, str] = {op: family for family, ops in FAMILIES.items() for op in ops}
