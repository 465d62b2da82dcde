"""Where an agent run's time went: wall time, verdict latency per candidate, and the
share of wall time spent waiting on the sandbox, read from a run folder.

    python benchmarks/run_stats.py agent_logs/run_YYYYmmdd_HHMMSS [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from datetime import datetime
from pathlib import Path


def _ts(text: str) -> datetime:
    return datetime.fromisoformat(text)


def stats(run_dir: Path) -> dict:
    events = [
        json.loads(line)
        for line in (run_dir / "events.jsonl").read_text().splitlines()
        if line.strip()
    ]
    metas = [
        json.loads(p.read_text()) for p in sorted(run_dir.glob("ops/*/worker_*/round_*/meta.json"))
    ]
    verdicts = sorted(
        m["verdict_s"] for m in metas if m.get("verdict_s") and not m.get("verdict_reused_from")
    )
    provider = sum(m.get("latency_s") or 0.0 for m in metas)
    wall = (_ts(events[-1]["ts"]) - _ts(events[0]["ts"])).total_seconds()
    gen_end = next(
        (e["ts"] for e in events if e.get("event") == "evaluation_start"), events[-1]["ts"]
    )
    gen_wall = (_ts(gen_end) - _ts(events[0]["ts"])).total_seconds()
    eval_wall = wall - gen_wall
    judged = sum(verdicts)
    return {
        "run": run_dir.name,
        "wall_s": round(wall, 1),
        "generation_wall_s": round(gen_wall, 1),
        "evaluation_wall_s": round(eval_wall, 1),
        "rounds": len(metas),
        "candidates_judged": len(verdicts),
        "verdict_median_s": round(statistics.median(verdicts), 3) if verdicts else None,
        "verdict_p90_s": round(verdicts[int(0.9 * (len(verdicts) - 1))], 3) if verdicts else None,
        "provider_s": round(provider, 2),
        # Verdicts of different operators overlap (parallel_ops), so this can exceed 1.
        "sandbox_share_of_generation": round(judged / gen_wall, 3) if gen_wall else None,
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    row = stats(args.run_dir)
    print(json.dumps(row, indent=None if args.json else 2))


if __name__ == "__main__":
    main()
