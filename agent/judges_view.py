"""The judges as a person sees them: one line per pool (device, busy/idle, verdicts per minute).

Contract: `judges_line(summaries)` and `judges_caption(summaries)` take
`evaluator.evaluate.judge_stats()` (a list of `JudgePool.summary()` dicts) and return text: the
line the run prints at its end, and the caption under the live table while it runs.
"""

from __future__ import annotations

from typing import Any


def _judge_text(j: dict[str, Any]) -> str:
    if j.get("lost"):
        state = "lost"
    elif j.get("busy"):
        state = f"busy {j['busy']}/{j['slots']}"
    else:
        state = "idle"
    return f"{j['judge']} {state} {j['verdicts']} ({j['verdicts_per_min']:g}/min)"


def judges_caption(summaries: list[dict[str, Any]]) -> str:
    """`judges: cpu:0 busy 2/2 5 (3.1/min) · cpu:1 idle 4 (2.5/min)`; empty before any pool."""
    parts = [_judge_text(j) for s in summaries for j in s.get("judges", [])]
    return "judges: " + " · ".join(parts) if parts else ""


def judges_line(summaries: list[dict[str, Any]]) -> str:
    """`judges: 2 (local cpu), 16 verdicts, 9.5/min, utilisation 41%; lost: ...`"""
    texts = []
    for s in summaries:
        lost = [j["judge"] for j in s.get("judges", []) if j.get("lost")]
        text = (
            f"{s['num_judges']} ({s['executor']} {s['device']}), {s['verdicts']} verdicts, "
            f"{s['verdicts_per_min']:g}/min, utilisation {100 * s['utilisation']:.0f}%"
        )
        texts.append(text + (f", lost: {', '.join(lost)}" if lost else ""))
    return "judges: " + "; ".join(texts)
