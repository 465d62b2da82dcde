"""One invocation of `python -m agent.run`: run folder, selection,
generation, evaluation.

Contract: `Session(request, parts, view).run() -> RunResult`, where `Parts` holds what the session
is given from outside: the `agent.judging.Evaluator` that every verdict, selection, evaluation and
machine description comes from (the local one by default), and the provider (None: made from the
config by agent.providers.registry). Everything else is the agent's own, imported where used.
- opens a new run folder (evaluator.reports.runfolder.create_run_dir) or the `--resume` one, and writes
  `run.json` (command line, resolved config, environment, start/end, status) and `config.json`;
- selects operators (evaluator.cases.suites.select_operators; a resumed run keeps its own selection);
- unless `--evaluate-only`, generates kernels (agent.orchestrator.Generator) under a budget
  (agent.budget) that stops new provider calls and says so;
- stops calling the provider when its `ProviderHealth` says so (calls in a row without an answer,
  after waiting for a server that went away): one line on the console, a `provider_stop` event,
  `run.json` "provider_stop", and `RunResult.provider_stop`; the run still evaluates and writes its
  reports, and the CLI exits with its own code so that a script knows to `--resume` later;
- unless `--generate-only`, evaluates every selected operator on the kernels dir with
  evaluator.evaluate.evaluate(..., run_dir=the same folder), which writes the report files.
User errors raise UsageError before anything is started where possible. KeyboardInterrupt stops
the workers, marks the run `interrupted` and propagates (the CLI prints the resume command).
`run_dir` is set as soon as the folder exists, so a caller can point at it after any failure.
"""

from __future__ import annotations

import contextlib
import logging
import os
import shlex
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

from agent.budget import Budget
from agent.config import RunConfig
from agent.judges_view import judges_line
from agent.judging import Evaluator, LocalEvaluator
from agent.orchestrator import Generator, OpOutcome, workers_per_operator
from agent.prompts import PromptRenderer
from agent.providers.base import Provider
from agent.providers.health import ProviderHealth
from agent.providers.pricing import estimate_cost_usd
from agent.report_html import write_report_quietly
from agent.runlog import RunLog, read_json
from agent.speed import resolve_speed_rounds
from agent.speed_report import add_speed_to_reports
from evaluator import safe_ast
from evaluator.errors import UsageError
from evaluator.naming import kernel_path
from evaluator.reports.runfolder import create_run_dir

log = logging.getLogger(__name__)

Mode = Literal["full", "generate", "evaluate"]


@dataclass(frozen=True)
class Parts:
    """What a session is given from outside; the defaults are the real ones."""

    evaluator: Evaluator = field(default_factory=LocalEvaluator)
    provider: Provider | None = None  # None: agent.providers.registry.make_provider(cfg.provider)


@dataclass
class RunRequest:
    cfg: RunConfig
    mode: Mode = "full"
    argv: list[str] = field(default_factory=list)
    resume_dir: Path | None = None


@dataclass
class RunResult:
    run_dir: Path
    status: str  # completed, interrupted
    outcomes: list[OpOutcome]
    report: Any | None  # evaluator.reports.report.Report
    budget: dict[str, Any]
    provider_stop: str | None = None  # why the run stopped calling the provider, if it did


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds")


class Session:
    """One invocation of `python -m agent.run`. `run_dir` is set as soon as the folder exists."""

    def __init__(self, request: RunRequest, parts: Parts | None = None, view: Any = None) -> None:
        self.request = request
        self.cfg = request.cfg
        safe_ast.install()  # workers parse Python in threads: see evaluator.safe_ast
        self.parts = parts or Parts()
        self.evaluator = self.parts.evaluator
        templates = self.cfg.agent.templates_dir  # a missing folder is a usage error, found here
        self.renderer = PromptRenderer(Path(templates) if templates else None)
        self.view = view
        self.stop = threading.Event()
        self.run_dir: Path | None = None
        self.runlog: RunLog | None = None
        self.generator: Generator | None = None
        self._t0 = time.monotonic()
        self._finished = False
        self._judges: list[dict[str, Any]] = []

    def say(self, text: str) -> None:
        """A line for the person running the command (the live view prints it above its table)."""
        if self.view is not None:
            self.view.say(text)
        else:
            log.info("%s", text)

    # ------------------------------------------------------------------ the run

    def run(self) -> RunResult:
        cfg, req = self.cfg, self.request
        device = self.evaluator.resolve_device(cfg.device)
        kernels_dir = Path(cfg.kernels_dir)
        if req.mode == "evaluate":
            _check_kernels_dir(kernels_dir)
        provider, why = (None, "")
        if req.mode != "evaluate":
            provider, why = self._provider()
        previous = {}
        if req.resume_dir is not None:
            previous = read_json(Path(req.resume_dir) / "run.json") or {}
        # Selection errors are the user's to fix: find them before a run folder exists.
        ops = self._select(previous, device)
        self._open_run_dir()
        runlog = self.runlog
        assert runlog is not None
        if self.view is not None:
            runlog.listeners.append(self.view.handle)
        self.say(f"run folder: {self.run_dir}")
        if provider is not None:
            self.say(f"provider: {why}")
            num_workers = self.cfg.agent.num_workers
            if workers_per_operator(provider, num_workers) < num_workers:
                self.say(
                    f"workers: 1 per operator, not {num_workers}: {provider.name} writes the same "
                    "code in every worker, so more would only judge the same file again"
                )
            self._say_context_window(provider)
        self._write_start(device, provider, why, ops, previous)
        speed_note = resolve_speed_rounds(self.cfg.agent.speed_rounds, device)[1]
        if provider is not None and speed_note:  # agent.speed: none on the CPU, said once
            self.say(speed_note)
        runlog.emit(
            "run_start",
            mode=req.mode,
            resumed=req.resume_dir is not None,
            ops=[oc.op for oc in ops],
            provider=getattr(provider, "name", None),
            model=getattr(provider, "model", None),
            device=device,
        )

        spent_in, spent_out, spent_cost = runlog.spent()
        budget = Budget(
            cfg.agent.max_tokens,
            cfg.agent.max_cost_usd,
            input_tokens=spent_in,
            output_tokens=spent_out,
            cost_usd=spent_cost,
            cost_known=runlog.all_priced(),
            on_exhausted=self._budget_stop,
        )
        outcomes: list[OpOutcome] = []
        report = None
        health = self._health(provider)
        try:
            if req.mode != "evaluate":
                assert provider is not None
                kernels_dir.mkdir(parents=True, exist_ok=True)
                self.generator = Generator(
                    cfg,
                    provider=provider,
                    evaluator=self.evaluator,
                    renderer=self.renderer,
                    runlog=runlog,
                    budget=budget,
                    device=device,
                    kernels_dir=kernels_dir,
                    stop=self.stop,
                    health=health,
                )
                with self._viewing(ops):
                    outcomes = self.generator.run(ops)
            if req.mode != "generate":
                report = self._evaluate(kernels_dir, ops, device)
        except KeyboardInterrupt:
            self.interrupt()
            self.finish("interrupted", budget=budget.snapshot(), outcomes=outcomes)
            raise
        finally:
            self._judges = self._judge_summary()  # before the pools close
            with contextlib.suppress(Exception):
                self.evaluator.close()
        stop = health.stop_reason
        self.finish(
            "completed",
            budget=budget.snapshot(),
            outcomes=outcomes,
            report=report,
            provider_stop=stop,
        )
        return RunResult(self.run_dir, "completed", outcomes, report, budget.snapshot(), stop)

    @contextlib.contextmanager
    def _viewing(self, ops: list[Any]):
        if self.view is None:
            yield
            return
        provider = self.generator.provider if self.generator is not None else None
        num_workers = workers_per_operator(provider, self.cfg.agent.num_workers)
        self.view.judge_stats = self.evaluator.judge_stats  # the judges' caption under the table
        self.view.start([oc.op for oc in ops], num_workers)
        try:
            yield
        finally:
            self.view.stop()

    def _provider(self) -> tuple[Provider, str]:
        if self.parts.provider is not None:
            p = self.parts.provider
            return p, f"{p.name}, model {p.model} (given by the caller)"
        from agent.providers.registry import make_provider

        provider, why = make_provider(self.cfg.provider, env=os.environ)
        if self.cfg.agent.max_cost_usd is not None and provider.name not in ("builtin", "replay"):
            prices = getattr(provider, "prices", None) or self.cfg.provider.prices
            if estimate_cost_usd(provider.model, 0, 0, prices) is None:
                raise UsageError(
                    f"agent.max_cost_usd is set but there is no price for model '{provider.model}': "
                    f'add [provider.prices."{provider.model}"] to your config or drop max_cost_usd.'
                )
        return provider, why

    def _say_context_window(self, provider: Provider) -> None:
        """The model's context window, for providers that fit requests to one (asks the server)."""
        if not hasattr(type(provider), "context_tokens"):
            return  # builtin, replay: no context window
        tokens = provider.context_tokens  # type: ignore[attr-defined]
        if tokens is None:
            self.say(
                "context window: unknown (the server does not say, or is not answering yet): set "
                "provider.context_tokens to fit requests to it"
            )
            return
        source = getattr(provider, "context_source", None) or "provider config"
        self.say(f"context window: {tokens:,} tokens ({source})")
        if self.runlog is not None:
            self.runlog.emit("context_window", tokens=tokens, source=source)

    def _health(self, provider: Provider | None) -> ProviderHealth:
        """Failed calls in a row across the run; the outage wait probes the server when it can."""
        pc = self.cfg.provider
        return ProviderHealth(
            pc.max_consecutive_failures,
            outage_wait_s=pc.outage_wait_s,
            probe_interval_s=pc.probe_interval_s,
            probe=getattr(provider, "probe", None),
            on_stop=self._provider_stop,
            on_wait=self._provider_wait,
        )

    def _provider_stop(self, reason: str) -> None:
        if self.runlog is not None:
            self.runlog.emit("provider_stop", reason=reason)
        self.say(f"provider: {reason}; no new provider calls will start")

    def _provider_wait(self, text: str) -> None:
        if self.runlog is not None:
            self.runlog.emit("provider_wait", reason=text)
        self.say(text)

    def _open_run_dir(self) -> None:
        """A new run folder, or the --resume one."""
        if self.request.resume_dir is not None:
            self.run_dir = Path(self.request.resume_dir)
        else:
            self.run_dir = create_run_dir(self.cfg.log_dir)
        self.runlog = RunLog(self.run_dir)

    def _select(self, previous: dict[str, Any], device: str) -> list[Any]:
        cfg = self.cfg
        ops = cfg.suite.ops
        num_operators = cfg.suite.num_operators
        if previous.get("ops"):
            # A resumed run works on exactly the operators it selected the first time.
            ops, num_operators = list(previous["ops"]), None
        extra: dict[str, Any] = {}
        if device == "cpu":
            # Triton's interpreter skips large cases: rank the runnable ones first so workers
            # get cases their candidates can actually be tested on.
            from evaluator.cases.suites import cpu_runnable

            limit = cfg.eval.cpu.max_case_numel
            extra["prefer"] = lambda case: cpu_runnable(case, limit)
        if cfg.eval.hidden_salt is None:
            # one secret for the run: the rounds' hidden cases and the final evaluation's are
            # drawn from it as disjoint sets (it goes into run.json's config, never a prompt)
            import secrets

            cfg.eval.hidden_salt = secrets.token_hex(8)
        selection = self.evaluator.select(
            cfg.suite.suite,
            ops=ops,
            num_operators=num_operators,
            trace_file=cfg.suite.trace_file,
            max_cases_per_op=cfg.eval.max_cases_per_op,
            hidden_per_set=cfg.eval.hidden_per_set(),
            hidden_salt=cfg.eval.hidden_salt,
            **extra,
        )
        if previous.get("excluded"):
            # A resumed run names the exclusions of its first selection (the resumed one is by op).
            selection.excluded = [tuple(e) for e in previous["excluded"]]
        for error in selection.errors:
            self.say(f"warning: {error}")
        if not selection.ops:
            raise UsageError(
                "no operator was selected: check --suite, --ops, --num-operators or --trace-file."
            )
        self._selection = selection
        self.say(
            f"operators: {len(selection.ops)} selected from {selection.suite}"
            + (f", {len(selection.excluded)} excluded" if selection.excluded else "")
        )
        return list(selection.ops)

    def _write_start(
        self,
        device: str,
        provider: Provider | None,
        why: str,
        ops: list[Any],
        previous: dict[str, Any],
    ) -> None:
        runlog, req = self.runlog, self.request
        assert runlog is not None
        command = shlex.join(["python", "-m", "agent.run", *req.argv])
        config = self.cfg.model_dump(mode="json")
        runlog.write_config(config)
        if previous:
            resumes = list(previous.get("resumes", []))
            resumes.append({"command": command, "started_at": _now()})
            runlog.update_run_json(
                resumes=resumes, status="running", ended_at=None, config=config, device=device
            )
            return
        selection = self._selection
        runlog.write_run_json(
            {
                "schema_version": 1,
                "command": command,
                "argv": list(req.argv),
                "cwd": os.getcwd(),
                "mode": req.mode,
                "status": "running",
                "started_at": _now(),
                "ended_at": None,
                "device": device,
                "environment": self.evaluator.environment_info(
                    device, confine=self.cfg.eval.sandbox.confine
                ),
                "provider": None
                if provider is None
                else {"name": provider.name, "model": provider.model, "why": why},
                "kernels_dir": str(Path(self.cfg.kernels_dir).resolve()),
                "suite": selection.suite,
                "ops": [oc.op for oc in ops],
                "excluded": [list(e) for e in selection.excluded],
                "selection_errors": list(selection.errors),
                "config": config,
            }
        )

    def _budget_stop(self, reason: str) -> None:
        if self.runlog is not None:
            self.runlog.emit("budget_stop", reason=reason)
        self.say(f"budget: {reason}; no new provider calls will start")

    def _evaluate(self, kernels_dir: Path, ops: list[Any], device: str) -> Any:
        cfg = self.cfg
        assert self.runlog is not None
        if self.request.mode == "full" and not _has_kernels(kernels_dir):
            # evaluate() refuses an empty kernels dir; every operator is simply missing.
            self.say("no kernel was kept: every selected operator is reported as missing")
            return self._missing_report(kernels_dir, ops, device)
        self.runlog.emit("evaluation_start", kernels_dir=str(kernels_dir), ops=len(ops))
        self.say(f"evaluating {len(ops)} operator(s) in {kernels_dir} on {device}")
        progress = self.view.evaluated if self.view is not None else None
        report = self.evaluator.evaluate(
            kernels_dir,
            suite=cfg.suite.suite,
            ops=[oc.op for oc in ops],
            trace_file=cfg.suite.trace_file,
            config=cfg.eval,
            device=device,
            run_dir=self.run_dir,
            log_dir=cfg.log_dir,
            progress=progress,
            excluded=list(self._selection.excluded),
        )
        self.runlog.emit("evaluation_done", scores=getattr(report, "scores", None))
        if report is not None and self.run_dir is not None:  # before/after speed rounds
            add_speed_to_reports(self.runlog, [oc.op for oc in ops], report, self.run_dir)
        return report

    def _missing_report(self, kernels_dir: Path, ops: list[Any], device: str) -> Any:
        from evaluator.reports.report import Report, write_reports
        from evaluator.results import Status, not_run, verdict_without_run

        results = []
        for oc in ops:
            reason = f"no kernel at {kernel_path(kernels_dir, oc.op)}"
            cases = not_run([c.serialize() for c in oc.cases], "Missing", reason)
            results.append(
                verdict_without_run(
                    oc.op, Status.MISSING, reason, tests=len(oc.cases), results=cases
                )
            )
        selection = self._selection
        report = Report(
            run={"kind": "agent", "kernels_dir": str(kernels_dir.resolve()), "device": device},
            operators=results,
            excluded=list(selection.excluded),
            suite=selection.suite,
            device=device,
            notes=list(selection.errors),
            run_dir=self.run_dir,
            profile=self.cfg.eval.correctness.tolerance_profile,
        )
        assert self.run_dir is not None and self.runlog is not None
        write_reports(self.run_dir, report)
        self.runlog.emit("evaluation_done", scores=report.scores, missing=len(results))
        return report

    def finish(self, status: str, **extra: Any) -> None:
        """Mark the run's end in run.json and events.jsonl (also after an interrupt or a crash)."""
        if self.runlog is None or self._finished:
            return
        self._finished = True
        outcomes = extra.pop("outcomes", None) or []
        report = extra.pop("report", None)
        fields: dict[str, Any] = {
            "status": status,
            "ended_at": _now(),
            "wall_s": round(time.monotonic() - self._t0, 3),
        }
        if outcomes:
            fields["outcomes"] = {o.op: o.status for o in outcomes}
        if report is not None:
            fields["scores"] = report.scores
        judges = self._judges or self._judge_summary()
        if judges:
            fields["judges"] = judges  # throughput: verdicts per minute, utilisation per judge
            if any(j["num_judges"] > 1 or j["executor"] != "local" for j in judges):
                self.say(judges_line(judges))
        fields.update(extra)
        with contextlib.suppress(OSError):
            self.runlog.update_run_json(**fields)
            self.runlog.emit("run_end", status=status, wall_s=fields["wall_s"])
        write_report_quietly(self.run_dir)

    def _judge_summary(self) -> list[dict[str, Any]]:
        try:
            return self.evaluator.judge_stats()
        except Exception:  # noqa: BLE001 - throughput is a record, never a reason to fail a run
            log.debug("judge stats failed", exc_info=True)
            return []

    def interrupt(self) -> None:
        self.stop.set()
        if self.generator is not None:
            self.generator.interrupt()


def _has_kernels(kernels_dir: Path) -> bool:
    return kernels_dir.is_dir() and any(kernels_dir.glob("*__*/*_implementation*.py"))


def _check_kernels_dir(kernels_dir: Path) -> None:
    """--evaluate-only needs an existing, non-empty kernels dir (evaluate() checks it again)."""
    if not kernels_dir.exists():
        raise UsageError(
            f"kernels dir '{kernels_dir}' does not exist: pass an existing folder to --kernels-dir."
        )
    if not kernels_dir.is_dir():
        raise UsageError(
            f"kernels dir '{kernels_dir}' is not a folder: pass a folder to --kernels-dir."
        )
    if not _has_kernels(kernels_dir):
        raise UsageError(
            f"kernels dir '{kernels_dir}' holds no kernels (expected e.g. "
            "add__Tensor/add__Tensor_implementation_v1.py): pass a folder with kernels to --kernels-dir."
        )


def resume_config(run_dir: Path) -> dict[str, Any]:
    """The resolved config saved in a run folder (UsageError when it is not a run folder)."""
    if not run_dir.is_dir():
        raise UsageError(
            f"run folder '{run_dir}' does not exist: pass a folder under agent_logs/ to --resume."
        )
    data = read_json(run_dir / "config.json")
    if not isinstance(data, dict):
        raise UsageError(
            f"'{run_dir}' has no readable config.json: pass a run folder written by agent.run to --resume."
        )
    return data


def saved_mode(run_dir: Path) -> Mode:
    run = read_json(run_dir / "run.json") or {}
    mode = run.get("mode", "full")
    return mode if mode in ("full", "generate", "evaluate") else "full"
