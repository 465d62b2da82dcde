"""Softmax kernels for rows longer than a tile: `_row_body_kernel` (unaligned rows, a body of
whole tiles and a tail) and `_long_rows_kernel` (two passes, persistent grid for wide rows)."""

import triton  # noqa: I001  (one line per import, lint-only)
import triton.language as tl

from agent.providers.builtin.kernels.softmax_rows import _finish

# ---- emitted: long_rows ----


@triton.jit
def _row_body_kernel(a_ptr, b_ptr, out_ptr, ROWS, R, MODE: tl.constexpr, ACC: tl.constexpr,
                     BLOCK_N: tl.constexpr, ALIGN: tl.constexpr):
    """Rows of up to BLOCK_N elements whose length is not a multiple of 16 bytes (the forward,
    MODE < 2, and the log_softmax backward's 16-bit rows, MODE 3), one program per row, loaded
    once: the row's whole ALIGN-element vectors (its body) in one tile of 16-byte loads and
    stores, and the < ALIGN elements before and after them
    (its edges) in a small masked tile, as in `_long_rows_kernel`. A row tile over the rows as
    they fall (`_rows_tile`) would move unaligned rows element by element (scalar 2-byte
    accesses for bf16), and the two-pass kernel reads the row twice. The loads come first,
    padded with -inf, before any math (see `_rows_tile`)."""
    k = tl.arange(0, BLOCK_N)
    e = tl.arange(0, 2 * ALIGN)
    start = tl.program_id(0).to(tl.int64) * R
    end = start + R
    lo = tl.multiple_of((start + ALIGN - 1) // ALIGN * ALIGN, ALIGN)
    hi = tl.multiple_of(end // ALIGN * ALIGN, ALIGN)
    n_body = tl.multiple_of(tl.maximum(hi - lo, 0).to(tl.int32), ALIGN)
    body_ok = k < n_body
    # edges: [start, min(lo, end)) and [max(hi, lo), end), disjoint from the body
    e_offs = tl.where(e < ALIGN, start + e, hi + e - ALIGN)
    e_ok = (e_offs < end) & ((e < ALIGN) == (e_offs < lo))
    pad = float("-inf") if MODE < 2 else 0.0
    a = tl.load(a_ptr + lo + k, mask=body_ok, other=pad).to(ACC)
    ea = tl.load(a_ptr + e_offs, mask=e_ok, other=pad).to(ACC)
    b = a
    eb = ea
    if MODE >= 2:
        b = tl.load(b_ptr + lo + k, mask=body_ok, other=0).to(ACC)
        eb = tl.load(b_ptr + e_offs, mask=e_ok, other=0).to(ACC)
    if MODE < 2:
        mx = tl.maximum(tl.max(a, axis=0), tl.max(ea, axis=0))
        s = tl.sum(tl.exp(a - mx), axis=0) + tl.sum(tl.exp(ea - mx), axis=0)
    else:  # MODE 3 (the softmax backward, MODE 2, spills here and is not planned on it)
        mx = tl.zeros([], ACC)
        s = tl.sum(a, axis=0) + tl.sum(ea, axis=0)
    tl.store(out_ptr + lo + k, _finish(a, b, mx, s, MODE).to(out_ptr.dtype.element_ty),
             mask=body_ok)
    tl.store(out_ptr + e_offs, _finish(ea, eb, mx, s, MODE).to(out_ptr.dtype.element_ty),
             mask=e_ok)


@triton.jit
def _long_rows_kernel(a_ptr, b_ptr, out_ptr, ROWS, R, MODE: tl.constexpr, ACC: tl.constexpr,
                      BLOCK_N: tl.constexpr, ALIGN: tl.constexpr, STAGES: tl.constexpr,
                      HEAD: tl.constexpr, REVERSE: tl.constexpr, EV_KEEP: tl.constexpr,
                      EV_DONE: tl.constexpr, ST_CACHE: tl.constexpr, ST_EV: tl.constexpr):
    """Rows longer than a register tile: a statistics pass, then a writing pass that reads the
    row again.

    The grid is persistent (a few programs per SM, each taking rows pid, pid + grid, ...) so that
    only about grid rows are live at a time: they fit in L2 and the second read of a row mostly
    hits there instead of HBM (with one program per row, every row of a 50k vocabulary is in
    flight at once and the row is read from HBM twice). The first pass loads with EV_KEEP
    (evict_last) and the writing pass with EV_DONE (evict_first; its stores with ST_EV, or the
    cache modifier ST_CACHE), so the streamed output and the finished rows leave L2 before the
    rows still to be re-read; with REVERSE it walks the row
    backwards, taking the most recently loaded (least likely evicted) chunks first. With few
    programs per SM, each must keep many bytes in flight: STAGES > 1 lets Triton's pipeliner
    prefetch STAGES - 1 chunks into shared memory (cp.async) while the current one is reduced
    (without it the compiler serializes each load with the math that uses it).

    HEAD > 0 keeps the first HEAD elements of the row body in registers from the first pass to
    the second: they are read from HBM once, whatever L2 keeps, and the bytes that must survive
    in L2 between the passes shrink by as much (132 rows of 201 KB in flight are more than L2
    holds for the f32 50257-long rows).

    Each row is split at ALIGN-element boundaries: a body of whole ALIGN groups, loaded and stored
    in 16-byte vectors even when the row length is odd (50257) and rows start unaligned, and
    two edges (the < ALIGN elements before and after it) in one small masked chunk. The forward
    statistics are kept per lane (running max and rescaled sum) and combined once per row, so the
    loop over the row has no cross-warp reduction.
    """
    cols = tl.arange(0, BLOCK_N)
    e = tl.arange(0, 2 * ALIGN)
    head = e < ALIGN
    for row in range(tl.program_id(0), ROWS, tl.num_programs(0)):
        start = tl.cast(row, tl.int64) * R
        end = start + R
        body = tl.multiple_of((start + ALIGN - 1) // ALIGN * ALIGN, ALIGN)
        body_end = tl.multiple_of(end // ALIGN * ALIGN, ALIGN)
        n_body = tl.multiple_of(tl.maximum(body_end - body, 0).to(tl.int32), ALIGN)
        # the register-resident head [0, HEAD) of the body, then the rest, chunk by chunk
        if HEAD > 0:
            h = tl.arange(0, HEAD)
            h_ok = h < n_body
        n_rest = tl.multiple_of(tl.maximum(n_body - HEAD, 0), ALIGN)
        n_chunks = tl.cdiv(n_rest, BLOCK_N)
        # head [start, min(body, end)), tail [max(body_end, body), end): disjoint from the body
        e_offs = tl.where(head, start + e, body_end + e - ALIGN)
        e_ok = (e_offs < end) & (head == (e_offs < body))
        a_rest = a_ptr + body + HEAD
        b_rest = b_ptr + body + HEAD
        if MODE < 2:
            ea = tl.load(a_ptr + e_offs, mask=e_ok, other=float("-inf")).to(ACC)
            e_mx = tl.max(ea, axis=0)
            e_s = tl.sum(tl.exp(ea - tl.where(e_mx == float("-inf"), 0.0, e_mx)), axis=0)
            if HEAD > 0:
                ha = tl.load(a_ptr + body + h, mask=h_ok, other=float("-inf"))
                hb = ha
                hv = ha.to(ACC)
                h_mx = tl.maximum(tl.max(hv, axis=0), e_mx)
                h_safe = tl.where(h_mx == float("-inf"), 0.0, h_mx)
                e_s = e_s * tl.exp(e_mx - h_safe) + tl.sum(tl.exp(hv - h_safe), axis=0)
                e_mx = h_mx
            lane_mx = tl.full([BLOCK_N], float("-inf"), ACC)
            lane_s = tl.zeros([BLOCK_N], ACC)
            for j in tl.range(0, n_chunks, num_stages=STAGES):
                c = j * BLOCK_N + cols
                a = tl.load(a_rest + c, mask=c < n_rest, other=float("-inf"),
                            eviction_policy=EV_KEEP).to(ACC)
                new_mx = tl.maximum(lane_mx, a)
                safe = tl.where(new_mx == float("-inf"), 0.0, new_mx)
                lane_s = lane_s * tl.exp(lane_mx - safe) + tl.exp(a - safe)
                lane_mx = new_mx
            mx = tl.maximum(tl.max(lane_mx, axis=0), e_mx)
            safe = tl.where(mx == float("-inf"), 0.0, mx)
            s = tl.sum(lane_s * tl.exp(lane_mx - safe), axis=0) + e_s * tl.exp(e_mx - safe)
        else:
            ea = tl.load(a_ptr + e_offs, mask=e_ok, other=0).to(ACC)
            if MODE == 2:
                ea = ea * tl.load(b_ptr + e_offs, mask=e_ok, other=0).to(ACC)
            s = tl.sum(ea, axis=0)
            if HEAD > 0:
                ha = tl.load(a_ptr + body + h, mask=h_ok, other=0)
                hb = tl.load(b_ptr + body + h, mask=h_ok, other=0)
                if MODE == 2:
                    s += tl.sum(ha.to(ACC) * hb.to(ACC), axis=0)
                else:
                    s += tl.sum(ha.to(ACC), axis=0)
            acc = tl.zeros([BLOCK_N], ACC)
            for j in tl.range(0, n_chunks, num_stages=STAGES):
                c = j * BLOCK_N + cols
                a = tl.load(a_rest + c, mask=c < n_rest, other=0,
                            eviction_policy=EV_KEEP).to(ACC)
                if MODE == 2:
                    a = a * tl.load(b_rest + c, mask=c < n_rest, other=0,
                                    eviction_policy=EV_KEEP).to(ACC)
                acc += a
            s += tl.sum(acc, axis=0)
            mx = tl.zeros([], ACC)
        out_rest = out_ptr + body + HEAD
        for j in tl.range(0, n_chunks, num_stages=STAGES):
            if REVERSE:
                c = (n_chunks - 1 - j) * BLOCK_N + cols
            else:
                c = j * BLOCK_N + cols
            ok = c < n_rest
            a = tl.load(a_rest + c, mask=ok, other=0, eviction_policy=EV_DONE).to(ACC)
            b = a
            if MODE >= 2:
                b = tl.load(b_rest + c, mask=ok, other=0, eviction_policy=EV_DONE).to(ACC)
            y = _finish(a, b, mx, s, MODE)
            tl.store(out_rest + c, y.to(out_ptr.dtype.element_ty), mask=ok,
                     cache_modifier=ST_CACHE, eviction_policy=ST_EV)
        if HEAD > 0:
            y = _finish(ha.to(ACC), hb.to(ACC), mx, s, MODE)
            tl.store(out_ptr + body + h, y.to(out_ptr.dtype.element_ty), mask=h_ok,
                     cache_modifier=ST_CACHE)
        a = tl.load(a_ptr + e_offs, mask=e_ok, other=0).to(ACC)
        b = a
        if MODE >= 2:
            b = tl.load(b_ptr + e_offs, mask=e_ok, other=0).to(ACC)
        y = _finish(a, b, mx, s, MODE)
        tl.store(out_ptr + e_offs, y.to(out_ptr.dtype.element_ty), mask=e_ok)
