"""Host cost of one Triton launch, by path (GPU only): what a builtin wrapper pays per kernel.

    python benchmarks/launch_overhead.py [--out launch.json]

Times N back-to-back calls (no sync inside; µs per call) of a tiny copy kernel through
  triton       `kernel[grid](...)` (Triton's launch path),
  fast         the builtin writer's `_fast_launch` wrapper (agent/providers/builtin/codegen.py),
  run          `compiled.run(...)` with the compiled kernel in hand,
  eager        `torch.neg(x)` for scale (ATen's C++ path incl. allocation),
  empty        `torch.empty(...)` alone,
and a cProfile of the fast path, so the remaining host time can be located.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import json
import pstats
import time
from pathlib import Path

import torch
import triton
import triton.language as tl

from agent.providers.builtin.codegen import FAST_LAUNCH_SOURCE

N = 2000


@triton.jit
def _copy(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    tl.store(y_ptr + offs, tl.load(x_ptr + offs, mask=mask), mask=mask)


def _per_call(fn) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(N):
        fn()
    dt = time.perf_counter() - t0
    torch.cuda.synchronize()
    return dt / N * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    namespace = {"torch": torch, "triton": triton, "tl": tl}
    exec(compile(FAST_LAUNCH_SOURCE, "<fast_launch>", "exec"), namespace)
    fast = namespace["_fast_launch"](_copy)
    x = torch.randn(64, device="cuda")
    y = torch.empty_like(x)
    compiled = _copy[(1,)](x, y, 64, BLOCK=1024)
    stream = torch.cuda.current_stream().cuda_stream
    results = {
        "triton": _per_call(lambda: _copy[(1,)](x, y, 64, BLOCK=1024)),
        "fast": _per_call(lambda: fast[(1,)](x, y, 64, BLOCK=1024)),
        "run": _per_call(
            lambda: compiled.run(
                1,
                1,
                1,
                stream,
                compiled.function,
                compiled.packed_metadata,
                None,
                None,
                None,
                x,
                y,
                64,
                1024,
            )
        ),
        "eager": _per_call(lambda: torch.neg(x)),
        "empty": _per_call(lambda: torch.empty(64, device="cuda")),
        "current_device": _per_call(torch.cuda.current_device),
    }
    assert fast.cache, "fast path never cached a compiled kernel"
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(N):
        fast[(1,)](x, y, 64, BLOCK=1024)
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(12)
    for name, us in results.items():
        print(f"{name:16} {us:7.2f} µs/call")
    print(text.getvalue())
    if args.out:
        args.out.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
