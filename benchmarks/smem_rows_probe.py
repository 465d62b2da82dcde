"""Long softmax rows read once from HBM by holding each row in shared memory (Gluon).

    python benchmarks/smem_rows_probe.py [--rows 8192] [--cols 50257,50256]
        [--configs 4096x32x1,1024x16x1,2048x16x4] [--reps 20] [--out probe.json]
    python benchmarks/smem_rows_probe.py --superset 2048x16,4096x32 [--cols ...]

Why: the builtin `_log_softmax` reads a row longer than its one-tile limit twice (statistics,
then the output), which caps [8192, 50257] f32 near 67% of HBM bandwidth
(docs/history/BENCHMARKS-2026-11-to-12.md
§13, §22). A 201 KB f32 row does not fit a CTA's registers but fits the 227 KB of shared memory
an H100/H200 block may use, which plain Triton cannot allocate and Gluon (Triton's explicit
layout dialect, `triton.experimental.gluon`, Triton >= 3.5) can. This probe holds the row in
shared memory: one persistent program per SM loads its rows with `cp.async` into NCHUNK chunks,
folds each chunk into per-lane running max/sum statistics as it arrives, then writes the output
from shared memory and, chunk by chunk as each is consumed, starts the copies of its next row.
Each config is CHUNKxWARPSxVEC: elements per chunk, warps, elements per thread per access
(VEC 4 gives 16-byte copies, only for rows whose length is a multiple of 4 f32).

Checks every result against torch.log_softmax / torch.softmax (including rows with -inf) and
times it with CUDA events (median of --reps calls; no L2 flush: each call moves GBs). The
kernel above is session 15's research code. Since session 17 the writer emits its successor,
`_smem_rows_kernel` in softmax.py, which copies each row's 16-byte aligned superset whatever
the row's alignment; `--superset CHUNKxWARPS,...` runs that kernel as the writer emits it (with
its chunk size and warps set) and checks it on rows with -inf, +inf and NaN at every alignment.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch
import triton
from triton.experimental import gluon
from triton.experimental.gluon import language as gl
from triton.experimental.gluon.language.nvidia.ampere import async_copy

SMEM_LIMIT = 220 * 1024  # bytes of chunks per program (sm_90: 227 KB per block, some for scratch)


@gluon.jit
def _smem_rows_kernel(
    x_ptr,
    y_ptr,
    M,
    N,
    SX,
    SY,
    LOG: gl.constexpr,
    CHUNK: gl.constexpr,
    NCHUNK: gl.constexpr,
    L: gl.constexpr,
    SL: gl.constexpr,
):
    """Rows pid, pid + P, ... of x [M, N] -> (log_)softmax in y. Every thread reads back from
    shared memory exactly the elements its own copies wrote (one layout L for both), so a wait
    on its own copy groups is enough before reading a chunk; before a chunk is refilled, a
    barrier (the chunk's reads of this row are done by every thread)."""
    pid = gl.program_id(0)
    P = gl.num_programs(0)
    smem = gl.allocate_shared_memory(x_ptr.dtype.element_ty, [NCHUNK, CHUNK], SL)
    offs = gl.arange(0, CHUNK, layout=L)
    row = pid
    for c in gl.static_range(NCHUNK):
        cols = c * CHUNK + offs
        async_copy.async_copy_global_to_shared(
            smem.index(c), x_ptr + row.to(gl.int64) * SX + cols, mask=(cols < N) & (row < M)
        )
        async_copy.commit_group()
    while row < M:
        # per-lane running max and sum: one exp per element (exp(-|x - m|) serves both cases);
        # -inf elements and padding are skipped (a lane that saw only those drops out below)
        mv = gl.full([CHUNK], float("-inf"), gl.float32, L)
        sv = gl.zeros([CHUNK], gl.float32, L)
        for c in gl.static_range(NCHUNK):
            async_copy.wait_group(NCHUNK - 1 - c)
            cols = c * CHUNK + offs
            x = smem.index(c).load(L).to(gl.float32)
            e = gl.exp(-gl.abs(x - mv))
            up = x > mv
            ok = (cols < N) & (x != float("-inf"))
            sv = gl.where(ok, gl.where(up, sv * e + 1.0, sv + e), sv)
            mv = gl.where(ok & up, x, mv)
        m = gl.max(mv, axis=0)
        s = gl.sum(gl.where(mv == float("-inf"), 0.0, sv * gl.exp(mv - m)), axis=0)
        nxt = row + P
        for c in gl.static_range(NCHUNK):
            cols = c * CHUNK + offs
            x = smem.index(c).load(L).to(gl.float32)
            if LOG:
                y = x - m - gl.log(s)
            else:
                y = gl.exp(x - m) / s
            gl.store(
                y_ptr + row.to(gl.int64) * SY + cols, y.to(y_ptr.dtype.element_ty), mask=cols < N
            )
            gl.thread_barrier()
            async_copy.async_copy_global_to_shared(
                smem.index(c), x_ptr + nxt.to(gl.int64) * SX + cols, mask=(cols < N) & (nxt < M)
            )
            async_copy.commit_group()
        row = nxt
    async_copy.wait_group(0)


def smem_rows(x: torch.Tensor, log: bool, chunk: int, warps: int, vec: int) -> torch.Tensor:
    """(log_)softmax over the last dim of a contiguous 2-D f32 CUDA tensor."""
    M, N = x.shape
    nchunk = triton.cdiv(N, chunk)
    if nchunk * chunk * x.element_size() > SMEM_LIMIT:
        raise ValueError(f"{nchunk} chunks of {chunk} do not fit shared memory")
    y = torch.empty_like(x)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    _smem_rows_kernel[(min(sms, M),)](
        x,
        y,
        M,
        N,
        x.stride(0),
        y.stride(0),
        LOG=log,
        CHUNK=chunk,
        NCHUNK=nchunk,
        L=gl.BlockedLayout([vec], [32], [warps], [0]),
        SL=gl.SwizzledSharedLayout(1, 1, 1, [0]),
        num_warps=warps,
    )
    return y


def _builtin_module(op: str):
    """The builtin writer's kernel file for `op`, imported (the superset kernel is the writer's
    `_smem_rows_kernel`: measured here as the writer emits it)."""
    import importlib.util
    import tempfile

    from agent.providers.builtin.registry import WRITERS
    from agent.providers.builtin.request import KernelRequest

    path = Path(tempfile.mkdtemp(prefix="smem_rows_")) / f"{op.split('.')[0]}.py"
    path.write_text(WRITERS[op](KernelRequest(op, "", [])), encoding="utf-8")
    spec = importlib.util.spec_from_file_location(path.stem + "_probe", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Triton's JIT looks functions up through their module
    spec.loader.exec_module(module)
    return module


_MODULES: dict[bool, object] = {}


def superset_rows(x: torch.Tensor, log: bool, chunk: int, warps: int) -> torch.Tensor:
    """The builtin `_smem_rows_kernel` (softmax.py) on a contiguous 2-D f32 CUDA tensor, with
    its chunk size and warps set: any row length, 16-byte copies of each row's aligned
    superset (the row's first and last partial vectors by plain loads)."""
    if log not in _MODULES:
        _MODULES[log] = _builtin_module("_log_softmax.default" if log else "_softmax.default")
    module = _MODULES[log]
    module._SMEM_CHUNK, module._SMEM_WARPS = chunk, warps
    M, N = x.shape
    consts, chunk_bytes = module._smem_rows_consts(N)
    if chunk_bytes > SMEM_LIMIT:
        raise ValueError(f"{consts['NCHUNK']} chunks of {chunk} do not fit shared memory")
    y = torch.empty_like(x)
    sms = torch.cuda.get_device_properties(x.device).multi_processor_count
    module._smem_rows_kernel[(min(sms, M),)](x, y, M, N, **consts)
    return y


def check_superset(chunk: int, warps: int) -> list[str]:
    """Problems of `superset_rows` against torch: row lengths of every remainder mod 4, row
    counts below and above the grid, rows with -inf, +inf and NaN, an all -inf row. Rows of
    1024 elements or fewer are left out: CUDA eager takes another kernel for them, whose NaN
    and infinity pattern differs (5 x 997, session 17), and the writer never sends them here."""
    problems = []
    gen = torch.Generator(device="cuda").manual_seed(1)
    for rows, cols in ((3, 50257), (7, 50258), (133, 50259), (300, 50260), (1001, 30001)):
        x = torch.randn(rows, cols, device="cuda", generator=gen) * 4
        x[0, 3] = float("-inf")
        x[1, :] = float("-inf")
        x[2, cols - 1] = float("inf")
        if rows > 4:
            x[3, cols // 2] = float("nan")
            x[4, :2] = float("inf")
        for log in (True, False):
            want = torch.log_softmax(x, -1) if log else torch.softmax(x, -1)
            got = superset_rows(x, log, chunk, warps)
            if not (
                torch.equal(got.isnan(), want.isnan()) and torch.equal(got.isinf(), want.isinf())
            ):
                problems.append(f"{rows}x{cols} log={log}: NaN/inf positions differ")
                continue
            fin = want.isfinite()
            err = (got[fin] - want[fin]).abs().max().item()
            if err > (1e-4 if log else 1e-6):
                problems.append(f"{rows}x{cols} log={log}: max error {err:.3g}")
    return problems


def _median_us(fn, reps: int) -> float:
    fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(reps):
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return statistics.median(times)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=8192)
    ap.add_argument("--cols", default="50257,50256")
    ap.add_argument("--configs", default="4096x32x1,1024x16x1,2048x16x1,4096x32x4,2048x16x4")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--out", type=Path, default=None)
    ap.add_argument(
        "--superset", default="", help="CHUNKxWARPS configs of the superset kernel (then only it)"
    )
    args = ap.parse_args()
    results = []
    if args.superset:
        _superset_main(args)
        return
    for cols in (int(c) for c in args.cols.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(args.rows, cols, device="cuda", generator=gen) * 3
        x[0, 5] = float("-inf")
        x[1, :] = float("-inf")
        x[1, 7] = 1.0
        x[2, 100:] = float("-inf")
        want = torch.log_softmax(x, -1)
        eager_us = _median_us(lambda x=x: torch.log_softmax(x, -1), args.reps)
        for spec in args.configs.split(","):
            chunk, warps, vec = (int(v) for v in spec.split("x"))
            row = {"rows": args.rows, "cols": cols, "chunk": chunk, "warps": warps, "vec": vec}
            if vec > 1 and cols % vec:
                continue
            try:
                got = smem_rows(x, True, chunk, warps, vec)
                soft = smem_rows(x, False, chunk, warps, vec)
            except Exception as exc:  # a config that does not compile: reported, not fatal
                row["error"] = f"{type(exc).__name__}: {str(exc)[-300:]}"
                print(row, flush=True)
                results.append(row)
                continue
            same_inf = torch.equal(got.isinf(), want.isinf()) and torch.equal(
                got.isnan(), want.isnan()
            )
            finite = want.isfinite()
            row["max_err_log"] = (got[finite] - want[finite]).abs().max().item()
            row["max_err_soft"] = (soft - torch.softmax(x, -1)).abs().max().item()
            row["inf_nan_match"] = same_inf
            us = _median_us(
                lambda x=x, c=chunk, w=warps, v=vec: smem_rows(x, True, c, w, v), args.reps
            )
            row.update(us=us, eager_us=eager_us, tb_per_s=2 * x.numel() * 4 / us / 1e6)
            print(row, flush=True)
            results.append(row)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


def _superset_main(args: argparse.Namespace) -> None:
    results = []
    for cols in (int(c) for c in args.cols.split(",")):
        gen = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(args.rows, cols, device="cuda", generator=gen) * 3
        eager_us = _median_us(lambda x=x: torch.log_softmax(x, -1), args.reps)
        for spec in args.superset.split(","):
            chunk, warps = (int(v) for v in spec.split("x"))
            row = {
                "rows": args.rows,
                "cols": cols,
                "chunk": chunk,
                "warps": warps,
                "superset": True,
            }
            try:
                row["problems"] = check_superset(chunk, warps)
                us = _median_us(
                    lambda x=x, c=chunk, w=warps: superset_rows(x, True, c, w), args.reps
                )
            except Exception as exc:  # a config that does not compile: reported, not fatal
                row["error"] = f"{type(exc).__name__}: {str(exc)[-300:]}"
            else:
                row.update(us=us, eager_us=eager_us, tb_per_s=2 * x.numel() * 4 / us / 1e6)
            print(row, flush=True)
            results.append(row)
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
