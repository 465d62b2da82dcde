"""embedding_dense_backward, the atomic path: per-row counts, fixed-point atomic sums per weight
row, the output pass. First of the embedding sections (embedding_chunked, embedding_sorted,
embedding_backward follow).
"""

import triton
import triton.language as tl

# ---- emitted: embedding_atomic ----


@triton.jit
def _embed_rows(rows, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3):
    """Index and grad-row offsets of flat index positions (indices padded to 4 dims)."""
    r = rows
    c3 = r % I3
    r = r // I3
    c2 = r % I2
    r = r // I2
    c1 = r % I1
    c0 = r // I1
    ioff = c0 * SI0 + c1 * SI1 + c2 * SI2 + c3 * SI3
    goff = c0 * SG0 + c1 * SG1 + c2 * SG2 + c3 * SG3
    return ioff, goff


@triton.jit
def _embed_count_kernel(idx_ptr, cnt_ptr, R, I1, I2, I3, SI0, SI1, SI2, SI3,
                        BLOCK: tl.constexpr):
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = rows < R
    ioff, _ = _embed_rows(rows, I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    idx = tl.load(idx_ptr + ioff, mask=ok, other=0).to(tl.int64)
    tl.atomic_add(cnt_ptr + idx, tl.full([BLOCK], 1, tl.int32), mask=ok)


@triton.jit
def _embed_tile(g_ptr, idx_ptr, R, D, NCB, padding_idx, I1, I2, I3, SI0, SI1, SI2, SI3, SG0,
                SG1, SG2, SG3, SGD, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """This program's [BLOCK_R grad rows, BLOCK_C columns] tile: (weight rows, columns, the
    mask of contributions (rows whose index is padding_idx left out), grad values)."""
    pid = tl.program_id(0).to(tl.int64)
    rows = (pid // NCB) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = (pid % NCB) * BLOCK_C + tl.arange(0, BLOCK_C)
    row_ok = rows < R
    ioff, goff = _embed_rows(rows, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3)
    idx = tl.load(idx_ptr + ioff, mask=row_ok, other=0).to(tl.int64)
    m = (row_ok & (idx != padding_idx))[:, None] & (cols[None, :] < D)
    g = tl.load(g_ptr + goff[:, None] + cols[None, :] * SGD, mask=m, other=0)
    return idx, cols, m, g


@triton.jit
def _embed_terms(g_ptr, idx_ptr, cnt_ptr, R, D, NCB, padding_idx, I1, I2, I3, SI0, SI1, SI2,
                 SI3, SG0, SG1, SG2, SG3, SGD, SCALE: tl.constexpr, BLOCK_R: tl.constexpr,
                 BLOCK_C: tl.constexpr):
    """`_embed_tile` with the grads as fp64 terms, divided by their row's count when SCALE."""
    idx, cols, m, g = _embed_tile(g_ptr, idx_ptr, R, D, NCB, padding_idx, I1, I2, I3, SI0, SI1,
                                  SI2, SI3, SG0, SG1, SG2, SG3, SGD, BLOCK_R, BLOCK_C)
    g = g.to(tl.float64)
    if SCALE:
        cnt = tl.load(cnt_ptr + idx, mask=idx != padding_idx, other=1).to(tl.float64)
        g = g / cnt[:, None]
    return idx, cols, m, g


@triton.jit
def _embed_amax_kernel(g_ptr, idx_ptr, accf_ptr, AMAX, R, D, NCB, padding_idx,
                       I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr):
    """accf[AMAX] = max |grad| over the contributions, +inf when any is NaN or infinite (an
    atomic max: the same result in any order)."""
    _, _, m, g = _embed_tile(g_ptr, idx_ptr, R, D, NCB, padding_idx, I1, I2, I3, SI0, SI1, SI2,
                             SI3, SG0, SG1, SG2, SG3, SGD, BLOCK_R, BLOCK_C)
    a = tl.abs(g.to(tl.float32))
    bad = tl.max((m & ((a != a) | (a == float("inf")))).to(tl.int32))
    top = tl.max(tl.where(m, a, 0.0))
    tl.atomic_max(accf_ptr + AMAX, tl.where(bad > 0, float("inf"), top))


@triton.jit
def _embed_scale(accf_ptr, AMAX, R):
    """(2**S as fp64, whether every contribution is finite): S puts the largest possible row
    sum, R * max|grad|, below 2**62, so the int64 sums cannot overflow."""
    amax = tl.load(accf_ptr + AMAX).to(tl.float64)
    finite = amax < float("inf")
    bound = tl.maximum(amax * R, 1e-300)
    shift = 61.0 - tl.floor(tl.log2(bound))
    shift = tl.minimum(tl.maximum(shift, -1000.0), 1000.0)
    return tl.exp2(shift), finite


@triton.jit
def _embed_slot_kernel(idx_ptr, slot_ptr, R, padding_idx, I1, I2, I3, SI0, SI1, SI2, SI3,
                       BLOCK: tl.constexpr):
    """slot[w] = the first row whose index is w (an atomic min: the same in any order); that
    row of the compact accumulator holds weight row w's sum."""
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = rows < R
    ioff, _ = _embed_rows(rows, I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    idx = tl.load(idx_ptr + ioff, mask=ok, other=0).to(tl.int64)
    tl.atomic_min(slot_ptr + idx, rows.to(tl.int32), mask=ok & (idx != padding_idx))


@triton.jit
def _embed_bwd_kernel(g_ptr, idx_ptr, acc_ptr, accf_ptr, cnt_ptr, slot_ptr, AMAX, R, D, NCB,
                      padding_idx, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD,
                      SCALE: tl.constexpr, SLOT: tl.constexpr, BLOCK_R: tl.constexpr,
                      BLOCK_C: tl.constexpr):
    """acc[index[r], :] += grad[r, :] as int64 fixed point (grad * 2**S, truncated): integer
    additions give the same sum in any order, so the result is deterministic and, to 2**-S per
    term, exact. With a NaN or infinity among the grads, fp32 atomic adds into acc's memory
    instead (accf, its low words), which carry them as eager does. SLOT: acc has a row per
    index position, and weight row w sums into row slot[w] (fewer bytes than the table when
    there are fewer indices than weight rows)."""
    idx, cols, m, g = _embed_terms(g_ptr, idx_ptr, cnt_ptr, R, D, NCB, padding_idx, I1, I2, I3,
                                   SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, SCALE, BLOCK_R,
                                   BLOCK_C)
    scale, finite = _embed_scale(accf_ptr, AMAX, R)
    dst = idx
    if SLOT:
        dst = tl.load(slot_ptr + idx).to(tl.int64)  # masked-out rows read a valid slot, unused
    slot = dst[:, None] * D + cols[None, :]
    if finite:
        tl.atomic_add(acc_ptr + slot, (g * scale).to(tl.int64), mask=m)
    else:
        tl.atomic_add(accf_ptr + 2 * slot, g.to(tl.float32), mask=m)


@triton.jit
def _embed_sums(acc_ptr, accf_ptr, src, m, AMAX, R, OUT: tl.constexpr):
    """The sums at accumulator elements src in dtype OUT: acc / 2**S, or the fp32 sums of the
    non-finite case."""
    scale, finite = _embed_scale(accf_ptr, AMAX, R)
    if finite:
        v = tl.load(acc_ptr + src, mask=m, other=0).to(tl.float64) / scale
    else:
        v = tl.load(accf_ptr + 2 * src, mask=m, other=0).to(tl.float64)
    if OUT != tl.float32:
        v = v.to(tl.float32)  # then rounded once more (Triton's interpreter casts fp64 to bf16 wrongly)
    return v.to(OUT)


@triton.jit
def _embed_out_kernel(acc_ptr, accf_ptr, out_ptr, AMAX, R, N, BLOCK: tl.constexpr):
    """out = the sums, in the output dtype."""
    i = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = i < N
    tl.store(out_ptr + i, _embed_sums(acc_ptr, accf_ptr, i, ok, AMAX, R,
                                      out_ptr.dtype.element_ty), mask=ok)


@triton.jit
def _embed_out_rows_kernel(acc_ptr, accf_ptr, slot_ptr, out_ptr, AMAX, R, NW, D,
                           BLOCK_W: tl.constexpr, BLOCK_C: tl.constexpr):
    """out[w] = acc[slot[w]] / 2**S in the output dtype (the fp32 sums of the non-finite
    case), zero for weight rows no index names."""
    w = tl.program_id(0).to(tl.int64) * BLOCK_W + tl.arange(0, BLOCK_W)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    inside = (w < NW)[:, None] & (cols < D)[None, :]
    s = tl.load(slot_ptr + w, mask=w < NW, other=R).to(tl.int64)
    v = _embed_sums(acc_ptr, accf_ptr, s[:, None] * D + cols[None, :], inside & (s < R)[:, None],
                    AMAX, R, out_ptr.dtype.element_ty)
    tl.store(out_ptr + w[:, None] * D + cols[None, :], v, mask=inside)


@triton.jit
def _embed_zero_block(out_ptr, b, N, ZB: tl.constexpr):
    """Zeros of the output's flat elements [b * ZB, (b + 1) * ZB) (below N). The index kernels
    (`_embed_link_kernel`, `_embed_rank_kernel`) run these as extra programs of their grid:
    the fill streams at HBM speed while their compare loops wait on L2 and the ALUs, where a
    zero fill of its own ran before them (H200, 125 MiB: 39.6 us)."""
    offs = b.to(tl.int64) * ZB + tl.arange(0, ZB)
    tl.store(out_ptr + offs, tl.zeros([ZB], out_ptr.dtype.element_ty), mask=offs < N)
