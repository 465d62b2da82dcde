"""Record the ATen overloads a model calls, with their serialized arguments (design §3).

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
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from evaluator.naming import base_name, normalize_op
from evaluator.testcase import serialize_case, spec_of_tensor

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
    if isinstance(value, torch.Tensor):
        return spec_of_tensor(value)
    if isinstance(value, torch.SymInt):
        return int(value)
    if isinstance(value, torch.SymFloat):
        return float(value)
    if isinstance(value, torch.SymBool):
        return bool(value)
    if isinstance(value, list):
        return [_plain(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_plain(v) for v in value)
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
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
