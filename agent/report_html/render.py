"""Render a loaded run (`model.RunView`) into one self-contained HTML page.

Contract: `render_html(view) -> str` is the whole page: inline CSS, inline SVG, a small inline
script, no network reference. Everything taken from the run folder is untrusted text (model
answers, kernel output, error messages): the page template escapes it (jinja2 autoescape), and
each round's long texts travel as JSON inside `<script type="application/json">` with `<`, `>`
and `&` written as \\u escapes, which the script puts into the page with `textContent` only
when the reader opens that round. So the browser parses little until asked, and no text from the
run is ever parsed as markup.
"""

from __future__ import annotations

import base64
import difflib
import gzip
import hashlib
import json
import statistics
from importlib.resources import files
from typing import Any

from jinja2 import Environment, PackageLoader, StrictUndefined, select_autoescape
from markupsafe import Markup

from agent.report_html import svg
from agent.report_html.model import OpView, RoundView, RunView
from evaluator.naming import op_to_folder

SOLVED_OUTCOMES = ("passed", "passed_late")
SCORE_ROWS = [
    ("correctness_score", "correctness", "operators whose every test passed"),
    ("mean_pass_rate", "mean pass rate", "mean share of tests passed per operator"),
    (
        "performance_score",
        "performance",
        "geomean speedup; an operator that did not pass counts 1.0",
    ),
    ("fast_0", "fast_0", "passed, with a measured speedup"),
    ("fast_1.0", "fast_1.0", "passed and faster than eager"),
    ("fast_1.2", "fast_1.2", "passed and faster than 1.2× eager"),
]
# An answer's code block that is the candidate verbatim is shown once, as the candidate.
MIN_DEDUPED_CHARS = 200
CANDIDATE_MARK = "[… the code block here is the candidate, shown below …]"
MAX_NOTE_CHARS = 600  # a test's error as the case table shows it (the full text is in the JSON)


def _env() -> Environment:
    env = Environment(
        loader=PackageLoader("agent.report_html", "templates"),
        extensions=["jinja2.ext.loopcontrols"],
        autoescape=select_autoescape(default=True, default_for_string=True),
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.filters["num"] = _num
    env.filters["secs"] = _secs
    env.filters["pct"] = _pct
    return env


def _asset(name: str) -> Markup:
    # Our own static files, inlined as they are: they are not data from the run.
    return Markup(files("agent.report_html").joinpath("static", name).read_text(encoding="utf-8"))


def _num(value: Any) -> str:
    return f"{value:,}" if isinstance(value, int) else str(value)


def _secs(value: Any) -> str:
    if not isinstance(value, int | float):
        return "—"
    if value >= 120:
        return f"{value / 60:.1f} min"
    return f"{value:.1f} s"


def _pct(value: Any) -> str:
    return f"{value:.1%}" if isinstance(value, int | float) else "—"


def round_anchor(op: str, worker: int, round_: int) -> str:
    return f"r-{op_to_folder(op)}-w{worker}-r{round_}"


def round_payload(
    this: dict[str, str], previous: dict[str, str] | None, label: str
) -> dict[str, Any]:
    """What a round's details element is filled with when opened."""
    answer = this["answer"]
    candidate = this["candidate"].strip()
    if len(candidate) >= MIN_DEDUPED_CHARS and candidate in answer:
        answer = answer.replace(candidate, CANDIDATE_MARK)
    diff = ""
    if previous is not None and this["candidate"]:
        diff = "".join(
            difflib.unified_diff(
                previous["candidate"].splitlines(keepends=True),
                this["candidate"].splitlines(keepends=True),
                fromfile=f"previous round ({label})",
                tofile="this round",
                n=3,
            )
        )
    return {
        "prompt": this["prompt"],
        "answer": answer,
        "candidate": this["candidate"],
        "diff": diff,
        "has_previous": previous is not None,
        "verdict": this["verdict"],
        "feedback": this["feedback"],
    }


def pack_rounds(payloads: list[dict[str, Any]]) -> str:
    """An operator's round texts as base64 of gzipped JSON: a fraction of the size (rounds of one
    worker repeat most of their text), and only base64 letters inside the page's markup."""
    data = json.dumps(payloads, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    return base64.b64encode(gzip.compress(data, compresslevel=6, mtime=0)).decode("ascii")


def unpack_rounds(packed: str) -> list[dict[str, Any]]:
    """The inverse of `pack_rounds` (what the page's script does in the browser)."""
    return json.loads(gzip.decompress(base64.b64decode(packed)).decode("utf-8"))


def _round_title(r: RoundView) -> str:
    m = r.meta
    tests = f", {m.get('passed')}/{m.get('tests')} tests" if m.get("tests") is not None else ""
    return f"worker {r.worker} round {r.round}: {r.outcome}{tests}"


def _op_context(op: OpView) -> dict[str, Any]:
    rounds = []
    payloads = []
    # per worker: its latest earlier round that had a candidate (a no-code round has none)
    previous: dict[int, tuple[int, dict[str, str]]] = {}
    systems: list[str] = []
    for r in sorted(op.rounds, key=lambda r: (r.worker, r.round)):
        texts = r.texts()
        if texts["system"] and texts["system"] not in systems:
            systems.append(texts["system"])
        prev_round, prev = previous.get(r.worker, (0, None))
        label = f"round {prev_round}"
        if texts["candidate"]:
            previous[r.worker] = (r.round, texts)
        ins, outs = r.tokens
        rounds.append(
            {
                "anchor": round_anchor(op.op, r.worker, r.round),
                "worker": r.worker,
                "round": r.round,
                "outcome": r.outcome,
                "title": _round_title(r),
                "tokens_in": ins,
                "tokens_out": outs,
                "latency_s": r.meta.get("latency_s"),
                "verdict_s": r.meta.get("verdict_s"),
                "cost_usd": r.meta.get("cost_usd"),
                "attempts": r.meta.get("attempts"),
                "model": r.meta.get("model"),
                "index": len(payloads),
            }
        )
        payloads.append(round_payload(texts, prev, label))
    boxes = [
        svg.TimelineBox(
            r.worker,
            r.round,
            r.outcome,
            r.started,
            r.ended,
            round_anchor(op.op, r.worker, r.round),
            _round_title(r),
        )
        for r in op.rounds
    ]
    return {
        "rounds": rounds,
        "packed": pack_rounds(payloads) if payloads else "",
        "timeline": svg.timeline(boxes) if boxes else None,
        "systems": systems,
    }


def _decision_text(op: OpView) -> str:
    d = op.decision
    if not d:
        return "undecided" if op.rounds else ""
    if d.get("status") == "kept":
        return f"kept: w{d.get('worker')} r{d.get('round')}"
    return str(d.get("status", "?"))


def _number(value: Any) -> float | None:
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def _cases(result: dict[str, Any]) -> list[dict[str, Any]]:
    """The evaluation's test cases of one operator, as the page lists them."""
    rows = []
    for t in result.get("results") or []:
        if not isinstance(t, dict):
            continue
        error = ": ".join(str(t[k]) for k in ("error_type", "error_msg") if t.get(k))
        note = " · ".join(x for x in (", ".join(map(str, t.get("flags") or [])), error) if x)
        rows.append(
            {
                "args": str(t.get("args", "")),
                "result": "skipped"
                if t.get("skipped")
                else "passed"
                if t.get("passed")
                else "failed",
                "err": _number(t.get("max_abs_error")),
                "speedup": _number(t.get("speedup")),
                "kernel_ms": _number(t.get("kernel_ms")),
                "eager_ms": _number(t.get("eager_ms")),
                "note": note if len(note) <= MAX_NOTE_CHARS else note[:MAX_NOTE_CHARS] + " …",
            }
        )
    return rows


def _op_row(op: OpView) -> dict[str, Any]:
    result = op.result or {}
    ins, outs = op.tokens
    return {
        "op": op.op,
        "anchor": f"op-{op_to_folder(op.op)}",
        "status": op.status,
        "decision": _decision_text(op),
        "flags": [str(f) for f in result.get("flags") or []],
        "passed": result.get("passed"),
        "tests": result.get("tests"),
        "pass_rate": (result.get("passed") or 0) / result["tests"] if result.get("tests") else None,
        "speedup": op.speedup(),
        "bandwidth": op.bandwidth_share(),
        "num_rounds": len(op.rounds),
        "tokens_in": ins,
        "tokens_out": outs,
        "cost_usd": op.cost_usd if op.rounds else None,
        "cost_known": op.cost_known,
        "gen_s": op.elapsed_s,
        "eval_s": result.get("wall_s"),
        "reason": str(result.get("reason") or (op.decision or {}).get("reason") or ""),
        "cases": _cases(result),
    }


def _pass_rate_series(view: RunView) -> tuple[list[float], list[float | None]]:
    rounds = view.max_round
    n = len(view.ops) or 1
    solved, mean_pass = [], []
    for r in range(1, rounds + 1):
        done = sum(
            1
            for op in view.ops
            if any(x.round <= r and x.outcome in SOLVED_OUTCOMES for x in op.rounds)
        )
        solved.append(done / n)
        rates = [
            (x.meta.get("passed") or 0) / x.meta["tests"]
            for op in view.ops
            for x in op.rounds
            if x.round == r and x.meta.get("tests")
        ]
        mean_pass.append(sum(rates) / len(rates) if rates else None)
    return solved, mean_pass


def _calls(view: RunView) -> dict[str, Any]:
    calls = [r for op in view.ops for r in op.rounds if r.meta]
    latencies = [
        float(r.meta["latency_s"])
        for r in calls
        if isinstance(r.meta.get("latency_s"), int | float)
    ]
    by_model: dict[str, dict[str, Any]] = {}
    for r in calls:
        key = str(r.meta.get("model") or "?")
        row = by_model.setdefault(
            key, {"model": key, "calls": 0, "in": 0, "out": 0, "cost": 0.0, "retries": 0}
        )
        row["calls"] += 1
        row["in"] += r.tokens[0]
        row["out"] += r.tokens[1]
        row["cost"] += float(r.meta.get("cost_usd") or 0.0)
        row["retries"] += max(int(r.meta.get("attempts") or 1) - 1, 0)
    return {
        "count": len(calls),
        "median_latency_s": statistics.median(latencies) if latencies else None,
        "max_latency_s": max(latencies) if latencies else None,
        "by_model": sorted(by_model.values(), key=lambda row: -row["calls"]),
        "rows": [
            {
                "op": r.op,
                "anchor": round_anchor(r.op, r.worker, r.round),
                "worker": r.worker,
                "round": r.round,
                "model": r.meta.get("model") or "",
                "in": r.tokens[0],
                "out": r.tokens[1],
                "latency_s": r.meta.get("latency_s"),
                "cost_usd": r.meta.get("cost_usd"),
                "attempts": r.meta.get("attempts"),
                "outcome": r.outcome,
            }
            for r in calls
        ],
    }


def _speedup_rows(view: RunView) -> list[svg.SpeedupRow]:
    rows = []
    for op in view.ops:
        cases = [(str(t.get("args", "")), float(t["speedup"])) for t in op.timed_cases()]
        if cases:
            rows.append(svg.SpeedupRow(op.op, op.speedup(), cases))
    return rows


def render_html(view: RunView) -> str:
    run = view.run
    scores = view.scores or {}
    provider = run.get("provider") or {}
    env = run.get("environment") or (view.results.get("run") or {}).get("environment") or {}
    budget = run.get("budget") or {}
    speedups = _speedup_rows(view)
    solved, mean_pass = _pass_rate_series(view)
    op_rows = [_op_row(op) for op in view.ops]
    max_tokens = max((r["tokens_in"] + r["tokens_out"] for r in op_rows), default=0)
    ops = [{**row, **_op_context(op)} for row, op in zip(op_rows, view.ops, strict=True)]
    systems = list(dict.fromkeys(text for o in ops for text in o["systems"]))
    js = _asset("report.js")
    context = {
        "title": f"atenforge run {view.run_dir.name}",
        "run_dir": str(view.run_dir),
        "run": run,
        "status": run.get("status") or ("evaluated" if view.results else "?"),
        "mode": run.get("mode") or (view.results.get("run") or {}).get("kind") or "",
        "command": run.get("command") or "",
        "provider": provider,
        "device": view.device,
        "gpu": env.get("gpu") or "",
        "versions": {k: env.get(k) for k in ("torch", "triton", "python", "project") if env.get(k)},
        "started": run.get("started_at") or (view.results.get("run") or {}).get("started") or "",
        "ended": run.get("ended_at") or (view.results.get("run") or {}).get("finished") or "",
        "wall_s": run.get("wall_s"),
        "budget": budget,
        "scores": scores,
        "score_rows": SCORE_ROWS,
        "status_counts": [
            (s, scores.get(f"num_{s}", 0))
            for s in ("passed", "failed", "rejected", "error", "missing", "skipped")
        ],
        "measured": view.measured,
        "speedup_chart": svg.speedup_chart(speedups) if speedups else None,
        "pass_chart": svg.pass_rate_chart(solved, mean_pass) if solved else None,
        "ops": ops,
        "max_tokens": max_tokens,
        "calls": _calls(view),
        "system": systems[0] if systems else "",
        "same_system": len(systems) == 1,
        "excluded": view.excluded,
        "notes": [str(n) for n in view.results.get("notes") or []],
        "css": _asset("report.css"),
        "js": js,
        "js_hash": base64.b64encode(hashlib.sha256(js.encode("utf-8")).digest()).decode("ascii"),
    }
    return _env().get_template("report.html.j2").render(**context)
