"""atenforge's evaluator: judges Triton kernels for ATen operators.

It never imports `agent`. Kernels are untrusted and run only in sandbox processes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from evaluator.evaluate import Report


def evaluate(*args: Any, **kwargs: Any) -> Report:
    """See `evaluator.evaluate.evaluate` (imported lazily: torch is heavy)."""
    from evaluator.evaluate import evaluate as _evaluate

    return _evaluate(*args, **kwargs)
