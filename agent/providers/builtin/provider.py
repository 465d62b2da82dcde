"""BuiltinProvider: writes Triton kernels from templates instead of asking a model.

It sits behind the same `Provider` interface as the LLM providers: `complete(messages, context)`
returns a `Completion` whose text is one sentence and one ```python block with the whole kernel
file, logged and tested like any model answer. It reads only `context` (op, schema, cases, round,
feedback); the rendered prompt in `messages` is ignored.

Honesty: for an operator no family covers, or cases a writer declines (e.g. complex dtypes), the
text has no code block and says "builtin provider has no writer for <op>; it covers: <families>",
so the round fails and the operator fails honestly.

Determinism: the text depends only on (op, cases, variant); no time, randomness or machine state.

Variant policy (`choose_variant`): variant 0, the writer's best kernel, on every first attempt
(no feedback). After a failed round (feedback present) the provider moves to the next, more
conservative variant: round r (rounds count from 1) gets variant r - 1, at least 1. Elementwise
writers have 0 = strided in-place indexing, 1 = contiguous copies of the inputs, 2 = contiguous
copies and small fixed blocks; a writer with fewer variants treats a higher number as its last.
Every worker follows the same policy, so parallel workers of one operator produce the same text.
"""

from __future__ import annotations

import time
from collections.abc import Mapping

from agent.providers.base import Completion, Message, OperatorContext, ProviderError
from agent.providers.builtin import codegen, registry, variants
from agent.providers.builtin.request import KernelRequest, Writer
from evaluator.naming import normalize_op


def choose_variant(context: OperatorContext) -> int:
    """0 without feedback; after a failed round r (counted from 1), variant max(1, r - 1)."""
    if not context.feedback:
        return 0
    return max(1, context.round - 1)


class BuiltinProvider:
    """Provider protocol implementation backed by the builtin family writers."""

    name = "builtin"
    model = "builtin-v1"

    def __init__(
        self,
        writers: Mapping[str, Writer] | None = None,
        families: Mapping[str, list[str]] | None = None,
    ) -> None:
        self._writers = dict(registry.WRITERS if writers is None else writers)
        self._families = dict(registry.FAMILIES if families is None else families)
        self._family_of = {op: fam for fam, ops in self._families.items() for op in ops}

    def can_write(self, op: str) -> bool:
        """Whether some family has a writer for this overload (it may still decline odd cases)."""
        return normalize_op(op) in self._writers

    def covered_ops(self) -> list[str]:
        return sorted(self._writers)

    def complete(self, messages: list[Message], context: OperatorContext) -> Completion:
        start = time.perf_counter()
        op = normalize_op(context.op)
        speed = (context.feedback or {}).get("speed")
        if speed:  # a speed round: a variant of the kept file (variants.py)
            return variants.speed_completion(self.model, op, speed, self._alternatives(op, context))
        variant = choose_variant(context)
        family = self._family_of.get(op, "")
        writer = self._writers.get(op)
        source: str | None = None
        if writer is not None:
            request = KernelRequest(
                op=op,
                schema=context.schema or _schema_text(op),
                cases=list(context.cases),
                variant=variant,
            )
            try:
                source = writer(request)
            except Exception as exc:  # a writer bug is a failed round with its reason, not a crash
                raise ProviderError(
                    f"builtin {family or 'family'} writer for {op} failed: {type(exc).__name__}: {exc}"
                ) from exc
        if source is None:
            text = self._decline_text(op, declined=writer is not None)
        else:
            text = (
                f"Builtin {family} kernel for aten::{op} (variant {variant}).\n\n"
                f"```python\n{source.rstrip()}\n```\n"
            )
        return Completion(
            text=text,
            model=self.model,
            latency_s=time.perf_counter() - start,
            raw={"variant": variant, "family": family, "written": source is not None},
        )

    def _alternatives(self, op: str, context: OperatorContext) -> list[tuple[str, str]]:
        """The writer's variants 0-2 as (label, file) for a speed round (the others' code paths)."""
        writer = self._writers.get(op)
        out: list[tuple[str, str]] = []
        for v in range(3) if writer is not None else ():
            request = KernelRequest(op, context.schema or _schema_text(op), list(context.cases), v)
            try:
                source = writer(request)
            except Exception:  # noqa: BLE001 - a variant the writer cannot make is not proposed
                source = None
            if source is not None:
                out.append((f"writer variant {v}", source))
        return out

    def _decline_text(self, op: str, *, declined: bool) -> str:
        covers = ", ".join(f"{fam} ({len(ops)} overloads)" for fam, ops in self._families.items())
        if declined:
            return (
                f"builtin provider has no writer for {op} with these cases (its "
                f"{self._family_of.get(op, '')} writer does not handle their dtypes or arguments); "
                f"it covers: {covers}.\n"
            )
        return f"builtin provider has no writer for {op}; it covers: {covers}.\n"


def _schema_text(op: str) -> str:
    try:
        return str(codegen.schema_of(op))
    except KeyError:
        return ""
