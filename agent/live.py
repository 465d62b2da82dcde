"""Seeing a run work: a rich live table on a terminal, plain lines elsewhere.

Contract: `RunView(console, live=..., quiet=...)` is fed every run event (`handle`, called from
worker threads through `RunLog.listeners`), the evaluator's per-operator results (`evaluated`)
and lines for the person (`say`). With `live=True` it shows one row per operator (status, round,
worker, tokens, cost, elapsed) between `start` and `stop`; otherwise it prints one plain line per
event (with `quiet=True` only operator-level lines). `final(result)` prints the closing table:
the evaluator's summary (`evaluator.reports.report.print_summary`) when the run evaluated, else the
generation outcomes.
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.table import Table
from rich.text import Text

from agent.budget import cost_text

STATUS_TEXT = {
    "queued": "queued",
    "running": "running",
    "kept": "kept",
    "not_kept": "not kept",
    "budget_stopped": "budget stop",
    "interrupted": "interrupted",
    "provider_stopped": "provider stop",
}
MAX_REASON_LINES = 4  # a syntax error: the message, the source line, the caret
STATUS_STYLE = {
    "kept": "green",
    "not_kept": "red",
    "budget_stopped": "yellow",
    "interrupted": "yellow",
    "provider_stopped": "yellow",
}


@dataclass
class OpRow:
    op: str
    status: str = "queued"
    round: int = 0
    max_rounds: int = 0
    active: set[int] | None = None
    winner: int | None = None
    tokens: int = 0
    cost_usd: float = 0.0
    cost_known: bool = True
    started: float | None = None
    ended: float | None = None
    earlier: bool = False

    def elapsed(self) -> str:
        if self.started is None:
            return ""
        end = self.ended if self.ended is not None else time.monotonic()
        return f"{end - self.started:.0f}s"


def _cost_text(cost: float, known: bool) -> str:
    return cost_text(cost, known)


class RunView:
    def __init__(self, console: Console, *, live: bool, quiet: bool = False) -> None:
        self.console = console
        self.live_mode = live
        self.quiet = quiet
        self.rows: dict[str, OpRow] = {}
        self._lock = threading.Lock()
        self._live: Live | None = None
        self._num_workers = 0
        self.judge_stats: Any = None  # () -> evaluator.evaluate.judge_stats(), for the caption

    # ------------------------------------------------------------------ lines

    def say(self, text: str) -> None:
        # Text(): paths and error messages must not be read as rich markup.
        self.console.print(Text(text), soft_wrap=True)

    def _line(self, text: str, *, detail: bool = False) -> None:
        if self.live_mode or (detail and self.quiet):
            return
        self.say(text)

    # ------------------------------------------------------------------ live table

    def start(self, ops: list[str], num_workers: int) -> None:
        with self._lock:
            self._num_workers = num_workers
            for op in ops:
                self.rows.setdefault(op, OpRow(op))
        if self.live_mode:
            self._live = Live(
                console=self.console,
                refresh_per_second=4,
                transient=False,
                get_renderable=self.table,
            )
            self._live.start()

    def stop(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def table(self) -> Table:
        table = Table(title="atenforge: writing kernels", expand=False)
        for name, justify in (
            ("operator", "left"),
            ("status", "left"),
            ("round", "right"),
            ("worker", "right"),
            ("tokens", "right"),
            ("cost", "right"),
            ("elapsed", "right"),
        ):
            table.add_column(name, justify=justify)
        with self._lock:
            rows = list(self.rows.values())
        for r in rows:
            status = STATUS_TEXT.get(r.status, r.status) + (" (earlier)" if r.earlier else "")
            if r.winner is not None:
                worker = f"w{r.winner}"
            elif r.status == "running":
                worker = f"{len(r.active or ())}/{self._num_workers} busy"
            else:
                worker = ""
            table.add_row(
                Text(r.op),
                Text(status, style=STATUS_STYLE.get(r.status, "")),
                f"{r.round}/{r.max_rounds}" if r.max_rounds else "",
                worker,
                f"{r.tokens:,}" if r.tokens else "",
                _cost_text(r.cost_usd, r.cost_known) if r.tokens else "",
                r.elapsed(),
            )
        if self.judge_stats is not None:
            from agent.judges_view import judges_caption

            table.caption = judges_caption(self.judge_stats()) or None
        return table

    # ------------------------------------------------------------------ events

    def handle(self, event: dict[str, Any]) -> None:
        kind = event.get("event")
        op = event.get("op")
        with self._lock:
            row = self.rows.setdefault(op, OpRow(op)) if op else None
            if kind == "op_start" and row is not None:
                row.status, row.started, row.active = "running", time.monotonic(), set()
                row.max_rounds = int(event.get("max_rounds") or 0)
            elif kind == "round_start" and row is not None:
                row.round = max(row.round, int(event.get("round") or 0))
                row.active = (row.active or set()) | {int(event.get("worker") or 0)}
            elif kind == "round_end" and row is not None:
                row.active = (row.active or set()) - {int(event.get("worker") or 0)}
                row.tokens += int(event.get("input_tokens") or 0) + int(
                    event.get("output_tokens") or 0
                )
                if event.get("cost_usd") is None:
                    row.cost_known = row.cost_known and not event.get("input_tokens")
                else:
                    row.cost_usd += float(event["cost_usd"])
                if event.get("outcome") == "passed":
                    row.winner = int(event.get("worker") or 0)
            elif kind == "op_done" and row is not None:
                row.status, row.ended = str(event.get("status")), time.monotonic()
                row.winner = event.get("worker") or row.winner
                row.active = set()
            elif kind == "op_decided_earlier" and row is not None:
                row.status, row.earlier = str(event.get("status")), True
        self._plain(event)

    def _plain(self, e: dict[str, Any]) -> None:
        kind, op = e.get("event"), e.get("op")
        if kind == "op_start":
            self._line(
                f"[{op}] start: {e.get('workers')} worker(s) x {e.get('max_rounds')} round(s), "
                f"{e.get('cases')} test case(s)",
                detail=True,
            )
        elif kind == "round_end":
            tests = ""
            if e.get("tests") is not None and e.get("outcome") != "cancelled":
                tests = f" ({e.get('passed')}/{e.get('tests')} tests"
                tests += f", {e['skipped']} skipped)" if e.get("skipped") else ")"
            reason = f": {_clip(e.get('reason'))}" if e.get("reason") else ""
            tokens = int(e.get("input_tokens") or 0) + int(e.get("output_tokens") or 0)
            self._line(
                f"[{op}] worker {e.get('worker')} round {e.get('round')}: "
                f"{e.get('outcome')}{tests}{reason} [{tokens} tokens]",
                detail=True,
            )
        elif kind == "op_done":
            where = f" -> {e.get('kernel_file')}" if e.get("kernel_file") else ""
            self._line(
                f"[{op}] {STATUS_TEXT.get(str(e.get('status')), e.get('status'))}: "
                f"{_first_line(e.get('reason'))}{where}"
            )
        elif kind == "op_decided_earlier":
            self._line(f"[{op}] decided earlier in this run folder: {e.get('status')}")
        elif kind == "speed_round_end":  # agent.speed
            speedup = e.get("speedup")
            timed = f" at {speedup:.3f}x" if isinstance(speedup, float) else ""
            reason = f": {_clip(e.get('reason'))}" if e.get("reason") else ""
            self._line(
                f"[{op}] worker {e.get('worker')} speed round {e.get('round')}: "
                f"{e.get('outcome')}{timed}{reason}",
                detail=True,
            )
        elif kind == "speed_done":
            before, after = e.get("speedup_before"), e.get("speedup_after")
            if isinstance(before, float) and isinstance(after, float):
                self._line(
                    f"[{op}] speed rounds: {before:.3f}x -> {after:.3f}x eager "
                    f"({e.get('rounds')} round(s), {e.get('stopped')})"
                )

    def evaluated(self, result: Any) -> None:
        """evaluator.evaluate.evaluate's progress callback: one OperatorResult.

        A kernel that would not import shows its whole (short) reason: for a syntax error that is
        the offending line and the caret under it."""
        reason = str(result.reason or "").strip() if str(result.status) != "passed" else ""
        lines = reason.splitlines()
        if not any(str(f).startswith("import_error") for f in result.flags):
            lines = lines[:1]
        head = f"[eval] {result.op}: {result.status} ({tests_text(result)})"
        self.say(head + (f": {lines[0]}" if lines else ""))
        for line in lines[1:MAX_REASON_LINES]:
            self.say(f"    {line}")

    # ------------------------------------------------------------------ the end

    def final(self, result: Any) -> None:
        """The closing table: the evaluation's summary, else what generation kept."""
        if result.report is not None:
            from evaluator.reports.report import print_summary

            print_summary(result.report, self.console)
        elif result.outcomes:
            table = Table(title="atenforge: generation")
            for name in ("operator", "status", "worker", "round", "rounds", "tokens", "reason"):
                table.add_column(name)
            for o in result.outcomes:
                table.add_row(
                    Text(o.op),
                    Text(STATUS_TEXT.get(o.status, o.status), style=STATUS_STYLE.get(o.status, "")),
                    "" if o.worker is None else str(o.worker),
                    "" if o.round is None else str(o.round),
                    str(o.rounds),
                    f"{o.input_tokens + o.output_tokens:,}",
                    Text(_first_line(o.reason)[:80]),
                )
            self.console.print(table)
        b = result.budget
        if b.get("calls"):
            cost = _cost_text(b["cost_usd"], b["cost_known"])
            self.say(
                f"provider calls: {b['calls']} in this session; run total {b['tokens']:,} tokens, "
                f"estimated cost {cost}"
            )
        self.say(f"run folder: {result.run_dir}")


def tests_text(result: Any) -> str:
    """`5/5 tests`, with the cases that could not run here: `5/5 tests, 5 skipped on CPU`."""
    text = f"{result.passed}/{result.tests} tests"
    skipped = [t for t in result.results if t.skipped]
    if not skipped:
        return text
    on_cpu = all(any(str(f).startswith("skipped_size") for f in t.flags) for t in skipped)
    return f"{text}, {len(skipped)} skipped" + (" on CPU" if on_cpu else "")


def _clip(text: Any, limit: int = 160) -> str:
    """The first line of a reason, cut to `limit` characters (the full text is in the run folder)."""
    line = _first_line(text)
    return line if len(line) <= limit else line[: limit - 1] + "…"


def _first_line(text: Any) -> str:
    lines = str(text or "").strip().splitlines()
    return lines[0] if lines else ""
