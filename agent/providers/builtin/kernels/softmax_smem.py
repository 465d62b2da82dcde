"""Softmax for long f32 rows held in shared memory (Gluon; GPU only): each row read from HBM once."""


from agent.providers.builtin.kernels.runtime import _gl_barrier, _gl_copy, async_copy, gl, gluon  # noqa: I001  (one line per import, lint-only)

# ---- emitted: smem ----


# Long f32 rows held in shared memory (Gluon; GPU only): each row read from HBM once, where
# `_long_rows_kernel` reads it twice (its second read partly from L2).
# inline: gluon

if gluon is not None:

    @gluon.jit
    def _smem_geometry(row, R):
        """A row's aligned superset: its first element rounded down to a 16-byte vector (base,
        in elements), the row's offset in it (shift) and the end of its whole vectors (full)."""
        start = row.to(gl.int64) * R
        base = start // 4 * 4
        shift = (start - base).to(gl.int32)
        full = (shift + R) // 4 * 4
        return base, shift, full

    @gluon.jit
    def _smem_fold(x, ok, mv, sv):
        """Per-lane running max and sum with one exp per element (exp(-|x - mv|) serves a new
        max and an old one); -inf elements and the lanes outside the row are skipped. NaN
        makes the lane's sum NaN; +inf becomes the lane's max, and the row's sum NaN when the
        lanes are combined (exp(inf - inf)): a NaN row either way, as eager gives."""
        e = gl.exp(-gl.abs(x - mv))
        up = x > mv
        ok = ok & (x != float("-inf"))
        sv = gl.where(ok, gl.where(up, sv * e + 1.0, sv + e), sv)
        mv = gl.where(ok & up, x, mv)
        return mv, sv

    @gluon.jit
    def _smem_out(x, m, s, ls, MODE: gl.constexpr):
        if MODE == 0:
            y = gl.exp(x - m) / s
        else:
            y = x - m - ls
        return y

    @gluon.jit
    def _smem_rows_kernel(a_ptr, out_ptr, ROWS, R, MODE: gl.constexpr, CHUNK: gl.constexpr,
                          NCHUNK: gl.constexpr, L: gl.constexpr, SL: gl.constexpr):
        """Softmax / log_softmax of f32 rows pid, pid + grid, ... (one program per SM), each
        held in NCHUNK shared-memory chunks of CHUNK elements.

        A row is copied in (cp.async, 16-byte vectors) as its aligned superset: from its first
        element rounded down to a vector up to its last whole vector, however the rows fall
        (50257-long rows start at every 4-byte offset); the superset's lanes outside the row
        are masked in the math, and the row's last partial vector comes from a plain load. Each
        chunk is folded into per-lane statistics as it arrives; then each chunk is read back,
        its output stored (the whole vectors the row owns, 16 bytes each; its first partial
        vector from a plain load and masked stores), and the chunk refilled with the next
        row's copy, so the next row's bytes are in flight while this one is written. Every
        thread reads back only the elements its own copies wrote (layout L for both), so a
        wait on its own copy groups suffices before a chunk is read; a barrier before a chunk
        is refilled."""
        pid = gl.program_id(0)
        P = gl.num_programs(0)
        smem = gl.allocate_shared_memory(a_ptr.dtype.element_ty, [NCHUNK, CHUNK], SL)
        offs = gl.arange(0, CHUNK, layout=L)
        row = pid
        base, shift, full = _smem_geometry(row, R)
        for c in gl.static_range(NCHUNK):
            i = c * CHUNK + offs
            _gl_copy(smem.index(c), a_ptr + base + i, mask=(i < full) & (row < ROWS))
            async_copy.commit_group()
        while row < ROWS:
            base, shift, full = _smem_geometry(row, R)
            t_ok = offs < shift + R - full
            xt = gl.load(a_ptr + base + full + offs, mask=t_ok, other=float("-inf"))
            h_ok = (offs >= shift) & (offs < 4)
            xh = gl.load(a_ptr + base + offs, mask=h_ok, other=float("-inf"))
            mv = gl.full([CHUNK], float("-inf"), gl.float32, L)
            sv = gl.zeros([CHUNK], gl.float32, L)
            for c in gl.static_range(NCHUNK):
                async_copy.wait_group(NCHUNK - 1 - c)
                i = c * CHUNK + offs
                mv, sv = _smem_fold(smem.index(c).load(L), (i >= shift) & (i < full), mv, sv)
            mv, sv = _smem_fold(xt, t_ok, mv, sv)
            m = gl.max(mv, axis=0)
            s = gl.sum(gl.where(mv == float("-inf"), 0.0, sv * gl.exp(mv - m)), axis=0)
            ls = gl.log(s)
            first = gl.where(shift > 0, 4, 0)  # a partial first vector is stored apart
            nxt = row + P
            n_base, n_shift, n_full = _smem_geometry(nxt, R)
            for c in gl.static_range(NCHUNK):
                i = c * CHUNK + offs
                y = _smem_out(smem.index(c).load(L), m, s, ls, MODE)
                gl.store(out_ptr + base + i, y, mask=(i >= first) & (i < full))
                _gl_barrier()
                _gl_copy(smem.index(c), a_ptr + n_base + i, mask=(i < n_full) & (nxt < ROWS))
                async_copy.commit_group()
            gl.store(out_ptr + base + offs, _smem_out(xh, m, s, ls, MODE), mask=h_ok)
            gl.store(out_ptr + base + full + offs, _smem_out(xt, m, s, ls, MODE), mask=t_ok)
            row = nxt
        async_copy.wait_group(0)

    def _smem_rows(a, b, out, ROWS, R, GRID, **consts):
        """`_smem_rows_kernel` with the call shape of the other plans' launchers."""
        _smem_rows_kernel[(GRID,)](a, out, ROWS, R, **consts)
