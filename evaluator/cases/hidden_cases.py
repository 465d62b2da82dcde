"""Hidden cases: an operator's tests that no prompt shows.

Contract:
    hidden_sets(op, shown, spare, per_set, salt) -> (round_cases, final_cases)

- Candidates: the suite's further cases of the operator (`spare`: the ranked trace cases past the
  shown ones), then variants of each shown case (`perturb`): an odd size (a dimension size
  `v > 1` replaced by `v + 1` in every tensor of the case, so equal sizes stay equal), one more
  row (the same for the first tensor's first dimension) and a non-contiguous layout (the first
  contiguous tensor of rank >= 2 stored column-major in its last two dimensions).
- A variant counts only where the operator's input rules allow it: eager must accept it on meta
  tensors (shapes and strides, no data), and it must differ from every shown case. Ops without a
  meta kernel get no variants (only spare trace cases).
- The candidates are shuffled by `salt` (a per-run secret the model never sees) and dealt into
  two disjoint sets of at most `per_set` cases: `round_cases` judge the agent's rounds (a failure
  may be reported back to the model, shapes included), `final_cases` judge the kept kernels and
  are never shown to any round. Every returned case has `hidden = True`.

The guarantee: a kernel that passed was also right on cases its author never saw, drawn from a
set its author cannot enumerate without the salt. A kernel correct on every shape of its
operator passes them all; one fitted to the shown shapes does not.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import torch

from evaluator.cases.testcase import Device, TensorSpec, TestCase, map_values
from evaluator.naming import normalize_op


def _map_specs(value: Any, fn: Any) -> Any:
    return map_values(value, lambda v: fn(v) if isinstance(v, TensorSpec) else v)


def _with_specs(case: TestCase, fn: Any) -> TestCase:
    return TestCase(_map_specs(case.args, fn), _map_specs(case.kwargs, fn), 0)


def _resize(case: TestCase, old: int) -> TestCase:
    """Every tensor dimension of size `old` becomes `old + 1` (contiguous)."""

    def grow(spec: TensorSpec) -> TensorSpec:
        if old not in spec.shape:
            return spec
        shape = tuple(n + 1 if n == old else n for n in spec.shape)
        return TensorSpec(shape, spec.dtype, None)

    return _with_specs(case, grow)


def _column_major(case: TestCase) -> TestCase | None:
    """The first contiguous tensor of rank >= 2 stored with its last two dimensions swapped in
    memory (same shape and values, other strides)."""
    done = [False]

    def relayout(spec: TensorSpec) -> TensorSpec:
        if done[0] or spec.stride is not None or len(spec.shape) < 2:
            return spec
        m, n = spec.shape[-2], spec.shape[-1]
        if m < 2 or n < 2:
            return spec
        strides = [0] * len(spec.shape)
        strides[-2], strides[-1] = 1, m  # element (i, j) of the last two dims at i + j * m
        step = m * n
        for k in range(len(spec.shape) - 3, -1, -1):
            strides[k] = step
            step *= spec.shape[k]
        done[0] = True
        return TensorSpec(spec.shape, spec.dtype, tuple(strides))

    out = _with_specs(case, relayout)
    return out if done[0] else None


def perturb(case: TestCase) -> Iterator[TestCase]:
    """Size and layout variants of a case (not yet checked against the op's rules)."""
    specs = case.tensor_specs()
    if not specs:
        return
    first = specs[0]
    sizes = [n for n in first.shape[::-1] if n > 1]  # the last dimension first
    if sizes:
        yield _resize(case, sizes[0])  # an odd size where the shown case had this size
    if len(first.shape) >= 2 and first.shape[0] > 1 and first.shape[0] not in sizes[:1]:
        yield _resize(case, first.shape[0])  # one more row
    layout = _column_major(case)
    if layout is not None:
        yield layout


def _meta_leaf(value: Any) -> Any:
    if isinstance(value, TensorSpec):
        if value.stride is None:
            return torch.empty(value.shape, dtype=value.dtype, device="meta")
        return torch.empty_strided(value.shape, value.stride, dtype=value.dtype, device="meta")
    if isinstance(value, Device):
        return torch.device("meta")
    return value


def _meta_value(value: Any) -> Any:
    return map_values(value, _meta_leaf)


def eager_accepts(op: str, case: TestCase) -> bool:
    """True when eager runs the case on meta tensors (its shape and stride rules hold)."""
    base, overload = normalize_op(op).split(".", 1)
    try:
        packet = getattr(getattr(torch.ops.aten, base), overload)
        kwargs = _meta_value(case.kwargs)
        if "device" in kwargs:
            kwargs["device"] = torch.device("meta")
        packet(*_meta_value(case.args), **kwargs)
    except Exception:  # noqa: BLE001 - any refusal means the variant is not a valid input
        return False
    return True


def _order(salt: str, case: TestCase) -> str:
    return hashlib.sha256(f"{salt}\n{case.serialize()}".encode()).hexdigest()


def hidden_sets(
    op: str, shown: list[TestCase], spare: list[TestCase], per_set: int, salt: str
) -> tuple[list[TestCase], list[TestCase]]:
    """Two disjoint sets of hidden cases (see the module doc)."""
    if per_set <= 0:
        return [], []
    seen = {c.serialize() for c in shown}
    pool: list[TestCase] = []
    for case in spare:
        if case.serialize() not in seen:
            seen.add(case.serialize())
            pool.append(replace(case, hidden=True))
    for case in shown:
        for variant in perturb(case):
            key = variant.serialize()
            if key in seen or not eager_accepts(op, variant):
                continue
            seen.add(key)
            pool.append(replace(variant, hidden=True, source=key))
    pool.sort(key=lambda c: _order(salt, c))
    return pool[0 : 2 * per_set : 2], pool[1 : 2 * per_set : 2]
