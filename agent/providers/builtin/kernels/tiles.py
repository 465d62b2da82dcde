"""Tile helpers many families share (tile and block sizes, dims, strides, scalars), copied into
the files they emit after the file header.

Placeholder: `_CONSERVATIVE` (variant >= 1: small tiles).
"""

import torch  # noqa: I001  (each section's own imports follow its marker)

from agent.providers.builtin.kernels.runtime import _pow2


# ---- emitted: prelude ----
import os

_INTERPRET = os.environ.get("TRITON_INTERPRET", "0") == "1"
_CONSERVATIVE = False  # variant >= 1: small tiles


# inline: _cdiv, _pow2


def _prod(values):
    p = 1
    for v in values:
        p *= int(v)
    return p


def _wrap_dim(dim, ndim):
    rank = max(ndim, 1)
    if not -rank <= dim < rank:
        raise IndexError(f"Dimension out of range (expected to be in range of [{-rank}, {rank - 1}], but got {dim})")
    return dim % rank


def _tile_cap():
    """Elements per program: Triton's interpreter runs programs one after another, so few large
    programs are fastest there; on a GPU 4096 keeps loads wide (1024 in the fallback variant)."""
    if _INTERPRET:
        return 16384
    return 1024 if _CONSERVATIVE else 4096


def _tile2(rows, cols):
    """(BLOCK_R, BLOCK_C, num_warps) for a rows x cols tile."""
    cap = _tile_cap()
    block_c = max(2, min(_pow2(cols), 256 if _CONSERVATIVE else 1024))
    block_r = max(1, min(_pow2(rows), cap // block_c))
    return block_r, block_c, (8 if block_r * block_c >= 4096 else 4)


def _tile_map(rows, cols):
    """(BLOCK_R, BLOCK_C, num_warps) for `_map_kernel`: every row's coordinates are split with
    integer division in each thread that holds the row, so on a GPU a program takes at most
    1024 elements (two rows per thread for 128-wide rows; `_tile2`'s 4096-element tiles gave each
    thread 8 rows, 80 int64 divisions for 16 elements: a padded copy 11x slower than eager)."""
    if _INTERPRET or _CONSERVATIVE:
        return _tile2(rows, cols)
    block_c = max(2, min(_pow2(cols), 1024))
    block_r = max(1, min(_pow2(rows), 1024 // block_c))
    return block_r, block_c, 4


def _block1(n):
    """(BLOCK, num_warps) for a flat launch over n elements."""
    cap = _tile_cap() if _INTERPRET else (256 if _CONSERVATIVE else 1024)
    return max(32, min(_pow2(n), cap)), 4


def _contiguous_strides(shape):
    """Row-major strides of `shape` (what torch.empty gives)."""
    strides, step = [], 1
    for n in reversed(shape):
        strides.append(step)
        step *= max(int(n), 1)
    return strides[::-1]


def _scalar_for(value, dtype):
    """A Scalar argument as the Python number a kernel needs for `dtype` (bool/int/float)."""
    if dtype == torch.bool:
        return bool(value)
    if dtype.is_floating_point:
        return float(value)
    return int(value)
