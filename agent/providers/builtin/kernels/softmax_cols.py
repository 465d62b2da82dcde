"""Softmax along a dim that is not the innermost: columns of the inner extent reduced per program."""

import triton  # noqa: I001  (one line per import, lint-only)
import triton.language as tl

from agent.providers.builtin.kernels.softmax_rows import _finish

# ---- emitted: cols ----


@triton.jit
def _cols_kernel(a_ptr, b_ptr, out_ptr, INNER, R, NIB, MODE: tl.constexpr, ACC: tl.constexpr,
                 ONE_PASS: tl.constexpr, BLOCK_R: tl.constexpr, BLOCK_I: tl.constexpr):
    pid = tl.program_id(0)
    o = (pid // NIB).to(tl.int64)
    i = (pid % NIB).to(tl.int64) * BLOCK_I + tl.arange(0, BLOCK_I)
    i_ok = i < INNER
    base = o * R * INNER + i[None, :]
    if ONE_PASS:
        r = tl.arange(0, BLOCK_R)
        m = (r[:, None] < R) & i_ok[None, :]
        offs = base + r[:, None] * INNER
        if MODE < 2:  # (-inf padding from the load itself: see `_rows_tile`)
            a = tl.load(a_ptr + offs, mask=m, other=float("-inf")).to(ACC)
            b = a
            mx = tl.where(i_ok, tl.max(a, axis=0), 0.0)
            s = tl.where(i_ok, tl.sum(tl.exp(a - mx[None, :]), axis=0), 1.0)
        else:
            a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
            b = tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
            mx = tl.zeros([BLOCK_I], ACC)
            if MODE == 2:
                s = tl.sum(a * b, axis=0)
            else:
                s = tl.sum(a, axis=0)
        y = _finish(a, b, mx[None, :], s[None, :], MODE)
        tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)
    else:
        mx = tl.full([BLOCK_I], float("-inf"), ACC)
        s = tl.zeros([BLOCK_I], ACC)
        acc = tl.zeros([BLOCK_R, BLOCK_I], ACC)
        for r0 in range(0, R, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            m = (r[:, None] < R) & i_ok[None, :]
            offs = base + r[:, None] * INNER
            if MODE < 2:
                a = tl.load(a_ptr + offs, mask=m, other=float("-inf")).to(ACC)
                new_mx = tl.maximum(mx, tl.max(a, axis=0))
                safe = tl.where(new_mx == float("-inf"), 0.0, new_mx)
                s = s * tl.exp(mx - safe) + tl.sum(tl.exp(a - safe[None, :]), axis=0)
                mx = new_mx
            else:
                a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
                if MODE == 2:
                    acc += a * tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
                else:
                    acc += a
        if MODE >= 2:
            s = tl.sum(acc, axis=0)
        else:  # padding columns: finite statistics (no NaN in lanes that store nothing)
            mx = tl.where(i_ok, mx, 0.0)
            s = tl.where(i_ok, s, 1.0)
        for r0 in range(0, R, BLOCK_R):
            r = r0 + tl.arange(0, BLOCK_R)
            m = (r[:, None] < R) & i_ok[None, :]
            offs = base + r[:, None] * INNER
            a = tl.load(a_ptr + offs, mask=m, other=0).to(ACC)
            b = a
            if MODE >= 2:
                b = tl.load(b_ptr + offs, mask=m, other=0).to(ACC)
            y = _finish(a, b, mx[None, :], s[None, :], MODE)
            tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=m)
