"""Judge throughput against the number of judges: verdicts per minute with 1, 2, 4 ... judges.

The candidate set is fixed before any timing: the builtin provider writes one kernel per operator
of the suite (or `--kernels-dir` holds them), and every pool size judges the same files, each
`--repeat` times, as many at once as the pool has slots. Each pool's fork servers are started and
warmed (one candidate per judge) before its clock starts. The verdicts of every pool size must
agree with the first one's, or the run fails: a faster pool that judges differently is no pool.

    python benchmarks/scale.py --suite smoke --judges 1,2 --device cpu
    python benchmarks/scale.py --suite torchbench --judges 1,2,4,8 --device cuda --out scale.json
    python benchmarks/scale.py --suite torchbench --judges 8 --executor ray --ray-address auto
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from evaluator.config import EvalConfig
from evaluator.evaluate import resolve_device
from evaluator.judging.judge_pool import make_pool
from evaluator.naming import kernel_path


def builtin_candidates(suite: str, device: str, out: Path, cfg: EvalConfig) -> list[tuple]:
    """(op, cases, kernel file) for every operator of `suite` the builtin provider writes."""
    from agent.extract import ExtractError, extract_candidate
    from agent.providers.base import OperatorContext
    from agent.providers.builtin.provider import BuiltinProvider
    from evaluator.cases.suites import cpu_runnable, select_operators

    prefer = (lambda c: cpu_runnable(c, cfg.cpu.max_case_numel)) if device == "cpu" else None
    selection = select_operators(suite, max_cases_per_op=cfg.max_cases_per_op, prefer=prefer)
    provider = BuiltinProvider()
    found = []
    for oc in selection.ops:
        if not provider.can_write(oc.op):
            continue
        context = OperatorContext(op=oc.op, schema="", cases=oc.cases, worker=1, round=1)
        try:
            code = extract_candidate(provider.complete([], context).text, oc.op)
        except ExtractError:
            continue
        path = kernel_path(out, oc.op)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(code)
        found.append((oc.op, oc.cases, path))
    return found


def dir_candidates(kernels_dir: Path, suite: str, device: str, cfg: EvalConfig) -> list[tuple]:
    from evaluator.cases.suites import cpu_runnable, select_operators

    prefer = (lambda c: cpu_runnable(c, cfg.cpu.max_case_numel)) if device == "cpu" else None
    selection = select_operators(suite, max_cases_per_op=cfg.max_cases_per_op, prefer=prefer)
    return [
        (oc.op, oc.cases, kernel_path(kernels_dir, oc.op))
        for oc in selection.ops
        if kernel_path(kernels_dir, oc.op).exists()
    ]


def measure(cfg: EvalConfig, device: str, candidates: list[tuple], repeat: int) -> dict:
    pool = make_pool(cfg, device)
    try:
        op, cases, path = candidates[0]
        warm_started = time.perf_counter()
        with ThreadPoolExecutor(len(pool.slots)) as ex:
            list(ex.map(lambda _: pool.judge(path, op, cases), range(len(pool.slots))))
        warm_s = time.perf_counter() - warm_started
        jobs = [c for _ in range(repeat) for c in candidates]
        started = time.perf_counter()
        with ThreadPoolExecutor(pool.capacity) as ex:
            results = list(ex.map(lambda c: pool.judge(c[2], c[0], c[1]), jobs))
        wall_s = time.perf_counter() - started
        verdict_s = sorted(r.wall_s or 0.0 for r in results)
        return {
            "judges": len(pool.slots),
            "slots": pool.capacity,
            "candidates": len(jobs),
            "wall_s": round(wall_s, 2),
            "verdicts_per_min": round(60 * len(jobs) / wall_s, 1),
            "median_verdict_s": round(verdict_s[len(verdict_s) // 2], 3),
            "warmup_s": round(warm_s, 2),
            "per_judge": {s["judge"]: s["verdicts"] for s in pool.stats()},
            "verdicts": [f"{c[0]}: {r.status}" for c, r in zip(jobs, results, strict=True)],
        }
    finally:
        pool.close()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="smoke")
    ap.add_argument("--kernels-dir", type=Path, help="judge these kernels (default: builtin's)")
    ap.add_argument("--judges", default="1,2", help="pool sizes to measure, e.g. 1,2,4,8")
    ap.add_argument("--device", default="auto")
    ap.add_argument("--executor", choices=["local", "ray"], default="local")
    ap.add_argument("--ray-address")
    ap.add_argument("--repeat", type=int, default=2, help="times each candidate is judged")
    ap.add_argument("--num-parallel", type=int, default=2, help="slots per judge")
    ap.add_argument("--out", type=Path)
    args = ap.parse_args()
    device = resolve_device(args.device)
    base = EvalConfig()
    base.sandbox.num_parallel = args.num_parallel
    with tempfile.TemporaryDirectory(prefix="atenforge_scale_") as tmp:
        if args.kernels_dir is not None:
            candidates = dir_candidates(args.kernels_dir, args.suite, device, base)
        else:
            candidates = builtin_candidates(args.suite, device, Path(tmp), base)
        if not candidates:
            print("error: no candidate kernel for this suite", file=sys.stderr)
            return 2
        rows = []
        for n in [int(s) for s in args.judges.split(",") if s]:
            cfg = base.model_copy(deep=True)
            cfg.devices, cfg.executor, cfg.ray_address = str(n), args.executor, args.ray_address
            rows.append(measure(cfg, device, candidates, args.repeat))
            row = rows[-1]
            print(f"{n} judge(s): {row['verdicts_per_min']} verdicts/min", flush=True)
    first = rows[0]["verdicts"]
    differ = [r["judges"] for r in rows if r["verdicts"] != first]
    print(f"\n{len(candidates)} operators x {args.repeat} on {device} ({args.executor})")
    print("| judges | slots | verdicts | wall s | verdicts/min | speedup | median verdict s |")
    print("|---:|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        speedup = r["verdicts_per_min"] / rows[0]["verdicts_per_min"]
        print(
            f"| {r['judges']} | {r['slots']} | {r['candidates']} | {r['wall_s']} | "
            f"{r['verdicts_per_min']} | {speedup:.2f}x | {r['median_verdict_s']} |"
        )
    if args.out:
        args.out.write_text(json.dumps({"device": device, "rows": rows}, indent=2))
    if differ:
        print(f"error: verdicts differ with {differ} judge(s)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
