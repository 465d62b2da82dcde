"""Which operators the builtin provider can write: a static table of the family modules.

`FAMILY_MODULES` maps each family's display name to its module; every family module exports
`WRITERS` (normalized overload such as `add.Tensor` -> Writer). `WRITERS` merges them, `FAMILIES`
maps each family to the overloads it covers and `FAMILY_OF` the other way. No two families
write the same overload (tests/builtin/test_builtin_registry.py checks it).
"""

from __future__ import annotations

from types import ModuleType

from agent.providers.builtin import (
    backward,
    binary,
    conv,
    copy,
    embedding,
    gather,
    grouped_mm,
    loss,
    matmul,
    movement,
    norm,
    norm_extra,
    pooling,
    reduction,
    scan,
    softmax,
    unary,
)
from agent.providers.builtin.request import Writer

FAMILY_MODULES: dict[str, ModuleType] = {
    "unary elementwise": unary,
    "binary elementwise": binary,
    "backward elementwise": backward,
    "reduction": reduction,
    "softmax": softmax,
    "norm": norm,
    "matmul": matmul,
    "copy": copy,
    "gather": gather,
    "movement": movement,
    "embedding backward": embedding,
    "loss": loss,
    "pooling": pooling,
    "scan": scan,
    "norm_extra": norm_extra,
    "convolution": conv,
    "grouped matmul": grouped_mm,
}

FAMILIES: dict[str, list[str]] = {
    family: sorted(module.WRITERS) for family, module in FAMILY_MODULES.items()
}
WRITERS: dict[str, Writer] = {
    op: writer for module in FAMILY_MODULES.values() for op, writer in module.WRITERS.items()
}
FAMILY_OF: dict[str, str] = {op: family for family, ops in FAMILIES.items() for op in ops}
