"""Batch norm backward with each channel held in shared memory (Gluon; GPU only)."""


from agent.providers.builtin.kernels.runtime import _gl_barrier, _gl_copy, async_copy, gl, gluon  # noqa: I001  (one line per import, lint-only)

# ---- emitted: smem ----

# Batch norm backward with each channel held in shared memory (Gluon; GPU only): its inputs read
# from HBM once, where the eager-order sums and the elementwise pass read them twice.
if gluon is not None:

    @gluon.jit
    def _bn_reg_halve(v, DT: gl.constexpr, R: gl.constexpr, L: gl.constexpr):
        """`_bn_halve` on values a thread holds: v [R, L] -> [R, L/2], column i getting
        v[:, i] + v[:, i + L/2], the received value passed through DT first."""
        lo, hi = gl.split(gl.permute(gl.reshape(v, [R, 2, L // 2]), [0, 2, 1]))
        return lo + hi.to(DT).to(gl.float32)

    @gluon.jit
    def _bn_shfl_down(v, DT: gl.constexpr, OFF: gl.constexpr):
        """One step of eager's warp reduction (`warp_shfl_down`): each lane adds the value of
        lane + OFF, passed through DT first; lane 0 ends with eager's warp sum."""
        b = v.to(gl.int32, bitcast=True)
        b = gl.inline_asm_elementwise("shfl.sync.down.b32 $0, $1, $2, 0x1f, -1;", "=r,r,r",
                                      [b, b * 0 + OFF], dtype=gl.int32, is_pure=False, pack=1)
        return v + b.to(gl.float32, bitcast=True).to(DT).to(gl.float32)

    @gluon.jit
    def _bn_block_sums(a1, a2, sc, DT: gl.constexpr, W: gl.constexpr, WL: gl.constexpr):
        """eager's block reductions of the per-thread sums a1, a2 ([W, 32], thread w * 32 + l
        at [w, l]): each warp's shuffle-down tree (`_bn_shfl_down`), lane 0's results through
        shared memory sc [2, W, 32], then warp 0's tree over the W warp results, which every
        thread computes on its own copy (WL: a thread holds all of them; lanes past W would
        add zeros, which changes nothing)."""
        for h in gl.static_range(5):
            a1 = _bn_shfl_down(a1, DT, 16 >> h)
            a2 = _bn_shfl_down(a2, DT, 16 >> h)
        sc.index(0).store(a1)
        sc.index(1).store(a2)
        _gl_barrier()
        v1 = gl.permute(sc.index(0).slice(0, 1, 1).load(WL), [1, 0])
        v2 = gl.permute(sc.index(1).slice(0, 1, 1).load(WL), [1, 0])
        for h in gl.static_range(5):
            if (32 >> h) <= W:
                v1 = _bn_reg_halve(v1, DT, 1, 32 >> h)
                v2 = _bn_reg_halve(v2, DT, 1, 32 >> h)
        return gl.sum(gl.sum(v1, axis=1), axis=0), gl.sum(gl.sum(v2, axis=1), axis=0)

    @gluon.jit
    def _bn_smem_group(c, j: gl.constexpr, r8, col, C, N: gl.constexpr, HW: gl.constexpr,
                       NX: gl.constexpr):
        """Offsets and mask of channel c's rows j*8 .. j*8+7 (row = batch * NX + position
        block of 512), the [8, W, 32] tile a group of shared memory holds."""
        row = j * 8 + r8
        b = row // NX
        p = (row - b * NX) * 512 + col
        return (b.to(gl.int64) * C + c) * HW + p, (p < HW) & (b < N)

    @gluon.jit
    def _bn_smem_copy(xd, gd, x_ptr, g_ptr, c, C, J: gl.constexpr, r8, col8, N: gl.constexpr,
                      HW: gl.constexpr, NX: gl.constexpr):
        """Copy group J of channel c's x and grad_out into xd, gd (cp.async, 16 bytes a
        thread) as one commit group: zeros past the channel's positions, and for c >= C."""
        offs, ok = _bn_smem_group(c, J, r8, col8, C, N, HW, NX)
        ok = ok & (c < C)
        _gl_copy(xd, x_ptr + offs, mask=ok)
        _gl_copy(gd, g_ptr + offs, mask=ok)
        async_copy.commit_group()

    @gluon.jit
    def _bn_smem_kernel(x_ptr, g_ptr, mean_ptr, istd_ptr, rv_ptr, w_ptr, dx_ptr, dw_ptr, db_ptr,
                        C, inv_count, eps, N: gl.constexpr, HW: gl.constexpr,
                        TRAIN: gl.constexpr, HAS_W: gl.constexpr, WANT_DW: gl.constexpr,
                        WANT_DB: gl.constexpr, G: gl.constexpr, WAIT: gl.constexpr,
                        REFILL_EACH: gl.constexpr, CL: gl.constexpr, B3: gl.constexpr,
                        WL: gl.constexpr, SL3: gl.constexpr, SL2: gl.constexpr):
        """CUDA eager's NCHW batch norm backward for channels of more than 256 positions
        (its block: 512 threads in a row, thread t summing positions t, t + 512, ... of batch
        0, then of batch 1, ...), with each channel's x and grad_out held in shared memory:
        channels pid, pid + grid, ... (one program per SM, 16 warps as eager's 16).

        A channel is G groups of 8 rows of 512 (row = batch * NX + position block), copied in
        by cp.async (16-byte vectors). Its sums take each row as it arrives, thread t adding
        its element of the row in eager's order, each g*(x-mean) through the input dtype; the
        block's shuffle tree follows eager's (`_bn_block_sums`), then grad_weight,
        grad_bias and grad_input with eager's formula, each group read back from shared
        memory; the groups are refilled with the next channel's rows (each as soon as it is
        written with REFILL_EACH, else all after the channel's last), so that those bytes are
        in flight while this channel is finished. Past the channel's positions a group holds
        zeros (masked copies fill them), which add nothing to the sums."""
        W: gl.constexpr = 16
        NX: gl.constexpr = (HW + 511) // 512
        ROWS: gl.constexpr = N * NX
        DT: gl.constexpr = x_ptr.dtype.element_ty
        pid = gl.program_id(0)
        P = gl.num_programs(0)
        xs = gl.allocate_shared_memory(DT, [G, 8, W, 32], SL3)
        gs = gl.allocate_shared_memory(DT, [G, 8, W, 32], SL3)
        sc = gl.allocate_shared_memory(gl.float32, [2, W, 32], SL2)
        r8 = gl.arange(0, 8, layout=gl.SliceLayout(1, gl.SliceLayout(2, CL)))[:, None, None]
        w8 = gl.arange(0, W, layout=gl.SliceLayout(0, gl.SliceLayout(2, CL)))[None, :, None]
        l8 = gl.arange(0, 32, layout=gl.SliceLayout(0, gl.SliceLayout(1, CL)))[None, None, :]
        col8 = w8 * 32 + l8
        c = pid
        for j in gl.static_range(G):
            _bn_smem_copy(xs.index(j), gs.index(j), x_ptr, g_ptr, c, C, j, r8, col8, N, HW, NX)
        while c < C:
            mean = gl.load(mean_ptr + c).to(gl.float32)  # all three in flight during the sums
            if TRAIN:
                istd = gl.load(istd_ptr + c).to(gl.float32)
            else:
                istd = gl.div_rn(1.0, gl.sqrt_rn(gl.load(rv_ptr + c).to(gl.float32) + eps))
            w = 1.0
            if HAS_W:
                w = gl.load(w_ptr + c).to(gl.float32)
            a1 = gl.zeros([1, W, 32], gl.float32, B3)
            a2 = gl.zeros([1, W, 32], gl.float32, B3)
            for j in gl.static_range(G):
                if j % WAIT == 0:  # WAIT groups at a time
                    async_copy.wait_group(G - 1 - j - WAIT + 1 if j + WAIT <= G else 0)
                    _gl_barrier()  # rows copied by other threads are read below
                for k in gl.static_range(8):
                    if j * 8 + k < ROWS:
                        # lanes past the batch's positions hold zeros (masked copies fill
                        # them): their terms add nothing
                        gv = gs.index(j).slice(k, 1, 0).load(B3).to(gl.float32)
                        xv = xs.index(j).slice(k, 1, 0).load(B3).to(gl.float32)
                        a1 += gv
                        a2 += (gv * (xv - mean)).to(DT).to(gl.float32)
            gsum, dot = _bn_block_sums(gl.reshape(a1, [W, 32]), gl.reshape(a2, [W, 32]), sc,
                                       DT, W, WL)
            grad_mean = gsum * inv_count
            proj_scale = dot * inv_count * istd * istd
            grad_scale = istd * w
            if WANT_DW:
                gl.store(dw_ptr + c, (dot * istd).to(dw_ptr.dtype.element_ty))
            if WANT_DB:
                gl.store(db_ptr + c, gsum.to(db_ptr.dtype.element_ty))
            nc = c + P
            for j in gl.static_range(G):
                offs, ok = _bn_smem_group(c, j, r8, col8, C, N, HW, NX)
                go = gs.index(j).load(CL).to(gl.float32)
                if TRAIN:  # eager's formula, and so its inf and NaN too
                    xv = xs.index(j).load(CL).to(gl.float32)
                    dx = (go - (xv - mean) * proj_scale - grad_mean) * grad_scale
                else:
                    dx = go * grad_scale
                gl.store(dx_ptr + offs, dx.to(DT), mask=ok)
                if REFILL_EACH:  # the group's slot refilled at once
                    _gl_barrier()
                    _bn_smem_copy(xs.index(j), gs.index(j), x_ptr, g_ptr, nc, C, j, r8, col8,
                                  N, HW, NX)
            if not REFILL_EACH:  # all of them after the channel's last group
                _gl_barrier()
                for j in gl.static_range(G):
                    _bn_smem_copy(xs.index(j), gs.index(j), x_ptr, g_ptr, nc, C, j, r8, col8,
                                  N, HW, NX)
            c = nc
        async_copy.wait_group(0)
