"""What a builtin writer is asked for, and the one signature every writer has.

A writer turns a `KernelRequest` into the full text of a kernel file or returns None
when it cannot write this overload for these cases (e.g. complex dtypes). Writers are pure: the
same request gives the same text, so the builtin provider is deterministic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any


@dataclass
class KernelRequest:
    """One kernel to write: the overload (`add.Tensor`), its ATen schema, its test cases, a variant.

    `variant` 0 is the writer's best kernel; higher variants are more conservative fallbacks that
    the provider asks for after a failed round (the policy is in `provider.py`). A writer that has
    fewer variants treats a higher number as its last one.
    """

    op: str
    schema: str
    cases: list[Any] = field(default_factory=list)  # evaluator.cases.testcase.TestCase
    variant: int = 0


Writer = Callable[[KernelRequest], str | None]
