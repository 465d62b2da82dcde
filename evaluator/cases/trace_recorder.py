"""Record the ATen overloads a model calls, with their serialized arguments.

`Recorder` is a `TorchDispatchMode`: every ATen overload that reaches the Python dispatch key
while it is active is counted under its normalized name (`add.Tensor`) and its arguments in the
BackendBench case format (`((T([8, 128], f16), 1.0), {})`). It works the same on real, meta and
fake tensors (`FakeTensorMode`), so a model can be traced at full size without memory.

What it records is what the eager model dispatches below autograd: composite ops arrive
decomposed (`linear` -> `addmm`/`mm`), backward formulas arrive as their own overloads
(`native_layer_norm_backward`), and device-specific choices are those of the tensors' device
(SDPA picks `_scaled_dot_product_flash_attention_for_cpu` on the CPU, a CUDA kernel on CUDA).

Contract:
- Only the `aten` namespace is recorded; `prim`/`torchvision`/custom ops are counted in
  `skipped_ops` (no kernel folder could hold them).
- Metadata-only calls (`METADATA_OPS`: size/stride queries, `detach`, `alias`, `lift_fresh` ...)
  are not recorded: they move no data and take no kernel. Views (`view`, `t`, `expand`) are
  recorded; the suite decides whether to test them.
- A call whose arguments cannot be written in the format (a float8 tensor, a Generator) is
  counted in `unserializable` under its op name and otherwise dropped.
- Recording is thread-safe: the autograd engine may run backward on another thread, with the
  mode stack propagated to it.

`TraceTable` merges the recordings of many models and `write_trace` writes them out: the trace
file (operators by number of models, then count; cases by count, descending) and its JSON
sidecar (COMMON.md: per operator its models and count; per case count, models, dtype, bytes).
A case whose text does not round-trip through `evaluator.cases.testcase` is dropped and counted.
"""

from __future__ import annotations

import json
import os
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from evaluator.cases.testcase import (
    CODE_OF_DTYPE,
    CaseSyntaxError,
    TestCase,
    format_trace,
    map_values,
    parse_case,
    serialize_case,
    spec_of_tensor,
)
from evaluator.naming import base_name, normalize_op

SIDECAR_SCHEMA_VERSION = 1

# Base names of ATen ops that only read or relabel metadata: no data moves, no kernel to write.
METADATA_OPS: frozenset[str] = frozenset(
    {
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "size",
        "stride",
        "numel",
        "dim",
        "storage_offset",
        "is_contiguous",
        "is_strides_like_format",
        "is_non_overlapping_and_dense",
        "is_same_size",
        "is_pinned",
        "_has_compatible_shallow_copy_type",
        "result_type",
        "can_cast",
        "promote_types",
        "detach",
        "detach_",
        "alias",
        "lift",
        "lift_fresh",
        "resolve_conj",
        "resolve_neg",
        "_assert_async",
        "_assert_scalar",
        "_assert_tensor_metadata",
        "sym_constrain_range",
        "sym_constrain_range_for_size",
        "_functional_sym_constrain_range",
        "record_stream",
        "_nested_tensor_size",
        "_nested_tensor_strides",
        "_nested_tensor_storage_offsets",
    }
)


class UnserializableArgument(TypeError):
    """An argument the case format cannot express."""


def _plain(value: Any) -> Any:
    """Turn dispatcher arguments into values `serialize_case` accepts (tensors -> TensorSpec)."""
    return map_values(value, _plain_leaf)


def _plain_leaf(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        return spec_of_tensor(value)
    if isinstance(value, torch.SymInt):
        return int(value)
    if isinstance(value, torch.SymFloat):
        return float(value)
    if isinstance(value, torch.SymBool):
        return bool(value)
    return value


def serialize_call(args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
    """The case text of one call; raises UnserializableArgument when the format cannot hold it."""
    try:
        return serialize_case(_plain(tuple(args)), _plain(dict(kwargs)))
    except (TypeError, KeyError) as exc:  # KeyError: a dtype without a code (float8, uint16 ...)
        raise UnserializableArgument(str(exc)) from None


class Recorder(TorchDispatchMode):
    """Counts (op, case text) pairs of every recorded ATen call made while the mode is active."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: Counter[tuple[str, str]] = Counter()
        self.skipped_ops: Counter[str] = Counter()
        self.unserializable: Counter[str] = Counter()
        self._lock = threading.Lock()
        self._names: dict[Any, str | None] = {}  # OpOverload -> normalized name, None = skip

    def _name_of(self, func: Any) -> str | None:
        name = self._names.get(func, "")
        if name != "":
            return name
        if getattr(func, "namespace", None) != "aten":
            resolved = None
        else:
            op = normalize_op(func.name())
            resolved = None if base_name(op) in METADATA_OPS else op
        self._names[func] = resolved
        return resolved

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        op = self._name_of(func)
        if op is None:
            if getattr(func, "namespace", None) != "aten":
                with self._lock:
                    self.skipped_ops[str(func)] += 1
        else:
            try:
                text = serialize_call(args, kwargs)
            except UnserializableArgument:
                with self._lock:
                    self.unserializable[op] += 1
            else:
                with self._lock:
                    self.calls[(op, text)] += 1
        return func(*args, **kwargs)


_BOOL_REDUCTIONS = {"all": True, "any": False}


class HostScalars(TorchDispatchMode):
    """Answer `.item()` on fake/meta tensors where the answer is safe to assume.

    Fake and meta tensors have no values, so `bool(x.isfinite().all())` or `if mask.any():`
    would end a fake run. Outputs of `all` are assumed True and of `any` False (finite activations, no
    padding) - what a real run with random weights and unpadded inputs gives. Any other read of
    a value still raises, and the caller falls back to a real run.

    With `any_value=True` (model construction only: weight values are never used) every read
    answers 0 / False, which ends the rejection loops of initializers such as `trunc_normal_`.
    """

    def __init__(self, *, any_value: bool = False) -> None:
        super().__init__()
        self.any_value = any_value

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        if func is torch.ops.aten._local_scalar_dense.default:
            tensor = args[0]
            hint = getattr(tensor, "_atenforge_host_value", None)
            if hint is not None:
                return hint
            if self.any_value and _is_valueless(tensor):
                return _zero_of(tensor.dtype)
            return func(*args, **kwargs)
        out = func(*args, **kwargs)
        if getattr(func, "namespace", None) == "aten":
            value = _BOOL_REDUCTIONS.get(base_name(normalize_op(func.name())))
            if value is not None and isinstance(out, torch.Tensor) and _is_valueless(out):
                out._atenforge_host_value = value
        return out


def _is_valueless(tensor: Any) -> bool:
    """A fake or meta tensor: one whose values do not exist, so any read must be answered."""
    from torch._subclasses.fake_tensor import FakeTensor

    return isinstance(tensor, FakeTensor) or (isinstance(tensor, torch.Tensor) and tensor.is_meta)


def _zero_of(dtype: torch.dtype) -> bool | int | float:
    if dtype == torch.bool:
        return False
    if dtype.is_floating_point or dtype.is_complex:
        return 0.0
    return 0


# ---------------------------------------------------------------- recordings -> trace file


@dataclass
class CaseStats:
    count: int = 0
    models: set[str] = field(default_factory=set)


class TraceTable:
    """Cases per operator over many models, with counts and the models each case came from."""

    def __init__(self) -> None:
        self.ops: dict[str, dict[str, CaseStats]] = {}
        self.models: list[str] = []
        self.dropped: Counter[str] = Counter()  # op -> cases that do not round-trip
        self._checked: dict[str, bool] = {}

    def add(self, model: str, calls: Counter[tuple[str, str]]) -> None:
        if model not in self.models:
            self.models.append(model)
        for (op, text), count in calls.items():
            if not self._round_trips(text):
                self.dropped[op] += count
                continue
            stats = self.ops.setdefault(op, {}).setdefault(text, CaseStats())
            stats.count += count
            stats.models.add(model)

    def _round_trips(self, text: str) -> bool:
        ok = self._checked.get(text)
        if ok is None:
            try:
                ok = parse_case(text).serialize() == text
            except CaseSyntaxError:
                ok = False
            self._checked[text] = ok
        return ok

    def op_models(self, op: str) -> set[str]:
        return set().union(*(s.models for s in self.ops[op].values()))

    def op_count(self, op: str) -> int:
        return sum(s.count for s in self.ops[op].values())

    def ranked(self) -> list[tuple[str, list[tuple[TestCase, CaseStats]]]]:
        """Operators by number of models, then count; cases by count, models, then bytes."""
        ranked_ops = sorted(
            self.ops, key=lambda op: (-len(self.op_models(op)), -self.op_count(op), op)
        )
        out = []
        for op in ranked_ops:
            cases = []
            for text, stats in self.ops[op].items():
                case = parse_case(text)
                case.count = stats.count
                cases.append((case, stats))
            cases.sort(
                key=lambda cs: (
                    -cs[1].count,
                    -len(cs[1].models),
                    -cs[0].total_bytes(),
                    cs[0].serialize(),
                )
            )
            out.append((op, cases))
        return out

    @property
    def num_cases(self) -> int:
        return sum(len(cases) for cases in self.ops.values())


def _case_dtype(case: TestCase) -> str:
    specs = case.tensor_specs()
    if specs:
        return CODE_OF_DTYPE[specs[0].dtype]
    dtype = case.kwargs.get("dtype")
    if isinstance(dtype, torch.dtype):
        return CODE_OF_DTYPE.get(dtype, "")
    return ""


def write_trace(
    table: TraceTable, out: Path, *, command: str, extra: dict[str, Any] | None = None
) -> Path:
    """Write `out` (the trace: BackendBench's parquet format when it ends in `.parquet`, else the
    text format) and its sidecar `out.with_suffix('.json')`; return the sidecar path."""
    ranked = table.ranked()
    out.parent.mkdir(parents=True, exist_ok=True)
    by_op = {op: [c for c, _ in cases] for op, cases in ranked}
    if out.suffix == ".parquet":
        from evaluator.cases.parquet_trace import write_parquet_trace

        write_parquet_trace(by_op, out)
    else:
        out.write_text(format_trace(by_op), encoding="utf-8")
    sidecar: dict[str, Any] = {
        "schema_version": SIDECAR_SCHEMA_VERSION,
        "command": command,
        "models": list(table.models),
        "ops": {
            op: {
                "models": sorted(table.op_models(op)),
                "count": table.op_count(op),
                "cases": [
                    {
                        "args": case.serialize(),
                        "count": stats.count,
                        "models": sorted(stats.models),
                        "dtype": _case_dtype(case),
                        "bytes": case.total_bytes(),
                    }
                    for case, stats in cases
                ],
            }
            for op, cases in ranked
        },
    }
    if extra:
        sidecar.update(extra)
    json_path = out.with_suffix(".json")
    tmp = json_path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(sidecar, indent=1) + "\n", encoding="utf-8")
    os.replace(tmp, json_path)
    return json_path
