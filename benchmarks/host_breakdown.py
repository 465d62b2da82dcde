"""Where a builtin elementwise wrapper's host time goes, step by step (GPU only).

    python benchmarks/host_breakdown.py KERNELS_DIR [--out breakdown.json]

For neg.default on a small contiguous f16 tensor (a launch-bound torchbench shape), host µs per
call (median of 20 batches of 200 calls, no sync inside a batch) of: eager `torch.neg`; the
kernel's entry point; its parts: the plan lookup, `torch.empty_strided`, the fast launcher's
call (`_kernel_flat[grid](...)`), the compiled launcher called directly, the launcher's C
`launch` alone; and the entry point again while the evaluator's launch counter is installed.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
import sys
import time
from pathlib import Path
from typing import Any

import torch

from evaluator.judge.guards import LaunchCounter

BATCH, BATCHES = 200, 20


def _host_us(fn: Any) -> float:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    per = []
    for _ in range(BATCHES):
        t0 = time.perf_counter()
        for _ in range(BATCH):
            fn()
        per.append((time.perf_counter() - t0) / BATCH * 1e6)
        torch.cuda.synchronize()
    return round(statistics.median(per), 2)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels_dir", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    path = args.kernels_dir / "neg__default" / "neg__default_implementation_v1.py"
    spec = importlib.util.spec_from_file_location("hb_neg", path)
    assert spec is not None and spec.loader is not None
    mod = importlib.util.module_from_spec(spec)
    sys.modules["hb_neg"] = mod
    spec.loader.exec_module(mod)
    impl = mod.neg__default_kernel_impl

    x = torch.randn(4, 16, 512, 8, device="cuda", dtype=torch.float16)
    impl(x)
    impl(x)
    key = ((x.shape, x.stride(), x.dtype, x.device),)
    plan = mod._PLANS[key]
    launch, cdt, shape, strides, dtype, device, grid, block, warps, mid, m0, z0 = plan
    out = torch.empty_strided(shape, strides, dtype=dtype, device=device)
    fl = mod._kernel_flat
    ((launcher, function, metadata, rest),) = list(fl.cache.values())
    dev = torch.cuda.current_device()
    stream = torch._C._cuda_getCurrentRawStream(dev)
    n = len(grid)

    rows = {
        "eager torch.neg": lambda: torch.neg(x),
        "entry point": lambda: impl(x),
        "plan lookup (_PLANS.get)": lambda: mod._PLANS.get(
            ((x.shape, x.stride(), x.dtype, x.device),)
        ),
        "torch.empty_strided": lambda: torch.empty_strided(
            shape, strides, dtype=dtype, device=device
        ),
        "fast launcher _kernel_flat[grid](...)": lambda: fl[grid](
            out, x, z0, *mid, BLOCK=block, num_warps=warps
        ),
        "compiled launcher direct": lambda: launcher(
            grid[0],
            1,
            1,
            torch._C._cuda_getCurrentRawStream(dev),
            function,
            metadata,
            None,
            None,
            None,
            out,
            x,
            z0,
            *mid,
        ),
        "launcher.launch (C) direct": lambda: (
            launcher.launch(
                grid[0],
                1,
                1,
                stream,
                function,
                launcher.launch_cooperative_grid,
                launcher.launch_pdl,
                None,
                None,
                metadata,
                None,
                None,
                None,
                out,
                x,
                z0,
                *mid,
            )
            if hasattr(launcher, "launch_pdl")
            else None
        ),
        "raw stream query": lambda: torch._C._cuda_getCurrentRawStream(dev),
        "triton's own path fn[grid](...)": lambda: fl.fn[grid](
            out, x, z0, *mid, BLOCK=block, num_warps=warps
        ),
    }
    result: dict[str, Any] = {"grid": n, "args": len(mid) + 3}
    try:
        import inspect

        result["launcher_call_source"] = inspect.getsource(type(launcher).__call__)
    except (OSError, TypeError):
        pass
    for name, fn in rows.items():
        try:
            result[name] = _host_us(fn)
        except Exception as exc:  # noqa: BLE001 - a diagnostic: record and go on
            result[name] = f"{type(exc).__name__}: {exc}"[:200]
        print(f"{name:45s} {result[name]}", flush=True)
    counter = LaunchCounter()
    counter.install()
    result["entry point, launch counter installed"] = _host_us(lambda: impl(x))
    print("entry point, launch counter installed", result["entry point, launch counter installed"])
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))


if __name__ == "__main__":
    main()
