"""embedding_dense_backward, the sorted path: a stable counting sort of the rows by weight row,
then per-weight-row sums over tiles of the sorted rows.
"""

import triton
import triton.language as tl

from agent.providers.builtin.kernels.embedding_atomic import _embed_rows, _embed_zero_block
from agent.providers.builtin.kernels.runtime import _pdl_enter

# ---- emitted: embedding_sorted ----


@triton.jit
def _embed_sort_count_kernel(idx_ptr, cnt_ptr, R, NW, padding_idx, I1, I2, I3, SI0, SI1, SI2,
                             SI3, BLOCK: tl.constexpr, PDL_NEXT: tl.constexpr):
    """Sorted path, step 1: cnt[key] += 1 per index (integer atomics: the same counts in any
    order). A row's key is its weight row, or NW when it is padding_idx (sorted last, summed
    into nothing). PDL_NEXT: the scan's launch may start at once (it waits for the counts)."""
    _pdl_enter(False, PDL_NEXT)
    rows = tl.program_id(0).to(tl.int64) * BLOCK + tl.arange(0, BLOCK)
    ok = rows < R
    ioff, _ = _embed_rows(rows, I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    idx = tl.load(idx_ptr + ioff, mask=ok, other=0).to(tl.int32)
    key = tl.where(idx == padding_idx, NW, idx)
    tl.atomic_add(cnt_ptr + key, tl.full([BLOCK], 1, tl.int32), mask=ok)


@triton.jit
def _embed_sorted_count(ptrs, mask, SINGLES: tl.constexpr):
    """How many of a key's rows the sort places: all of them, or (SINGLES) none of a lone one."""
    c = tl.load(ptrs, mask=mask, other=0)
    if SINGLES:
        c = tl.where(c >= 2, c, 0)
    return c


@triton.jit
def _embed_scan_kernel(cnt_ptr, start_ptr, N, BLOCK: tl.constexpr, STEP: tl.constexpr,
                       SINGLES: tl.constexpr, PDL_WAIT: tl.constexpr, PDL_NEXT: tl.constexpr):
    """Step 2: start[k] = cnt[0] + ... + cnt[k - 1] for k in [0, N]; program b writes its
    BLOCK starts after summing every count before its block itself (STEP at a time: a few
    steps for a vocabulary of 50k; one program scanning all blocks in turn took 10.6 us).
    SINGLES: counts of 1 count as 0 (those rows are not sorted; start[N] is how many are).
    PDL_WAIT / PDL_NEXT: `_embed_sorted`'s dependent launches."""
    _pdl_enter(PDL_WAIT, PDL_NEXT)
    b0 = tl.program_id(0) * BLOCK
    before = tl.zeros([STEP], tl.int32)
    for s0 in range(0, b0, STEP):
        offs = s0 + tl.arange(0, STEP)
        before += _embed_sorted_count(cnt_ptr + offs, offs < b0, SINGLES)
    offs = b0 + tl.arange(0, BLOCK)
    c = _embed_sorted_count(cnt_ptr + offs, offs < N, SINGLES)
    tl.store(start_ptr + offs + 1, tl.sum(before, axis=0) + tl.cumsum(c, axis=0), mask=offs < N)
    tl.store(start_ptr + offs, tl.zeros([BLOCK], tl.int32), mask=offs < 1)


@triton.jit
def _embed_rank_kernel(idx_ptr, start_ptr, order_ptr, R, NW, padding_idx, I1, I2, I3, SI0, SI1,
                       SI2, SI3, zero_ptr, cnt_ptr, g_ptr, SG0, SG1, SG2, SG3, SGD, NRANK,
                       NCOPY, NZERO, D, ROWS: tl.constexpr, BLOCK_Q: tl.constexpr,
                       ZB: tl.constexpr, ZR: tl.constexpr, ZC: tl.constexpr, CR: tl.constexpr,
                       CC: tl.constexpr, SINGLES: tl.constexpr, PDL_WAIT: tl.constexpr,
                       PDL_NEXT: tl.constexpr):
    """Programs NRANK and on do fill units 0, 1, ... (`_embed_fill`: the copies of weight rows
    named once, then the zeros); the others rank rows. The segment kernel's launch may start
    (PDL_NEXT) once every program has done its work: a grid of many waves whose dependents
    started early would have them waiting in slots its own programs need."""
    pid = tl.program_id(0)
    if pid >= NRANK:
        _embed_fill(pid - NRANK, NCOPY, idx_ptr, cnt_ptr, g_ptr, zero_ptr, R, NW, padding_idx,
                    I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, NZERO, D, ZB, ZR,
                    ZC, CR, CC, SINGLES)
    else:
        _pdl_enter(PDL_WAIT, False)
        _embed_rank_rows(idx_ptr, start_ptr, order_ptr, cnt_ptr, R, NW, padding_idx, I1, I2, I3,
                         SI0, SI1, SI2, SI3, ROWS, BLOCK_Q, SINGLES)
    _pdl_enter(False, PDL_NEXT)


@triton.jit
def _embed_fill(u, NCOPY, idx_ptr, cnt_ptr, g_ptr, out_ptr, R, NW, padding_idx, I1, I2, I3, SI0,
                SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, NZERO, D, ZB: tl.constexpr,
                ZR: tl.constexpr, ZC: tl.constexpr, CR: tl.constexpr, CC: tl.constexpr,
                SINGLES: tl.constexpr):
    """Fill unit u of the sorted path's output: below NCOPY, the copies of index positions
    [u * CR, (u + 1) * CR) whose weight row is named once (SINGLES); then the zeros of weight
    rows no index names (ZR > 0, `_embed_zero_rows`), or of the whole output. These read only
    the counts (and the grads), so the rank kernel's fill programs do not wait for the scan:
    that launch starts only once every scan program has waited for the count kernel, and the
    fill streams beside the scan and the ranks. (Fill programs in the segment launch, or in
    the fix launch beside the segment sums, measured slower.)"""
    if u >= NCOPY:
        if ZR > 0:
            _embed_zero_rows(out_ptr, cnt_ptr, u - NCOPY, NW, D, ZR, ZC)
        else:
            _embed_zero_block(out_ptr, u - NCOPY, NZERO, ZB)
    elif SINGLES:
        _embed_copy_singles(idx_ptr, cnt_ptr, g_ptr, out_ptr, u, R, NW, padding_idx, I1, I2, I3,
                            SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, D, CR, CC)


@triton.jit
def _embed_copy_singles(idx_ptr, cnt_ptr, g_ptr, out_ptr, c, R, NW, padding_idx, I1, I2, I3,
                        SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, D, CR: tl.constexpr,
                        CC: tl.constexpr):
    """Index positions [c * CR, (c + 1) * CR) whose weight row no other position names: that
    grad row is the weight row's sum (0 + g in fp32, as the sums give it: -0 becomes +0, NaN
    and infinities stay). Read in index order (whole rows, CC columns a step), stored where
    the index says."""
    rows = c.to(tl.int64) * CR + tl.arange(0, CR)
    ok = rows < R
    ioff, goff = _embed_rows(rows, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3)
    idx = tl.load(idx_ptr + ioff, mask=ok, other=0).to(tl.int32)
    named = ok & (idx != padding_idx)
    one = named & (tl.load(cnt_ptr + idx, mask=named, other=0) == 1)
    DT: tl.constexpr = out_ptr.dtype.element_ty
    for c0 in range(0, D, CC):
        cols = c0 + tl.arange(0, CC)
        m = one[:, None] & (cols < D)[None, :]
        g = tl.load(g_ptr + goff[:, None] + cols.to(tl.int64)[None, :] * SGD, mask=m, other=0)
        tl.store(out_ptr + idx.to(tl.int64)[:, None] * D + cols[None, :],
                 (g.to(tl.float32) + 0.0).to(DT), mask=m)


@triton.jit
def _embed_rank_rows(idx_ptr, start_ptr, order_ptr, cnt_ptr, R, NW, padding_idx, I1, I2, I3, SI0,
                     SI1, SI2, SI3, ROWS: tl.constexpr, BLOCK_Q: tl.constexpr,
                     SINGLES: tl.constexpr):
    """Step 3, a stable counting sort: row r goes to position start[key] + (rows before r with
    its key), so each weight row's rows lie together in index order: order[pos] = r and
    order[R + pos] = its key. Keys compare as the raw int32 indices (the padding mapping is
    one to one); each earlier index costs a compare and an add. SINGLES: a key's lone row is
    not placed (the fill copies it)."""
    rows0 = tl.program_id(0) * ROWS
    r = rows0 + tl.arange(0, ROWS)[:, None]
    r_ok = r < R
    ioff, _ = _embed_rows(r.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    idx = tl.load(idx_ptr + ioff, mask=r_ok, other=-1).to(tl.int32)
    same = tl.zeros([ROWS, BLOCK_Q], tl.int32)
    for q0 in range(0, rows0, BLOCK_Q):
        q = q0 + tl.arange(0, BLOCK_Q)[None, :]
        qoff, _unused = _embed_rows(q.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
        qi = tl.load(idx_ptr + qoff, mask=q < rows0, other=-1).to(tl.int32)
        same += (qi == idx).to(tl.int32)
    rank = tl.sum(same, axis=1, keep_dims=True)
    # the program's own rows: those before r
    qc = rows0 + tl.arange(0, ROWS)[None, :]
    qcoff, _unused = _embed_rows(qc.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    qci = tl.load(idx_ptr + qcoff, mask=qc < R, other=-1).to(tl.int32)
    rank += tl.sum(((qci == idx) & (qc < r)).to(tl.int32), axis=1, keep_dims=True)
    key = tl.where(idx == padding_idx, NW, idx)
    pos = tl.load(start_ptr + key, mask=r_ok, other=0) + rank
    placed = r_ok
    if SINGLES:
        placed = r_ok & (tl.load(cnt_ptr + key, mask=r_ok, other=0) >= 2)
    tl.store(order_ptr + pos, r, mask=placed)
    tl.store(order_ptr + R + pos, key, mask=placed)


@triton.jit
def _embed_run_sums(same, g, TC: tl.constexpr):
    """same [T, T] (0/1) @ g [T, BLOCK_C] on tensor cores (TC), fp32 accumulation, exact products.
    f32 grads go as three bf16 pieces (g = g1 + g2 + g3 exactly: 8 significant bits each), so
    a lone row comes back bit for bit; fp32 FMA dots (input_precision="ieee") took 277 us
    where these take ~50 for [8, 512, 768] f32 grads on the H200. (|g| within a bf16 step of
    the fp32 maximum would round g1 to infinity: not handled.) Not TC (Triton's interpreter,
    whose bf16 dots are wrong): an fp32 dot."""
    if not TC:
        return tl.dot(same.to(tl.float32), g.to(tl.float32), input_precision="ieee")
    elif g.dtype == tl.float32:
        one = same.to(tl.bfloat16)
        g1 = g.to(tl.bfloat16)
        rest = g - g1.to(tl.float32)
        g2 = rest.to(tl.bfloat16)
        g3 = (rest - g2.to(tl.float32)).to(tl.bfloat16)
        acc = tl.dot(one, g1, out_dtype=tl.float32)
        acc = tl.dot(one, g2, acc, out_dtype=tl.float32)
        return tl.dot(one, g3, acc, out_dtype=tl.float32)
    else:
        return tl.dot(same.to(g.dtype), g, out_dtype=tl.float32)


@triton.jit
def _embed_zero_rows(out_ptr, cnt_ptr, z, NW, D, ZR: tl.constexpr, ZC: tl.constexpr):
    """Zeros of weight rows [z * ZR, (z + 1) * ZR) that no index names (cnt[w] == 0: padding_idx
    counts under NW, so its row is zeroed here)."""
    rows = z.to(tl.int64) * ZR + tl.arange(0, ZR)
    row_ok = rows < NW
    idle = tl.load(cnt_ptr + rows, mask=row_ok, other=1) == 0
    for c0 in range(0, D, ZC):
        cols = c0 + tl.arange(0, ZC)
        tl.store(out_ptr + rows[:, None] * D + cols[None, :],
                 tl.zeros([ZR, ZC], out_ptr.dtype.element_ty),
                 mask=(row_ok & idle)[:, None] & (cols < D)[None, :])


@triton.jit
def _embed_seg_kernel(g_ptr, order_ptr, start_ptr, out_ptr, part_ptr, R, D, NW, I1, I2, I3, SG0,
                      SG1, SG2, SG3, SGD, NCP, T: tl.constexpr, BLOCK_C: tl.constexpr,
                      TC: tl.constexpr, CHECK_SUMS: tl.constexpr, COL_STEPS: tl.constexpr,
                      STAGES: tl.constexpr, SINGLES: tl.constexpr, PDL_WAIT: tl.constexpr,
                      PDL_NEXT: tl.constexpr):
    """Step 4: a tile of T sorted positions x BLOCK_C columns; their grad rows loaded at once
    (no chain of dependent loads, however many rows share a weight row) and summed per weight
    row as one small matrix product: same[p, q] (positions p and q hold the same weight row,
    and so the same run of it, keys being sorted) times the grads, accumulated in fp32 on
    tensor cores with exact products (`_embed_run_sums`). A weight row whose rows all lie in
    the tile is stored (rounded once); one continuing into the next tile leaves its partial sum
    in part[0, tile], and the part of one that began in an earlier tile goes to part[1, tile],
    for `_embed_fix_kernel` to add up in tile order. (A segmented scan down the tile's rows
    took 78 us for [4, 2048, 2048] grads on the H200: it crosses warps at every step.)
    Program t * NCP + b does tile t's column blocks b * COL_STEPS and on, in turn (STAGES of
    them in flight), its positions' keys and rows loaded once. SINGLES: only the first
    start[NW + 1] of the R places hold rows; the programs of tiles past them leave at once,
    without waiting (the scan is done: the rank kernel's programs waited for it). The others,
    and program 0 always (so that this grid ends after the rank kernel's), wait for the rank
    kernel, then let the fix kernel's launch start (PDL_NEXT), whose programs mostly leave
    at once too."""
    pid = tl.program_id(0)
    t = pid // NCP
    M = _embed_placed(start_ptr, R, NW, SINGLES)
    if (t * T < M) | (pid == 0):
        _pdl_enter(PDL_WAIT, PDL_NEXT)
    if t * T < M:
        _embed_seg_tile(g_ptr, order_ptr, out_ptr, part_ptr, t, pid % NCP, tl.cdiv(R, T), M, R,
                        D, NW, I1, I2, I3, SG0, SG1, SG2, SG3, SGD, T, BLOCK_C, TC, CHECK_SUMS,
                        COL_STEPS, STAGES)


@triton.jit
def _embed_placed(start_ptr, R, NW, SINGLES: tl.constexpr):
    """How many sorted places hold rows: R, or (SINGLES) the scan's total."""
    if SINGLES:
        return tl.load(start_ptr + NW + 1)
    else:
        return R


@triton.jit
def _embed_seg_tile(g_ptr, order_ptr, out_ptr, part_ptr, t, b, NT, M, R, D, NW, I1, I2, I3, SG0,
                    SG1, SG2, SG3, SGD, T: tl.constexpr, BLOCK_C: tl.constexpr, TC: tl.constexpr,
                    CHECK_SUMS: tl.constexpr, COL_STEPS: tl.constexpr, STAGES: tl.constexpr):
    """`_embed_seg_kernel`'s tile t (of NT) of the M sorted places (keys at order[R:]), its
    column blocks b * COL_STEPS and on."""
    DT: tl.constexpr = out_ptr.dtype.element_ty
    p = t * T + tl.arange(0, T)
    p_ok = p < M
    key = tl.load(order_ptr + R + p, mask=p_ok, other=NW)
    nxt = tl.load(order_ptr + R + p + 1, mask=p + 1 < M, other=-1)
    row = tl.load(order_ptr + p, mask=p_ok, other=0)
    live = p_ok & (key < NW)
    _, goff = _embed_rows(row.to(tl.int64), I1, I2, I3, 0, 0, 0, 0, SG0, SG1, SG2, SG3)
    same = key[:, None] == key[None, :]
    end = live & (key != nxt) | live & (p == t * T + T - 1)
    cont = key == nxt  # (only at the tile's last position) the weight row goes on
    first = tl.load(order_ptr + R + t * T)
    # block-shaped conditions only (the interpreter rejects masks that combine scalar ones)
    before = (key == first) & (key == tl.load(order_ptr + R + tl.maximum(t * T - 1, 0))) & (p >= T)
    done = end & ~cont & ~before
    slot = tl.where(cont, 0, 1).to(tl.int64) * NT + t
    for c in tl.range(0, COL_STEPS, num_stages=STAGES):
        cols = (b.to(tl.int64) * COL_STEPS + c) * BLOCK_C + tl.arange(0, BLOCK_C)
        col_ok = cols < D
        g = tl.load(g_ptr + goff[:, None] + cols[None, :] * SGD,
                    mask=live[:, None] & col_ok[None, :], other=0)
        sums = _embed_run_sums(same, g, TC)
        if CHECK_SUMS:
            # a NaN or infinite grad makes its own row's sum (and so their total) NaN or
            # infinite; an overflow to infinity also takes the branch, which gives it the same
            # sums
            total = tl.sum(tl.sum(sums, axis=1), axis=0)
            odd = (total - total) != 0
        else:
            gf = g.to(tl.float32)
            odd = tl.max(tl.max(((gf != gf) | (tl.abs(gf) == float("inf"))).to(tl.int32),
                                axis=1), axis=0) > 0
        if odd:
            # 0 * NaN is NaN: sum the finite values alone, then give each run what eager's sums
            # give it: NaN for a NaN or for both infinities, else the infinity it holds
            gf = g.to(tl.float32)
            bad = (gf != gf) | (tl.abs(gf) == float("inf"))
            sums = _embed_run_sums(same, tl.where(bad, 0, g), TC)
            one = same.to(tl.float16)
            nan = tl.dot(one, (gf != gf).to(tl.float16), out_dtype=tl.float32) > 0
            pos = tl.dot(one, (gf == float("inf")).to(tl.float16), out_dtype=tl.float32) > 0
            neg = tl.dot(one, (gf == -float("inf")).to(tl.float16), out_dtype=tl.float32) > 0
            sums = tl.where(pos, float("inf"), sums)
            sums = tl.where(neg, -float("inf"), sums)
            sums = tl.where(nan | (pos & neg), float("nan"), sums)
        tl.store(out_ptr + key.to(tl.int64)[:, None] * D + cols[None, :], sums.to(DT),
                 mask=done[:, None] & col_ok[None, :])
        tl.store(part_ptr + slot[:, None] * D + cols[None, :], sums,
                 mask=(end & (cont | before))[:, None] & col_ok[None, :])


@triton.jit
def _embed_fix_kernel(order_ptr, start_ptr, out_ptr, part_ptr, R, D, NW, NT, T: tl.constexpr,
                      BLOCK_C: tl.constexpr, SINGLES: tl.constexpr, PDL_WAIT: tl.constexpr):
    """Step 5, launched while the segment kernel runs: program t + NT * b fixes tile t's column
    block b (`_embed_fix_tile`) after waiting for the segment kernel. One whose tile has
    nothing to fix leaves without waiting (the keys it reads are the rank kernel's, done
    before the segment kernel let this launch start), except program 0, so that this grid
    ends after the segment kernel's."""
    pid = tl.program_id(0)
    t = pid % NT
    M = _embed_placed(start_ptr, R, NW, SINGLES)
    at = tl.minimum(t * T, tl.maximum(M - 1, 0))  # (tiles past M read in bounds, then stop)
    first = tl.load(order_ptr + R + at)
    before = (t > 0) & (tl.load(order_ptr + R + tl.maximum(at - 1, 0)) == first)
    last = tl.maximum(tl.minimum(t * T + T, M) - 1, 0)
    goes_on = (last + 1 < M) & (tl.load(order_ptr + R + last) == first) & (
        tl.load(order_ptr + R + tl.minimum(last + 1, tl.maximum(M - 1, 0))) == first)
    fix = (t * T < M) & before & ~goes_on & (first < NW)
    if fix | (pid == 0):
        _pdl_enter(PDL_WAIT, False)
    if fix:
        _embed_fix_tile(out_ptr, part_ptr, start_ptr, first, t, pid // NT, NT, D, T, BLOCK_C)


@triton.jit
def _embed_fix_tile(out_ptr, part_ptr, start_ptr, first, t, b, NT, D, T: tl.constexpr,
                    BLOCK_C: tl.constexpr):
    """Weight row `first`'s sum in column block b: the partial sums of its tiles before tile t,
    in tile order, then tile t's part; stored rounded once."""
    cols = b.to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < D
    acc = tl.zeros([BLOCK_C], tl.float32)
    for j in range(tl.load(start_ptr + first) // T, t):
        acc += tl.load(part_ptr + j * D + cols, mask=col_ok, other=0)
    acc += tl.load(part_ptr + (NT + t).to(tl.int64) * D + cols, mask=col_ok, other=0)
    tl.store(out_ptr + first.to(tl.int64) * D + cols, acc.to(out_ptr.dtype.element_ty),
             mask=col_ok)
