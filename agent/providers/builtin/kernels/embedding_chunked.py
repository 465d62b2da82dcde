"""embedding_dense_backward, the chunked path: eager's chunk-by-chunk sums (rounded per chunk) for
up to `_EAGER_FEATURE_MAX` indices, every chunk in parallel (link, term, fold kernels).
"""

import triton
import triton.language as tl

from agent.providers.builtin.kernels.embedding_atomic import _embed_rows, _embed_zero_block
from agent.providers.builtin.kernels.runtime import _pdl_enter

# ---- emitted: embedding_chunked ----


@triton.jit
def _embed_link_kernel(idx_ptr, link_ptr, R, padding_idx, I1, I2, I3, SI0, SI1, SI2, SI3,
                       zero_ptr, NLINK, NZERO, CHUNK: tl.constexpr, ROWS: tl.constexpr,
                       BLOCK_Q: tl.constexpr, ZB: tl.constexpr, PDL_NEXT: tl.constexpr):
    """Programs NLINK and on zero the output (`_embed_zero_block`); the others link rows.
    PDL_NEXT: the term kernel's launch may start once every program has done its work."""
    if tl.program_id(0) >= NLINK:
        _embed_zero_block(zero_ptr, tl.program_id(0) - NLINK, NZERO, ZB)
    else:
        _embed_link_rows(idx_ptr, link_ptr, R, padding_idx, I1, I2, I3, SI0, SI1, SI2, SI3,
                         CHUNK, ROWS, BLOCK_Q)
    _pdl_enter(False, PDL_NEXT)


@triton.jit
def _embed_link_rows(idx_ptr, link_ptr, R, padding_idx, I1, I2, I3, SI0, SI1, SI2, SI3,
                     CHUNK: tl.constexpr, ROWS: tl.constexpr, BLOCK_Q: tl.constexpr):
    """Step 1 of eager's arithmetic for few indices (CUDA's embedding_backward_feature_kernel,
    up to 3072 indices, sums each chunk of CHUNK rows on its own; a row that is the first of its
    chunk with its weight row is that row's leader): the order in which leaders are added to
    their weight row. One program per ROWS rows r (ROWS divides CHUNK), comparing their indices
    with all R indices q in [ROWS, BLOCK_Q] tiles, elementwise (the reductions come once, at the
    end):
    - link[r]: the first row of a later chunk with r's weight row (that row is its chunk's
      leader), or -1;
    - link[R + r]: r's weight row when no earlier row has it (r heads the chain), else -1;
    - link[2R + r]: 1 when a later row of r's chunk (a peer) has its weight row, else 0;
    - link[3R + r]: 1 when r leads its weight row's rows in its chunk and has peers (its term
      is summed ahead, `_embed_term_kernel`), else 0.
    Indices compare as int32 (valid ones are below num_weights; masked loads give -1, which no
    valid index equals), so each index before r's chunk costs a compare and an or, each after
    it a compare, a select and a min. (One program per row scanning 1-D int64 tiles took 87 us
    for 8192 indices on the H200; one per chunk of 32 rows, int64, 75 us.)"""
    rows0 = tl.program_id(0) * ROWS
    r = rows0 + tl.arange(0, ROWS)[:, None]
    c0 = rows0 // CHUNK * CHUNK
    c_end = c0 + CHUNK
    r_ok = r < R
    ioff, _ = _embed_rows(r.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    idx = tl.load(idx_ptr + ioff, mask=r_ok, other=-1).to(tl.int32)
    big = R + CHUNK
    seen = tl.zeros([ROWS, BLOCK_Q], tl.int1)
    for q0 in range(0, c0, BLOCK_Q):
        q = q0 + tl.arange(0, BLOCK_Q)[None, :]
        qoff, _unused = _embed_rows(q.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
        seen = seen | (tl.load(idx_ptr + qoff, mask=q < c0, other=-1).to(tl.int32) == idx)
    nxt = tl.full([ROWS, BLOCK_Q], big, tl.int32)
    for q0 in range(c_end, R, BLOCK_Q):
        q = q0 + tl.arange(0, BLOCK_Q)[None, :]
        qoff, _unused = _embed_rows(q.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
        qi = tl.load(idx_ptr + qoff, mask=q < R, other=-1).to(tl.int32)
        nxt = tl.minimum(nxt, tl.where(qi == idx, q, big))
    # r's own chunk: a row before r with its weight row (r is no leader, so no head), or after
    # it (r has peers)
    qc = c0 + tl.arange(0, CHUNK)[None, :]
    qcoff, _unused = _embed_rows(qc.to(tl.int64), I1, I2, I3, SI0, SI1, SI2, SI3, 0, 0, 0, 0)
    eqc = tl.load(idx_ptr + qcoff, mask=qc < R, other=-1).to(tl.int32) == idx
    in_chunk = tl.max((eqc & (qc < r)).to(tl.int32), axis=1, keep_dims=True)
    before = tl.maximum(in_chunk, tl.max(seen.to(tl.int32), axis=1, keep_dims=True))
    peers = tl.max((eqc & (qc > r)).to(tl.int32), axis=1, keep_dims=True)
    first_next = tl.min(nxt, axis=1, keep_dims=True)
    live = r_ok & (idx != padding_idx)
    tl.store(link_ptr + r, tl.where(live & (first_next < big), first_next, -1).to(tl.int64),
             mask=r_ok)
    tl.store(link_ptr + R + r, tl.where(live & (before == 0), idx, -1).to(tl.int64), mask=r_ok)
    tl.store(link_ptr + 2 * R + r, (live & (peers > 0)).to(tl.int64), mask=r_ok)
    tl.store(link_ptr + 3 * R + r, (live & (peers > 0) & (in_chunk == 0)).to(tl.int64),
             mask=r_ok)


@triton.jit
def _embed_chain_term(g_ptr, idx_ptr, link_ptr, k, on, cols, col_ok, R, I1, I2, I3, SI0, SI1,
                      SI2, SI3, SG0, SG1, SG2, SG3, SGD, CHUNK: tl.constexpr,
                      DT: tl.constexpr):
    """Leader k's term of its weight row, fp32 (rows where `on`): its grad row, plus its peers'
    in index order when it has any (fp32, as eager sums a chunk), rounded to DT (as eager
    rounds each chunk's sum). Peers are rare with many weight rows: their loop runs only
    when one of the rows has some, and loads only theirs."""
    kk = tl.where(on, k, 0)
    ioff, goff = _embed_rows(kk, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3)
    t = tl.load(g_ptr + goff[:, None] + cols[None, :] * SGD, mask=on[:, None] & col_ok[None, :],
                other=0).to(tl.float32)
    peer = on & (tl.load(link_ptr + 2 * R + kk, mask=on, other=0) != 0)
    if tl.max(peer.to(tl.int32)) > 0:
        w = tl.load(idx_ptr + ioff, mask=peer, other=-1).to(tl.int32)
        c0 = kk // CHUNK * CHUNK
        for j in tl.static_range(1, CHUNK):
            q = c0 + j
            later = peer & (q > kk) & (q < R)
            qoff, qg = _embed_rows(q, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3)
            same = later & (tl.load(idx_ptr + qoff, mask=later, other=-1).to(tl.int32) == w)
            g = tl.load(g_ptr + qg[:, None] + cols[None, :] * SGD,
                        mask=same[:, None] & col_ok[None, :], other=0)
            t = tl.where(same[:, None], t + g.to(tl.float32), t)
        t = t.to(DT).to(tl.float32)
    return t


@triton.jit
def _embed_term_kernel(g_ptr, idx_ptr, link_ptr, term_ptr, R, D,
                       I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD,
                       CHUNK: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr,
                       PDL_WAIT: tl.constexpr, PDL_NEXT: tl.constexpr):
    """Step 2: the terms of the leaders with peers (link[3R + r]), all at once, into
    term[r, :] in the output dtype, so that the fold (step 3) only adds finished terms. Summed
    in the fold itself, a weight row named in most chunks (skewed indices, as token streams
    are) walked its chunks' peers hop after hop: H200, 1024 Zipf(1.1) indices, 250-270 us
    against eager's 43-69. PDL_WAIT / PDL_NEXT: dependent launches."""
    _pdl_enter(PDL_WAIT, False)
    DT: tl.constexpr = term_ptr.dtype.element_ty
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < D
    on = tl.load(link_ptr + 3 * R + r, mask=r < R, other=0) != 0
    if tl.max(on.to(tl.int32)) > 0:
        t = _embed_chain_term(g_ptr, idx_ptr, link_ptr, r, on, cols, col_ok, R, I1, I2, I3,
                              SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD, CHUNK, DT)
        tl.store(term_ptr + r[:, None] * D + cols[None, :], t.to(DT),
                 mask=on[:, None] & col_ok[None, :])
    _pdl_enter(False, PDL_NEXT)


@triton.jit
def _embed_leader_term(g_ptr, link_ptr, term_ptr, k, on, cols, col_ok, R, D, I1, I2, I3, SI0,
                       SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD):
    """Leader k's term (rows where `on`), fp32: its grad row, or its chunk's sum from step 2
    when it has peers."""
    kk = tl.where(on, k, 0)
    summed = on & (tl.load(link_ptr + 3 * R + kk, mask=on, other=0) != 0)
    _unused, goff = _embed_rows(kk, I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3)
    t = tl.load(g_ptr + goff[:, None] + cols[None, :] * SGD,
                mask=(on & ~summed)[:, None] & col_ok[None, :], other=0).to(tl.float32)
    s = tl.load(term_ptr + kk[:, None] * D + cols[None, :],
                mask=summed[:, None] & col_ok[None, :], other=0).to(tl.float32)
    return tl.where(summed[:, None], s, t)


@triton.jit
def _embed_fold_kernel(g_ptr, link_ptr, term_ptr, out_ptr, R, D,
                       I1, I2, I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD,
                       BLOCK_R: tl.constexpr, BLOCK_C: tl.constexpr, PDL_WAIT: tl.constexpr):
    """Step 3: each chain's head walks its leaders in index order and adds their terms
    (`_embed_leader_term`), rounded to the output dtype at every step, as eager adds chunk
    after chunk (out[w] = dtype(out[w] + term)).
    The output is zero-filled before, by the link kernel's extra programs (a fold over all
    weight rows that wrote their zeros too took 93 us against 39 + 26 for [4, 2048, 2048] grads
    into 32000 rows on the H200: its programs wait on chains of dependent loads)."""
    _pdl_enter(PDL_WAIT, False)
    DT: tl.constexpr = out_ptr.dtype.element_ty
    r = tl.program_id(0).to(tl.int64) * BLOCK_R + tl.arange(0, BLOCK_R)
    cols = tl.program_id(1).to(tl.int64) * BLOCK_C + tl.arange(0, BLOCK_C)
    col_ok = cols < D
    w = tl.load(link_ptr + R + r, mask=r < R, other=-1)
    head = w >= 0
    if tl.max(head.to(tl.int32)) > 0:
        v = _embed_leader_term(g_ptr, link_ptr, term_ptr, r, head, cols, col_ok, R, D, I1, I2,
                               I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD)
        k = tl.load(link_ptr + r, mask=head, other=-1)
        while tl.max(k) >= 0:
            on = k >= 0
            t = _embed_leader_term(g_ptr, link_ptr, term_ptr, k, on, cols, col_ok, R, D, I1, I2,
                                   I3, SI0, SI1, SI2, SI3, SG0, SG1, SG2, SG3, SGD)
            t = (v + t).to(DT).to(tl.float32)
            v = tl.where(on[:, None], t, v)
            k = tl.load(link_ptr + tl.where(on, k, 0), mask=on, other=-1)
        tl.store(out_ptr + w[:, None] * D + cols[None, :], v.to(DT),
                 mask=head[:, None] & col_ok[None, :])
