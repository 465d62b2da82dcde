"""The agent's side of a run folder: every round on disk as it happens, and read back.

Layout (the replay provider and `python -m agent.logs` read it):
    run_dir/run.json                      command line, resolved config, environment, start/end, status
    run_dir/config.json                   the resolved RunConfig (a run can be redone from it)
    run_dir/events.jsonl                  append-only events (evaluator.reports.runfolder.EventLog)
    run_dir/ops/<folder>/worker_<w>/round_<r>/
        messages.json   the conversation sent (rendered prompts)    response.md  the raw answer
        candidate.py    the extracted kernel                         verdict.json OperatorResult.to_json()
        feedback.md     what went back to the model                  meta.json    model, tokens, latency,
                                                                                  attempts, cost_usd, error, outcome
    run_dir/ops/<folder>/decision.json    written once an operator is decided (kept or not kept)
    run_dir/archive/<folder>/             a kernel that was in the kernels dir before this run kept a new one

`meta.json` is written last in a round: a round directory without it was cut short (interrupt,
crash) and `--resume` redoes it. Every write is atomic (evaluator.reports.runfolder.write_text/write_json).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

# The round outcomes are named in agent.messages; the worker and orchestrator also read them here.
from agent.messages import (  # noqa: F401
    CANCELLED,
    FAILED,
    FINISHED_OUTCOMES,
    NO_CODE,
    PASSED,
    PASSED_NOT_KEPT,
    PROVIDER_ERROR,
    UNTESTABLE,
    Message,
)
from evaluator.naming import op_to_folder
from evaluator.reports.runfolder import EventLog, read_events, write_json, write_text
from evaluator.results import OperatorResult

log = logging.getLogger(__name__)

RUN_FILE = "run.json"
CONFIG_FILE = "config.json"
DECISION_FILE = "decision.json"
META_FILE = "meta.json"

# Round outcomes (meta.json["outcome"], the round_end event) are defined in agent.messages.


def read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or unreadable (a run cut short)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


@dataclass
class RoundRecord:
    """One finished round read back from disk (for resume and `agent.logs`)."""

    round: int
    path: Path
    meta: dict[str, Any]

    def text(self, name: str) -> str | None:
        try:
            return (self.path / name).read_text(encoding="utf-8")
        except OSError:
            return None

    def messages(self) -> list[Message]:
        data = read_json(self.path / "messages.json") or []
        return [Message(role=m["role"], content=m["content"]) for m in data]

    def verdict(self) -> dict[str, Any] | None:
        return read_json(self.path / "verdict.json")


class RunLog:
    """Writes and reads one run folder. Thread-safe: every file has one writer (its worker)."""

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.events = EventLog(self.run_dir)
        self.listeners: list[Callable[[dict[str, Any]], None]] = []

    # ------------------------------------------------------------------ events

    def emit(self, event: str, **fields: Any) -> dict[str, Any]:
        """Append an event to events.jsonl, then tell the listeners (live view, console)."""
        record = self.events.append({"event": event, **fields})
        for listener in list(self.listeners):
            try:
                listener(record)
            except Exception:  # a display bug must never stop a worker
                log.exception("event listener failed on %s", event)
        return record

    # ------------------------------------------------------------------ run files

    def write_run_json(self, data: dict[str, Any]) -> None:
        write_json(self.run_dir / RUN_FILE, data)

    def update_run_json(self, **fields: Any) -> dict[str, Any]:
        """Merge `fields` into run.json (whoever else wrote keys there keeps them)."""
        data = read_json(self.run_dir / RUN_FILE) or {}
        data.update(fields)
        write_json(self.run_dir / RUN_FILE, data)
        return data

    def read_run_json(self) -> dict[str, Any]:
        return read_json(self.run_dir / RUN_FILE) or {}

    def write_config(self, config: dict[str, Any]) -> None:
        write_json(self.run_dir / CONFIG_FILE, config)

    # ------------------------------------------------------------------ rounds

    def op_dir(self, op: str) -> Path:
        return self.run_dir / "ops" / op_to_folder(op)

    def round_dir(self, op: str, worker: int, round_: int) -> Path:
        return self.op_dir(op) / f"worker_{worker}" / f"round_{round_}"

    def start_round(self, op: str, worker: int, round_: int) -> Path:
        """A fresh round folder. A round cut short by an interrupt is redone on resume, a call that
        got no answer is asked again; what the earlier attempt wrote is moved aside to
        `round_<r>.cut<k>` (or `round_<r>.failed<k>` for a failed call), not deleted (replay
        reads `round_<r>`)."""
        path = self.round_dir(op, worker, round_)
        if path.exists():
            meta = read_json(path / META_FILE)
            failed = isinstance(meta, dict) and meta.get("outcome") == PROVIDER_ERROR
            label = "failed" if failed else "cut"
            k = 1
            while path.with_name(f"{path.name}.{label}{k}").exists():
                k += 1
            path.rename(path.with_name(f"{path.name}.{label}{k}"))
        path.mkdir(parents=True)
        return path

    def write_messages(self, path: Path, messages: list[Message]) -> None:
        write_json(
            path / "messages.json", [{"role": m.role, "content": m.content} for m in messages]
        )

    def write_text(self, path: Path, name: str, text: str) -> Path:
        write_text(path / name, text)
        return path / name

    def write_verdict(self, path: Path, result: OperatorResult) -> None:
        write_json(path / "verdict.json", result.to_json())

    def write_meta(self, path: Path, meta: dict[str, Any]) -> None:
        write_json(path / META_FILE, meta)

    def finished_rounds(self, op: str, worker: int) -> list[RoundRecord]:
        """The rounds 1..k of a worker that finished (contiguous); later ones are redone on resume."""
        records: list[RoundRecord] = []
        round_ = 1
        while True:
            path = self.round_dir(op, worker, round_)
            meta = read_json(path / META_FILE)
            if not isinstance(meta, dict) or meta.get("outcome") not in FINISHED_OUTCOMES:
                return records
            records.append(RoundRecord(round=round_, path=path, meta=meta))
            round_ += 1

    def worker_numbers(self, op: str) -> list[int]:
        found = []
        for path in self.op_dir(op).glob("worker_*"):
            suffix = path.name.removeprefix("worker_")
            if suffix.isdigit():
                found.append(int(suffix))
        return sorted(found)

    def all_rounds(self, op: str) -> list[tuple[int, Path, dict[str, Any] | None]]:
        """(worker, round folder, meta or None) for every round folder of an operator, in order."""
        out = []
        for worker in self.worker_numbers(op):
            wdir = self.op_dir(op) / f"worker_{worker}"
            rounds = [p for p in wdir.glob("round_*") if p.name.removeprefix("round_").isdigit()]
            for path in sorted(rounds, key=lambda p: int(p.name.removeprefix("round_"))):
                out.append((worker, path, read_json(path / META_FILE)))
        return out

    def spent(self) -> tuple[int, int, float]:
        """(input tokens, output tokens, cost in USD) of every call this run folder recorded.

        Read from events.jsonl, which is append-only: a round cut short and redone on resume
        still counts what it cost.
        """
        inp = out = 0
        cost = 0.0
        for event in read_events(self.run_dir):
            if event.get("event") not in ("round_end", "speed_round_end"):
                continue
            inp += int(event.get("input_tokens") or 0)
            out += int(event.get("output_tokens") or 0)
            cost += float(event.get("cost_usd") or 0.0)
        return inp, out, cost

    def all_priced(self) -> bool:
        """False when some call this run folder recorded used tokens but had no price."""
        return not any(
            event.get("event") == "round_end"
            and event.get("cost_usd") is None
            and (event.get("input_tokens") or event.get("output_tokens"))
            for event in read_events(self.run_dir)
        )

    # ------------------------------------------------------------------ decisions

    def write_decision(self, op: str, decision: dict[str, Any]) -> None:
        write_json(self.op_dir(op) / DECISION_FILE, decision)

    def read_decision(self, op: str) -> dict[str, Any] | None:
        data = read_json(self.op_dir(op) / DECISION_FILE)
        return data if isinstance(data, dict) else None

    def archive(self, kernel_file: Path, folder: str) -> Path:
        """Move an earlier kept kernel into run_dir/archive/<folder>/ (never overwrite an archive)."""
        dest_dir = self.run_dir / "archive" / folder
        dest_dir.mkdir(parents=True, exist_ok=True)
        dest = dest_dir / kernel_file.name
        n = 2
        while dest.exists():
            dest = dest_dir / f"{kernel_file.stem}.{n}{kernel_file.suffix}"
            n += 1
        shutil.copy2(kernel_file, dest)
        return dest


def load_result(data: dict[str, Any] | None) -> OperatorResult | None:
    """An OperatorResult from verdict.json data, or None when absent or not a verdict."""
    if not data:
        return None
    try:
        return OperatorResult.from_json(data)
    except (KeyError, TypeError, ValueError):
        return None
