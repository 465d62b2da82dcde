"""Sweep a generated kernel's module constants (tile sizes, warps, grid factors) on the GPU.

    python benchmarks/knob_sweep.py KERNELS_DIR --op OP --knob NAME=V1,V2 [--knob NAME=...]
        [--cases 2] [--match TEXT] [--zipf S] [--out sweep.jsonl]

Why: a writer's tile limits are module constants of the file it writes (`_TILE`, `_POOL_ELEMS`,
...), chosen from measurements; this re-measures them on the operator's largest torchbench cases
without editing the file. For every combination of the knob values, the kernel file is loaded as
a fresh module (empty plan caches), the constants are set, the output is checked against eager
(a wrong combination is reported, not timed) and both are timed as the evaluator times a case
(`timed_with_window`: the evaluator's L2 state, and a GPU wait before each call long enough for
the host's time). Runs the kernel in this process: only for our own writers' kernels.
Diagnostic: verdicts and claims come from evaluations.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import itertools
import json
import statistics
from pathlib import Path
from typing import Any

import torch

from evaluator.cases.inputs import materialize
from evaluator.cases.suites import select_operators
from evaluator.config import EvalConfig
from evaluator.judge.spec_view import aten_overload
from evaluator.judge.timing import (
    _bytes_moved,
    _exact_copy,
    _wait_cycles,
    flusher_for,
    rotation_sets,
    timed_with_window,
)
from evaluator.naming import kernel_function_name, op_to_folder


def _load(path: Path, number: int) -> Any:
    spec = importlib.util.spec_from_file_location(f"swept_{number}_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    return module


def _same(got: Any, want: Any) -> bool:
    if isinstance(want, torch.Tensor):
        if not isinstance(got, torch.Tensor) or got.shape != want.shape:
            return False
        if want.is_floating_point():
            return torch.allclose(got.float(), want.float(), atol=1e-2, rtol=2e-2, equal_nan=True)
        return torch.equal(got, want)
    if isinstance(want, list | tuple):
        return len(got) == len(want) and all(_same(g, w) for g, w in zip(got, want, strict=True))
    return True


def zipf_indices(args: list[Any], exponent: float, seed: int = 0) -> list[Any]:
    """args with every integer tensor of non-negative values redrawn from a Zipf law over the
    same range [0, max + 1): value ranks shuffled, rank k drawn with weight 1 / (k + 1)**exponent.
    The suite's index tensors are uniform; real token streams are skewed (a few ids most of the
    time), which is where chained sums (embedding backward) can be slow. Same shapes, strides,
    storage offsets, dtypes and devices; a fixed seed, so every combination sees the same
    indices."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for a in args:
        if (
            isinstance(a, torch.Tensor)
            and not a.is_floating_point()
            and a.dtype != torch.bool
            and a.numel() > 0
            and int(a.min()) >= 0
        ):
            n = int(a.max()) + 1
            weights = 1.0 / torch.arange(1, n + 1, dtype=torch.float64) ** exponent
            # the whole storage, so that views (stride 0, offsets) keep their layout
            count = a.untyped_storage().nbytes() // a.element_size()
            ranks = torch.multinomial(weights, count, replacement=True, generator=gen)
            values = torch.randperm(n, generator=gen)[ranks].to(a.dtype).to(a.device)
            a = values.as_strided(a.shape, a.stride(), a.storage_offset())
        out.append(a)
    return out


def _knobs(texts: list[str]) -> dict[str, list[Any]]:
    knobs = {}
    for text in texts:
        name, _, values = text.partition("=")
        if not name or not values:
            raise SystemExit(f"knob_sweep: --knob {text!r}: write NAME=V1,V2")
        try:  # one list literal: a value may be a tuple or a string with commas
            knobs[name] = list(ast.literal_eval(f"[{values}]"))
        except (ValueError, SyntaxError):
            raise SystemExit(
                f"knob_sweep: --knob {text!r}: values must be Python literals"
            ) from None
    return knobs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("kernels_dir", type=Path)
    ap.add_argument("--op", required=True)
    ap.add_argument("--knob", action="append", default=[], help="NAME=V1,V2 (Python literals)")
    ap.add_argument("--cases", type=int, default=2, help="largest cases (by bytes) to time")
    ap.add_argument("--match", default="", help="only cases whose text contains this")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", type=Path, default=None, help="append JSON lines here")
    ap.add_argument(
        "--l2-state",
        choices=("steady", "flushed"),
        default=None,
        help="what L2 holds when a timed call starts (default: the evaluator's)",
    )
    ap.add_argument(
        "--zipf",
        type=float,
        default=0.0,
        metavar="S",
        help="redraw integer index tensors from a Zipf law of exponent S (see zipf_indices)",
    )
    args = ap.parse_args()
    knobs = _knobs(args.knob)
    folder = op_to_folder(args.op)
    path = args.kernels_dir / folder / f"{folder}_implementation_v1.py"
    if not path.is_file():
        raise SystemExit(f"knob_sweep: no kernel file {path}")
    # the evaluator's timing (and its per-case GPU window: a slow host's time is not counted)
    timing = EvalConfig().timing.model_copy(
        update={"num_reps": args.reps, "max_time_per_case_s": 20.0}
    )
    if args.l2_state:
        timing = timing.model_copy(update={"l2_state": args.l2_state})
    flush = flusher_for(timing)
    wait = _wait_cycles(timing.host_window_us)
    oc = select_operators("torchbench", ops=[args.op]).ops[0]
    cases = [c for c in oc.cases if args.match in c.serialize()]
    cases = sorted(cases, key=lambda c: -c.total_bytes())[: args.cases]
    packet = aten_overload(args.op)
    sink = args.out.open("a") if args.out else None
    combos = [
        dict(zip(knobs, values, strict=True)) for values in itertools.product(*knobs.values())
    ]
    for number, combo in enumerate(combos or [{}]):
        module = _load(path, number)
        for name, value in combo.items():
            if not hasattr(module, name):
                raise SystemExit(f"knob_sweep: {path.name} has no module constant {name}")
            setattr(module, name, value)
        fn = getattr(module, kernel_function_name(args.op))
        for case in cases:
            a, kw = materialize(args.op, case, "cuda", 1)
            if args.zipf:
                a = zipf_indices(list(a), args.zipf)
            b = _exact_copy(list(a))
            row: dict[str, Any] = {"op": args.op, "knobs": combo, "case": case.serialize()}
            try:
                ok = _same(fn(*a, **kw), packet(*b, **kw))
            except Exception as exc:  # noqa: BLE001 - a combination may not compile or launch
                ok, row["error"] = False, f"{type(exc).__name__}: {exc}"[:200]
            row["correct"] = ok
            if ok:
                n = rotation_sets(case.total_bytes(), timing)
                sets_k = [(a, kw)] + [(_exact_copy(a), _exact_copy(kw)) for _ in range(n - 1)]
                sets_e = [(b, kw)] + [(_exact_copy(b), _exact_copy(kw)) for _ in range(n - 1)]
                eager, kernel, _, kernel_host, window = timed_with_window(
                    [lambda p=packet, b=x, kw=k: p(*b, **kw) for x, k in sets_e],
                    [lambda f=fn, a=x, kw=k: f(*a, **kw) for x, k in sets_k],
                    flush,
                    timing,
                    wait,
                )
                row["kernel_us"] = statistics.median(kernel) * 1e3
                row["eager_us"] = statistics.median(eager) * 1e3
                row["kernel_host_us"] = statistics.median(kernel_host) * 1e3
                row["window_us"] = window
                moved = _bytes_moved(args.op, a, packet(*b, **kw))
                row["bw_pct"] = (
                    100 * moved / (row["kernel_us"] * 1e-6) / (timing.hbm_bandwidth_gbps * 1e9)
                )
            print(
                f"{args.op} {combo} {case.serialize()[:70]}: "
                + (
                    f"kernel {row['kernel_us']:.1f} us ({row['bw_pct']:.0f}% bw), eager {row['eager_us']:.1f} us"
                    f" (kernel host {row['kernel_host_us']:.0f} us, GPU wait {row['window_us']:.0f} us)"
                    if ok
                    else f"WRONG {row.get('error', 'result differs from eager')}"
                ),
                flush=True,
            )
            if sink:
                sink.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
