"""Per-candidate verdict latency of the sandbox: what one judge_candidate call costs.

Judges the same honest kernel N times on ~10 torchbench-sized cases (fresh sandbox child each time,
as the agent does for every round) and reports median and p90 wall time per verdict, for the fork
server and for a fresh interpreter per candidate. The first call (server start, Triton compile) is
reported separately.

    python benchmarks/sandbox_cost.py --device auto --num-candidates 20 --cases suite --out cost.json
    python benchmarks/sandbox_cost.py --device cpu --modes fork --confine off,on  # its cost
    python benchmarks/sandbox_cost.py --device cuda --modes fork --concurrent 8  # 8 at once
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evaluator.cases.testcase import parse_case
from evaluator.config import EvalConfig
from evaluator.evaluate import resolve_device
from evaluator.judging.sandbox import Sandbox

ROOT = Path(__file__).resolve().parent.parent
KERNEL = ROOT / "tests/fixtures/kernels/corpus/add__Tensor/add__Tensor_implementation_v1.py"
# Ten add.Tensor cases of the sizes BERT-base / ResNet-50 layers use (f16/f32, broadcasting).
GPU_CASES = [
    "((T([8, 512, 768], f16), T([8, 512, 768], f16)), {})",
    "((T([8, 512, 3072], f16), T([3072], f16)), {})",
    "((T([32, 256, 56, 56], f16), T([32, 256, 56, 56], f16)), {})",
    "((T([8, 12, 512, 512], f16), T([8, 1, 1, 512], f16)), {})",
    "((T([1, 512, 768], f32), T([1, 512, 768], f32)), {})",
    "((T([4096], f32), T([4096], f32)), {})",
    "((T([8, 512, 768], bf16), T([8, 512, 768], bf16)), {})",
    "((T([32, 2048, 7, 7], f16), T([32, 2048, 7, 7], f16)), {})",
    "((T([128, 1000], f32), T([1000], f32)), {})",
    "((T([2, 1024, 1024], f16), T([2, 1024, 1024], f16)), {})",
]
CPU_CASES = [
    "((T([64, 768], f32), T([64, 768], f32)), {})",
    "((T([16, 3072], f32), T([3072], f32)), {})",
    "((T([4, 16, 28, 28], f16), T([4, 16, 28, 28], f16)), {})",
    "((T([2, 4, 64, 64], f32), T([2, 1, 1, 64], f32)), {})",
    "((T([1, 128, 768], f32), T([1, 128, 768], f32)), {})",
    "((T([4096], f32), T([4096], f32)), {})",
    "((T([8, 1000], f32), T([1000], f32)), {})",
    "((T([37, 129], f32), T([37, 129], f32)), {})",
    "((T([128, 128], f16), T([128, 128], f16)), {})",
    "((T([1000], f32), T([1000], f32)), {})",
]


def suite_cases(device: str) -> list:
    """add.Tensor's cases as the torchbench suite selects them (the most used operator)."""
    from evaluator.cases.suites import cpu_runnable, select_operators

    cfg = EvalConfig()
    prefer = (lambda c: cpu_runnable(c, cfg.cpu.max_case_numel)) if device == "cpu" else None
    sel = select_operators("torchbench", ops=["add.Tensor"], prefer=prefer)
    return sel.ops[0].cases


def measure(
    mode: str, device: str, n: int, which: str, confine: list[bool], concurrent: int = 1
) -> list[dict]:
    """One sandbox per `confine` setting, judged in turn candidate by candidate, so a load change
    on a shared machine hits every setting alike. With `concurrent` > 1, that many candidates
    are judged at once (threads on one sandbox of as many children), `n` rounds of them; each
    verdict's wall time counts."""
    if which == "suite":
        cases = suite_cases(device)
    else:
        cases = [parse_case(c) for c in (GPU_CASES if device == "cuda" else CPU_CASES)]
    boxes = []
    for on in confine:
        cfg = EvalConfig()
        cfg.sandbox.mode = mode  # type: ignore[assignment]
        cfg.sandbox.confine = on
        cfg.sandbox.num_parallel = concurrent
        boxes.append(Sandbox(cfg, device))
    times: list[list[float]] = [[] for _ in boxes]
    phases: list[dict[str, list[float]]] = [{} for _ in boxes]
    first_s = []
    try:
        for on, box in zip(confine, boxes, strict=True):
            t0 = time.perf_counter()
            first = box.judge(KERNEL, "add.Tensor", cases)
            first_s.append(time.perf_counter() - t0)
            assert first.status.value == "passed", first.reason
            print(f"{mode} confine={on} first: {first_s[-1]:.3f} s {first.phases_s}", flush=True)
        for _ in range(n):
            for i, (on, box) in enumerate(zip(confine, boxes, strict=True)):

                def one(box: Sandbox = box) -> tuple[float, dict]:
                    t0 = time.perf_counter()
                    res = box.judge(KERNEL, "add.Tensor", cases)
                    assert res.status.value == "passed", res.reason
                    return time.perf_counter() - t0, res.phases_s

                with ThreadPoolExecutor(concurrent) as pool:
                    done = list(pool.map(lambda _: one(), range(concurrent)))
                for took, phases_s in done:
                    times[i].append(took)
                    print(f"{mode} confine={on} x{concurrent}: {took:.3f} s {phases_s}", flush=True)
                    for k, v in phases_s.items():
                        phases[i].setdefault(k, []).append(v)
    finally:
        for box in boxes:
            box.close()
    rows = []
    for i, on in enumerate(confine):
        ts = sorted(times[i])
        rows.append(
            {
                "mode": mode,
                "confine": on,
                "cases": which,
                "device": device,
                "num_cases": len(cases),
                "num_candidates": n * concurrent,
                "concurrent": concurrent,
                "first_s": round(first_s[i], 3),
                "median_s": round(statistics.median(ts), 3),
                "p90_s": round(ts[int(0.9 * (len(ts) - 1))], 3),
                "min_s": round(ts[0], 3),
                "median_phase_s": {k: round(statistics.median(v), 3) for k, v in phases[i].items()},
            }
        )
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="auto")
    ap.add_argument("--num-candidates", type=int, default=20)
    ap.add_argument("--modes", default="fork,fresh")
    ap.add_argument("--out", type=Path)
    ap.add_argument(
        "--cases",
        choices=["suite", "large"],
        default="suite",
        help="suite: add.Tensor's torchbench cases; large: ten large cases (up to 25M elements)",
    )
    ap.add_argument(
        "--confine",
        default="on",
        help="OS-level containment: on, off, or off,on to judge with both in turn",
    )
    ap.add_argument(
        "--concurrent", type=int, default=1, help="candidates judged at once (default 1)"
    )
    args = ap.parse_args()
    device = resolve_device(args.device)
    confine = [value == "on" for value in args.confine.split(",")]
    rows = [
        row
        for mode in args.modes.split(",")
        for row in measure(mode, device, args.num_candidates, args.cases, confine, args.concurrent)
    ]
    for row in rows:
        print(json.dumps(row))
    if args.out:
        args.out.write_text(json.dumps(rows, indent=2))


if __name__ == "__main__":
    main()
