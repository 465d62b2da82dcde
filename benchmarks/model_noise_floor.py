"""How much rounding alone moves the model check's final loss, per learning-rate schedule.

    python benchmarks/model_noise_floor.py --schedule cosine [--device cpu] [--steps 500]

Trains the model check's "small" GPT twice in eager, from the same batches: once from the seeded
initial weights, once from those weights times (1 + 1e-7 N(0, 1)) (about one float32 rounding
step each), and prints the two final losses (mean of the last tenth of the steps) as JSON. A
backend whose kernels are right up to rounding cannot be held closer to eager than this.
No kernels of ours run here. CPU: ~13 min per schedule on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import time

import torch

from evaluator.models import model_check as mc
from evaluator.models.tiny_gpt import PRESETS, CharData


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--schedule", choices=mc.LR_SCHEDULES, default="cosine")
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--steps", type=int, default=500)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    cfg = PRESETS["small"]
    data = CharData.load()
    cfg = cfg.with_vocab(data.vocab_size)
    batches = mc.make_batches(data, cfg, args.steps, args.seed, args.device)
    state = mc.initial_state(cfg, args.seed)
    start = time.time()
    runs = []
    for weights in (state, mc.perturbed_state(state, args.seed)):
        model, opt = mc.fresh_model(cfg, weights, args.device)
        runs.append(mc.train(model, opt, batches, args.device, "eager", args.schedule).losses)
    window = max(1, args.steps // 10)
    a, b = (sum(r[-window:]) / window for r in runs)
    print(
        json.dumps(
            {
                "schedule": args.schedule,
                "device": args.device,
                "steps": args.steps,
                "final_loss": a,
                "final_loss_perturbed": b,
                "rel_diff": abs(a - b) / a,
                "largest_abs_diff": max(abs(p - q) for p, q in zip(*runs, strict=True)),
                "seconds": round(time.time() - start, 1),
            }
        )
    )


if __name__ == "__main__":
    torch.set_num_threads(max(1, torch.get_num_threads()))
    main()
