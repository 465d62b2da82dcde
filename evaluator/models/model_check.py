"""Model-level check of a kernel directory: train the tiny GPT with and without the backend.

    python -m evaluator.model_check --kernels-dir DIR [--steps N] [--device auto]
        [--log-dir agent_logs] [--results PATH] [--only-passed | --all]

Contract:
- Both runs start from the same initial weights (initialised once, in eager) and see the same
  batches (drawn once, before either run); the only difference is which kernels computed them.
  The eager run goes first, then the backend run with `evaluator.backend` enabled.
- Writes a new run folder (`create_run_dir(log_dir)`): `run.json`, `losses.csv` (step,
  loss_eager, loss_backend, step_ms_eager, step_ms_backend), `loss_curves.png` (matplotlib when
  installed, else the stdlib plotter of `evaluator.reports.png_plot`), `model_check.json` and
  `MODEL_CHECK.md`: final losses, the largest loss difference, kernel hit counts over training,
  the overloads that still ran in eager during one tracked training step (fallbacks) with the
  share of calls and of (synchronised, per-call) operator time our kernels covered, step times,
  an inference check on a transformers GPT-2 built from a config (random weights) when
  transformers is installed, and the noise floor: a third run, eager from the same weights
  times (1 + 1e-7 N(0,1)), i.e. rounding-sized changes and nothing else; how far its final loss
  lands from eager's says how much of the backend's difference rounding alone explains
  (`--no-noise-floor` skips it).
- Verdict: passed when the final backend loss (the mean over the last tenth of the steps: a
  single late step's loss swings with its batch) is within `--tolerance` (relative, default 2%)
  of eager's and at least one of our kernels ran. Exit 0 passed, 1 failed, 2 usage error.
- Defaults: on a GPU 500 steps of the "small" preset (4 layers, 256 wide, context 128,
  batch 32); on the CPU (Triton's interpreter, slow) 10 steps of the "tiny" preset. AdamW with
  nanoGPT's schedule (warm-up, cosine decay to a tenth): with a constant learning rate the run is
  chaotic late on (on the CPU, weights changed by 1e-7 alone moved eager's final loss by 4.6%,
  more than the 2% tolerance); with the decay the same perturbation moved it by 0.003%.
- `--on-kernel-error eager` (default) runs a call whose kernel raised in eager and counts it
  (reported); `raise` stops at the first such call.
- Imports only torch, triton (through the kernels), the standard library and `evaluator`;
  rich, matplotlib and transformers are used when present.
"""

from __future__ import annotations

import argparse
import copy
import logging
import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch

from evaluator import backend as backend_mod
from evaluator.errors import UsageError
from evaluator.models.model_check_report import TrainResult, write_outputs
from evaluator.models.tiny_gpt import GPT, PRESETS, CharData, GPTConfig
from evaluator.reports.runfolder import create_run_dir, environment_info, write_json

log = logging.getLogger(__name__)

DEFAULT_STEPS = {"cuda": 500, "cpu": 10}
DEFAULT_PRESET = {"cuda": "small", "cpu": "tiny"}
WARMUP_STEPS = 10  # left out of the median step time (Triton compiles on first calls)
INFERENCE_ATOL = 1e-3


@dataclass
class CheckOptions:
    kernels_dir: Path
    steps: int | None = None
    device: str = "auto"
    log_dir: Path = Path("agent_logs")
    results: str | None = "auto"
    only_passed: bool = True
    ops: list[str] | None = None
    skip: list[str] | None = None
    preset: str | None = None
    seed: int = 0
    tolerance: float = 0.02
    data: str = "corpus"
    shape_table: str | None = None
    shape_match: str = "exact"
    on_kernel_error: str = "eager"
    inference: bool = True
    noise_floor: bool = True
    lr_schedule: str = "cosine"
    command: str = ""


# --------------------------------------------------------------------------- training

NOISE_SCALE = 1e-7  # relative perturbation of the noise-floor run's initial weights (~1 f32 ulp)


def _sync(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


def make_batches(
    data: CharData, cfg: GPTConfig, steps: int, seed: int, device: str
) -> list[tuple[torch.Tensor, torch.Tensor]]:
    gen = torch.Generator().manual_seed(seed)
    return [data.get_batch(cfg.batch_size, cfg.block_size, gen, device) for _ in range(steps)]


def initial_state(cfg: GPTConfig, seed: int) -> dict[str, torch.Tensor]:
    """Initial weights, made in eager on the CPU so no kernel of ours takes part."""
    torch.manual_seed(seed)
    return copy.deepcopy(GPT(cfg).state_dict())


def perturbed_state(
    state: dict[str, torch.Tensor], seed: int, scale: float = NOISE_SCALE
) -> dict[str, torch.Tensor]:
    """The initial weights times (1 + scale * N(0, 1)): about one float32 rounding step each.

    A kernel that is right up to rounding changes the run by about this much; training the same
    model from these weights in eager shows how far that alone moves the final loss (the noise
    floor the backend's difference is read against)."""
    gen = torch.Generator().manual_seed(seed + 1)
    return {
        k: v * (1 + scale * torch.randn(v.shape, generator=gen, dtype=v.dtype))
        if v.is_floating_point()
        else v.clone()
        for k, v in state.items()
    }


def fresh_model(
    cfg: GPTConfig, state: dict[str, torch.Tensor], device: str
) -> tuple[GPT, torch.optim.Optimizer]:
    model = GPT(cfg)
    model.load_state_dict(state)
    model.to(device).train()
    return model, torch.optim.AdamW(model.parameters(), lr=cfg.learning_rate, weight_decay=0.0)


def train_step(
    model: GPT, opt: torch.optim.Optimizer, x: torch.Tensor, y: torch.Tensor
) -> torch.Tensor:
    _, loss = model(x, y)
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss.detach()


LR_SCHEDULES = ("constant", "cosine")


def lr_factor(schedule: str, step: int, steps: int) -> float:
    """Learning-rate multiplier at `step` of `steps`: constant, or nanoGPT's recipe (linear
    warm-up over the first 10% of the steps, then cosine decay to a tenth of the peak). With the
    decay the last steps move the weights little, so the final loss says more about the kernels
    than about where a chaotic trajectory happened to be at the end."""
    if schedule == "constant":
        return 1.0
    warmup = max(1, steps // 10)
    if step < warmup:
        return (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, steps - warmup))
    return 0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * progress))


def train(
    model: GPT,
    opt: torch.optim.Optimizer,
    batches: list[tuple[torch.Tensor, torch.Tensor]],
    device: str,
    label: str,
    schedule: str = "constant",
) -> TrainResult:
    result = TrainResult()
    peak = [group["lr"] for group in opt.param_groups]
    every = max(1, len(batches) // 10)
    for step, (x, y) in enumerate(batches):
        factor = lr_factor(schedule, step, len(batches))
        for group, lr in zip(opt.param_groups, peak, strict=True):
            group["lr"] = lr * factor
        _sync(device)
        start = time.perf_counter()
        loss = train_step(model, opt, x, y)
        value = loss.item()  # synchronises: the step is done when we read its loss
        result.step_ms.append((time.perf_counter() - start) * 1e3)
        result.losses.append(value)
        if step % every == 0 or step == len(batches) - 1:
            log.info(
                "%s step %d/%d: loss %.4f (%.1f ms)",
                label,
                step + 1,
                len(batches),
                value,
                result.step_ms[-1],
            )
        if not math.isfinite(value):
            log.warning("%s: loss is %s at step %d; stopping this run", label, value, step + 1)
            break
    return result


def median_step_ms(step_ms: list[float]) -> float | None:
    steady = step_ms[WARMUP_STEPS:] if len(step_ms) > 2 * WARMUP_STEPS else step_ms[1:] or step_ms
    return statistics.median(steady) if steady else None


# --------------------------------------------------------------------------- inference check


def _gpt2(device: str, seed: int) -> tuple[Any, torch.Tensor, dict[str, Any]] | str:
    """A transformers GPT-2 from a config with random weights, and input ids; or why not."""
    try:
        from transformers import AutoModelForCausalLM, GPT2Config
        from transformers.utils import logging as hf_logging
    except Exception as exc:  # not installed, or broken beside this torch
        return f"transformers is not importable ({type(exc).__name__})"
    hf_logging.set_verbosity_error()
    if device == "cuda":
        sizes = {"n_layer": 2, "n_embd": 128, "n_head": 4, "vocab_size": 1024, "n_positions": 128}
        shape = (4, 128)
    else:
        sizes = {"n_layer": 1, "n_embd": 32, "n_head": 2, "vocab_size": 64, "n_positions": 16}
        shape = (2, 8)
    try:
        config = GPT2Config(**sizes, bos_token_id=0, eos_token_id=0)
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config, attn_implementation="eager")
    except Exception as exc:  # an old transformers without attn_implementation, say
        return f"could not build GPT-2 from a config ({type(exc).__name__}: {exc})"[:300]
    model = model.to(device).eval()
    gen = torch.Generator().manual_seed(seed)
    ids = torch.randint(0, sizes["vocab_size"], shape, generator=gen).to(device)
    return model, ids, {"model": type(model).__name__, **sizes, "batch": shape[0], "seq": shape[1]}


def inference_reference(device: str, seed: int) -> dict[str, Any]:
    """Eager logits of the transformers model (run before the backend is enabled)."""
    built = _gpt2(device, seed)
    if isinstance(built, str):
        return {"ran": False, "reason": built}
    model, ids, info = built
    try:
        with torch.no_grad():
            logits = model(ids).logits
    except Exception as exc:  # a transformers/torch mismatch must not sink the training check
        return {"ran": False, "reason": f"eager GPT-2 raised {type(exc).__name__}: {exc}"[:300]}
    return {"ran": True, "model": model, "ids": ids, "eager": logits, "config": info}


def inference_compare(ref: dict[str, Any], backend: backend_mod.Backend) -> dict[str, Any]:
    """Logits with the backend enabled, compared with the eager reference."""
    if not ref.get("ran"):
        return {"ran": False, "reason": ref.get("reason")}
    backend.reset_stats()
    try:
        with backend.tracking(), torch.no_grad():
            logits = ref["model"](ref["ids"]).logits
    except Exception as exc:  # a kernel that breaks this model is a finding, not a crash
        return {
            "ran": False,
            "reason": f"backend run raised {type(exc).__name__}: {exc}"[:400],
            "config": ref["config"],
        }
    stats = backend.stats()
    diff = (logits.float() - ref["eager"].float()).abs()
    max_abs = float(diff.max())
    scale = float(ref["eager"].float().abs().max())
    return {
        "ran": True,
        "config": ref["config"],
        "max_abs_diff": max_abs,
        "max_rel_diff": max_abs / scale if scale else None,
        "within_tolerance": bool(
            torch.allclose(
                logits.float(), ref["eager"].float(), atol=INFERENCE_ATOL, rtol=INFERENCE_ATOL
            )
        ),
        "atol": INFERENCE_ATOL,
        "hits": stats["hits"],
        "fallbacks": stats["fallbacks"],
        "kernel_errors": stats["kernel_errors"],
        "coverage": backend.coverage(),
    }


# --------------------------------------------------------------------------- the check


def _resolve_device(device: str) -> str:
    if device not in ("auto", "cuda", "cpu"):
        raise UsageError(f"unknown device {device!r}: use auto, cuda or cpu.")
    interpret = os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")
    if device == "auto":
        device = "cuda" if torch.cuda.is_available() and not interpret else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            "--device cuda was asked for but no CUDA GPU is visible: use --device cpu or auto."
        )
    if device == "cpu":
        # Read when the kernel files are imported (triton.jit), which happens after this.
        os.environ["TRITON_INTERPRET"] = "1"
    return device


def _loss_diffs(eager: list[float], ours: list[float]) -> dict[str, Any]:
    n = min(len(eager), len(ours))
    if n == 0:
        return {"max_abs": None, "max_abs_step": None, "max_rel": None}
    diffs = [abs(ours[i] - eager[i]) for i in range(n)]
    i = max(range(n), key=lambda j: diffs[j] if math.isfinite(diffs[j]) else math.inf)
    rel = [d / abs(eager[j]) if eager[j] else math.inf for j, d in enumerate(diffs)]
    return {"max_abs": diffs[i], "max_abs_step": i + 1, "max_rel": max(rel)}


def run_check(opts: CheckOptions) -> dict[str, Any]:
    """Run the whole check and write the run folder; returns what model_check.json holds."""
    device = _resolve_device(opts.device)
    preset = opts.preset or DEFAULT_PRESET[device]
    if preset not in PRESETS:
        raise UsageError(f"unknown preset {preset!r}: use one of {', '.join(PRESETS)}.")
    steps = opts.steps if opts.steps is not None else DEFAULT_STEPS[device]
    if steps < 1:
        raise UsageError("--steps must be at least 1.")
    # Fail on bad input before anything is trained or written.
    backend_mod.select_kernels(
        opts.kernels_dir,
        ops=opts.ops,
        skip=opts.skip,
        results=opts.results,
        only_passed=opts.only_passed,
        log_dir=opts.log_dir,
    )
    table = (
        backend_mod.ShapeTable.load(opts.shape_table, match=opts.shape_match)
        if opts.shape_table
        else None
    )
    data = CharData.load() if opts.data == "corpus" else CharData.generated(seed=opts.seed)
    cfg = PRESETS[preset].with_vocab(data.vocab_size)

    run_dir = create_run_dir(opts.log_dir)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    run_info = {
        "kind": "model_check",
        "command": opts.command,
        "kernels_dir": str(Path(opts.kernels_dir).resolve()),
        "device": device,
        "environment": environment_info(device),
        "options": {k: (str(v) if isinstance(v, Path) else v) for k, v in vars(opts).items()},
        "model": {"preset": preset, **cfg.to_json(), "lr_schedule": opts.lr_schedule},
        "data": {"source": data.source, "chars": len(data.text), "vocab_size": data.vocab_size},
        "steps": steps,
        "started": started,
    }
    write_json(run_dir / "run.json", run_info)
    log.info(
        "model check: %s, %d steps of the %s GPT on %s; writing %s",
        opts.kernels_dir,
        steps,
        preset,
        device,
        run_dir,
    )

    state = initial_state(cfg, opts.seed)
    batches = make_batches(data, cfg, steps, opts.seed, device)
    model_e, opt_e = fresh_model(cfg, state, device)
    model_b, opt_b = fresh_model(cfg, state, device)
    profile_model, profile_opt = fresh_model(cfg, state, device)
    inference_ref = (
        inference_reference(device, opts.seed)
        if opts.inference
        else {"ran": False, "reason": "--no-inference"}
    )

    eager = train(model_e, opt_e, batches, device, "eager", opts.lr_schedule)
    noisy = None
    if opts.noise_floor:
        model_n, opt_n = fresh_model(cfg, perturbed_state(state, opts.seed), device)
        noisy = train(
            model_n, opt_n, batches, device, "eager, weights x (1 + 1e-7 N(0,1))", opts.lr_schedule
        )
    with backend_mod.use(
        opts.kernels_dir,
        ops=opts.ops,
        skip=opts.skip,
        results=opts.results,
        only_passed=opts.only_passed,
        device=device,
        shape_table=table,
        on_error=opts.on_kernel_error,
        log_dir=opts.log_dir,
    ) as be:
        ours = train(model_b, opt_b, batches, device, "backend", opts.lr_schedule)
        train_stats = be.stats()
        # One more step, tracked and timed call by call: which overloads still ran in eager,
        # and what share of the calls and of the operator time ours took. Kernels are warm.
        be.reset_stats()
        with be.tracking(time_ops=True):
            train_step(profile_model, profile_opt, *batches[0])
            _sync(device)
        step_stats, step_coverage = be.stats(), be.coverage()
        inference = inference_compare(inference_ref, be)
        summary = be.summary()

    # One step's loss depends on its batch and, late in training, swings by tens of percent from
    # step to step; the verdict compares the mean of the last tenth of the run instead.
    window = max(1, steps // 10)
    final_e = sum(eager.losses[-window:]) / window if len(eager.losses) >= window else math.nan
    final_b = sum(ours.losses[-window:]) / window if len(ours.losses) >= window else math.nan
    rel = abs(final_b - final_e) / abs(final_e) if final_e else math.inf
    total_hits = sum(train_stats["hits"].values())
    noise_floor: dict[str, Any] = {"ran": False}
    if noisy is not None and len(noisy.losses) >= window:
        final_n = sum(noisy.losses[-window:]) / window
        noise_floor = {
            "ran": True,
            "weight_noise": NOISE_SCALE,
            "final_loss": final_n,
            "rel_diff_to_eager": abs(final_n - final_e) / abs(final_e) if final_e else math.inf,
            "largest_loss_diff": _loss_diffs(eager.losses, noisy.losses),
        }
    reasons = []
    if not (math.isfinite(rel) and rel <= opts.tolerance):
        reasons.append(
            f"final loss (mean of the last {window} steps) {final_b:.4f} vs eager {final_e:.4f}"
            f" ({rel:.2%} apart, tolerance {opts.tolerance:.0%})"
        )
    if len(ours.losses) < steps:
        reasons.append(
            f"backend run stopped after {len(ours.losses)} of {steps} steps (non-finite loss)"
        )
    if total_hits == 0:
        reasons.append("none of our kernels ran during training")
    med_e, med_b = median_step_ms(eager.step_ms), median_step_ms(ours.step_ms)
    result = {
        "schema_version": 1,
        "verdict": "passed" if not reasons else "failed",
        "command": opts.command,
        "reasons": reasons,
        "device": device,
        "steps": steps,
        "tolerance": opts.tolerance,
        "final_loss": {
            "eager": final_e,
            "backend": final_b,
            "rel_diff": rel,
            "window_steps": window,
            "last_step": {
                "eager": eager.losses[-1] if eager.losses else None,
                "backend": ours.losses[-1] if ours.losses else None,
            },
        },
        "largest_loss_diff": _loss_diffs(eager.losses, ours.losses),
        "noise_floor": noise_floor,
        "step_ms": {
            "median_eager": med_e,
            "median_backend": med_b,
            "ratio_backend_over_eager": med_b / med_e if med_e and med_b else None,
            "warmup_steps_excluded": WARMUP_STEPS if steps > 2 * WARMUP_STEPS else 1,
            "total_s_eager": sum(eager.step_ms) / 1e3,
            "total_s_backend": sum(ours.step_ms) / 1e3,
        },
        "hits": train_stats["hits"],
        "hits_per_step": {
            op: n / max(1, len(ours.losses)) for op, n in train_stats["hits"].items()
        },
        "kernel_errors": train_stats["kernel_errors"],
        "shape_decisions": train_stats["shape_decisions"],
        "one_step": {
            "fallbacks": step_stats["fallbacks"],
            "calls": step_stats["calls"],
            "time_ms": step_stats["time_ms"],
            "coverage": step_coverage,
        },
        "backend": {k: v for k, v in summary.items() if k not in ("stats", "coverage")},
        "inference": inference,
        "model": run_info["model"],
        "data": run_info["data"],
        "run_dir": str(run_dir),
    }
    write_outputs(run_dir, result, eager, ours, noisy)
    run_info["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    write_json(run_dir / "run.json", run_info)
    return result


# --------------------------------------------------------------------------- CLI


def _csv_list(text: str | None) -> list[str] | None:
    return [t.strip() for t in text.split(",") if t.strip()] if text else None


def parse_args(argv: list[str] | None = None) -> CheckOptions:
    p = argparse.ArgumentParser(
        prog="python -m evaluator.model_check",
        description="Train the tiny GPT with and without the kernels of DIR and compare the losses.",
    )
    p.add_argument(
        "--kernels-dir", required=True, type=Path, help="kernel directory (DirectoryBackend layout)"
    )
    p.add_argument(
        "--steps",
        type=int,
        default=None,
        help="training steps (default: 500 on a GPU, 10 on the CPU)",
    )
    p.add_argument("--device", default="auto", choices=["auto", "cuda", "cpu"])
    p.add_argument(
        "--log-dir", type=Path, default=Path("agent_logs"), help="where the run folder is created"
    )
    p.add_argument(
        "--results",
        default="auto",
        help="atenforge_results.json or run folder of an evaluation (default: newest for DIR)",
    )
    which = p.add_mutually_exclusive_group()
    which.add_argument(
        "--only-passed",
        dest="only_passed",
        action="store_true",
        default=True,
        help="enable only kernels whose evaluation passed (default)",
    )
    which.add_argument(
        "--all",
        dest="only_passed",
        action="store_false",
        help="enable every kernel in DIR, evaluated or not",
    )
    p.add_argument("--ops", help="comma-separated operators to enable (default: all eligible)")
    p.add_argument("--skip", help="comma-separated operators never to enable")
    p.add_argument(
        "--preset",
        choices=sorted(PRESETS),
        help="model size (default: small on a GPU, tiny on the CPU)",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--tolerance", type=float, default=0.02, help="allowed relative final-loss difference"
    )
    p.add_argument(
        "--data",
        choices=["corpus", "generated"],
        default="corpus",
        help="bundled text or procedural text",
    )
    p.add_argument(
        "--shape-table",
        help="GPU evaluation's atenforge_results.json: use a kernel only where it was measured faster",
    )
    p.add_argument("--shape-match", choices=["exact", "nearest"], default="exact")
    p.add_argument("--on-kernel-error", choices=["eager", "raise"], default="eager")
    p.add_argument(
        "--no-inference",
        dest="inference",
        action="store_false",
        help="skip the transformers inference check",
    )
    p.add_argument(
        "--lr-schedule",
        choices=LR_SCHEDULES,
        default="cosine",
        help="learning rate over the run: warm-up then cosine decay to 10%% (default), or "
        "constant (session 1's recipe: chaotic late in the run, see "
        "docs/history/BENCHMARKS-2026-11-to-12.md §10)",
    )
    p.add_argument(
        "--no-noise-floor",
        dest="noise_floor",
        action="store_false",
        help="skip the third run (eager from weights perturbed by ~1 ulp) that measures how far "
        "rounding alone moves the final loss",
    )
    p.add_argument("-v", "--verbose", action="store_true")
    a = p.parse_args(argv)
    logging.basicConfig(
        level=logging.DEBUG if a.verbose else logging.INFO,
        format="%(levelname)s %(name)s: %(message)s",
    )
    return CheckOptions(
        kernels_dir=a.kernels_dir,
        steps=a.steps,
        device=a.device,
        log_dir=a.log_dir,
        results=a.results,
        only_passed=a.only_passed,
        ops=_csv_list(a.ops),
        skip=_csv_list(a.skip),
        preset=a.preset,
        seed=a.seed,
        tolerance=a.tolerance,
        data=a.data,
        shape_table=a.shape_table,
        shape_match=a.shape_match,
        on_kernel_error=a.on_kernel_error,
        inference=a.inference,
        noise_floor=a.noise_floor,
        lr_schedule=a.lr_schedule,
        command=" ".join(
            ["python -m evaluator.model_check", *(argv if argv is not None else sys.argv[1:])]
        ),
    )


def _say(text: str) -> None:
    try:
        from rich.console import Console
    except ImportError:  # rich is optional on a bare GPU image
        log.info("%s", text)
        return
    Console(highlight=False, soft_wrap=True).print(text, markup=False)


def main(argv: list[str] | None = None) -> int:
    try:
        opts = parse_args(argv)
        result = run_check(opts)
    except UsageError as exc:
        _say(f"error: {exc}")
        return 2
    except (backend_mod.BackendRecursionError, backend_mod.BackendKernelError) as exc:
        # A kernel broke the model (with --on-kernel-error raise, or by recursing): a failed check.
        _say(f"model check failed: {exc}")
        return 1
    fl = result["final_loss"]
    _say(
        f"model check {result['verdict']}: final loss backend {fl['backend']:.4f} vs eager {fl['eager']:.4f}"
        f" ({fl['rel_diff']:.3%} apart); {sum(result['hits'].values())} kernel calls;"
        f" report: {Path(result['run_dir']) / 'MODEL_CHECK.md'}"
    )
    return 0 if result["verdict"] == "passed" else 1


if __name__ == "__main__":
    sys.exit(main())
