"""What every emitted pooling and upsampling file shares: plan cache, window arithmetic, NCHW /
channels-last geometry, tile choice and the 2-D tile coordinates."""

import torch  # noqa: I001  (each section's own imports follow its marker)
import triton
import triton.language as tl

from agent.providers.builtin.kernels.runtime import _INTERPRET, _OP, _cdiv, _pow2
from agent.providers.builtin.kernels.tiles import _CONSERVATIVE


# ---- emitted: common ----


_PLANS = {}  # launch plans per call geometry: validation and tiling run once per geometry


def _floor_pow2(n):
    """The largest power of two <= n (1 for n < 1): block sizes from element budgets."""
    return 1 << (max(1, int(n)).bit_length() - 1)

# Elements per program on a GPU for each kernel, and warps per program (module constants so that
# benchmarks/knob_sweep.py can re-measure them; plans read them when first made). The windowed
# kernels want small programs (few elements per thread keep many loads in flight).
_MAX_POOL_ELEMS, _MAX_POOL_WARPS = 256, 1
_MAX_POOL_BWD_ELEMS, _MAX_POOL_BWD_WARPS = 256, 4
# max_pool2d backward with stride 2 (2x2 blocks of grad_input): on/off, grad_input elements per
# program, warps
_MAX_POOL_BWD_S2 = True
_MAX_POOL_BWD_S2_ELEMS, _MAX_POOL_BWD_S2_WARPS = 1024, 2  # stride-2 windows that tile the plane
# ... and its kernel for NCHW with dense grad_output and indices (vector loads of window pairs;
# lanes of ROWS x 2 blocks, 8 * ROWS grad_input elements): on/off, grad_input elements per
# program, warps, block rows per lane (1 or 2)
_MAX_POOL_BWD_S2_VEC = True
_MAX_POOL_BWD_S2_VEC_ELEMS, _MAX_POOL_BWD_S2_VEC_WARPS = 1024, 2
_MAX_POOL_BWD_S2_VEC_ROWS = 1
_AVG_POOL_ELEMS, _AVG_POOL_WARPS = 256, 1
# avg_pool2d forward on dense NCHW inputs, plane sizes constexpr: windows that tile the plane
# (kernel == stride, no padding, KW 1 or 2: vector row loads; on/off, input elements per program,
# warps) and every other window shape (flat walk over the output; on/off, outputs per program,
# warps)
_AVG_POOL_TILE = True
_AVG_POOL_TILE_ELEMS, _AVG_POOL_TILE_WARPS = 2048, 4  # windows that tile the plane
_AVG_POOL_FLAT = True
_AVG_POOL_FLAT_ELEMS, _AVG_POOL_FLAT_WARPS = 512, 4  # any window, one output per lane
_AVG_POOL_BWD_ELEMS, _AVG_POOL_BWD_WARPS = 2048, 4
# avg_pool2d_backward when the windows tile the plane exactly (a broadcast copy): on/off, and
# grad_input elements per program (each thread stores ELEMS / (32 * WARPS) of them)
_AVG_POOL_BWD_TILE = True
_AVG_POOL_BWD_TILE_ELEMS, _AVG_POOL_BWD_TILE_WARPS = 2048, 8
_ADAPTIVE_ELEMS, _ADAPTIVE_WARPS = 512, 4
_UPSAMPLE_ELEMS, _UPSAMPLE_WARPS = 1024, 2  # bilinear upsampling


def _pair(value, name, default=None):
    value = list(value) if isinstance(value, (list, tuple)) else [value]
    if len(value) == 0 and default is not None:
        return list(default)
    if len(value) == 1:
        return [int(value[0])] * 2
    if len(value) != 2:
        raise RuntimeError(f"{_OP}: {name} must either be a single int, or a tuple of two ints")
    return [int(v) for v in value]


def _key(value):
    return tuple(value) if isinstance(value, (list, tuple)) else value


def _planned(key, make, *args):
    """The launch plan for `key`, made by `make(*args)` on first use (the table is emptied when
    full)."""
    plan = _PLANS.get(key)
    if plan is None:
        if len(_PLANS) > 4096:
            _PLANS.clear()
        plan = _PLANS[key] = make(*args)
    return plan


def _pool_out(size, k, s, p, d, ceil_mode):
    """ATen's pooling_output_shape."""
    num = size + 2 * p - d * (k - 1) - 1 + ((s - 1) if ceil_mode else 0)
    out = num // s + 1
    if ceil_mode and (out - 1) * s >= size + p:
        out -= 1
    return out


def _planes(x):
    """(N, C, H, W, sn, sc, sh, sw) of a 3-D or 4-D input (a 3-D input is one image)."""
    if x.dim() == 4:
        return (*x.shape, *x.stride())
    if x.dim() == 3:
        return (1, *x.shape, 0, *x.stride())
    raise RuntimeError(f"{_OP}: expected 3D or 4D input, got {x.dim()}D")


def _is_cl(x):
    """Eager's suggest_memory_format for these layouts: channels-last unless also contiguous."""
    return (
        x.dim() == 4
        and not x.is_contiguous()
        and x.is_contiguous(memory_format=torch.channels_last)
    )


def _dense_strides(shape, cl):
    """Strides of a dense tensor of `shape`, channels-last when `cl`."""
    if cl:
        n, c, h, w = shape
        return (h * w * c, 1, w * c, c)
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= max(int(size), 1)
    return tuple(reversed(strides))


def _extent(t):
    """1 + the largest element offset `t` addresses (decides int32 vs int64 offsets)."""
    return 1 + sum((s - 1) * abs(st) for s, st in zip(t.shape, t.stride()) if s > 0)


def _wide(*tensors):
    return any(_extent(t) >= 2**31 - 2**20 for t in tensors)


def _tiles(N, C, A, B, cl, elems, warps):
    """(grid, (rows, cols), meta) of a tile walk over a dense [N, C, A, B] tensor in memory order:
    rows of (n, c, a) x columns b (NCHW) or rows of (n, a, b) x columns c (channels-last).
    `elems` per program on a GPU: few per thread keep many loads in flight (measured on an H200:
    512 beat 2048 by 1.5-3x for the windowed kernels); the interpreter prefers big programs."""
    rows, cols = (N * A * B, C) if cl else (N * C * A, B)
    if _INTERPRET:
        cap = 16384
    else:
        cap = max(256, elems // 2) if _CONSERVATIVE else elems
    block_q = max(1, min(_pow2(cols), 128, cap))
    block_r = max(1, min(_pow2(rows), cap // block_q))
    grid = (_cdiv(rows, block_r), _cdiv(cols, block_q))
    meta = dict(CL=cl, BLOCK_R=block_r, BLOCK_Q=block_q, num_warps=warps)
    return grid, (rows, cols), meta


def _acc(dtype):
    return tl.float64 if dtype == torch.float64 else tl.float32


def _strides4(t):
    return (0, *t.stride()) if t.dim() == 3 else tuple(t.stride())


@triton.jit
def _avg_of_window(acc, divisor, lh, lw, hs, he, ws, we, HAS_DIV: tl.constexpr,
                   COUNT_PAD: tl.constexpr):
    """A window's sum over its divisor (divisor_override, the padded window lh*lw, or the
    window inside the plane), 0 for an empty window, as eager's avg_pool2d."""
    if HAS_DIV:
        div = tl.zeros_like(acc) + divisor
    elif COUNT_PAD:
        div = (lh * lw).to(acc.dtype)
    else:
        div = ((he - hs) * (we - ws)).to(acc.dtype)
    empty = (hs >= he) | (ws >= we)
    return tl.where(empty, 0.0, acc / tl.where(empty, 1.0, div))


@triton.jit
def _tile_rq(I64: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):
    """Row ([BLOCK_R, 1]) and column ([1, BLOCK_Q]) indices of this program's tile (grid: row
    blocks, column blocks); int64 rows when I64."""
    pid = tl.program_id(0)
    if I64:
        pid = pid.to(tl.int64)
    r = (pid * BLOCK_R + tl.arange(0, BLOCK_R))[:, None]
    q = (tl.program_id(1) * BLOCK_Q + tl.arange(0, BLOCK_Q))[None, :]
    return r, q


@triton.jit
def _coords(R, Q, C, A, B, CL: tl.constexpr, I64: tl.constexpr, BLOCK_R: tl.constexpr,
            BLOCK_Q: tl.constexpr):
    """(n, c, a, b, flat offset, in-range mask) of this program's tile of a dense [N, C, A, B]
    tensor walked in memory order. Row coordinates are [BLOCK_R, 1], the column one [1, BLOCK_Q]:
    the integer division runs once per row, never per element."""
    r, q = _tile_rq(I64, BLOCK_R, BLOCK_Q)
    ok = (r < R) & (q < Q)
    if CL:
        b = r % B
        t = r // B
        a = t % A
        n = t // A
        c = q
    else:
        a = r % A
        t = r // A
        c = t % C
        n = t // C
        b = q
    return n, c, a, b, r * Q + q, ok
