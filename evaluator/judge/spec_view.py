"""What a job spec names, read the same way by the verifier and the runner: the evaluator config
the parent validated (as attributes, without pydantic), the operator's ATen overload and which of
its arguments the overload writes."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import torch

from evaluator.naming import normalize_op


def config_view(data: dict[str, Any]) -> Any:
    """Attribute access over the EvalConfig the parent validated and dumped: the child imports
    only torch, triton, numpy, the standard library and `evaluator` (no pydantic)."""
    view = SimpleNamespace(**data)
    for section in ("correctness", "timing", "sandbox", "cpu"):
        setattr(view, section, SimpleNamespace(**data[section]))
    return view


def aten_overload(op: str) -> Any:
    base, overload = normalize_op(op).split(".", 1)
    return getattr(getattr(torch.ops.aten, base), overload)


def mutable_positions(packet: Any) -> tuple[set[int], set[str]]:
    """Positions and names of arguments the overload writes to (in-place self, out=)."""
    positions: set[int] = set()
    names: set[str] = set()
    for i, arg in enumerate(packet._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            names.add(arg.name)
            if not arg.kwarg_only:
                positions.add(i)
    return positions, names
