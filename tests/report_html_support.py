"""Helpers for the HTML report tests: a synthetic run folder of any size, and headless chromium.

`synthetic_run(run_dir, ...)` writes a run folder in the layout agent.runlog and the evaluator
write (run.json, events.jsonl, ops/<folder>/worker_<w>/round_<r>/..., decision.json, the results
object), with texts of the sizes real runs have (a 4-8 KB prompt, a 4 KB candidate, a 3 KB
feedback) and, with `gpu=True`, timed cases (speedups, bandwidth floors) as a GPU run records.
It stands in for the one thing this machine cannot produce: a whole-suite run with 4 workers x 5
rounds on a GPU.

`chromium()` finds Debian's chromium; `dump_dom(url)` and `screenshot(url, png)` run it headless
with a throwaway profile and a timeout.
"""

from __future__ import annotations

import json
import random
import shutil
import subprocess
import tempfile
from datetime import UTC, datetime, timedelta
from pathlib import Path

from evaluator.naming import op_to_folder

KERNEL = """import torch
import triton
import triton.language as tl


@triton.jit
def _kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    pid = tl.program_id(0)
    offs = pid * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    x = tl.load(x_ptr + offs, mask=mask, other=0.0).to(tl.float32)
    y = {expr}
    tl.store(out_ptr + offs, y.to(out_ptr.dtype.element_ty), mask=mask)


def {folder}_kernel_impl(x, *args, **kwargs):
    out = torch.empty_like(x)
    n = x.numel()
    BLOCK = {block}
    _kernel[(triton.cdiv(n, BLOCK),)](x, out, n, BLOCK=BLOCK)
    return out
"""
_WORDS = random.Random(0)
VOCAB = [
    "".join(_WORDS.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(_WORDS.randint(2, 9)))
    for _ in range(400)
]


def _prose(rng: random.Random, chars: int) -> str:
    """Text about as compressible as a model's answer (a few hundred words, reused)."""
    words, size = [], 0
    while size < chars:
        word = rng.choice(VOCAB) if rng.random() > 0.1 else f"{rng.uniform(0, 1e4):.4g}"
        words.append(word + ("\n" if rng.random() < 0.08 else " "))
        size += len(words[-1])
    return "".join(words)


def _candidate(rng: random.Random, folder: str, worker: int, round_: int) -> str:
    """A worker's candidates share most lines from round to round, as a model's do."""
    expr = ["x * 2.0", "tl.maximum(x, 0.0)", "x + 1.0", "tl.where(x > 0, x, 0.0)"][round_ % 4]
    block = [256, 512, 1024, 2048][(worker + round_) % 4]
    body = KERNEL.format(expr=expr, folder=folder, block=block)
    lines = _prose(random.Random(f"{folder}/{worker}"), 3300).splitlines()
    for _ in range(3):
        lines[rng.randrange(len(lines))] = _prose(rng, 60)
    return body + "".join(f"# {line}\n" for line in lines)  # ~4 KB


def _case_args(rng: random.Random) -> str:
    shape = [rng.choice([1, 8, 64, 128, 512, 1024]) for _ in range(rng.randint(1, 4))]
    return f"((T({shape}, {rng.choice(['f32', 'f16', 'bf16'])}),), {{}})"


def synthetic_run(
    run_dir: Path,
    *,
    num_ops: int = 108,
    num_workers: int = 4,
    num_rounds: int = 5,
    gpu: bool = True,
    cases_per_op: int = 6,
    seed: int = 0,
) -> Path:
    """Write a run where every worker of every operator used every round (the worst case)."""
    rng = random.Random(seed)
    run_dir.mkdir(parents=True, exist_ok=True)
    ops = [f"synthetic_op_{i:03d}.default" for i in range(num_ops)]
    t0 = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
    events = [{"ts": t0.isoformat(), "event": "run_start", "ops": ops}]
    operators = []
    for i, op in enumerate(ops):
        folder = op_to_folder(op)
        solved_round = rng.choice([None, 1, 2, 3, 5])
        clock = t0 + timedelta(seconds=i * 3)
        for w in range(1, num_workers + 1):
            wclock = clock
            for r in range(1, num_rounds + 1):
                path = run_dir / "ops" / folder / f"worker_{w}" / f"round_{r}"
                path.mkdir(parents=True)
                candidate = _candidate(rng, folder, w, r)
                passed = solved_round is not None and r >= solved_round
                feedback = f"Status: {'passed' if passed else 'failed'}.\n" + "".join(
                    f"{k}. args: {_case_args(rng)}\n   WrongResult: {rng.randint(1, 4096)} of 4096 "
                    f"elements outside atol=0.0001 rtol=0.0001; max abs error {rng.random():.3g}\n"
                    for k in range(1, 22)
                )  # ~3 KB
                prompt = f"Write a Triton kernel for {op}.\n" + _prose(random.Random(op), 4000)
                if r > 1:
                    prompt += feedback
                system = "You write Triton kernels for ATen operators.\n" * 80
                messages = [
                    {"role": "system", "content": system},
                    {"role": "user", "content": prompt},
                ]
                (path / "messages.json").write_text(json.dumps(messages))
                (path / "response.md").write_text(
                    f"Round {r}: {_prose(rng, 400)}\n\n```python\n{candidate}```\n"
                )
                (path / "candidate.py").write_text(candidate)
                (path / "feedback.md").write_text(feedback)
                tests = cases_per_op
                verdict = {
                    "op": op,
                    "folder": folder,
                    "status": "passed" if passed else "failed",
                    "flags": [] if passed else ["wrong_values"],
                    "tests": tests,
                    "passed": tests if passed else rng.randint(0, tests - 1),
                    "reason": "" if passed else "a test gave a wrong result",
                    "results": [],
                }
                (path / "verdict.json").write_text(json.dumps(verdict))
                latency = rng.uniform(5, 60)
                meta = {
                    "op": op,
                    "worker": w,
                    "round": r,
                    "model": "synthetic-model",
                    "input_tokens": 3000 + 500 * r,
                    "output_tokens": 1300,
                    "latency_s": round(latency, 2),
                    "attempts": 1,
                    "cost_usd": 0.02,
                    "outcome": "passed" if passed else "failed",
                    "status": verdict["status"],
                    "tests": tests,
                    "passed": verdict["passed"],
                    "verdict_s": 4.0,
                }
                (path / "meta.json").write_text(json.dumps(meta))
                events.append(
                    {
                        "ts": wclock.isoformat(),
                        "event": "round_start",
                        "op": op,
                        "worker": w,
                        "round": r,
                    }
                )
                wclock += timedelta(seconds=latency + 4)
                events.append(
                    {
                        "ts": wclock.isoformat(),
                        "event": "round_end",
                        **{k: meta[k] for k in ("op", "worker", "round", "outcome")},
                    }
                )
        kept = solved_round is not None
        decision = {"op": op, "status": "kept" if kept else "not kept", "worker": 1}
        decision["round"] = solved_round
        (run_dir / "ops" / folder / "decision.json").write_text(json.dumps(decision))
        events.append({"ts": clock.isoformat(), "event": "op_done", "op": op, "elapsed_s": 300.0})
        results = []
        for _ in range(cases_per_op):
            speedup = rng.lognormvariate(0.1, 0.5) if gpu and kept else None
            kernel_ms = rng.uniform(0.01, 2.0) if speedup else None
            results.append(
                {
                    "args": _case_args(rng),
                    "passed": kept,
                    "speedup": speedup,
                    "kernel_ms": kernel_ms,
                    "eager_ms": kernel_ms * speedup if speedup and kernel_ms else None,
                    "floor_ms": kernel_ms * rng.uniform(0.3, 0.95) if kernel_ms else None,
                    "flags": [],
                }
            )
        speedups = [t["speedup"] for t in results if t["speedup"]]
        geomean = None
        if speedups:
            product = 1.0
            for s in speedups:
                product *= s
            geomean = product ** (1 / len(speedups))
        operators.append(
            {
                "op": op,
                "folder": folder,
                "status": "passed" if kept else "failed",
                "flags": [] if kept else ["wrong_values"],
                "tests": cases_per_op,
                "passed": cases_per_op if kept else 0,
                "geomean_speedup": geomean,
                "reason": "" if kept else "a test gave a wrong result",
                "results": results,
                "wall_s": 12.0,
            }
        )
    with (run_dir / "events.jsonl").open("w") as f:
        for event in sorted(events, key=lambda e: e["ts"]):
            f.write(json.dumps(event) + "\n")
    n_passed = sum(1 for o in operators if o["status"] == "passed")
    run = {
        "schema_version": 1,
        "command": f"python -m agent.run --suite torchbench --num-workers {num_workers}",
        "mode": "full",
        "status": "completed",
        "device": "cuda" if gpu else "cpu",
        "environment": {"gpu": "NVIDIA H200" if gpu else "cpu-interpreter"},
        "provider": {"name": "synthetic", "model": "synthetic-model"},
        "ops": ops,
        "excluded": [["synthetic_excluded.default", "no test case runs on this device"]],
        "started_at": t0.isoformat(),
        "ended_at": (t0 + timedelta(hours=2)).isoformat(),
        "wall_s": 7200.0,
    }
    (run_dir / "run.json").write_text(json.dumps(run))
    scores = {
        "num_operators": num_ops,
        "num_passed": n_passed,
        "num_failed": num_ops - n_passed,
        "correctness_score": n_passed / num_ops,
        "mean_pass_rate": n_passed / num_ops,
        "performance_score": 1.1 if gpu else None,
        "fast_0": 0.5 if gpu else None,
        "fast_1.0": 0.4 if gpu else None,
        "fast_1.2": 0.3 if gpu else None,
    }
    results_object = {
        "schema_version": 1,
        "device": run["device"],
        "scores": scores,
        "operators": operators,
        "excluded": [{"op": "synthetic_excluded.default", "reason": "no test case runs here"}],
    }
    (run_dir / "atenforge_results.json").write_text(json.dumps(results_object))
    return run_dir


# ------------------------------------------------------------------------------ chromium


def chromium() -> str | None:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        path = shutil.which(name)
        if path:
            return path
    return None


def _run_chromium(args: list[str], timeout_s: float) -> subprocess.CompletedProcess[str]:
    binary = chromium()
    assert binary is not None
    with tempfile.TemporaryDirectory(prefix="chromium-profile-") as profile:
        return subprocess.run(
            [
                binary,
                "--headless",
                "--no-sandbox",  # CI runs as root, where chromium's sandbox refuses to start
                "--disable-gpu",
                "--no-first-run",
                f"--user-data-dir={profile}",
                *args,
            ],
            capture_output=True,
            text=True,
            timeout=timeout_s,
            check=False,
        )


def dump_dom(url: str, *, timeout_s: float = 120.0, virtual_time_ms: int = 5000) -> str:
    """The page's DOM after load (and after `virtual_time_ms` of timers, when not 0)."""
    budget = [f"--virtual-time-budget={virtual_time_ms}"] if virtual_time_ms else []
    done = _run_chromium([*budget, "--dump-dom", url], timeout_s)
    return done.stdout


def screenshot(url: str, png: Path, *, width: int = 1200, height: int = 1500) -> Path:
    _run_chromium(
        [
            "--hide-scrollbars",
            "--virtual-time-budget=2000",  # lets the whole window paint before the capture
            f"--window-size={width},{height}",
            f"--screenshot={png}",
            url,
        ],
        120.0,
    )
    return png
