"""native_group_norm kernels: split partial sums and apply, whole groups in registers, and the
persistent pipelined form for long one-channel f16/bf16 groups."""

import triton  # noqa: I001  (one line per import, lint-only)
import triton.language as tl

# ---- emitted: kernels ----


@triton.jit
def _gn_range(s, D, HW, CHUNK, SPC, PER_CHANNEL: tl.constexpr):
    """[lo, hi) of chunk s inside its group, and its channel (PER_CHANNEL: chunks never cross a
    channel, SPC of them per channel)."""
    if PER_CHANNEL:
        ci = s // SPC
        lo = ci * HW + (s % SPC) * CHUNK
        hi = tl.minimum(lo + CHUNK, ci * HW + HW)
    else:
        ci = 0
        lo = s * CHUNK
        hi = tl.minimum(lo + CHUNK, D)
    return lo, hi, ci


@triton.jit
def _gn_partials_kernel(x_ptr, part_ptr, D, HW, CHUNK, SPC, S, PER_CHANNEL: tl.constexpr,
                        ACC: tl.constexpr, STAGES: tl.constexpr, BLOCK: tl.constexpr):
    """Sums of one chunk of a group, shifted by the group's first element (every chunk of the
    group uses the same shift, so the sums add up; no catastrophic cancellation)."""
    g = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    base = g * D
    shift = tl.load(x_ptr + base).to(ACC)
    lo, hi, _ = _gn_range(s, D, HW, CHUNK, SPC, PER_CHANNEL)
    s1 = tl.zeros([BLOCK], ACC)
    s2 = tl.zeros([BLOCK], ACC)
    for k0 in tl.range(lo, hi, BLOCK, num_stages=STAGES):
        k = k0 + tl.arange(0, BLOCK)
        m = k < hi
        v = tl.load(x_ptr + base + k, mask=m, other=0).to(ACC)
        v = tl.where(m, v - shift, 0.0)
        s1 += v
        s2 += v * v
    slot = (g * S + s) * 2
    tl.store(part_ptr + slot, tl.sum(s1, axis=0))
    tl.store(part_ptr + slot + 1, tl.sum(s2, axis=0))


@triton.jit
def _gn_apply_kernel(x_ptr, w_ptr, b_ptr, out_ptr, part_ptr, mean_ptr, rstd_ptr, G, CPG, HW, D,
                     CHUNK, SPC, S, n_f: tl.float64, eps: tl.float64, HAS_W: tl.constexpr, HAS_B: tl.constexpr,
                     ACC: tl.constexpr, ROUND_STATS: tl.constexpr, PER_CHANNEL: tl.constexpr,
                     SP: tl.constexpr, STAGES: tl.constexpr, BLOCK: tl.constexpr):
    """Statistics of the group from its S partial sums (every program of the group computes the
    same values in the same order; chunk 0 stores them), then one chunk normalised.

    ROUND_STATS (CUDA, f16/bf16): normalise with the mean and rstd rounded to the input dtype,
    as y = x*a + b with a = rstd*w and b = beta - a*mean, which is how CUDA eager computes it
    from the statistics it stored; with unrounded ones, elements whose x*a nearly cancels the
    bias came out several f16 ulps from eager on the H200."""
    n_f = tl.full([], n_f, ACC)  # double arguments (a plain float is packed as fp32)
    eps = tl.full([], eps, ACC)
    g = tl.program_id(0).to(tl.int64)
    s = tl.program_id(1)
    base = g * D
    shift = tl.load(x_ptr + base).to(ACC)
    j = tl.arange(0, SP)
    t1 = tl.sum(tl.load(part_ptr + (g * S + j) * 2, mask=j < S, other=0), axis=0)
    t2 = tl.sum(tl.load(part_ptr + (g * S + j) * 2 + 1, mask=j < S, other=0), axis=0)
    mean_s = t1 / n_f
    var = (t2 - t1 * mean_s) / n_f
    var = tl.maximum(var, 0.0)
    mean = shift + mean_s
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(mean_ptr + g, mean.to(mean_ptr.dtype.element_ty), mask=s == 0)
    tl.store(rstd_ptr + g, rstd.to(rstd_ptr.dtype.element_ty), mask=s == 0)
    if ROUND_STATS:
        mean = mean.to(mean_ptr.dtype.element_ty).to(ACC)
        rstd = rstd.to(rstd_ptr.dtype.element_ty).to(ACC)
    c_base = (g % G) * CPG
    lo, hi, ci = _gn_range(s, D, HW, CHUNK, SPC, PER_CHANNEL)
    if PER_CHANNEL:
        # the chunk is inside one channel: its weight and bias are scalars (a per-element
        # channel number k // HW and two gathers cost more than the bytes)
        wv, bv = _gn_affine(w_ptr, b_ptr, c_base + ci, ci < CPG, HAS_W, HAS_B, ACC)
    for k0 in tl.range(lo, hi, BLOCK, num_stages=STAGES):
        k = k0 + tl.arange(0, BLOCK)
        m = k < hi
        v = tl.load(x_ptr + base + k, mask=m, other=0).to(ACC)
        if not PER_CHANNEL:
            wv, bv = _gn_affine(w_ptr, b_ptr, c_base + k // HW, m, HAS_W, HAS_B, ACC)
        y = _gn_apply(v, wv, bv, mean, rstd, ROUND_STATS)
        tl.store(out_ptr + base + k, y.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def _gn_whole_kernel(x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, rstd_ptr, NG, G, CPG, HW, D,
                     n_f: tl.float64, eps: tl.float64, HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr,
                     ROUND_STATS: tl.constexpr, ONE_CHANNEL: tl.constexpr, ROWS: tl.constexpr,
                     BLOCK: tl.constexpr):
    """ROWS whole groups, each loaded once into registers: mean, then the variance as the mean
    of (x - mean)^2 over the same registers (two passes without a second read), normalised and
    stored. ONE_CHANNEL (C/G == 1): one weight and bias per group, no per-element channel."""
    n_f = tl.full([], n_f, ACC)  # double arguments (a plain float is packed as fp32)
    eps = tl.full([], eps, ACC)
    g = tl.program_id(0).to(tl.int64) * ROWS + tl.arange(0, ROWS)
    k = tl.arange(0, BLOCK)
    g_ok = g < NG
    m = g_ok[:, None] & (k[None, :] < D)
    # 64-bit group bases, 32-bit offsets inside a group (one wide multiply-add per element)
    x_row = x_ptr + (g * D)[:, None]
    v = tl.load(x_row + k[None, :], mask=m, other=0).to(ACC)
    mean = tl.sum(v, axis=1) / n_f
    dev = tl.where(m, v - mean[:, None], 0.0)
    var = tl.sum(dev * dev, axis=1) / n_f
    rstd = 1.0 / tl.sqrt(var + eps)
    tl.store(mean_ptr + g, mean.to(mean_ptr.dtype.element_ty), mask=g_ok)
    tl.store(rstd_ptr + g, rstd.to(rstd_ptr.dtype.element_ty), mask=g_ok)
    if ROUND_STATS:
        mean = mean.to(mean_ptr.dtype.element_ty).to(ACC)
        rstd = rstd.to(rstd_ptr.dtype.element_ty).to(ACC)
    c_base = (g % G) * CPG
    if ONE_CHANNEL:
        wv, bv = _gn_affine(w_ptr, b_ptr, c_base[:, None], g_ok[:, None], HAS_W, HAS_B, ACC)
    else:
        wv, bv = _gn_affine(w_ptr, b_ptr, c_base[:, None] + k[None, :] // HW, m, HAS_W, HAS_B,
                            ACC)
    y = _gn_apply(v, wv, bv, mean[:, None], rstd[:, None], ROUND_STATS)
    tl.store(out_ptr + (g * D)[:, None] + k[None, :], y.to(out_ptr.dtype.element_ty), mask=m)


@triton.jit
def _gn_pipe_fetch(x_ptr, g, NG, D, k, e, VEC: tl.constexpr):
    """Group g's (nothing when g >= NG) whole VEC-element chunks, as 32-bit words of two
    elements each (16-byte loads for VEC 8), and its head and tail outside them (e < VEC: the
    elements before the first whole chunk; e >= VEC: those after the last)."""
    base = tl.cast(g, tl.int64) * D
    ok = g < NG  # else every bound below is 0: nothing loaded
    cb = tl.cdiv(base, VEC)
    cf = (base + D) // VEC
    n_w = tl.where(ok, (cf - cb) * (VEC // 2), 0)
    words = tl.load(x_ptr.to(tl.pointer_type(tl.int32)) + cb * (VEC // 2) + k, mask=k < n_w,
                    other=0)
    p = tl.where(e < VEC, base + e, cf * VEC + e - VEC)
    pm = p < tl.where(ok, tl.where(e < VEC, cb * VEC, base + D), 0)
    edge = tl.load(x_ptr + p, mask=pm, other=0)
    return words, edge


@triton.jit
def _gn_pipe_kernel(x_ptr, w_ptr, b_ptr, out_ptr, mean_ptr, rstd_ptr, NG, G, D, n_f: tl.float64,
                    eps: tl.float64,
                    HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr,
                    ROUND_STATS: tl.constexpr, VEC: tl.constexpr, BLOCK_W: tl.constexpr):
    """Persistent whole-group kernel for 16-bit one-channel groups: program pid takes groups
    pid, pid + P, ... and fetches the next group before it reduces and stores the current one:
    those loads are in flight during that work (a load stalls only at its first use, one
    iteration later). A group is held as 32-bit words of two elements (one register per two
    elements; a 16-bit load takes a whole register), loaded and stored as whole VEC-element
    chunks (16 bytes for VEC 8) although groups start anywhere: the (< VEC) elements before the
    group's first whole chunk and after its last go through a 2*VEC-element side tensor.
    Statistics as _gn_whole_kernel's: mean, then the mean of squared deviations."""
    n_f = tl.full([], n_f, ACC)  # double arguments (a plain float is packed as fp32)
    eps = tl.full([], eps, ACC)
    P = tl.num_programs(0)
    pid = tl.program_id(0)
    DT: tl.constexpr = x_ptr.dtype.element_ty
    k = tl.arange(0, BLOCK_W)
    e = tl.arange(0, 2 * VEC)
    words, edge = _gn_pipe_fetch(x_ptr, pid, NG, D, k, e, VEC)
    for g in range(pid, NG, P):
        cur_w = words
        cur_e = edge
        words, edge = _gn_pipe_fetch(x_ptr, g + P, NG, D, k, e, VEC)
        wv, bv = _gn_affine(w_ptr, b_ptr, g % G, g < NG, HAS_W, HAS_B, ACC)
        base = tl.cast(g, tl.int64) * D
        cb = tl.cdiv(base, VEC)
        cf = (base + D) // VEC
        wm = k < (cf - cb) * (VEC // 2)
        p = tl.where(e < VEC, base + e, cf * VEC + e - VEC)
        pm = tl.where(e < VEC, p < cb * VEC, p < base + D)
        lo = (cur_w & 0xFFFF).to(tl.int16).to(DT, bitcast=True).to(ACC)
        hi = (cur_w >> 16).to(tl.int16).to(DT, bitcast=True).to(ACC)
        ve = cur_e.to(ACC)
        mean = (tl.sum(lo + hi, axis=0) + tl.sum(ve, axis=0)) / n_f
        dl = tl.where(wm, lo - mean, 0.0)
        dh = tl.where(wm, hi - mean, 0.0)
        de = tl.where(pm, ve - mean, 0.0)
        var = (tl.sum(dl * dl + dh * dh, axis=0) + tl.sum(de * de, axis=0)) / n_f
        rstd = 1.0 / tl.sqrt(var + eps)
        tl.store(mean_ptr + g, mean.to(mean_ptr.dtype.element_ty))
        tl.store(rstd_ptr + g, rstd.to(rstd_ptr.dtype.element_ty))
        if ROUND_STATS:
            mean = mean.to(mean_ptr.dtype.element_ty).to(ACC)
            rstd = rstd.to(rstd_ptr.dtype.element_ty).to(ACC)
        y_lo = _gn_apply(lo, wv, bv, mean, rstd, ROUND_STATS).to(DT).to(tl.int16, bitcast=True)
        y_hi = _gn_apply(hi, wv, bv, mean, rstd, ROUND_STATS).to(DT).to(tl.int16, bitcast=True)
        y_w = (y_lo.to(tl.int32) & 0xFFFF) | (y_hi.to(tl.int32) << 16)
        tl.store(out_ptr.to(tl.pointer_type(tl.int32)) + cb * (VEC // 2) + k, y_w, mask=wm)
        y_e = _gn_apply(ve, wv, bv, mean, rstd, ROUND_STATS)
        tl.store(out_ptr + p, y_e.to(DT), mask=pm)


@triton.jit
def _gn_affine(w_ptr, b_ptr, c, m, HAS_W: tl.constexpr, HAS_B: tl.constexpr, ACC: tl.constexpr):
    """(weight, bias) of channel(s) c; 1 and 0 where the op has none (exact in either form)."""
    wv = 1.0
    bv = 0.0
    if HAS_W:
        wv = tl.load(w_ptr + c, mask=m, other=1).to(ACC)
    if HAS_B:
        bv = tl.load(b_ptr + c, mask=m, other=0).to(ACC)
    return wv, bv


@triton.jit
def _gn_apply(v, wv, bv, mean, rstd, ROUND_STATS: tl.constexpr):
    """ROUND_STATS: y = v*a + (b - a*mean) with a = rstd*w, CUDA eager's form from its stored
    statistics; otherwise ((v - mean) * rstd) * w + b."""
    if ROUND_STATS:
        a = rstd * wv
        return v * a + (-a * mean + bv)
    return ((v - mean) * rstd) * wv + bv
