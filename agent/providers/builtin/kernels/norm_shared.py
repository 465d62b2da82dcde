"""The header every emitted norm file starts with (layer norm and batch norm): the interpreter
flag, the variant's tile policy, statistics dtype and warp choice."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _num_sms


# ---- emitted: header ----
import functools  # noqa: F401  (the inlined _num_sms uses it)
import os

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CONSERVATIVE = False  # variant >= 1: smaller tiles, no split statistics


# inline: _cdiv, _pow2, _num_sms


def _target_programs(x):
    if _INTERPRET or x.device.type != "cuda":
        return 4
    index = x.device.index if x.device.index is not None else torch.cuda.current_device()
    return 4 * _num_sms(index)


def _stat_dtype(x):
    """ATen keeps statistics in the accumulate type on CUDA, in the input dtype on the CPU."""
    if x.device.type == "cuda" and x.dtype in (torch.float16, torch.bfloat16):
        return torch.float32
    return x.dtype


def _acc(*dtypes):
    return tl.float64 if torch.float64 in dtypes else tl.float32


def _warps(tile):
    return 4 if tile <= 1024 else (8 if tile <= 4096 else 16)
