"""The files a model check writes (evaluator.models.model_check), rendered from its result dict.

Contract: `write_outputs(run_dir, result, eager, ours, noisy=None)`, with the runs as
`TrainResult`s (`noisy`: the eager run from perturbed weights, the noise floor), writes
`losses.csv` (step, loss_eager, loss_backend, step_ms_eager, step_ms_backend, and
loss_eager_perturbed when the noise-floor run exists),
`loss_curves.png` (matplotlib when installed, else `evaluator.reports.png_plot`), `model_check.json`
(`result`, plus `plot` and `plot_drawn_by`) and `MODEL_CHECK.md`.
"""

from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.reports import png_plot
from evaluator.reports.runfolder import write_json, write_text


@dataclass
class TrainResult:
    """One training run, step by step."""

    losses: list[float] = field(default_factory=list)
    step_ms: list[float] = field(default_factory=list)


def _csv_text(eager: TrainResult, ours: TrainResult, noisy: TrainResult | None = None) -> str:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    header = ["step", "loss_eager", "loss_backend", "step_ms_eager", "step_ms_backend"]
    w.writerow(header + (["loss_eager_perturbed"] if noisy is not None else []))
    for i in range(max(len(eager.losses), len(ours.losses))):
        row: list[Any] = [i + 1]
        for seq in (eager.losses, ours.losses):
            row.append(f"{seq[i]:.6f}" if i < len(seq) else "")
        for seq in (eager.step_ms, ours.step_ms):
            row.append(f"{seq[i]:.3f}" if i < len(seq) else "")
        if noisy is not None:
            row.append(f"{noisy.losses[i]:.6f}" if i < len(noisy.losses) else "")
        w.writerow(row)
    return buf.getvalue()


def plot_losses(
    path: Path, eager: TrainResult, ours: TrainResult, title: str, noisy: TrainResult | None = None
) -> str:
    """Write the loss curves (and their difference) as a PNG; returns what drew it. With the
    noise-floor run, its difference to eager is drawn under the backend's, in grey."""
    n = min(len(eager.losses), len(ours.losses))
    diff = [ours.losses[i] - eager.losses[i] for i in range(n)]
    m = min(len(eager.losses), len(noisy.losses)) if noisy is not None else 0
    noise = [noisy.losses[i] - eager.losses[i] for i in range(m)] if noisy is not None else []
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except Exception:  # a bare GPU image: draw it without matplotlib rather than not at all
        panels = [
            png_plot.Panel(
                "training loss",
                [
                    png_plot.Series("eager", eager.losses, png_plot.BLUE, 3),
                    png_plot.Series("atenforge backend", ours.losses, png_plot.ORANGE, 1),
                ],
                height_weight=3.0,
            ),
            png_plot.Panel(
                "backend - eager",
                (
                    [png_plot.Series("eager (perturbed) - eager", noise, (160, 160, 160), 1)]
                    if noise
                    else []
                )
                + [png_plot.Series("difference", diff, png_plot.RED, 1)],
            ),
        ]
        png_plot.plot_png(path, panels, title=title, xlabel="step")
        return "the built-in PNG plotter, as matplotlib is not installed"
    fig, (top, bottom) = plt.subplots(
        2, 1, figsize=(8, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    top.plot(range(1, len(eager.losses) + 1), eager.losses, label="eager", linewidth=1.5)
    top.plot(
        range(1, len(ours.losses) + 1),
        ours.losses,
        label="atenforge backend",
        linewidth=1.0,
        linestyle="--",
    )
    top.set_ylabel("training loss")
    top.set_title(title)
    top.legend()
    if noise:
        bottom.plot(
            range(1, m + 1), noise, color="grey", linewidth=0.8, label="eager from ~1-ulp weights"
        )
    bottom.plot(range(1, n + 1), diff, color="tab:red", linewidth=1.0, label="backend")
    if noise:
        bottom.legend(fontsize="small")
    bottom.axhline(0.0, color="grey", linewidth=0.5)
    bottom.set_ylabel("minus eager")
    bottom.set_xlabel("step")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return "matplotlib"


def _fmt(value: Any, spec: str = ".4f") -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return format(value, spec)


def _noise_line(result: dict[str, Any]) -> str:
    nf = result.get("noise_floor") or {"ran": False}
    if not nf.get("ran"):
        return "- noise floor: not measured (--no-noise-floor)"
    ld = nf["largest_loss_diff"]
    return (
        f"- noise floor: eager from the same weights times (1 + {nf['weight_noise']:g} N(0,1)) ends at"
        f" {_fmt(nf['final_loss'])}, {_fmt(nf['rel_diff_to_eager'], '.3%')} from eager (largest"
        f" difference {_fmt(ld['max_abs'], '.3g')} at step {ld['max_abs_step']}): rounding-sized"
        " changes alone move this run that much"
    )


def render_markdown(result: dict[str, Any]) -> str:
    fl, ld, sm = result["final_loss"], result["largest_loss_diff"], result["step_ms"]
    be, one = result["backend"], result["one_step"]
    cov = one["coverage"]
    model = result["model"]
    lines = [
        "# Model check: the tiny GPT with and without the atenforge backend",
        "",
        f"**Verdict: {result['verdict'].upper()}**"
        + (" — " + "; ".join(result["reasons"]) if result["reasons"] else "")
        + (
            f" ({sum(e['count'] for e in result['kernel_errors'].values())} kernel calls raised"
            " and ran in eager: see Kernel errors)"
            if result["kernel_errors"]
            else ""
        )
        + f". Final loss (mean of the last {fl.get('window_steps', 1)} steps)"
        f" {_fmt(fl['backend'])} with the backend vs {_fmt(fl['eager'])} in eager,"
        f" {_fmt(fl['rel_diff'], '.3%')} apart (tolerance {result['tolerance']:.0%}).",
        "",
        f"- kernels: `{be['kernels_dir']}`, {len(be['enabled'])} enabled on {be['device']}"
        f" ({be['dispatch_key']} key), {len(be['not_enabled'])} not enabled;"
        f" results: `{be['results'] or 'none (--all)'}`",
        f"- model: {model['n_layer']} layer(s), {model['n_embd']} wide, {model['n_head']} heads, context"
        f" {model['block_size']}, batch {model['batch_size']}, vocab {model['vocab_size']} (preset"
        f" `{model['preset']}`), fp32, AdamW lr {model['learning_rate']}"
        f" ({model.get('lr_schedule', 'constant')} schedule); data: {result['data']['source']}",
        f"- steps: {result['steps']}; largest loss difference {_fmt(ld['max_abs'], '.3g')} at step"
        f" {ld['max_abs_step']} (largest relative {_fmt(ld['max_rel'], '.3%')})",
        f"- step time, median after warm-up: eager {_fmt(sm['median_eager'], '.2f')} ms, backend"
        f" {_fmt(sm['median_backend'], '.2f')} ms, ratio backend/eager {_fmt(sm['ratio_backend_over_eager'], '.2f')}",
        _noise_line(result),
        f"- loss curves: `loss_curves.png` (drawn with {result['plot_drawn_by']})",
        f"- command: `{result['command']}`",
    ]
    if result["device"] == "cpu":
        lines.append(
            "- CPU run: kernels ran in Triton's interpreter, so step times and time shares say nothing"
            " about GPU speed."
        )
    lines += [
        "",
        "## Kernel hits during training",
        "",
        "| operator | calls | per step |",
        "| --- | ---: | ---: |",
    ]
    for op, n in sorted(result["hits"].items(), key=lambda kv: -kv[1]):
        lines.append(f"| `{op}` | {n} | {result['hits_per_step'][op]:.1f} |")
    if not result["hits"]:
        lines.append("| (none) | 0 | 0 |")
    lines += [
        "",
        "## Coverage of one training step (forward, backward, optimizer)",
        "",
        f"- ATen calls run by our kernels: {cov['calls_ours']} of {cov['calls_total']}"
        f" ({_fmt(cov['call_share'], '.1%')}); without views and metadata: {cov['compute_calls_ours']}"
        f" of {cov['compute_calls_total']} ({_fmt(cov['compute_call_share'], '.1%')})",
        f"- operator time in our kernels: {_fmt(cov['time_ms_ours'], '.2f')} of {_fmt(cov['time_ms_total'], '.2f')}"
        f" ms ({_fmt(cov['time_share'], '.1%')}); an estimate: each call was timed alone, with the device"
        " synchronised before and after it",
        "",
        "### Fallbacks: overloads that ran in eager",
        "",
        "| operator | calls | eager ms |",
        "| --- | ---: | ---: |",
    ]
    fallbacks = one["fallbacks"]
    for op, n in sorted(
        fallbacks.items(), key=lambda kv: -one["time_ms"].get(kv[0], {}).get("eager", 0.0)
    ):
        lines.append(f"| `{op}` | {n} | {_fmt(one['time_ms'].get(op, {}).get('eager'), '.3f')} |")
    if not fallbacks:
        lines.append("| (none) | 0 | |")
    if result["kernel_errors"]:
        lines += [
            "",
            "## Kernel errors (those calls ran in eager)",
            "",
            "| operator | calls | last error |",
            "| --- | ---: | --- |",
        ]
        for op, e in result["kernel_errors"].items():
            lines.append(f"| `{op}` | {e['count']} | {e['last'].replace('|', '/')} |")
    if result["shape_decisions"]:
        lines += [
            "",
            "## Shape-aware dispatch",
            "",
            f"Table: `{be['shape_table']['source']}` ({be['shape_table']['match']} match).",
            "",
        ]
        lines += [f"- {why}: {n} calls" for why, n in sorted(result["shape_decisions"].items())]
    if be["not_enabled"]:
        lines += ["", "## Not enabled", "", "| operator | reason |", "| --- | --- |"]
        lines += [f"| `{op}` | {why.replace('|', '/')} |" for op, why in be["not_enabled"].items()]
    if be["notes"]:
        lines += ["", "## Notes", ""] + [f"- {n}" for n in be["notes"]]
    inf = result["inference"]
    lines += ["", "## Inference check (transformers, random weights)", ""]
    if inf.get("ran"):
        c = inf["config"]
        lines += [
            f"- {c['model']}: {c['n_layer']} layer(s), {c['n_embd']} wide, vocab {c['vocab_size']},"
            f" batch {c['batch']} x {c['seq']} tokens, eager attention, no_grad",
            f"- logits max |backend - eager| = {_fmt(inf['max_abs_diff'], '.3g')} (relative to max |logit|:"
            f" {_fmt(inf['max_rel_diff'], '.3g')}); within atol=rtol={inf['atol']}: {inf['within_tolerance']}",
            f"- our kernels ran: {', '.join(f'`{op}` x{n}' for op, n in inf['hits'].items()) or 'none'};"
            f" ATen calls covered: {_fmt(inf['coverage']['call_share'], '.1%')}",
        ]
    else:
        lines.append(f"- not run: {inf.get('reason')}")
    lines += [
        "",
        "Files: `losses.csv`, `loss_curves.png`, `model_check.json`, `run.json`",
        "",
    ]
    return "\n".join(lines)


def write_outputs(
    run_dir: Path,
    result: dict[str, Any],
    eager: TrainResult,
    ours: TrainResult,
    noisy: TrainResult | None = None,
) -> None:
    write_text(run_dir / "losses.csv", _csv_text(eager, ours, noisy))
    title = (
        f"tiny GPT ({result['model']['preset']}) on {result['device']}: eager vs atenforge backend"
    )
    result["plot"] = "loss_curves.png"
    result["plot_drawn_by"] = plot_losses(run_dir / "loss_curves.png", eager, ours, title, noisy)
    write_json(run_dir / "model_check.json", result)
    write_text(run_dir / "MODEL_CHECK.md", render_markdown(result))
