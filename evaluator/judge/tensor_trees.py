"""Helpers over nested argument values (tensors inside lists, tuples and dicts): strided copies,
the tensors and leaves inside, output poisoning, and the bytes a tree holds."""

from __future__ import annotations

import math
from typing import Any

import torch

from evaluator.cases.testcase import map_values


def clone_tree(value: Any) -> Any:
    """Every tensor in `value` (through lists, tuples and dicts) cloned with its strides."""
    return map_values(value, _clone_tensor)


def _clone_tensor(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.is_contiguous() and value.storage_offset() == 0:
            return value.clone()
        # Keep strides, overlapping ones (stride 0) included: copy the whole backing storage and
        # rebuild the same view on it, so a strided input reaches the kernel strided.
        out = torch.empty(0, dtype=value.dtype, device=value.device)
        out.set_(
            value.untyped_storage().clone(), value.storage_offset(), value.size(), value.stride()
        )
        return out
    return value


def named_tensors(value: Any, prefix: str) -> list[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        return [(prefix, value)]
    if isinstance(value, list | tuple):
        out: list[tuple[str, torch.Tensor]] = []
        for i, v in enumerate(value):
            out += named_tensors(v, f"{prefix}[{i}]")
        return out
    return []


def leaf_values(value: Any) -> list[Any]:
    """Every non-container value inside `value` (lists and tuples opened), Nones left out."""
    if isinstance(value, list | tuple):
        return [leaf for v in value for leaf in leaf_values(v)]
    return [] if value is None else [value]


def poison(value: Any) -> None:
    """Fill caller-provided output buffers so unwritten elements show."""
    for _, t in named_tensors(value, ""):
        if t.is_floating_point() or t.is_complex():
            t.fill_(math.nan)
        elif t.dtype == torch.bool:
            t.fill_(True)
        else:
            t.fill_(torch.iinfo(t.dtype).max)


def poison_allocator(ref_out: Any, device: str) -> None:
    """On CUDA the caching allocator hands a just-freed block to the next same-sized request:
    fill such blocks with 0xFF (NaN for floats) so a kernel that leaves outputs unwritten shows."""
    if device != "cuda":
        return
    for _, t in named_tensors(ref_out if isinstance(ref_out, list | tuple) else [ref_out], "out"):
        nbytes = t.numel() * t.element_size()
        if nbytes:
            block = torch.empty(nbytes, dtype=torch.uint8, device=device)
            block.fill_(255)
            del block


def storage_bytes(value: Any) -> int:
    return sum(t.untyped_storage().nbytes() for _, t in named_tensors(value, ""))
