"""SVG charts for the HTML run report, drawn as plain markup (no plotting library).

Contract: each function returns one `<svg>` element as a `markupsafe.Markup` string, every text
in it escaped. Colours are CSS classes (`pass`, `fail`, `axis`, ...) that the page's stylesheet
sets for light and dark mode, so a chart follows the reader's colour scheme.
- `speedup_chart(rows)`: per operator a row of its cases' speedups on a log axis with the 1.0×
  line, and the operator's geomean as a bar tip.
- `pass_rate_chart(points, max_round)`: share of operators solved by round r and the mean test
  pass rate of round r's candidates.
- `timeline(rounds)`: one lane per worker, one box per round (in run time when the event log
  has it, else one slot per round), each a link to that round's details.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from markupsafe import Markup, escape

_TICKS = (0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0, 200.0, 500.0)


def _svg(width: float, height: float, body: list[str], label: str) -> Markup:
    head = (
        f'<svg xmlns="http://www.w3.org/2000/svg" class="chart" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" role="img" aria-label="{escape(label)}">'
    )
    return Markup(head + "".join(body) + "</svg>")


def _fmt_x(value: float) -> str:
    return f"{value:g}×"


@dataclass
class SpeedupRow:
    op: str
    geomean: float | None
    cases: list[tuple[str, float]]  # (args, speedup)


def speedup_chart(rows: Sequence[SpeedupRow], width: int = 760) -> Markup:
    """Log-scale speedups per operator and case, the 1.0× line dashed."""
    values = [s for r in rows for _, s in r.cases] + [r.geomean for r in rows if r.geomean]
    lo = max(min(min(values, default=1.0), 0.5) / 1.25, _TICKS[0])
    hi = min(max(max(values, default=1.0), 2.0) * 1.25, _TICKS[-1])
    label_w, pad, row_h, top = 210, 16, 16, 22
    plot_w = width - label_w - pad
    height = top + row_h * len(rows) + 8

    def x(v: float) -> float:
        v = min(max(v, lo), hi)
        return label_w + plot_w * (math.log(v) - math.log(lo)) / (math.log(hi) - math.log(lo))

    body = []
    for tick in _TICKS:
        if lo <= tick <= hi:
            body.append(
                f'<line class="grid" x1="{x(tick):.1f}" x2="{x(tick):.1f}" y1="{top - 4}" y2="{height - 6}"/>'
                f'<text class="tick" x="{x(tick):.1f}" y="{top - 8}" text-anchor="middle">{_fmt_x(tick)}</text>'
            )
    body.append(
        f'<line class="one" x1="{x(1.0):.1f}" x2="{x(1.0):.1f}" y1="{top - 4}" y2="{height - 6}"/>'
    )
    for i, row in enumerate(rows):
        y = top + i * row_h + row_h / 2
        body.append(
            f'<text class="label" x="{label_w - 8}" y="{y + 4:.1f}" text-anchor="end">{escape(row.op)}</text>'
        )
        if row.geomean:
            cls = "fast" if row.geomean >= 1.0 else "slow"
            x0, x1 = sorted((x(1.0), x(row.geomean)))
            body.append(
                f'<rect class="bar {cls}" x="{x0:.1f}" y="{y - 5:.1f}" width="{max(x1 - x0, 1):.1f}" height="10">'
                f"<title>{escape(row.op)}: geomean {row.geomean:.3g}×</title></rect>"
            )
        for args, speedup in row.cases:
            body.append(
                f'<circle class="case {"fast" if speedup >= 1.0 else "slow"}" '
                f'cx="{x(speedup):.1f}" cy="{y:.1f}" r="3">'
                f"<title>{escape(row.op)} {escape(args)}: {speedup:.3g}×</title></circle>"
            )
    return _svg(width, height, body, "speedup per operator and case, log scale")


def pass_rate_chart(
    solved: Sequence[float], mean_pass: Sequence[float | None], width: int = 520, height: int = 230
) -> Markup:
    """Two lines over rounds 1..R: share of operators solved by round r, mean test pass rate."""
    rounds = len(solved)
    left, right, top, bottom = 46, 16, 14, 40
    plot_w, plot_h = width - left - right, height - top - bottom

    def x(r: int) -> float:
        return left + (plot_w * (r - 1) / (rounds - 1) if rounds > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h * (1 - v)

    body = []
    for frac in (0.0, 0.25, 0.5, 0.75, 1.0):
        body.append(
            f'<line class="grid" x1="{left}" x2="{width - right}" y1="{y(frac):.1f}" y2="{y(frac):.1f}"/>'
            f'<text class="tick" x="{left - 6}" y="{y(frac) + 4:.1f}" text-anchor="end">{frac:.0%}</text>'
        )
    for r in range(1, rounds + 1):
        body.append(
            f'<text class="tick" x="{x(r):.1f}" y="{height - bottom + 16}" text-anchor="middle">{r}</text>'
        )
    body.append(
        f'<text class="tick" x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">round</text>'
    )
    series = [  # the solved line is drawn last, on top
        ("tests", "mean share of tests passed by this round's candidates", list(mean_pass)),
        ("solved", "operators solved by this round", list(solved)),
    ]
    for cls, name, values in series:
        points = [(r + 1, v) for r, v in enumerate(values) if v is not None]
        if len(points) > 1:
            path = " ".join(f"{x(r):.1f},{y(v):.1f}" for r, v in points)
            body.append(f'<polyline class="line {cls}" points="{path}"/>')
        for r, v in points:
            body.append(
                f'<circle class="dot {cls}" cx="{x(r):.1f}" cy="{y(v):.1f}" r="3.5">'
                f"<title>round {r}: {escape(name)} {v:.0%}</title></circle>"
            )
    return _svg(width, height, body, "pass rate against round number")


@dataclass
class TimelineBox:
    worker: int
    round: int
    outcome: str
    start: float | None
    end: float | None
    anchor: str  # id of the round's details element
    title: str


def timeline(boxes: Sequence[TimelineBox], width: int = 760) -> Markup:
    """Workers' rounds in time (seconds since the run started) or in round slots."""
    workers = sorted({b.worker for b in boxes})
    timed = all(b.start is not None and b.end is not None for b in boxes)
    label_w, pad, lane_h, top = 40, 10, 20, 4
    plot_w = width - label_w - pad
    height = top + lane_h * len(workers) + (18 if timed else 4)
    if timed:
        t0 = min(b.start for b in boxes)  # type: ignore[type-var]
        t1 = max(b.end for b in boxes)  # type: ignore[type-var]
        span = max(t1 - t0, 1e-6)
    slots = max((b.round for b in boxes), default=1)
    body = []
    for lane, worker in enumerate(workers):
        y = top + lane * lane_h
        body.append(
            f'<text class="label" x="{label_w - 6}" y="{y + 14}" text-anchor="end">w{worker}</text>'
        )
        for b in (b for b in boxes if b.worker == worker):
            if timed:
                x0 = label_w + plot_w * (b.start - t0) / span  # type: ignore[operator]
                w = max(plot_w * (b.end - b.start) / span, 3.0)  # type: ignore[operator]
            else:
                x0 = label_w + plot_w * (b.round - 1) / slots
                w = plot_w / slots - 3
            text = (
                f'<text class="boxlabel" x="{x0 + 4:.1f}" y="{y + 14}">r{b.round}</text>'
                if w > 22
                else ""
            )
            body.append(
                f'<a href="#{escape(b.anchor)}" class="jump" data-target="{escape(b.anchor)}">'
                f'<rect class="box o-{escape(b.outcome)}" x="{x0:.1f}" y="{y + 2}" width="{w:.1f}" height="{lane_h - 4}" rx="3">'
                f"<title>{escape(b.title)}</title></rect>{text}</a>"
            )
    if timed:
        y = top + lane_h * len(workers) + 13
        body.append(f'<text class="tick" x="{label_w}" y="{y}">{t0:.1f} s</text>')
        body.append(
            f'<text class="tick" x="{width - pad}" y="{y}" text-anchor="end">{t1:.1f} s</text>'
        )
    return _svg(width, height, body, "rounds of each worker over time")
