"""The builtin convolution's autotuner on the GPU: which tile it picks per case, how stable the
pick is across fresh loads, and what every candidate tile would have given.

Why: the convolution kernel picks its GEMM tile by Triton's autotuner with a short bench
(`_quick_bench`, 20 ms per config) inside the verdict's time budget. Session 19's suite run put
one case ([32,128,14,14] f16, 3x3 to 32 channels) at 51 us against eager's 18, where session 18
had it near eager: a noisy pick, or a tile set with nothing good for it. For each case this loads
the generated file `--loads` times as a fresh module (empty autotune caches), records the pick,
then times every candidate the autotuner benchmarked by forcing it into the file's `_BEST` cache
(the same fast launch path the evaluator's later calls take). Times are medians in us, timed as the
evaluator times a case (host time hidden behind a GPU wait). Diagnostic: verdicts come from evaluations.

Usage (GPU): python3 benchmarks/write_builtin.py gk --ops convolution.default
             python3 benchmarks/conv_pick_probe.py gk [--cases 10] [--loads 3] [--out F.jsonl]
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import statistics
from pathlib import Path
from typing import Any

import torch

from evaluator.cases.inputs import materialize
from evaluator.cases.suites import select_operators
from evaluator.config import EvalConfig
from evaluator.judge.timing import (
    _exact_copy,
    _wait_cycles,
    flusher_for,
    rotation_sets,
    timed_with_window,
)
from evaluator.naming import kernel_function_name, op_to_folder

_OP = "convolution.default"


def _load(path: Path, number: int) -> Any:
    spec = importlib.util.spec_from_file_location(f"conv_probe_{number}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


class _CaseTimer:
    """Times a call as the evaluator times a case (`timed_with_window`: its L2 state, its input
    rotation, and a GPU wait before each call long enough to hide the host's time), so a
    tile's time is the GPU's, not the launch path's."""

    def __init__(self, args: list[Any], kwargs: dict[str, Any], total_bytes: int) -> None:
        self.timing = EvalConfig().timing.model_copy(update={"max_time_per_case_s": 20.0})
        self.flush = flusher_for(self.timing)
        self.wait = _wait_cycles(self.timing.host_window_us)
        n = rotation_sets(total_bytes, self.timing)
        self.sets = [(args, kwargs)] + [(_exact_copy(args), kwargs) for _ in range(n - 1)]

    def __call__(self, fn: Any) -> tuple[float, float]:
        """(fn's median us, eager's median us)."""
        packet = torch.ops.aten.convolution.default
        eager, kernel, *_ = timed_with_window(
            [lambda a=a, kw=kw: packet(*a, **kw) for a, kw in self.sets],
            [lambda a=a, kw=kw: fn(*a, **kw) for a, kw in self.sets],
            self.flush,
            self.timing,
            self.wait,
        )
        return statistics.median(kernel) * 1e3, statistics.median(eager) * 1e3


def _describe(config: Any) -> str:
    kw = config.kwargs
    tile = (
        kw.get("BLOCK_M", kw.get("BLOCK_P")),
        kw.get("BLOCK_N", kw.get("BLOCK_C")),
        kw.get("BLOCK_K"),
    )
    return f"{tile} w{config.num_warps} s{config.num_stages}"


def _tuners(module: Any) -> list[Any]:
    tuners = list(getattr(module, "_conv_gemm_tuned", {}).values())
    return tuners + [getattr(module, "_conv_direct_tuned", None)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("kernels_dir", type=Path)
    parser.add_argument("--cases", type=int, default=10)
    parser.add_argument("--match", default="", help="only cases whose text contains this")
    parser.add_argument("--loads", type=int, default=3)
    parser.add_argument("--out", type=Path)
    args = parser.parse_args()
    folder = op_to_folder(_OP)
    path = args.kernels_dir / folder / f"{folder}_implementation_v1.py"
    oc = select_operators("torchbench", ops=[_OP]).ops[0]
    cases = [c for c in oc.cases if args.match in c.serialize()]
    cases = sorted(cases, key=lambda c: -c.total_bytes())[: args.cases]
    sink = args.out.open("a") if args.out else None
    number = 0
    for case in cases:
        a, kw = materialize(_OP, case, "cuda", 1)
        timer = _CaseTimer(list(a), kw, case.total_bytes())
        eager = timer(torch.ops.aten.convolution.default)[0]
        row: dict[str, Any] = {"case": case.serialize(), "eager_us": eager, "picks": []}
        timings: dict[str, float] = {}
        for _ in range(args.loads):
            number += 1
            module = _load(path, number)
            fn = getattr(module, kernel_function_name(_OP))
            fn(*a, **kw)
            torch.cuda.synchronize()
            (key, best), *_ = module._BEST.items() or [(None, None)]
            if best is None:
                row["picks"].append(None)
                continue
            picked = timer(fn)[0]
            row["picks"].append([_describe(best), picked])
            if timings:
                continue
            tuner = next(t for t in _tuners(module) if getattr(t, "best_config", None) is best)
            for config in getattr(tuner, "configs_timings", None) or [best]:
                module._BEST[key] = config
                timings[_describe(config)] = timer(fn)[0]
        row["all_us"] = timings
        print(
            f"{case.serialize()[:110]}\n  eager {eager:.1f}  picks "
            + ", ".join(f"{p[0]} {p[1]:.1f}" for p in row["picks"] if p)
            + "\n  all "
            + ", ".join(f"{k} {v:.1f}" for k, v in sorted(timings.items(), key=lambda kv: kv[1])),
            flush=True,
        )
        if sink:
            sink.write(json.dumps(row) + "\n")
            sink.flush()


if __name__ == "__main__":
    main()
