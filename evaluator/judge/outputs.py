"""Validate what the runner sends back, as hostile input.

- `decode_reply` rebuilds a call's outputs and inputs from the runner's bytes (the channel already
  capped the sizes); the inputs must come back with the dtypes and shapes they were sent with.
- `clean_flags` keeps only flags that make a verdict worse (a runner can accuse itself, never
  clear itself) and bounds their number and length; `clean_load_error` does the same for the
  import report.
- `output_flags` requires plain dense tensors: exactly `torch.Tensor`, with a storage that holds
  every element (no stride-0 stand-ins for a full result), where eager returned a tensor.
"""

from __future__ import annotations

from typing import Any

import torch

from evaluator.judge.channel import ChannelError, Foreign, decode_tree
from evaluator.judge.runner import CallReply
from evaluator.results import ERROR_FLAGS, REJECT_FLAGS, Flag, flag_name

_MAX_FLAGS = 64
_MAX_TEXT = 600
_LOAD_FLAGS = {Flag.IMPORT_ERROR, Flag.MISSING_FUNCTION, Flag.EXIT_CALLED}


def _text(value: Any) -> str | None:
    return None if value is None else str(value)[:_MAX_TEXT]


def clean_flags(flags: Any) -> list[str]:
    """The runner's flags that accuse it (reject or error flags), bounded; the rest is dropped."""
    if not isinstance(flags, list):
        return [f"{Flag.RUNNER_PROTOCOL}:flags not a list"]
    kept: list[str] = []
    for f in flags[:_MAX_FLAGS]:
        if isinstance(f, str) and flag_name(f) in REJECT_FLAGS | ERROR_FLAGS:
            f = f[:200]
            if f not in kept:
                kept.append(f)
    return kept


def clean_load_error(error: Any) -> dict[str, Any] | None:
    if error is None:
        return None
    if not isinstance(error, dict) or error.get("flag") not in _LOAD_FLAGS:
        return {
            "event": "load_error",
            "flag": Flag.RUNNER_PROTOCOL,
            "error_type": "RunnerProtocol",
            "error_msg": "the kernel's process sent a malformed import report",
        }
    return {
        "event": "load_error",
        "flag": error["flag"],
        "error_type": _text(error.get("error_type")) or "Error",
        "error_msg": _text(error.get("error_msg")) or "",
    }


def _same_layout(got: Any, sent: Any) -> bool:
    if isinstance(sent, torch.Tensor):
        return (
            isinstance(got, torch.Tensor) and got.dtype == sent.dtype and got.size() == sent.size()
        )
    if isinstance(sent, list | tuple):
        return (
            isinstance(got, list | tuple)
            and len(got) == len(sent)
            and all(_same_layout(g, s) for g, s in zip(got, sent, strict=True))
        )
    if isinstance(sent, dict):
        return (
            isinstance(got, dict)
            and got.keys() == sent.keys()
            and all(_same_layout(got[k], sent[k]) for k in sent)
        )
    return True


def decode_reply(
    header: dict[str, Any], blobs: list[bytearray], args: tuple, kwargs: dict, device: str
) -> CallReply:
    """A CallReply from the runner's answer to a call on (args, kwargs); a malformed answer is a
    `runner_protocol` rejection."""
    reply = CallReply(flags=clean_flags(header.get("flags")))
    try:
        if header.get("kind") != "result":
            raise ChannelError("not a result message")
        launches = header.get("launches")
        if type(launches) is not int or launches < 0:
            raise ChannelError("malformed launch count")
        reply.launches = launches
        if header.get("error_type") is not None:
            reply.error_type = _text(header["error_type"])
            reply.error_msg = _text(header.get("error_msg")) or ""
            if not any(flag_name(f) in ERROR_FLAGS for f in reply.flags):
                reply.flags.append(Flag.EXCEPTION)
            return reply
        reply.out = decode_tree(header.get("out"), blobs, device)
        inputs = decode_tree(header.get("inputs"), blobs, device)
        if not (isinstance(inputs, list) and len(inputs) == 2):
            raise ChannelError("inputs not sent back as [args, kwargs]")
        got_args, got_kwargs = inputs
        if not _same_layout(got_args, list(args)) or not _same_layout(got_kwargs, kwargs):
            raise ChannelError("inputs came back with other dtypes or shapes than were sent")
        reply.inputs = (tuple(got_args), got_kwargs)
    except ChannelError as exc:
        reply.flags.append(f"{Flag.RUNNER_PROTOCOL}:{str(exc)[:200]}")
        reply.error_type = "RunnerProtocol"
        reply.error_msg = f"the kernel's process sent a malformed result: {exc}"[:_MAX_TEXT]
    return reply


def output_flags(out: Any, ref: Any) -> list[str]:
    """`non_tensor_output` for each place where eager returned a tensor and the kernel returned
    something that is not a plain dense `torch.Tensor`."""
    if isinstance(ref, list | tuple):
        if isinstance(out, list | tuple) and len(out) == len(ref):
            return [f for o, r in zip(out, ref, strict=True) for f in output_flags(o, r)]
        return _foreign_flags(out)
    if not isinstance(ref, torch.Tensor):
        return _foreign_flags(out)
    if isinstance(out, Foreign):
        return [f"{Flag.NON_TENSOR_OUTPUT}:{out.what}"]
    if isinstance(out, torch.Tensor):
        if type(out) is not torch.Tensor:
            return [f"{Flag.NON_TENSOR_OUTPUT}:{type(out).__name__}"]
        if out.device.type != ref.device.type:
            return [f"{Flag.NON_TENSOR_OUTPUT}:on {out.device.type}, expected {ref.device.type}"]
        need = out.numel() * out.element_size()
        if out.numel() > 1 and out.untyped_storage().nbytes() < need:
            return [f"{Flag.NON_TENSOR_OUTPUT}:storage smaller than the result (overlapping view)"]
    return []


def _foreign_flags(value: Any) -> list[str]:
    if isinstance(value, Foreign):
        return [f"{Flag.NON_TENSOR_OUTPUT}:{value.what}"]
    if isinstance(value, list | tuple):
        return [f for v in value for f in _foreign_flags(v)]
    if isinstance(value, torch.Tensor) and type(value) is not torch.Tensor:
        return [f"{Flag.NON_TENSOR_OUTPUT}:{type(value).__name__}"]
    return []


def clean_raw_timing(raw: Any) -> dict[str, Any] | None:
    """The runner's raw timing numbers, or None when malformed: finite, non-negative numbers,
    at least one timed call per side, bounded lists. The numbers are the kernel's process
    talking; the verifier derives floors, clamps and speedups itself."""
    import math

    def number(v: Any) -> bool:
        return type(v) in (int, float) and math.isfinite(v) and v >= 0

    if not isinstance(raw, dict):
        return None
    lists = {}
    for key in ("eager_ms", "kernel_ms"):
        values = raw.get(key)
        if not isinstance(values, list) or not 0 < len(values) <= 100_000:
            return None
        if not all(number(v) for v in values):
            return None
        lists[key] = [float(v) for v in values]
    scalars = {}
    for key in ("eager_host_ms", "kernel_host_ms", "host_window_us", "empty_launch_ms"):
        if not number(raw.get(key)):
            return None
        scalars[key] = float(raw[key])
    if raw.get("l2_state") not in ("steady", "flushed"):
        return None
    clean: dict[str, Any] = {**lists, **scalars, "l2_state": raw["l2_state"]}
    if number(raw.get("compile_ms")):
        clean["compile_ms"] = float(raw["compile_ms"])
    elif isinstance(raw.get("compile_error"), str):
        clean["compile_error"] = raw["compile_error"][:300]
    return clean
