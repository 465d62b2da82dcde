"""GPU-only (marker `gpu`): what the interpreter cannot run of the softmax kernels.

Long f32 softmax / log_softmax rows through the shared-memory kernel (`_smem_rows_kernel`,
Gluon): rows start at every 4-byte offset (odd lengths), programs take one row or many (row
counts below and above the SM count), and rows hold -inf (skipped; an all -inf row is NaN), +inf
and NaN (a NaN row) in their last partial vectors and in their bodies, as eager has them.
49-wide rows through the window kernels with their masks as arithmetic on values hidden from
the compiler by inline PTX (`_WIN_ARITH`), next to rows with -inf, +inf and NaN.
"""

from __future__ import annotations

import sys

import pytest
import torch
from kernel_loading import load_kernel

from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest

_SHAPES = [(3, 50257), (7, 50258), (133, 50259), (300, 50260), (1001, 40001), (5, 32769)]


def _rows(rows: int, cols: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(rows, cols, generator=gen) * 4
    x[0, 3] = float("-inf")
    x[1] = float("-inf")  # eager: a NaN row
    x[2, cols - 1] = float("inf")  # in the row's last partial vector (most lengths)
    x[0, 0] = -1e30  # far below the row's max: its exp underflows to 0
    if rows > 4:
        x[3, cols // 2] = float("nan")
        x[4, :2] = float("inf")
    return x.cuda()


@pytest.mark.parametrize("op", ["_softmax.default", "_log_softmax.default"])
@pytest.mark.parametrize(("rows", "cols"), _SHAPES)
def test_long_f32_rows_match_eager_through_shared_memory(op, rows, cols, tmp_path) -> None:
    kernel = load_kernel(op, WRITERS[op](KernelRequest(op, "", [])), tmp_path)
    module = sys.modules[kernel.__module__]
    x = _rows(rows, cols, rows)
    assert module._plan(x, 1, torch.float32)[0] is module._smem_rows
    got = kernel(x, 1, False)
    want = getattr(torch.ops.aten, op.split(".")[0])(x, 1, False)
    torch.testing.assert_close(got, want, equal_nan=True)
    # the same bits on every call (NaN where NaN)
    torch.testing.assert_close(kernel(x, 1, False), got, rtol=0, atol=0, equal_nan=True)


def test_rows_past_shared_memory_keep_the_two_pass_kernel(tmp_path) -> None:
    op = "_log_softmax.default"
    kernel = load_kernel(op, WRITERS[op](KernelRequest(op, "", [])), tmp_path)
    module = sys.modules[kernel.__module__]
    x = torch.randn(4, 70001, device="cuda")
    assert module._plan(x, 1, torch.float32)[0] is not module._smem_rows
    torch.testing.assert_close(kernel(x, 1, False), torch.log_softmax(x, 1))


def _window_rows(shape, dtype, seed: int) -> torch.Tensor:
    """49-wide rows (windowed attention) with -inf, +inf and NaN in some rows, next to rows
    whose windows hold them: a row's result must not see its neighbours'."""
    gen = torch.Generator().manual_seed(seed)
    x = (torch.randn(*shape, generator=gen) * 3).to(dtype)
    flat = x.view(-1, shape[-1])
    flat[0] = float("-inf")  # eager: a NaN row
    flat[1, :7] = float("-inf")
    flat[3, 0] = float("inf")  # in the vector shared with row 2's tail
    flat[5, 48] = float("nan")  # in the vector shared with row 6's head
    flat[9, 20] = float("inf")
    flat[12, 1] = 60000.0 if dtype == torch.float16 else 1e30  # a neighbour far above the row
    return x.cuda()


@pytest.mark.parametrize("persistent", [True, False])
@pytest.mark.parametrize("op", ["_softmax.default", "_log_softmax.default"])
@pytest.mark.parametrize(("shape", "dtype"), [((64, 3, 49, 49), torch.float16),
                                              ((37, 49), torch.bfloat16)])  # fmt: skip
def test_window_rows_match_eager_with_infinities_and_nan(op, shape, dtype, persistent, tmp_path):
    """The window kernels' masks as arithmetic on opaque values (`_WIN_ARITH`, inline PTX: GPU
    only): eager's values and NaN pattern, per-tile and persistent."""
    kernel = load_kernel(op, WRITERS[op](KernelRequest(op, "", [])), tmp_path)
    module = sys.modules[kernel.__module__]
    if not persistent:
        module._WIN_PROGRAMS_PER_SM = 0
    x = _window_rows(shape, dtype, 3)
    assert module._plan(x, -1, dtype)[2]["ARITH"]
    got = kernel(x, -1, False)
    want = getattr(torch.ops.aten, op.split(".")[0])(x, -1, False)
    torch.testing.assert_close(got, want, equal_nan=True)
