"""Pooling and upsampling kernels (max/avg pooling and their backward, adaptive pooling,
upsampling), the text the builtin writer copies into the files it emits, after the tile helpers
of tiles.py.
"""

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
# benchmarks/knob_sweep.py can re-measure them; plans read them when first made). Measured on the
# H200 (largest torchbench cases): the windowed kernels want small programs
# (max_pool2d 3x3/2 [64,64,112,112] f16: 96 us at 256 elements and one warp, 106 with four, 135
# at 512 and four, 310 at 2048.)
_MAX_POOL_ELEMS, _MAX_POOL_WARPS = 256, 1
_MAX_POOL_BWD_ELEMS, _MAX_POOL_BWD_WARPS = 256, 4
# max_pool2d backward with stride 2 (2x2 blocks of grad_input): on/off, grad_input elements per
# program, warps
_MAX_POOL_BWD_S2 = True
_MAX_POOL_BWD_S2_ELEMS, _MAX_POOL_BWD_S2_WARPS = 1024, 2  # [32,64,112,112] bf16: 145 -> 41 us
# ... and its kernel for NCHW with dense grad_output and indices (vector loads of window pairs;
# lanes of ROWS x 2 blocks, 8 * ROWS grad_input elements): on/off, grad_input elements per
# program, warps, block rows per lane (1 or 2). H200 [32,64,112,112] bf16 3x3/2: 39.1 -> 31.0 us
# (88% of HBM bandwidth; 1024/2/1 and 1024/4/1 best, 31.2 with 2 rows, 34-76 elsewhere)
_MAX_POOL_BWD_S2_VEC = True
_MAX_POOL_BWD_S2_VEC_ELEMS, _MAX_POOL_BWD_S2_VEC_WARPS = 1024, 2
_MAX_POOL_BWD_S2_VEC_ROWS = 1
_AVG_POOL_ELEMS, _AVG_POOL_WARPS = 256, 1
# avg_pool2d forward on dense NCHW inputs, plane sizes constexpr: windows that tile the plane
# (kernel == stride, no padding, KW 1 or 2: vector row loads; on/off, input elements per program,
# warps) and every other window shape (flat walk over the output; on/off, outputs per program,
# warps)
_AVG_POOL_TILE = True
_AVG_POOL_TILE_ELEMS, _AVG_POOL_TILE_WARPS = 2048, 4  # [32,256,56,56] bf16 2x2: 30 -> 21 us
_AVG_POOL_FLAT = True
_AVG_POOL_FLAT_ELEMS, _AVG_POOL_FLAT_WARPS = 512, 4  # 3x3/1 [32,288,35,35] f16: 92 -> 37 us
_AVG_POOL_BWD_ELEMS, _AVG_POOL_BWD_WARPS = 2048, 4
# avg_pool2d_backward when the windows tile the plane exactly (a broadcast copy): on/off, and
# grad_input elements per program (each thread stores ELEMS / (32 * WARPS) of them)
_AVG_POOL_BWD_TILE = True
_AVG_POOL_BWD_TILE_ELEMS, _AVG_POOL_BWD_TILE_WARPS = 2048, 8
_ADAPTIVE_ELEMS, _ADAPTIVE_WARPS = 512, 4
_UPSAMPLE_ELEMS, _UPSAMPLE_WARPS = 1024, 2  # [8,256,64,64] cl f16: 38.8 -> 32.8 us


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


def _remember(key, plan):
    if len(_PLANS) > 4096:
        _PLANS.clear()
    _PLANS[key] = plan
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


# ---- emitted: max_pool ----


@triton.jit
def _first_valid(start, D):
    """The first tap start + k*D that is >= 0 (eager's initial argmax position)."""
    return tl.where(start < 0, start + ((D - 1 - start) // D) * D, start)


@triton.jit
def _max_pool_kernel(x_ptr, out_ptr, idx_ptr, R, Q, C, H, W, OH, OW, sn, sc, sh, sw,
                     SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                     DH: tl.constexpr, DW: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                     CL: tl.constexpr, I64: tl.constexpr, ACC: tl.constexpr,
                     BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):
    n, c, oh, ow, o, ok = _coords(R, Q, C, OH, OW, CL, I64, BLOCK_R, BLOCK_Q)
    base = x_ptr + n * sn + c * sc
    h0 = oh * SH - PH
    w0 = ow * SW - PW
    best = tl.full([BLOCK_R, BLOCK_Q], float("-inf"), ACC)
    bidx = tl.zeros([BLOCK_R, BLOCK_Q], tl.int32) + (
        _first_valid(h0, DH) * W + _first_valid(w0, DW))
    for kh in tl.static_range(KH):
        h = h0 + kh * DH
        row = base + h * sh
        h_ok = ok & (h >= 0) & (h < H)
        for kw in tl.static_range(KW):
            w = w0 + kw * DW
            m = h_ok & (w >= 0) & (w < W)
            v = tl.load(row + w * sw, mask=m, other=float("-inf")).to(ACC)
            take = (v > best) | (v != v)  # masked taps read -inf: never taken
            best = tl.where(take, v, best)
            bidx = tl.where(take, h * W + w, bidx)
    tl.store(out_ptr + o, best.to(out_ptr.dtype.element_ty), mask=ok)
    tl.store(idx_ptr + o, bidx.to(tl.int64), mask=ok)


@triton.jit
def _max_pool_bwd_kernel(go_ptr, idx_ptr, out_ptr, R, Q, C, H, W, OH, OW,
                         gn, gc, gh, gw, jn, jc, jh, jw, SH: tl.constexpr, SW: tl.constexpr,
                         PH: tl.constexpr, PW: tl.constexpr, EH: tl.constexpr, EW: tl.constexpr,
                         MAXH: tl.constexpr, MAXW: tl.constexpr, CL: tl.constexpr,
                         I64: tl.constexpr, ACC: tl.constexpr, BLOCK_R: tl.constexpr,
                         BLOCK_Q: tl.constexpr):
    """grad_input[h, w] = sum of grad_output over the windows whose argmax is (h, w)."""
    n, c, h, w, o, ok = _coords(R, Q, C, H, W, CL, I64, BLOCK_R, BLOCK_Q)
    ph0 = tl.where(h + PH < EH, 0, (h + PH - EH) // SH + 1)
    ph1 = tl.minimum((h + PH) // SH + 1, OH)
    pw0 = tl.where(w + PW < EW, 0, (w + PW - EW) // SW + 1)
    pw1 = tl.minimum((w + PW) // SW + 1, OW)
    target = h * W + w
    gbase = go_ptr + n * gn + c * gc
    jbase = idx_ptr + n * jn + c * jc
    acc = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    for i in tl.static_range(MAXH):
        ph = ph0 + i
        h_ok = ok & (ph < ph1)
        for j in tl.static_range(MAXW):
            pw = pw0 + j
            m = h_ok & (pw < pw1)
            ind = tl.load(jbase + ph * jh + pw * jw, mask=m, other=-1)
            hit = m & (ind == target)
            acc += tl.load(gbase + ph * gh + pw * gw, mask=hit, other=0).to(ACC)
    tl.store(out_ptr + o, acc.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _max_pool_bwd_s2_kernel(go_ptr, idx_ptr, out_ptr, R, Q, gp, gh, gw, gc, jp, jh, jw, jc,
                            H: tl.constexpr, W: tl.constexpr, OH: tl.constexpr,
                            OW: tl.constexpr, MH: tl.constexpr, MW: tl.constexpr,
                            LH0: tl.constexpr, HH0: tl.constexpr, LH1: tl.constexpr,
                            HH1: tl.constexpr, LW0: tl.constexpr, HW0: tl.constexpr,
                            LW1: tl.constexpr, HW1: tl.constexpr, CL: tl.constexpr,
                            I64: tl.constexpr, ACC: tl.constexpr, BLOCK_R: tl.constexpr,
                            BLOCK_Q: tl.constexpr):
    """Stride-2 windows, walked in 2x2 blocks of grad_input: block (m, n) holds the positions
    (2m + a, 2n + b), and position a along a dim lies in the windows m + LO_a .. m + HI_a
    (constants of kernel size, pad and dilation). A program loads each distinct window offset's
    indices and gradients once for its blocks (contiguous along the columns) and adds a
    gradient to the positions whose flat index it saved, in eager's window order. NCHW tiles are
    [planes x block rows, block columns]: the two b positions of a row are interleaved in
    registers (tl.join) and stored as full rows; channels-last tiles are [blocks, channels]
    with four shifted stores. Plane sizes are constexpr: block coordinates come from divisions
    by constants, row offsets are visible multiples (aligned vector stores). (The per-element
    gather did four int64 index loads, two runtime divisions and ~40 index instructions per
    element: 27% of HBM bandwidth on the H200.)"""
    r, q = _tile_rq(I64, BLOCK_R, BLOCK_Q)
    ok = (r < R) & (q < Q)
    if CL:  # rows (image, m, n), columns channels
        n = r % MW
        t = r // MW
        m = t % MH
        img = t // MH
        gsrc = go_ptr + img * gp + q * gc
        jsrc = idx_ptr + img * jp + q * jc
    else:  # rows (plane, m), columns n
        m = r % MH
        img = r // MH
        n = q
        gsrc = go_ptr + img * gp
        jsrc = idx_ptr + img * jp
    t00 = (2 * m) * W + 2 * n
    a00 = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    a01 = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    a10 = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    a11 = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    for di in tl.static_range(min(LH0, LH1), max(HH0, HH1) + 1):
        ph = m + di
        h_ok = ok & (ph >= 0) & (ph < OH)
        for dj in tl.static_range(min(LW0, LW1), max(HW0, HW1) + 1):
            pw = n + dj
            msk = h_ok & (pw >= 0) & (pw < OW)
            ind = tl.load(jsrc + ph * jh + pw * jw, mask=msk, other=-1)
            g = tl.load(gsrc + ph * gh + pw * gw, mask=msk, other=0).to(ACC)
            if (LH0 <= di) & (di <= HH0):
                if (LW0 <= dj) & (dj <= HW0):
                    a00 += tl.where(ind == t00, g, 0.0)
                if (LW1 <= dj) & (dj <= HW1):
                    a01 += tl.where(ind == t00 + 1, g, 0.0)
            if (LH1 <= di) & (di <= HH1):
                if (LW0 <= dj) & (dj <= HW0):
                    a10 += tl.where(ind == t00 + W, g, 0.0)
                if (LW1 <= dj) & (dj <= HW1):
                    a11 += tl.where(ind == t00 + (W + 1), g, 0.0)
    ty = out_ptr.dtype.element_ty
    h_ok0 = ok & (2 * m < H)
    h_ok1 = ok & (2 * m + 1 < H)
    if CL:
        dst = out_ptr + ((img * H + 2 * m) * W + 2 * n) * Q + q
        w_ok1 = 2 * n + 1 < W
        tl.store(dst, a00.to(ty), mask=h_ok0)
        tl.store(dst + Q, a01.to(ty), mask=h_ok0 & w_ok1)
        tl.store(dst + W * Q, a10.to(ty), mask=h_ok1)
        tl.store(dst + (W + 1) * Q, a11.to(ty), mask=h_ok1 & w_ok1)
    else:
        w = (tl.program_id(1) * (2 * BLOCK_Q) + tl.arange(0, 2 * BLOCK_Q))[None, :]
        dst = out_ptr + (img * H + 2 * m) * W + w
        row0 = tl.reshape(tl.join(a00, a01), [BLOCK_R, 2 * BLOCK_Q]).to(ty)
        row1 = tl.reshape(tl.join(a10, a11), [BLOCK_R, 2 * BLOCK_Q]).to(ty)
        tl.store(dst, row0, mask=(r < R) & (2 * m < H) & (w < W))
        tl.store(dst + W, row1, mask=(r < R) & (2 * m + 1 < H) & (w < W))


@triton.jit
def _s2_window_pair(idx_ptr, go_ptr, src, base, row_ok, col, OW: tl.constexpr, KP: tl.constexpr,
                    S: tl.constexpr, ACC: tl.constexpr):
    """(saved index - base, gradient) of window columns col + 2S of the rows at `src`
    ([BLOCK, 2]; one aligned vector load each), the index difference in int32: an index with a
    nonzero high word equals no position (as in an int64 compare), and neither does a window off
    the plane: both give -1 (positions are >= base). Column bounds are checked only where a
    lane's columns can leave the plane (constexpr OW, KP lanes per row)."""
    msk = row_ok[:, None]
    if S < 0:
        msk = msk & (col + 2 * S >= 0)
    if 2 * KP + 2 * S > OW:
        msk = msk & (col + 2 * S < OW)
    ind = tl.load(idx_ptr + src + 2 * S, mask=msk, other=-1)
    lo, hi = ind.to(tl.int32), (ind >> 32).to(tl.int32)
    grd = tl.load(go_ptr + src + 2 * S, mask=msk, other=0).to(ACC)
    return tl.where(hi == 0, lo - base[:, None], -1), grd


@triton.jit
def _s2_shift(lo, hi):
    """[BLOCK, 2] pairs (lo[1], hi[0]): the window one column right of each of lo's."""
    _, lo1 = tl.split(lo)
    hi0, _ = tl.split(hi)
    return tl.join(lo1, hi0)


@triton.jit
def _max_pool_bwd_s2_vec_kernel(go_ptr, idx_ptr, out_ptr, total, H: tl.constexpr,
                                W: tl.constexpr, OH: tl.constexpr, OW: tl.constexpr,
                                MG: tl.constexpr, KP: tl.constexpr, LH0: tl.constexpr,
                                HH0: tl.constexpr, LH1: tl.constexpr, HH1: tl.constexpr,
                                LW0: tl.constexpr, HW0: tl.constexpr, LW1: tl.constexpr,
                                HW1: tl.constexpr, RB: tl.constexpr, I64: tl.constexpr,
                                ACC: tl.constexpr, BLOCK: tl.constexpr):
    """`_max_pool_bwd_s2_kernel` for dense NCHW grad_output and indices, walked flat over lanes
    of RB x 2 blocks: lane f owns block rows m0 .. m0 + RB - 1 (m0 = RB * (row group)) x block
    columns 2k, 2k + 1 (k = f % KP), i.e. grad_input rows 2 m0 .. 2 m0 + 2 RB - 1 x columns 4k
    .. 4k + 3. Each window row the lane needs (RB + window rows per block - 1 of them) is read
    once: window columns 2k + (0, 1) as one aligned vector (16-byte int64 pairs, 4-byte
    gradient pairs; the row offset is a multiple of the constexpr OW), plus the single columns
    2k - 1 / 2k + 2 when a window one column left / right covers the blocks (dj = -1 / +1; the
    pair shifted by dj is built in registers, tl.split + tl.join). Accumulators are [BLOCK, 2
    (block column c), 2 (position b)] per grad_input row, in grad_input order, so a row stores
    as one 4-wide vector. Per accumulator, terms come in window-row then dj order: eager's
    (ph, pw) order. The flat walk keeps every lane busy (a 56-wide plane row is 28 lanes, not
    32 padded ones), and the divisions by constexpr sizes run once per lane. (The block kernel
    loaded each window with a scalar ld.global.b64 / .b16, ~35 SASS instructions per element:
    70% of HBM bandwidth on the H200.)"""
    pid = tl.program_id(0)
    if I64:
        pid = pid.to(tl.int64)
    f = pid * BLOCK + tl.arange(0, BLOCK)
    ok = f < total
    k = f % KP
    r = f // KP
    m0 = (r % MG) * RB
    plane = r // MG
    two = tl.arange(0, 2)
    col = (2 * k)[:, None] + two[None, :]  # block / window columns 2k + c
    # flat position of block (m0 + u, 2k + c), position (a, b): base + rel(u, a) + 2c + b
    base = ((2 * m0) * W + 4 * k).to(tl.int32)  # < H * W
    rel = (2 * two)[None, :, None] + two[None, None, :]
    acc00 = tl.zeros([BLOCK, 2, 2], ACC)  # acc{u}{a}: grad_input row 2 (m0 + u) + a
    acc01 = tl.zeros([BLOCK, 2, 2], ACC)
    acc10 = tl.zeros([BLOCK, 2, 2], ACC)
    acc11 = tl.zeros([BLOCK, 2, 2], ACC)
    for w in tl.static_range(min(LH0, LH1), max(HH0, HH1) + RB):  # window row m0 + w
        mm = m0 + w
        row_ok = ok & (mm >= 0) & (mm < OH)
        src = ((plane * OH + mm) * OW)[:, None] + col
        i_c, g_c = _s2_window_pair(idx_ptr, go_ptr, src, base, row_ok, col, OW, KP,
                                       0, ACC)
        if min(LW0, LW1) < 0:
            i_l, g_l = _s2_window_pair(idx_ptr, go_ptr, src, base, row_ok, col, OW, KP,
                                       -1, ACC)
        if max(HW0, HW1) > 0:
            i_r, g_r = _s2_window_pair(idx_ptr, go_ptr, src, base, row_ok, col, OW, KP,
                                       1, ACC)
        for dj in tl.static_range(min(LW0, LW1), max(HW0, HW1) + 1):
            if dj == 0:
                iv, gv = i_c, g_c
            elif dj == 1:
                iv, gv = _s2_shift(i_c, i_r), _s2_shift(g_c, g_r)
            else:
                iv, gv = _s2_shift(i_l, i_c), _s2_shift(g_l, g_c)
            iv = iv[:, :, None]
            gv = gv[:, :, None]
            for u in tl.static_range(RB):
                for a in tl.static_range(2):
                    if a == 0:
                        in_h = (LH0 <= w - u) & (w - u <= HH0)
                    else:
                        in_h = (LH1 <= w - u) & (w - u <= HH1)
                    in0 = in_h & (LW0 <= dj) & (dj <= HW0)
                    in1 = in_h & (LW1 <= dj) & (dj <= HW1)
                    if in0 | in1:
                        hit = iv == rel + (2 * u + a) * W
                        if not (in0 & in1):
                            hit = hit & (two[None, None, :] == (0 if in0 else 1))
                        term = tl.where(hit, gv, 0.0)
                        if u == 0:
                            if a == 0:
                                acc00 += term
                            else:
                                acc01 += term
                        else:
                            if a == 0:
                                acc10 += term
                            else:
                                acc11 += term
    ty = out_ptr.dtype.element_ty
    quad = tl.arange(0, 4)[None, :]
    w_ok = ok[:, None] & (4 * k[:, None] + quad < W)
    dst = out_ptr + ((plane * H + 2 * m0) * W + 4 * k)[:, None] + quad
    tl.store(dst, tl.reshape(acc00.to(ty), [BLOCK, 4]), mask=w_ok & (2 * m0 < H)[:, None])
    tl.store(dst + W, tl.reshape(acc01.to(ty), [BLOCK, 4]),
             mask=w_ok & (2 * m0 + 1 < H)[:, None])
    if RB == 2:
        tl.store(dst + 2 * W, tl.reshape(acc10.to(ty), [BLOCK, 4]),
                 mask=w_ok & (2 * m0 + 2 < H)[:, None])
        tl.store(dst + 3 * W, tl.reshape(acc11.to(ty), [BLOCK, 4]),
                 mask=w_ok & (2 * m0 + 3 < H)[:, None])


def _max_pool_bwd_s2_plan(grad_output, self, indices, kh, kw, ph, pw, dh, dw):
    """(kernel, grid, args, meta) of the stride-2 kernels, or None when the switch is off or the
    planes of grad_output / indices are not evenly strided across images and channels: the pair
    kernel `_max_pool_bwd_s2_vec_kernel` for NCHW with dense grad_output and indices (switch
    `_MAX_POOL_BWD_S2_VEC`), else the block kernel `_max_pool_bwd_s2_kernel`."""
    N, C, H, W, _, _, _, _ = _planes(self)
    oh, ow = grad_output.shape[-2], grad_output.shape[-1]
    gn, gc, gh, gw = _strides4(grad_output)
    jn, jc, jh, jw = _strides4(indices)
    cl = _is_cl(self)
    if not _MAX_POOL_BWD_S2:
        return None
    if not cl and ((N > 1 and gn != C * gc) or (N > 1 and jn != C * jc)):
        return None
    eh = (kh - 1) * dh + 1
    ew = (kw - 1) * dw + 1
    bounds = {}
    for name, e, p in (("H", eh, ph), ("W", ew, pw)):
        for a in (0, 1):
            bounds[f"L{name}{a}"] = -((e - 1 - a - p) // 2)  # ceil((a + p - e + 1) / 2)
            bounds[f"H{name}{a}"] = (a + p) // 2
    mh, mw = _cdiv(H, 2), _cdiv(W, 2)
    wide = _wide(self, grad_output, indices)
    dj0 = min(bounds["LW0"], bounds["LW1"])
    dj1 = max(bounds["HW0"], bounds["HW1"])
    if (_MAX_POOL_BWD_S2_VEC and not cl and grad_output.is_contiguous()
            and indices.is_contiguous() and -1 <= dj0 and dj1 <= 1):
        rb = 2 if _MAX_POOL_BWD_S2_VEC_ROWS >= 2 and mh >= 2 else 1
        groups, pairs = _cdiv(mh, rb), _cdiv(mw, 2)
        total = N * C * groups * pairs
        if _INTERPRET:
            elems = 16384
        else:
            elems = _MAX_POOL_BWD_S2_VEC_ELEMS // (2 if _CONSERVATIVE else 1)
        block = max(1, min(_pow2(total), _floor_pow2(elems // (8 * rb))))
        meta = dict(H=H, W=W, OH=oh, OW=ow, MG=groups, KP=pairs, **bounds, RB=rb, I64=wide,
                    ACC=_acc(grad_output.dtype), BLOCK=block,
                    num_warps=_MAX_POOL_BWD_S2_VEC_WARPS)
        return _max_pool_bwd_s2_vec_kernel, (_cdiv(total, block),), (total,), meta
    rows, cols = (N * mh * mw, C) if cl else (N * C * mh, mw)
    if _INTERPRET:
        elems = 16384
    else:
        elems = _MAX_POOL_BWD_S2_ELEMS // (2 if _CONSERVATIVE else 1)
    block_q = max(1, min(_pow2(cols), 128))
    block_r = max(1, min(_pow2(rows), _floor_pow2(elems // (4 * block_q))))
    grid = (_cdiv(rows, block_r), _cdiv(cols, block_q))
    meta = dict(H=H, W=W, OH=oh, OW=ow, MH=mh, MW=mw, **bounds, CL=cl, I64=wide,
                ACC=_acc(grad_output.dtype), BLOCK_R=block_r, BLOCK_Q=block_q,
                num_warps=_MAX_POOL_BWD_S2_WARPS)
    planes = (gn, jn) if cl else (gc, jc)
    args = (rows, cols, planes[0], gh, gw, gc, planes[1], jh, jw, jc)
    return _max_pool_bwd_s2_kernel, grid, args, meta


def _max_pool_params(kernel_size, stride, padding, dilation):
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = _pair(stride, "stride", default=(kh, kw))
    ph, pw = _pair(padding, "padding")
    dh, dw = _pair(dilation, "dilation")
    if ph > kh // 2 or pw > kw // 2:
        raise RuntimeError("pad should be at most half of effective kernel size")
    return kh, kw, sh, sw, ph, pw, dh, dw


def _max_pool_plan(self, kernel_size, stride, padding, dilation, ceil_mode):
    kh, kw, sh, sw, ph, pw, dh, dw = _max_pool_params(kernel_size, stride, padding, dilation)
    N, C, H, W, sn, sc, s_h, s_w = _planes(self)
    oh = _pool_out(H, kh, sh, ph, dh, ceil_mode)
    ow = _pool_out(W, kw, sw, pw, dw, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input size: ({C}x{H}x{W}). Calculated output size: ({C}x{oh}x{ow}). Output size is too small")
    cl = _is_cl(self)
    shape = tuple(self.shape[:-2]) + (oh, ow)
    strides = _dense_strides(shape, cl)
    if N * C * oh * ow == 0:
        return shape, strides, None, None, None
    grid, rq, meta = _tiles(N, C, oh, ow, cl, _MAX_POOL_ELEMS, _MAX_POOL_WARPS)
    wide = _wide(self) or N * C * oh * ow >= 2**31 - 2**20
    meta.update(KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, DH=dh, DW=dw, I64=wide,
                ACC=_acc(self.dtype))
    args = (*rq, C, H, W, oh, ow, sn, sc, s_h, s_w)
    return shape, strides, grid, args, meta


def _max_pool2d_with_indices(self, kernel_size, stride=(), padding=0, dilation=1, ceil_mode=False):
    key = ("fwd", self.shape, self.stride(), self.dtype, _key(kernel_size), _key(stride),
           _key(padding), _key(dilation), bool(ceil_mode))
    plan = _PLANS.get(key)
    if plan is None:
        plan = _remember(key, _max_pool_plan(self, kernel_size, stride, padding, dilation,
                                             ceil_mode))
    shape, strides, grid, args, meta = plan
    out = torch.empty_strided(shape, strides, dtype=self.dtype, device=self.device)
    idx = torch.empty_strided(shape, strides, dtype=torch.int64, device=self.device)
    if grid is not None:
        _max_pool_kernel[grid](self, out, idx, *args, **meta)
    return out, idx


def _max_pool_bwd_plan(grad_output, self, kernel_size, stride, padding, dilation, indices):
    kh, kw, sh, sw, ph, pw, dh, dw = _max_pool_params(kernel_size, stride, padding, dilation)
    N, C, H, W, _, _, _, _ = _planes(self)
    oh, ow = grad_output.shape[-2], grad_output.shape[-1]
    cl = _is_cl(self)
    shape = tuple(self.shape)
    strides = _dense_strides(shape, cl)
    if N * C * H * W == 0:
        return shape, strides, None, None, None, None
    if sh == sw == 2:
        s2 = _max_pool_bwd_s2_plan(grad_output, self, indices, kh, kw, ph, pw, dh, dw)
        if s2 is not None:
            return (shape, strides, *s2)
    eh = (kh - 1) * dh + 1
    ew = (kw - 1) * dw + 1
    grid, rq, meta = _tiles(N, C, H, W, cl, _MAX_POOL_BWD_ELEMS, _MAX_POOL_BWD_WARPS)
    wide = _wide(self, grad_output, indices)
    meta.update(MAXH=_cdiv(eh, sh), MAXW=_cdiv(ew, sw), SH=sh, SW=sw, PH=ph, PW=pw, EH=eh, EW=ew,
                I64=wide, ACC=_acc(grad_output.dtype))
    args = (*rq, C, H, W, oh, ow, *_strides4(grad_output), *_strides4(indices))
    return shape, strides, _max_pool_bwd_kernel, grid, args, meta


def _max_pool2d_with_indices_backward(grad_output, self, kernel_size, stride, padding, dilation,
                                      ceil_mode, indices):
    key = ("bwd", self.shape, self.stride(), grad_output.shape, grad_output.stride(),
           grad_output.dtype, indices.stride(), _key(kernel_size), _key(stride), _key(padding), _key(dilation))
    plan = _PLANS.get(key)
    if plan is None:
        plan = _remember(key, _max_pool_bwd_plan(grad_output, self, kernel_size, stride, padding,
                                                 dilation, indices))
    shape, strides, kernel, grid, args, meta = plan
    out = torch.empty_strided(shape, strides, dtype=grad_output.dtype, device=self.device)
    if grid is not None:
        kernel[grid](grad_output, indices, out, *args, **meta)
    return out


# ---- emitted: avg_pool ----


@triton.jit
def _avg_window(o, S, P, K, size):
    """(start, clipped start, clipped end, padded window length) of output o along one dim."""
    start = o * S - P
    end = tl.minimum(start + K, size + P)
    length = end - start
    return start, tl.maximum(start, 0), tl.minimum(end, size), length


@triton.jit
def _avg_pool_kernel(x_ptr, out_ptr, R, Q, C, H, W, OH, OW, sn, sc, sh, sw, divisor,
                     SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                     KH: tl.constexpr, KW: tl.constexpr,
                     COUNT_PAD: tl.constexpr, HAS_DIV: tl.constexpr, CL: tl.constexpr,
                     I64: tl.constexpr, ACC: tl.constexpr, BLOCK_R: tl.constexpr,
                     BLOCK_Q: tl.constexpr):
    n, c, oh, ow, o, ok = _coords(R, Q, C, OH, OW, CL, I64, BLOCK_R, BLOCK_Q)
    base = x_ptr + n * sn + c * sc
    h0, hs, he, lh = _avg_window(oh, SH, PH, KH, H)
    w0, ws, we, lw = _avg_window(ow, SW, PW, KW, W)
    acc = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    for kh in tl.static_range(KH):
        h = h0 + kh
        row = base + h * sh
        h_ok = ok & (h >= 0) & (h < H)
        for kw in tl.static_range(KW):
            w = w0 + kw
            m = h_ok & (w >= 0) & (w < W)
            acc += tl.load(row + w * sw, mask=m, other=0).to(ACC)
    res = _avg_of_window(acc, divisor, lh, lw, hs, he, ws, we, HAS_DIV, COUNT_PAD)
    tl.store(out_ptr + o, res.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _avg_pool_tile_kernel(x_ptr, out_ptr, R, divisor, H: tl.constexpr, W: tl.constexpr,
                          OH: tl.constexpr, OW: tl.constexpr, KH: tl.constexpr,
                          KW: tl.constexpr, I64: tl.constexpr, ACC: tl.constexpr,
                          BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):
    """Windows that tile the plane (kernel == stride, no padding, all windows inside the plane)
    of a dense NCHW input: every window is full, so the divisor is one number. A program owns
    [BLOCK_R, BLOCK_Q] outputs, rows (n, c, oh); for each kh it loads the matching input rows
    as one [BLOCK_R, KW * BLOCK_Q] vector load and splits column pairs apart in registers
    (reshape + tl.split, the reverse of the backward tile kernel's join), summing taps in
    eager's (kh, kw) order. H, W, OH, OW are constexpr: row offsets are multiples the compiler
    sees (aligned vector loads) and the plane split is a division by a constant. (The generic
    kernel read each tap with a scalar strided load: 50% of HBM bandwidth on the H200.)"""
    r, q = _tile_rq(I64, BLOCK_R, BLOCK_Q)
    w = (tl.program_id(1) * (BLOCK_Q * KW) + tl.arange(0, BLOCK_Q * KW))[None, :]
    if H == OH * KH:
        src = x_ptr + r * (KH * W) + w
    else:
        src = x_ptr + (r // OH) * (H * W) + (r % OH) * (KH * W) + w
    m = (r < R) & (w < OW * KW)
    acc = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    for kh in tl.static_range(KH):
        v = tl.load(src + kh * W, mask=m, other=0).to(ACC)
        if KW == 1:
            acc += v
        else:
            v0, v1 = tl.split(tl.reshape(v, [BLOCK_R, BLOCK_Q, 2]))
            acc += v0
            acc += v1
    res = acc / divisor
    tl.store(out_ptr + r * OW + q, res.to(out_ptr.dtype.element_ty), mask=(r < R) & (q < OW))


@triton.jit
def _avg_pool_flat_kernel(x_ptr, out_ptr, total, divisor, H: tl.constexpr, W: tl.constexpr,
                          OH: tl.constexpr, OW: tl.constexpr, SH: tl.constexpr,
                          SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                          KH: tl.constexpr, KW: tl.constexpr, COUNT_PAD: tl.constexpr,
                          HAS_DIV: tl.constexpr, EVEN: tl.constexpr, I64: tl.constexpr,
                          ACC: tl.constexpr, BLOCK: tl.constexpr):
    """Any window shape on a dense NCHW input, walked flat over the dense output: every lane
    holds a real output (a row tile pads a 35-wide plane row to 64 lanes, 17 to 32), the
    (plane, oh, ow) split divides by constexpr sizes (multiply-shift, no div.s32), and each tap
    is one load at a constant offset from the window's corner (a 64-bit corner pointer, so the
    offsets become load immediates). Taps that cannot leave the plane (known from the constexpr
    sizes) skip their bounds checks, and EVEN (BLOCK divides the output) drops the tail mask. Sums and divisors as the generic
    kernel (and eager) compute them. (The generic kernel spent ~100 instructions per output
    incl. 8 runtime divisions per thread on 3x3/1 windows: 11% of HBM bandwidth on the H200.)"""
    pid = tl.program_id(0)
    if I64:
        pid = pid.to(tl.int64)
    o = pid * BLOCK + tl.arange(0, BLOCK)
    if EVEN:
        ok = tl.full([BLOCK], True, tl.int1)
    else:
        ok = o < total
    ow = o % OW
    t = o // OW
    oh = t % OH
    h0, hs, he, lh = _avg_window(oh, SH, PH, KH, H)
    w0, ws, we, lw = _avg_window(ow, SW, PW, KW, W)
    corner = x_ptr + ((t // OH) * (H * W) + h0 * W + w0).to(tl.int64)
    acc = tl.zeros([BLOCK], ACC)
    for kh in tl.static_range(KH):
        h_ok = ok
        if kh < PH:  # oh >= 0, so h = oh * SH - PH + kh >= 0 once kh >= PH
            h_ok = h_ok & (h0 + kh >= 0)
        if (OH - 1) * SH - PH + kh >= H:
            h_ok = h_ok & (h0 + kh < H)
        for kw in tl.static_range(KW):
            m = h_ok
            if kw < PW:
                m = m & (w0 + kw >= 0)
            if (OW - 1) * SW - PW + kw >= W:
                m = m & (w0 + kw < W)
            acc += tl.load(corner + (kh * W + kw), mask=m, other=0).to(ACC)
    res = _avg_of_window(acc, divisor, lh, lw, hs, he, ws, we, HAS_DIV, COUNT_PAD)
    if EVEN:
        tl.store(out_ptr + o, res.to(out_ptr.dtype.element_ty))
    else:
        tl.store(out_ptr + o, res.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _avg_pool_bwd_kernel(go_ptr, out_ptr, R, Q, C, H, W, OH, OW, gn, gc, gh, gw, divisor,
                         SH: tl.constexpr, SW: tl.constexpr, PH: tl.constexpr, PW: tl.constexpr,
                         KH: tl.constexpr, KW: tl.constexpr,
                         MAXH: tl.constexpr, MAXW: tl.constexpr, COUNT_PAD: tl.constexpr,
                         HAS_DIV: tl.constexpr, CL: tl.constexpr, I64: tl.constexpr,
                         ACC: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):
    """grad_input[h, w] = sum over windows containing (h, w) of grad_output / divisor."""
    n, c, h, w, o, ok = _coords(R, Q, C, H, W, CL, I64, BLOCK_R, BLOCK_Q)
    hp = h + PH
    wp = w + PW
    ph0 = tl.where(hp < KH, 0, (hp - KH) // SH + 1)
    ph1 = tl.minimum(hp // SH + 1, OH)
    pw0 = tl.where(wp < KW, 0, (wp - KW) // SW + 1)
    pw1 = tl.minimum(wp // SW + 1, OW)
    gbase = go_ptr + n * gn + c * gc
    acc = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    for i in tl.static_range(MAXH):
        ph = ph0 + i
        _, hs, he, lh = _avg_window(ph, SH, PH, KH, H)
        h_ok = ok & (ph < ph1) & (hs < he)
        for j in tl.static_range(MAXW):
            pw = pw0 + j
            _, ws, we, lw = _avg_window(pw, SW, PW, KW, W)
            m = h_ok & (pw < pw1) & (ws < we)
            g = tl.load(gbase + ph * gh + pw * gw, mask=m, other=0).to(ACC)
            if HAS_DIV:
                acc += g / divisor
            else:
                if COUNT_PAD:
                    div = (lh * lw).to(ACC)
                else:
                    div = ((he - hs) * (we - ws)).to(ACC)
                acc += g / tl.where(m, div, 1.0)
    tl.store(out_ptr + o, acc.to(out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _avg_pool_bwd_tile_kernel(go_ptr, out_ptr, R, Q, divisor, W: tl.constexpr,
                              OW: tl.constexpr, KH: tl.constexpr, KW: tl.constexpr,
                              CL: tl.constexpr, I64: tl.constexpr, ACC: tl.constexpr,
                              BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr):
    """Windows that tile the plane exactly (kernel == stride, no padding, H = OH*KH, W = OW*KW):
    every grad_input element is one grad_output element / divisor, a broadcast copy. A program
    loads a [BLOCK_R, BLOCK_Q] tile of the dense grad_output in memory order (vector loads),
    divides once per grad_output element and writes its KH*KW copies with vector stores: NCHW
    rows (n, c, oh) are widened KW-fold in registers (tl.join interleaves, no shared memory) and
    stored to grad_input rows oh*KH + kh; channels-last rows are pixels, each copy a shifted
    store of the whole channel run. W and OW are constexpr: row offsets are multiples the
    compiler can see (aligned vector stores) and the pixel split is a division by a constant.
    (The gather kernel spent ~50 instructions and two runtime divisions per element: 29% of
    HBM bandwidth on the H200.)"""
    r, q = _tile_rq(I64, BLOCK_R, BLOCK_Q)
    if CL:
        ok = (r < R) & (q < Q)
        src = go_ptr + r * Q + q
    else:  # Q == OW, constexpr here: aligned vector loads
        ok = (r < R) & (q < OW)
        src = go_ptr + r * OW + q
    # 0 + g / divisor as eager sums it (a -0 gradient gives +0)
    g = 0.0 + tl.load(src, mask=ok, other=0).to(ACC) / divisor
    g = g.to(out_ptr.dtype.element_ty)
    if CL:
        t = r // OW
        pix = t * (KH * W) + (r - t * OW) * KW
        for kh in tl.static_range(KH):
            for kw in tl.static_range(KW):
                tl.store(out_ptr + (pix + (kh * W + kw)) * Q + q, g, mask=ok)
    else:
        for _ in tl.static_range(KW.bit_length() - 1):
            g = tl.reshape(tl.join(g, g), [g.shape[0], 2 * g.shape[1]])
        w = (tl.program_id(1) * (BLOCK_Q * KW) + tl.arange(0, BLOCK_Q * KW))[None, :]
        m = (r < R) & (w < W)
        for kh in tl.static_range(KH):
            tl.store(out_ptr + (r * KH + kh) * W + w, g, mask=m)


def _avg_pool_bwd_tile_plan(grad_output, self, kh, kw, divisor):
    """(grid, args, meta) of `_avg_pool_bwd_tile_kernel`, or None when the windows do not tile
    the plane exactly or grad_output is not dense in grad_input's layout (the gather kernel
    serves those). NCHW widens rows with tl.join, so KW must be a power of two there."""
    N, C, H, W, _, _, _, _ = _planes(self)
    oh, ow = grad_output.shape[-2], grad_output.shape[-1]
    cl = _is_cl(self)
    if not _AVG_POOL_BWD_TILE or H != oh * kh or W != ow * kw:
        return None
    if cl:
        if not grad_output.is_contiguous(memory_format=torch.channels_last):
            return None
        rows, cols = N * oh * ow, C
    else:
        if not grad_output.is_contiguous() or kw & (kw - 1):
            return None
        rows, cols = N * C * oh, ow
    elems = 16384 if _INTERPRET else _AVG_POOL_BWD_TILE_ELEMS
    block_q = max(1, min(_pow2(cols), 128 if cl else 1024))
    block_r = max(1, min(_pow2(rows), _floor_pow2(elems // (block_q * kh * kw))))
    grid = (_cdiv(rows, block_r), _cdiv(cols, block_q))
    meta = dict(W=W, OW=ow, KH=kh, KW=kw, CL=cl, I64=_wide(self, grad_output),
                ACC=_acc(grad_output.dtype), BLOCK_R=block_r, BLOCK_Q=block_q,
                num_warps=_AVG_POOL_BWD_TILE_WARPS)
    return grid, (rows, cols, int(divisor)), meta


def _avg_pool_params(kernel_size, stride, padding, divisor_override):
    kh, kw = _pair(kernel_size, "kernel_size")
    sh, sw = _pair(stride, "stride", default=(kh, kw))
    ph, pw = _pair(padding, "padding")
    if ph > kh // 2 or pw > kw // 2:
        raise RuntimeError("pad should be at most half of effective kernel size")
    if divisor_override is not None and divisor_override == 0:
        raise RuntimeError("divisor must be not zero")
    return kh, kw, sh, sw, ph, pw


def _avg_pool_fast_plan(self, kh, kw, sh, sw, ph, pw, oh, ow, count_include_pad,
                        divisor_override):
    """(kernel, grid, args, meta) of the dense-NCHW kernels (`_avg_pool_tile_kernel` for windows
    that tile the plane with KW 1 or 2, else `_avg_pool_flat_kernel`), or None when the input is
    not dense NCHW or both switches are off (the generic kernel serves those)."""
    N, C, H, W, _, _, _, _ = _planes(self)
    if _is_cl(self) or not self.is_contiguous():
        return None
    wide = _wide(self) or N * C * oh * ow >= 2**31 - 2**20
    acc = _acc(self.dtype)
    tiled = (kh, kw, ph, pw) == (sh, sw, 0, 0) and oh * kh <= H and ow * kw <= W
    if _AVG_POOL_TILE and tiled and kw in (1, 2):
        rows = N * C * oh
        elems = 16384 if _INTERPRET else _AVG_POOL_TILE_ELEMS
        block_q = max(1, min(_pow2(ow), 1024))
        block_r = max(1, min(_pow2(rows), _floor_pow2(elems // (block_q * kh * kw))))
        grid = (_cdiv(rows, block_r), _cdiv(ow, block_q))
        meta = dict(H=H, W=W, OH=oh, OW=ow, KH=kh, KW=kw, I64=wide, ACC=acc, BLOCK_R=block_r,
                    BLOCK_Q=block_q, num_warps=_AVG_POOL_TILE_WARPS)
        return _avg_pool_tile_kernel, grid, (rows, int(divisor_override or kh * kw)), meta
    if not _AVG_POOL_FLAT:
        return None
    total = N * C * oh * ow
    elems = 16384 if _INTERPRET else _AVG_POOL_FLAT_ELEMS
    block = max(32, min(_pow2(total), elems))
    meta = dict(H=H, W=W, OH=oh, OW=ow, SH=sh, SW=sw, PH=ph, PW=pw, KH=kh, KW=kw,
                COUNT_PAD=bool(count_include_pad), HAS_DIV=divisor_override is not None,
                EVEN=total % block == 0, I64=wide, ACC=acc, BLOCK=block,
                num_warps=_AVG_POOL_FLAT_WARPS)
    args = (total, int(divisor_override or 1))
    return _avg_pool_flat_kernel, (_cdiv(total, block),), args, meta


def _avg_pool_plan(self, kernel_size, stride, padding, ceil_mode, count_include_pad,
                   divisor_override):
    kh, kw, sh, sw, ph, pw = _avg_pool_params(kernel_size, stride, padding, divisor_override)
    N, C, H, W, sn, sc, s_h, s_w = _planes(self)
    oh = _pool_out(H, kh, sh, ph, 1, ceil_mode)
    ow = _pool_out(W, kw, sw, pw, 1, ceil_mode)
    if oh <= 0 or ow <= 0:
        raise RuntimeError(f"Given input size: ({C}x{H}x{W}). Calculated output size: ({C}x{oh}x{ow}). Output size is too small")
    cl = _is_cl(self)
    shape = tuple(self.shape[:-2]) + (oh, ow)
    strides = _dense_strides(shape, cl)
    if N * C * oh * ow == 0:
        return shape, strides, None, None, None, None
    fast = _avg_pool_fast_plan(self, kh, kw, sh, sw, ph, pw, oh, ow, count_include_pad,
                               divisor_override)
    if fast is not None:
        return (shape, strides, *fast)
    grid, rq, meta = _tiles(N, C, oh, ow, cl, _AVG_POOL_ELEMS, _AVG_POOL_WARPS)
    wide = _wide(self) or N * C * oh * ow >= 2**31 - 2**20
    meta.update(KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, COUNT_PAD=bool(count_include_pad),
                HAS_DIV=divisor_override is not None, I64=wide, ACC=_acc(self.dtype))
    args = (*rq, C, H, W, oh, ow, sn, sc, s_h, s_w, int(divisor_override or 1))
    return shape, strides, _avg_pool_kernel, grid, args, meta


def _avg_pool2d(self, kernel_size, stride=(), padding=0, ceil_mode=False, count_include_pad=True,
                divisor_override=None):
    key = ("fwd", self.shape, self.stride(), self.dtype, _key(kernel_size), _key(stride),
           _key(padding), bool(ceil_mode), bool(count_include_pad), divisor_override)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _remember(key, _avg_pool_plan(self, kernel_size, stride, padding, ceil_mode,
                                             count_include_pad, divisor_override))
    shape, strides, kernel, grid, args, meta = plan
    out = torch.empty_strided(shape, strides, dtype=self.dtype, device=self.device)
    if grid is not None:
        kernel[grid](self, out, *args, **meta)
    return out


def _avg_pool_bwd_plan(grad_output, self, kernel_size, stride, padding, count_include_pad,
                       divisor_override):
    kh, kw, sh, sw, ph, pw = _avg_pool_params(kernel_size, stride, padding, divisor_override)
    N, C, H, W, _, _, _, _ = _planes(self)
    oh, ow = grad_output.shape[-2], grad_output.shape[-1]
    cl = _is_cl(self)
    shape = tuple(self.shape)
    strides = _dense_strides(shape, cl)
    if N * C * H * W == 0:
        return shape, strides, None, None, None, None
    if (kh, kw, ph, pw) == (sh, sw, 0, 0):
        tile = _avg_pool_bwd_tile_plan(grad_output, self, kh, kw, divisor_override or kh * kw)
        if tile is not None:
            return (shape, strides, _avg_pool_bwd_tile_kernel, *tile)
    grid, rq, meta = _tiles(N, C, H, W, cl, _AVG_POOL_BWD_ELEMS, _AVG_POOL_BWD_WARPS)
    meta.update(KH=kh, KW=kw, SH=sh, SW=sw, PH=ph, PW=pw, MAXH=_cdiv(kh, sh), MAXW=_cdiv(kw, sw),
                COUNT_PAD=bool(count_include_pad), HAS_DIV=divisor_override is not None,
                I64=_wide(self, grad_output), ACC=_acc(grad_output.dtype))
    args = (*rq, C, H, W, oh, ow, *_strides4(grad_output), int(divisor_override or 1))
    return shape, strides, _avg_pool_bwd_kernel, grid, args, meta


def _avg_pool2d_backward(grad_output, self, kernel_size, stride, padding, ceil_mode,
                         count_include_pad, divisor_override):
    key = ("bwd", self.shape, self.stride(), grad_output.shape, grad_output.stride(),
           grad_output.dtype, _key(kernel_size), _key(stride), _key(padding), bool(count_include_pad),
           divisor_override)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _remember(key, _avg_pool_bwd_plan(grad_output, self, kernel_size, stride, padding,
                                                 count_include_pad, divisor_override))
    shape, strides, kernel, grid, args, meta = plan
    out = torch.empty_strided(shape, strides, dtype=grad_output.dtype, device=self.device)
    if grid is not None:
        kernel[grid](grad_output, out, *args, **meta)
    return out


# ---- emitted: adaptive ----


@triton.jit
def _adaptive_kernel(x_ptr, out_ptr, R, Q, C, H, W, OH, OW, sn, sc, sh, sw,
                     MAXH: tl.constexpr, MAXW: tl.constexpr, CL: tl.constexpr,
                     I64: tl.constexpr, ACC: tl.constexpr, BLOCK_R: tl.constexpr,
                     BLOCK_Q: tl.constexpr):
    n, c, oh, ow, o, ok = _coords(R, Q, C, OH, OW, CL, I64, BLOCK_R, BLOCK_Q)
    hs = (oh * H) // OH
    he = ((oh + 1) * H + OH - 1) // OH
    ws = (ow * W) // OW
    we = ((ow + 1) * W + OW - 1) // OW
    base = x_ptr + n * sn + c * sc
    acc = tl.zeros([BLOCK_R, BLOCK_Q], ACC)
    for i in range(0, MAXH):
        h = hs + i
        row = base + h * sh
        h_ok = ok & (h < he)
        for j in range(0, MAXW):
            w = ws + j
            m = h_ok & (w < we)
            acc += tl.load(row + w * sw, mask=m, other=0).to(ACC)
    res = acc / (he - hs).to(ACC) / (we - ws).to(ACC)
    tl.store(out_ptr + o, res.to(out_ptr.dtype.element_ty), mask=ok)


def _max_window(size, out_size):
    return max(-(-((o + 1) * size) // out_size) - (o * size) // out_size for o in range(out_size))


def _adaptive_plan(self, output_size):
    oh, ow = _pair(output_size, "output_size")
    N, C, H, W, sn, sc, sh, sw = _planes(self)
    if oh < 0 or ow < 0 or (oh == 0 and H) or (ow == 0 and W):
        raise RuntimeError("adaptive_avg_pool2d(): output_size must be positive")
    cl = _is_cl(self)
    shape = tuple(self.shape[:-2]) + (oh, ow)
    strides = _dense_strides(shape, cl)
    if N * C * oh * ow == 0:
        return shape, strides, None, None, None
    grid, rq, meta = _tiles(N, C, oh, ow, cl, _ADAPTIVE_ELEMS, _ADAPTIVE_WARPS)
    meta.update(MAXH=_max_window(H, oh), MAXW=_max_window(W, ow),
                I64=_wide(self) or N * C * oh * ow >= 2**31 - 2**20, ACC=_acc(self.dtype))
    return shape, strides, grid, (*rq, C, H, W, oh, ow, sn, sc, sh, sw), meta


def _adaptive_avg_pool2d(self, output_size):
    key = (self.shape, self.stride(), self.dtype, _key(output_size))
    plan = _PLANS.get(key)
    if plan is None:
        plan = _remember(key, _adaptive_plan(self, output_size))
    shape, strides, grid, args, meta = plan
    out = torch.empty_strided(shape, strides, dtype=self.dtype, device=self.device)
    if grid is not None:
        _adaptive_kernel[grid](self, out, *args, **meta)
    return out


# ---- emitted: upsample ----


@triton.jit
def _src_index(o, scale, size, ALIGN: tl.constexpr, ACC: tl.constexpr):
    """ATen's area_pixel_compute_source_index: (low index, step to the high one, high weight)."""
    if ALIGN:
        src = scale * o.to(ACC)
    else:
        src = scale * (o.to(ACC) + 0.5) - 0.5
        src = tl.maximum(src, 0.0)
    i0 = src.to(o.dtype)  # src >= 0: truncation is floor (int64 only for int64 offsets)
    step = tl.where(i0 < size - 1, 1, 0)
    return i0, step, src - i0.to(ACC)


@triton.jit
def _bilinear_kernel(x_ptr, out_ptr, R, Q, C, H, W, OH, OW, sn, sc, sh, sw, rh: tl.float64,
                     rw: tl.float64,
                     ALIGN: tl.constexpr, CL: tl.constexpr, I64: tl.constexpr,
                     ACC: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_Q: tl.constexpr,
                     SAME: tl.constexpr):
    """A [BLOCK_R, BLOCK_Q] tile of the output in memory order (like the pools): channels-last
    rows are output pixels and columns channels, so the four taps are contiguous loads along C
    and the source positions are computed once per row. (One element per lane with int64
    divisions by C, OW and OH per element ran at 24% of HBM bandwidth on the H200, eager 89%.)
    SAME (output size = input size) copies, as ATen's kernels do for that size whatever the
    scales; the suite's largest case is one."""
    n, c, oh, ow, o, ok = _coords(R, Q, C, OH, OW, CL, I64, BLOCK_R, BLOCK_Q)
    if SAME:
        x = tl.load(x_ptr + n * sn + c * sc + oh * sh + ow * sw, mask=ok, other=0)
        tl.store(out_ptr + o, x.to(out_ptr.dtype.element_ty), mask=ok)
        return
    # the scales arrive as doubles (a float argument would be packed as fp32): one rounding to ACC
    h1, hp, lh1 = _src_index(oh, tl.full([1, 1], rh, ACC), H, ALIGN, ACC)
    w1, wp, lw1 = _src_index(ow, tl.full([1, 1], rw, ACC), W, ALIGN, ACC)
    lh0 = 1.0 - lh1
    lw0 = 1.0 - lw1
    base = x_ptr + n * sn + c * sc
    top = base + h1 * sh
    bot = top + hp * sh
    x00 = tl.load(top + w1 * sw, mask=ok, other=0).to(ACC)
    x01 = tl.load(top + (w1 + wp) * sw, mask=ok, other=0).to(ACC)
    x10 = tl.load(bot + w1 * sw, mask=ok, other=0).to(ACC)
    x11 = tl.load(bot + (w1 + wp) * sw, mask=ok, other=0).to(ACC)
    res = lh0 * (lw0 * x00 + lw1 * x01) + lh1 * (lw0 * x10 + lw1 * x11)
    tl.store(out_ptr + o, res.to(out_ptr.dtype.element_ty), mask=ok)


def _area_scale(in_size, out_size, align_corners, scale):
    """ATen's area_pixel_compute_scale."""
    if align_corners:
        return (in_size - 1) / (out_size - 1) if out_size > 1 else 0.0
    if scale is not None and scale > 0:
        return 1.0 / scale
    return in_size / out_size


def _upsample_bilinear2d(self, output_size, align_corners, scales_h=None, scales_w=None):
    key = ("up", self.shape, self.stride(), self.dtype, self.device, _key(output_size),
           bool(align_corners), scales_h, scales_w)
    plan = _PLANS.get(key)
    if plan is None:
        plan = _remember(key, _upsample_plan(self, output_size, align_corners, scales_h,
                                             scales_w))
    shape, fmt, grid, args, meta = plan
    out = torch.empty(shape, dtype=self.dtype, device=self.device, memory_format=fmt)
    if grid is not None:
        _bilinear_kernel[grid](self, out, *args, **meta)
    return out


def _upsample_plan(self, output_size, align_corners, scales_h, scales_w):
    """(output shape, memory format, grid or None for an empty output, launch args, meta)."""
    if self.dim() != 4:
        raise RuntimeError(f"{_OP}: expected a 4D input, got {self.dim()}D")
    oh, ow = _pair(output_size, "output_size")
    N, C, H, W = self.shape
    if oh <= 0 or ow <= 0 or H <= 0 or W <= 0:
        raise RuntimeError(f"Input and output sizes should be greater than 0, but got input (H: {H}, W: {W}) output (H: {oh}, W: {ow})")
    cl = self.is_contiguous(memory_format=torch.channels_last) and not self.is_contiguous()
    fmt = torch.channels_last if cl else torch.contiguous_format
    shape = (N, C, oh, ow)
    if N * C * oh * ow == 0:
        return shape, fmt, None, None, None
    rh = _area_scale(H, oh, align_corners, scales_h)
    rw = _area_scale(W, ow, align_corners, scales_w)
    grid, rq, meta = _tiles(N, C, oh, ow, cl, _UPSAMPLE_ELEMS, _UPSAMPLE_WARPS)
    wide = _wide(self) or N * C * oh * ow >= 2**31 - 2**20  # the dense output's extent
    meta.update(ALIGN=bool(align_corners), I64=wide, ACC=_acc(self.dtype))
    meta.update(SAME=(oh, ow) == (H, W))  # ATen copies whatever the scales (CPU and CUDA alike)
    return shape, fmt, grid, (*rq, C, H, W, oh, ow, *self.stride(), float(rh), float(rw)), meta


def _upsample_bilinear2d_vec(input, output_size, align_corners, scale_factors):
    if output_size is not None and scale_factors is not None:
        raise RuntimeError("Must specify exactly one of output_size and scale_factors")
    if output_size is not None:
        return _upsample_bilinear2d(input, output_size, align_corners)
    if scale_factors is None or len(scale_factors) != 2:
        raise RuntimeError("Must specify exactly one of output_size and scale_factors")
    sh, sw = float(scale_factors[0]), float(scale_factors[1])
    size = [int(input.shape[-2] * sh), int(input.shape[-1] * sw)]
    return _upsample_bilinear2d(input, size, align_corners, sh, sw)
