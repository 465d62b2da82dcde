"""A run folder read into plain data for the HTML report: one loader, nothing written.

Contract: `load_run(run_dir) -> RunView` reads `run.json`, `events.jsonl`, the evaluation results
and every round under `ops/`; any of them may be missing or cut short (an interrupted or crashed
run), and what is there is shown. The evaluation results are the object form from
`atenforge_results.json`, or from `full_results.json` when that file holds an object (older runs;
a BackendBench-style flat list under that name is not ours and is ignored).

Round texts (prompt, answer, candidate, feedback) are read when the renderer asks for them
(`RoundView.texts()`), so a large run is read once, round by round.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from agent.runlog import RunLog, read_json
from evaluator.reports.runfolder import read_events, results_file

# What the page shows of a round's own files; texts longer than this are cut, and say so.
MAX_TEXT_CHARS = 60_000


@dataclass
class RoundView:
    """One round of one worker: its meta.json, its timing from the event log, its files."""

    op: str
    worker: int
    round: int
    path: Path
    meta: dict[str, Any]
    started: float | None = None  # seconds since the run started (events.jsonl)
    ended: float | None = None

    @property
    def outcome(self) -> str:
        return str(self.meta.get("outcome") or "unfinished")

    @property
    def tokens(self) -> tuple[int, int]:
        return _int(self.meta.get("input_tokens")), _int(self.meta.get("output_tokens"))

    def read(self, name: str) -> str:
        try:
            text = (self.path / name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""
        if len(text) > MAX_TEXT_CHARS:
            cut = len(text) - MAX_TEXT_CHARS
            text = text[:MAX_TEXT_CHARS] + f"\n… {cut:,} more characters in {self.path / name}"
        return text

    def texts(self) -> dict[str, str]:
        """prompt (the last message sent), system prompt, answer, candidate, feedback, verdict."""
        messages = read_json(self.path / "messages.json")
        messages = messages if isinstance(messages, list) else []
        system = next(
            (
                str(m.get("content", ""))
                for m in messages
                if isinstance(m, dict) and m.get("role") == "system"
            ),
            "",
        )
        last = messages[-1] if messages and isinstance(messages[-1], dict) else {}
        verdict = read_json(self.path / "verdict.json")
        return {
            "system": system[:MAX_TEXT_CHARS],
            "prompt": str(last.get("content", ""))[:MAX_TEXT_CHARS],
            "answer": self.read("response.md"),
            "candidate": self.read("candidate.py"),
            "feedback": self.read("feedback.md") or str(self.meta.get("error") or ""),
            "verdict": _verdict_line(verdict) if isinstance(verdict, dict) else "",
        }


@dataclass
class OpView:
    """One selected operator: its evaluation result, its decision and its rounds."""

    op: str
    result: dict[str, Any] | None = None
    decision: dict[str, Any] | None = None
    rounds: list[RoundView] = field(default_factory=list)
    elapsed_s: float | None = None  # generation wall time (op_done event)

    @property
    def status(self) -> str:
        if self.result:
            return str(self.result.get("status", "?"))
        if self.decision:
            return "kept" if self.decision.get("status") == "kept" else "not kept"
        return "not evaluated"

    @property
    def tokens(self) -> tuple[int, int]:
        ins = sum(r.tokens[0] for r in self.rounds)
        outs = sum(r.tokens[1] for r in self.rounds)
        return ins, outs

    @property
    def cost_usd(self) -> float:
        return sum(_float(r.meta.get("cost_usd")) or 0.0 for r in self.rounds)

    @property
    def cost_known(self) -> bool:
        return all(r.meta.get("cost_usd") is not None for r in self.rounds if r.meta)

    def timed_cases(self) -> list[dict[str, Any]]:
        """The test cases with a measured speedup (none on the CPU)."""
        results = (self.result or {}).get("results") or []
        return [t for t in results if _positive(t.get("speedup")) is not None]

    def speedup(self) -> float | None:
        return _positive((self.result or {}).get("geomean_speedup"))

    def bandwidth_share(self) -> float | None:
        """Bandwidth floor / kernel time on the largest timed case (share of measured HBM peak)."""
        timed = [t for t in self.timed_cases() if _positive(t.get("floor_ms")) is not None]
        if not timed:
            return None
        largest = max(timed, key=lambda t: float(t["floor_ms"]))
        kernel = _positive(largest.get("kernel_ms"))
        return float(largest["floor_ms"]) / kernel if kernel else None


@dataclass
class RunView:
    run_dir: Path
    run: dict[str, Any]
    results: dict[str, Any]
    ops: list[OpView]
    excluded: list[tuple[str, str]]
    events: list[dict[str, Any]]

    @property
    def scores(self) -> dict[str, Any] | None:
        return self.results.get("scores") or self.run.get("scores")

    @property
    def device(self) -> str:
        return str(self.results.get("device") or self.run.get("device") or "")

    @property
    def measured(self) -> bool:
        return any(op.timed_cases() for op in self.ops)

    @property
    def max_round(self) -> int:
        return max((r.round for op in self.ops for r in op.rounds), default=0)


def load_results(run_dir: Path) -> dict[str, Any]:
    """The evaluation's results object, from the first file that holds one ({} when none does)."""
    data = read_json(results_file(run_dir))
    return data if isinstance(data, dict) else {}


def load_run(run_dir: str | Path) -> RunView:
    run_dir = Path(run_dir)
    run = read_json(run_dir / "run.json")
    run = run if isinstance(run, dict) else {}
    results = load_results(run_dir)
    events = read_events(run_dir)
    by_op = {o.get("op"): o for o in results.get("operators") or [] if isinstance(o, dict)}

    names = [str(op) for op in run.get("ops") or []]
    names += [op for op in by_op if op not in names]
    runlog = RunLog(run_dir)
    names += [op for op in _ops_on_disk(run_dir) if op not in names]

    t0 = _start_time(events)
    spans = _round_spans(events, t0)
    elapsed = {
        e.get("op"): _float(e.get("elapsed_s")) for e in events if e.get("event") == "op_done"
    }
    ops = []
    for name in names:
        view = OpView(op=name, result=by_op.get(name), decision=runlog.read_decision(name))
        view.elapsed_s = elapsed.get(name)
        for worker, path, meta in runlog.all_rounds(name):
            number = int(path.name.removeprefix("round_"))
            start, end = spans.get((name, worker, number), (None, None))
            view.rounds.append(
                RoundView(
                    name, worker, number, path, meta if isinstance(meta, dict) else {}, start, end
                )
            )
        ops.append(view)
    return RunView(
        run_dir=run_dir,
        run=run,
        results=results,
        ops=ops,
        excluded=_excluded(results, run),
        events=events,
    )


def _ops_on_disk(run_dir: Path) -> list[str]:
    """Operators with a folder under ops/ that neither run.json nor the results name."""
    found = []
    for folder in sorted((run_dir / "ops").glob("*")):
        rounds = sorted(folder.glob("worker_*/round_*/meta.json"))
        meta = read_json(rounds[0]) if rounds else None
        op = meta.get("op") if isinstance(meta, dict) else None
        if op:
            found.append(str(op))
    return found


def _excluded(results: dict[str, Any], run: dict[str, Any]) -> list[tuple[str, str]]:
    """(op, reason) pairs, from the results (objects) or run.json (pairs)."""
    out = []
    for entry in results.get("excluded") or run.get("excluded") or []:
        if isinstance(entry, dict):
            out.append((str(entry.get("op", "?")), str(entry.get("reason", ""))))
        elif isinstance(entry, list | tuple) and entry:
            out.append((str(entry[0]), str(entry[1]) if len(entry) > 1 else ""))
    return out


def _parse_ts(value: Any) -> float | None:
    try:
        return datetime.fromisoformat(str(value)).timestamp()
    except ValueError:
        return None


def _start_time(events: list[dict[str, Any]]) -> float | None:
    for event in events:
        ts = _parse_ts(event.get("ts"))
        if ts is not None:
            return ts
    return None


def _round_spans(
    events: list[dict[str, Any]], t0: float | None
) -> dict[tuple[str, int, int], tuple[float | None, float | None]]:
    """(op, worker, round) -> (start, end) in seconds since t0, the last attempt of each round."""
    if t0 is None:
        return {}
    spans: dict[tuple[str, int, int], tuple[float | None, float | None]] = {}
    for event in events:
        kind = event.get("event")
        if kind not in ("round_start", "round_end"):
            continue
        ts = _parse_ts(event.get("ts"))
        try:
            key = (str(event["op"]), int(event["worker"]), int(event["round"]))
        except (KeyError, TypeError, ValueError):
            continue
        if ts is None:
            continue
        start, end = spans.get(key, (None, None))
        if kind == "round_start":
            spans[key] = (ts - t0, None)
        else:
            spans[key] = (start, ts - t0)
    return spans


def _verdict_line(verdict: dict[str, Any]) -> str:
    status = verdict.get("status", "?")
    tests = f"{verdict.get('passed', 0)}/{verdict.get('tests', 0)} tests"
    flags = ", ".join(str(f) for f in verdict.get("flags") or [])
    parts = [f"{status}: {tests}"]
    if flags:
        parts.append(f"flags: {flags}")
    if verdict.get("reason"):
        parts.append(str(verdict["reason"]))
    return "\n".join(parts)


def _int(value: Any) -> int:
    try:
        return int(value or 0)
    except (TypeError, ValueError):
        return 0


def _float(value: Any) -> float | None:
    if isinstance(value, bool):
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _positive(value: Any) -> float | None:
    number = _float(value)
    return number if number is not None and number > 0 else None
