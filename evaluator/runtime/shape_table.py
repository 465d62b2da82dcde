"""Shape-aware dispatch for the backend: run our kernel only where a GPU evaluation measured it faster.

Contract:
- `ShapeTable.load(atenforge_results.json | run folder | dict, match="exact"|"nearest")` reads every
  passed test result with a finite `speedup` into `{op: {case text: speedup}}`;
  a table without any measured speedup (a CPU run) is a UsageError.
- `ShapeTable.decide(op, args, kwargs) -> (use_ours, why)`: the call's arguments are serialized
  as the trace recorder does (strides only when not contiguous); `exact` needs that very case
  measured faster than eager (speedup > 1); `nearest` falls back to the measured case with the
  same dtypes, ranks, layouts and non-tensor arguments whose element count is closest (within
  `nearest_factor`). Anything else runs in eager. Decisions are cached per argument signature.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from evaluator.cases.testcase import (
    CaseSyntaxError,
    TensorSpec,
    map_values,
    parse_case,
    serialize_case,
)
from evaluator.cases.trace_recorder import UnserializableArgument, serialize_call
from evaluator.errors import UsageError
from evaluator.naming import normalize_op
from evaluator.reports.runfolder import RESULTS_JSON, results_file
from evaluator.runtime.backend_selection import read_results


def _canonical_spec(spec: TensorSpec) -> TensorSpec:
    """Strides equal to the contiguous ones are dropped, as the trace recorder writes them."""
    if spec.stride is None:
        return spec
    contiguous, acc = [], 1
    for size in reversed(spec.shape):
        contiguous.append(acc)
        acc *= max(size, 1)
    if tuple(reversed(contiguous)) == tuple(spec.stride):
        return TensorSpec(spec.shape, spec.dtype, None)
    return spec


def _canonical(value: Any) -> Any:
    return map_values(value, lambda v: _canonical_spec(v) if isinstance(v, TensorSpec) else v)


def _shape_free(value: Any) -> Any:
    """A case with every tensor's shape blanked (dtype, rank and layout kept): its 'signature'."""
    if isinstance(value, TensorSpec):
        return ("T", len(value.shape), str(value.dtype), value.stride is None)
    if isinstance(value, list | tuple):
        return tuple(_shape_free(v) for v in value)
    if isinstance(value, dict):
        return tuple(sorted((k, _shape_free(v)) for k, v in value.items()))
    return repr(value)


def _total_numel(value: Any) -> int:
    if isinstance(value, TensorSpec):
        return value.numel()
    if isinstance(value, list | tuple):
        return sum(_total_numel(v) for v in value)
    if isinstance(value, dict):
        return sum(_total_numel(v) for v in value.values())
    return 0


@dataclass
class _Measured:
    text: str
    speedup: float
    signature: Any
    numel: int


@dataclass
class ShapeTable:
    """Measured speedups per operator and case, from a GPU evaluation.

    `match="exact"`: our kernel runs for a call only if that exact case (shapes, dtypes, strides,
    other arguments) was measured faster than eager. `match="nearest"`: a call with no exact
    entry takes the verdict of the measured case with the same dtypes, ranks and non-tensor
    arguments whose total element count is closest, if within `nearest_factor`; otherwise eager.
    """

    entries: dict[str, dict[str, _Measured]]
    source: str
    match: str = "exact"
    nearest_factor: float = 4.0
    _cache: dict[tuple[str, Any], tuple[bool, str]] = field(default_factory=dict, repr=False)

    @classmethod
    def load(
        cls,
        source: str | Path | dict[str, Any],
        *,
        match: str = "exact",
        nearest_factor: float = 4.0,
    ) -> ShapeTable:
        """From a atenforge_results.json (or its run folder), or from an already-read dict of one."""
        if match not in ("exact", "nearest"):
            raise UsageError(f"shape match {match!r} is unknown: use 'exact' or 'nearest'.")
        if isinstance(source, dict):
            data, where = source, "<dict>"
        else:
            path = results_file(source)
            if not path.is_file():
                raise UsageError(
                    f"shape table '{path}' does not exist: pass a GPU evaluation's {RESULTS_JSON}."
                )
            data, where = read_results(path), str(path)
        entries: dict[str, dict[str, _Measured]] = {}
        for op_data in data.get("operators", []):
            op = normalize_op(str(op_data.get("op", "")))
            for res in op_data.get("results", []) or []:
                speedup = res.get("speedup")
                if (
                    not res.get("passed")
                    or not isinstance(speedup, int | float)
                    or not math.isfinite(speedup)
                ):
                    continue
                try:
                    case = parse_case(str(res.get("args", "")))
                except CaseSyntaxError:
                    continue
                args, kwargs = _canonical(case.args), _canonical(case.kwargs)
                text = serialize_case(args, kwargs)
                entries.setdefault(op, {})[text] = _Measured(
                    text, float(speedup), _shape_free((args, kwargs)), _total_numel((args, kwargs))
                )
        if not entries:
            raise UsageError(
                f"shape table '{where}' holds no measured speedups: pass the {RESULTS_JSON} of an evaluation on a GPU."
            )
        return cls(entries=entries, source=where, match=match, nearest_factor=nearest_factor)

    def decide(self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[bool, str]:
        """(use our kernel?, why): why is one of faster, slower, nearest-faster, nearest-slower,
        unmeasured, unserializable."""
        key = (op, _fast_key(args), _fast_key(kwargs))
        hit = self._cache.get(key)
        if hit is None:
            hit = self._cache[key] = self._decide_slow(op, args, kwargs)
        return hit

    def _decide_slow(
        self, op: str, args: tuple[Any, ...], kwargs: dict[str, Any]
    ) -> tuple[bool, str]:
        table = self.entries.get(op)
        if not table:
            return False, "unmeasured"
        try:
            text = serialize_call(args, kwargs)
        except UnserializableArgument:
            return False, "unserializable"
        exact = table.get(text)
        if exact is not None:
            return (True, "faster") if exact.speedup > 1.0 else (False, "slower")
        if self.match != "nearest":
            return False, "unmeasured"
        case = parse_case(text)
        signature, numel = (
            _shape_free((case.args, case.kwargs)),
            _total_numel((case.args, case.kwargs)),
        )
        best, best_dist = None, math.inf
        for m in table.values():
            if m.signature != signature or m.numel <= 0 or numel <= 0:
                continue
            dist = abs(math.log(numel / m.numel))
            if dist < best_dist:
                best, best_dist = m, dist
        if best is None or best_dist > math.log(self.nearest_factor):
            return False, "unmeasured"
        return (True, "nearest-faster") if best.speedup > 1.0 else (False, "nearest-slower")


def _fast_key(value: Any) -> Any:
    """A hashable key for a call's arguments (tensor -> shape, dtype, strides, device)."""
    if isinstance(value, torch.Tensor):
        return ("T", tuple(value.shape), value.dtype, tuple(value.stride()), value.device.type)
    if isinstance(value, list | tuple):
        return (type(value).__name__, *(_fast_key(v) for v in value))
    if isinstance(value, dict):
        return tuple(sorted((k, _fast_key(v)) for k, v in value.items()))
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return (type(value).__name__, value)
