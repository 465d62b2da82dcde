"""`python -m agent.logs`: read run folders without opening a dozen JSON files.

    python -m agent.logs                      every run in agent_logs/, newest first
    python -m agent.logs RUN                  one run: command, status, budget, each operator, scores
    python -m agent.logs RUN --op add.Tensor  one operator's rounds: prompt, response, verdict
    python -m agent.logs RUN --html           writes RUN/report.html (the one write it makes)

RUN is a run folder path, a folder name inside --log-dir, or `latest` (with --op: the newest run
that worked on that operator, so a later evaluate-only run does not hide the rounds). An
evaluate-only run shows its evaluation: per operator the verdict, and with --op the reason and
failing tests. Texts are cut to a few lines unless --full; piped output is not cut to 80 columns.
Read-only: it never changes a run folder. Exit 2 (one line) for a RUN or an operator that is not
there.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, NoReturn

from rich.console import Console
from rich.table import Table
from rich.text import Text

from agent.budget import cost_text
from agent.runlog import RunLog, read_json
from evaluator.errors import UsageError
from evaluator.naming import normalize_op, op_to_folder
from evaluator.reports.runfolder import results_file

PREVIEW_LINES = 8
# Piped output is not cut to rich's 80-column default: a reader (grep, a file) wants whole lines.
PIPE_WIDTH = 200
# The evaluation's object report: its newer name first.
class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see --help)")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m agent.logs",
        description="List atenforge runs, or show one run or one operator's rounds.",
    )
    p.add_argument(
        "run", nargs="?", help="a run folder, its name in --log-dir, or 'latest'; omit to list runs"
    )
    p.add_argument("--op", help="show this operator's rounds (e.g. add.Tensor)")
    p.add_argument(
        "--log-dir", default="agent_logs", help="where run folders are (default: agent_logs)"
    )
    p.add_argument(
        "--full", action="store_true", help="print prompts, responses and verdicts in full"
    )
    p.add_argument(
        "--html", action="store_true", help="write RUN/report.html (the run as one web page)"
    )
    return p


# ------------------------------------------------------------------------------ reading


def run_dirs(log_dir: Path) -> list[Path]:
    """Run folders under `log_dir`, newest first (by name: run_<YYYYmmdd_HHMMSS>[_N])."""
    if not log_dir.is_dir():
        return []
    found = [p for p in log_dir.iterdir() if p.is_dir() and p.name.startswith("run_")]
    return sorted(found, key=_run_sort_key, reverse=True)


def _run_sort_key(path: Path) -> tuple[str, int]:
    stem, _, suffix = path.name[4:].partition("_")
    time_part, _, n = suffix.partition("_")
    return (f"{stem}_{time_part}", int(n) if n.isdigit() else 1)


def find_run(spec: str, log_dir: Path, op: str | None = None) -> Path:
    """The run folder `spec` names; `latest` with `op` is the newest run that worked on `op`
    (wrote rounds for it, or evaluated it), so an evaluate-only run does not hide the rounds."""
    if spec == "latest":
        runs = run_dirs(log_dir)
        if not runs:
            raise UsageError(f"no runs in '{log_dir}': pass --log-dir with your run folders.")
        if op is None:
            return runs[0]
        op = normalize_op(op)
        for run_dir in runs:
            if RunLog(run_dir).all_rounds(op):
                return run_dir
        for run_dir in runs:
            if op in _results(run_dir):
                return run_dir
        raise UsageError(
            f"no run in '{log_dir}' worked on {op}: pick an operator listed by "
            "python -m agent.logs latest."
        )
    for candidate in (Path(spec), log_dir / spec):
        if candidate.is_dir():
            return candidate
    raise UsageError(
        f"run '{spec}' not found: pass a run folder or a name listed by python -m agent.logs."
    )


def _report(run_dir: Path) -> dict[str, Any]:
    """The evaluation's report object (operators with their verdicts, scores), or {}."""
    data = read_json(results_file(run_dir))
    return data if isinstance(data, dict) and isinstance(data.get("operators"), list) else {}


def _results(run_dir: Path) -> dict[str, dict[str, Any]]:
    """Each evaluated operator's verdict: the report, else evaluation.jsonl (written as it goes)."""
    ops = _report(run_dir).get("operators")
    if ops is None:
        ops = []
        try:
            lines = (run_dir / "evaluation.jsonl").read_text(encoding="utf-8").splitlines()
        except OSError:
            lines = []
        for line in lines:
            try:
                ops.append(json.loads(line))
            except ValueError:
                continue  # a line cut short by an interrupt
    return {o["op"]: o for o in ops if isinstance(o, dict) and o.get("op")}


def run_summary(run_dir: Path) -> dict[str, Any]:
    """What the list and the summary show about a run, from run.json, decisions and reports."""
    run = read_json(run_dir / "run.json") or {}
    results = _report(run_dir)
    ops = list(run.get("ops") or [])
    if not ops:
        ops = [o.get("op") for o in results.get("operators", []) if o.get("op")]
    rl = RunLog(run_dir)
    decisions = {op: rl.read_decision(op) for op in ops}
    kept = sum(1 for d in decisions.values() if d and d.get("status") == "kept")
    return {
        "run": run,
        "ops": ops,
        "decisions": decisions,
        "kept": kept,
        "decided": sum(1 for d in decisions.values() if d),
        "scores": results.get("scores") or run.get("scores"),
        "results": _results(run_dir),
    }


# ------------------------------------------------------------------------------ showing


def _score(scores: dict[str, Any] | None, key: str) -> str:
    if not scores:
        return ""
    value = scores.get(key)
    return f"{value:.2f}" if isinstance(value, int | float) else "n/a"


def list_runs(log_dir: Path, console: Console) -> None:
    runs = run_dirs(log_dir)
    if not runs:
        console.print(Text(f"no runs in {log_dir}"))
        return
    table = Table(title=f"runs in {log_dir}")
    table.add_column("run", no_wrap=True)
    for name in ("mode", "status", "provider", "ops", "kept", "correctness", "perf", "wall"):
        table.add_column(name)
    for run_dir in runs:
        s = run_summary(run_dir)
        run = s["run"]
        provider = (run.get("provider") or {}).get("name", "")
        wall = run.get("wall_s")
        table.add_row(
            Text(run_dir.name),
            str(run.get("mode", "")),
            str(run.get("status", "?")),
            Text(str(provider)),
            str(len(s["ops"])),
            f"{s['kept']}/{len(s['ops'])}" if run.get("mode") != "evaluate" else "",
            _score(s["scores"], "correctness_score"),
            _score(s["scores"], "performance_score"),
            f"{wall:.0f}s" if isinstance(wall, int | float) else "",
        )
    console.print(table)


def show_run(run_dir: Path, console: Console) -> None:
    s = run_summary(run_dir)
    run = s["run"]
    say = lambda text: console.print(Text(text), soft_wrap=True)  # noqa: E731
    say(f"run:      {run_dir}")
    say(f"command:  {run.get('command', '?')}")
    say(
        f"status:   {run.get('status', '?')}  ({run.get('started_at', '?')} -> {run.get('ended_at') or '...'})"
    )
    provider = run.get("provider") or {}
    if provider:
        say(
            f"provider: {provider.get('name')} / {provider.get('model')}  ({provider.get('why', '')})"
        )
    env = run.get("environment") or {}
    say(
        f"device:   {run.get('device', '?')}  gpu: {env.get('gpu')}  torch {env.get('torch')}  triton {env.get('triton')}"
    )
    if env.get("containment"):
        say(f"containment: {env['containment']}")
    budget = run.get("budget") or {}
    if budget:
        cost = cost_text(budget.get("cost_usd", 0), budget.get("cost_known", True))
        stopped = f"  STOPPED: {budget['stopped']}" if budget.get("stopped") else ""
        say(
            f"usage:    {budget.get('calls', 0)} calls, {budget.get('tokens', 0):,} tokens, {cost}{stopped}"
        )
    for resume in run.get("resumes", []):
        say(f"resumed:  {resume.get('started_at')}: {resume.get('command')}")

    evaluate_only = run.get("mode") == "evaluate" or run.get("kind") == "evaluate"
    if evaluate_only:
        say(f"mode:     evaluate-only: the kernels in {run.get('kernels_dir', '?')}, no rounds")
    table = Table(title="operators")
    table.add_column("operator", no_wrap=True)
    generation = () if evaluate_only else ("decision", "winner", "rounds", "tokens")
    for name in (*generation, "evaluated", "reason"):
        table.add_column(name)
    rl = RunLog(run_dir)
    for op in s["ops"]:
        d = s["decisions"].get(op) or {}
        result = s["results"].get(op) or {}
        evaluated = (
            f"{result.get('status')} {result.get('passed')}/{result.get('tests')}" if result else ""
        )
        reason = Text(_first_line(d.get("reason") or result.get("reason") or "")[:70])
        if evaluate_only:
            table.add_row(Text(op), evaluated, reason)
            continue
        rounds = rl.all_rounds(op)
        tokens = sum(
            int((m or {}).get("input_tokens") or 0) + int((m or {}).get("output_tokens") or 0)
            for _, _, m in rounds
        )
        table.add_row(
            Text(op),
            d.get("status", "undecided" if rounds else "not started"),
            f"w{d['worker']} r{d['round']}" if d.get("worker") else "",
            str(len(rounds)),
            f"{tokens:,}",
            evaluated,
            reason,
        )
    console.print(table)
    if s["scores"]:
        keys = ("correctness_score", "mean_pass_rate", "performance_score")
        say(
            "scores:   "
            + ", ".join(f"{k} {_score(s['scores'], k)}" for k in keys if k in s["scores"])
        )
    if (run_dir / "OVERALL_SUMMARY.md").exists():
        say(f"report:   {run_dir / 'OVERALL_SUMMARY.md'}")


def show_op(run_dir: Path, op: str, console: Console, *, full: bool) -> None:
    op = normalize_op(op)
    rl = RunLog(run_dir)
    rounds = rl.all_rounds(op)
    if not rounds:
        result = _results(run_dir).get(op)
        if result is None:
            raise UsageError(
                f"{op} is not in '{run_dir}': pick an operator listed by python -m agent.logs {run_dir}."
            )
        show_evaluation(op, result, console, full=full)
        return
    decision = rl.read_decision(op)
    console.rule(Text(f"{op} ({op_to_folder(op)})"))
    if decision:
        console.print(
            Text(f"decision: {decision.get('status')}: {decision.get('reason', '')}"),
            soft_wrap=True,
        )
    for worker, path, meta in rounds:
        meta = meta or {}
        tests = (
            f" {meta.get('passed')}/{meta.get('tests')} tests"
            if meta.get("tests") is not None
            else ""
        )
        head = (
            f"worker {worker} round {path.name.removeprefix('round_')}: {meta.get('outcome') or 'unfinished'}"
            f"{tests} | {meta.get('input_tokens', 0)}+{meta.get('output_tokens', 0)} tokens"
            f" | provider {_secs(meta.get('latency_s'))}, verdict {_secs(meta.get('verdict_s'))}"
        )
        console.rule(Text(head), align="left", style="dim")
        messages = read_json(path / "messages.json") or []
        prompt = messages[-1]["content"] if messages else ""
        _block(console, "prompt (last message)", prompt, full)
        _block(console, "response", _read(path / "response.md"), full)
        verdict = _read(path / "feedback.md") or (meta.get("error") or "")
        _block(console, "verdict", verdict, full)


def show_evaluation(op: str, result: dict[str, Any], console: Console, *, full: bool) -> None:
    """An operator this run evaluated without writing rounds (an evaluate-only run)."""
    console.rule(Text(f"{op} ({op_to_folder(op)}): evaluated, no rounds in this run"))
    skipped = f", {result['skipped_tests']} skipped" if result.get("skipped_tests") else ""
    console.print(
        Text(
            f"verdict: {result.get('status')} ({result.get('passed')}/{result.get('tests')} tests{skipped})"
        ),
        soft_wrap=True,
    )
    if result.get("kernel_file"):
        console.print(Text(f"kernel:  {result['kernel_file']}"), soft_wrap=True)
    if result.get("flags"):
        console.print(Text(f"flags:   {', '.join(result['flags'])}"), soft_wrap=True)
    _block(console, "reason", str(result.get("reason") or ""), full)
    failing = [
        t for t in result.get("results") or [] if not t.get("passed") and not t.get("skipped")
    ]
    lines = [
        f"{t.get('args')}: {t.get('error_type') or ''} {t.get('error_msg') or ''}" for t in failing
    ]
    _block(console, "failing tests", "\n".join(lines), full)


def _secs(value: Any) -> str:
    return f"{value:.1f}s" if isinstance(value, int | float) else "-"


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except OSError:
        return ""


def _block(console: Console, title: str, text: str, full: bool) -> None:
    if not text.strip():
        return
    lines = text.strip().splitlines()
    shown = lines if full else lines[:PREVIEW_LINES]
    console.print(Text(f"{title}:", style="bold"))
    for line in shown:
        console.print(Text("  " + line), soft_wrap=True)
    if len(shown) < len(lines):
        console.print(Text(f"  ... {len(lines) - len(shown)} more lines (--full)", style="dim"))


def _first_line(text: str) -> str:
    lines = text.strip().splitlines()
    return lines[0] if lines else ""


def _console() -> Console:
    console = Console(highlight=False)
    return console if console.is_terminal else Console(highlight=False, width=PIPE_WIDTH)


def main(argv: list[str] | None = None, console: Console | None = None) -> int:
    console = console or _console()
    try:
        args = build_parser().parse_args(argv)
        log_dir = Path(args.log_dir)
        if args.run is None:
            if args.op or args.html:
                raise UsageError("--op and --html need a run: python -m agent.logs RUN --html.")
            list_runs(log_dir, console)
        elif args.html:
            from agent.report_html import write_report

            console.print(Text(f"wrote {write_report(find_run(args.run, log_dir))}"))
        elif args.op:
            show_op(find_run(args.run, log_dir, args.op), args.op, console, full=args.full)
        else:
            show_run(find_run(args.run, log_dir), console)
    except UsageError as exc:
        sys.stderr.write(f"error: {' '.join(str(exc).split())}\n")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
