"""Evaluate a kernel directory on a suite, or judge one candidate: the evaluator's public entry points.

`evaluate()` selects operators (suites.py), finds each kernel (naming.py), judges it in the sandbox,
and writes the report files (evaluator.reports.report) into a run folder. `judge_candidate()` is what the agent calls once per
round. Both return data; a kernel's failure is a result, never an exception.
"""

from __future__ import annotations

import atexit
import logging
import shlex
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from evaluator.cases.testcase import TestCase
from evaluator.config import EvalConfig
from evaluator.errors import UsageError
from evaluator.judging.judge_pool import JudgePool, make_pool, num_local_judges
from evaluator.naming import find_kernel_file, kernel_files, op_to_folder
from evaluator.results import OperatorResult, Status, not_run, verdict_without_run

log = logging.getLogger(__name__)

_SANDBOXES: dict[tuple[str, str], JudgePool] = {}
_SANDBOX_LOCK = threading.Lock()


def hidden_salt(config: EvalConfig) -> str:
    """The secret that shuffles hidden cases: the configured one, else a fresh one kept in the
    config (so a run's phases and its run.json agree)."""
    if config.hidden_salt is None:
        import secrets

        config.hidden_salt = secrets.token_hex(8)
    return config.hidden_salt


def resolve_device(device: str = "auto") -> str:
    """`auto` -> `cuda` when a GPU is visible, else `cpu` (Triton's interpreter)."""
    if device not in ("auto", "cuda", "cpu"):
        raise UsageError(f"unknown device {device!r}: use auto, cuda or cpu.")
    import torch

    if device == "auto":
        return "cuda" if torch.cuda.is_available() else "cpu"
    if device == "cuda" and not torch.cuda.is_available():
        raise UsageError(
            "--device cuda was asked for but no CUDA GPU is visible: use --device cpu or auto."
        )
    return device


def shared_sandbox(config: EvalConfig, device: str) -> JudgePool:
    """One judge pool per config and device (a fork server per judge, `eval.devices`), shared by
    all callers in a process; it judges with `Sandbox.judge`'s signature."""
    key = (config.model_dump_json(), device)
    with _SANDBOX_LOCK:
        box = _SANDBOXES.get(key)
        if box is None:
            box = _SANDBOXES[key] = make_pool(config, device)
        return box


def judge_capacity(config: EvalConfig, device: str) -> int:
    """How many candidates the pool for (config, device) judges at once, without starting it
    where that is possible (local judges start their fork servers lazily anyway)."""
    if config.executor == "ray":
        return shared_sandbox(config, device).capacity
    if str(config.devices).strip() == "1":
        return config.sandbox.num_parallel  # one judge: no need to count the devices
    return num_local_judges(config, device) * config.sandbox.num_parallel


def close_sandboxes() -> None:
    with _SANDBOX_LOCK:
        for box in _SANDBOXES.values():
            box.close()
        _SANDBOXES.clear()


def judge_stats() -> list[dict]:
    """Every shared judge pool's throughput so far (JudgePool.summary), for run.json."""
    with _SANDBOX_LOCK:
        return [box.summary() for box in _SANDBOXES.values()]


atexit.register(close_sandboxes)  # no fork server or scratch folder outlives the process


def judge_candidate(
    kernel_file: Path,
    op: str,
    cases: list[TestCase],
    *,
    config: EvalConfig,
    device: str = "auto",
    measure_performance: bool = False,
    cancel: threading.Event | None = None,
) -> OperatorResult:
    """Judge one kernel file for one operator in a sandbox process."""
    dev = resolve_device(device)
    return shared_sandbox(config, dev).judge(
        Path(kernel_file), op, cases, measure_performance=measure_performance, cancel=cancel
    )


def check_kernels_dir(kernels_dir: Path | str) -> Path:
    path = Path(kernels_dir)
    if not path.exists():
        raise UsageError(
            f"kernels dir '{path}' does not exist: pass an existing folder to --kernels-dir."
        )
    if not path.is_dir():
        raise UsageError(f"kernels dir '{path}' is not a folder: pass a folder to --kernels-dir.")
    if not any(p.is_dir() and "__" in p.name.strip("_") for p in path.iterdir()):
        raise UsageError(
            f"kernels dir '{path}' holds no kernel folders (expected e.g. add__Tensor/add__Tensor_implementation_v1.py)."
        )
    return path


def evaluate(
    kernels_dir: Path | str,
    *,
    suite: str | None = "torchbench",
    ops: list[str] | None = None,
    num_operators: int | None = None,
    trace_file: Path | str | None = None,
    config: EvalConfig | None = None,
    device: str = "auto",
    run_dir: Path | None = None,
    log_dir: Path | str = "agent_logs",
    progress: Callable[[OperatorResult], None] | None = None,
    measure_performance: bool = True,
    write: bool = True,
    excluded: list[tuple[str, str]] | None = None,
):  # -> evaluator.reports.report.Report
    """Evaluate every selected operator's kernel in `kernels_dir` and write the reports.

    `excluded` replaces the (operator, reason) exclusions the reports list: a caller that selected
    from a suite and passes its choice as `ops` (the agent) hands over the suite's exclusions.
    """
    from evaluator.cases.suites import select_operators
    from evaluator.reports.report import Report, write_reports
    from evaluator.reports.runfolder import create_run_dir, environment_info, write_json

    config = config or EvalConfig()
    kdir = check_kernels_dir(kernels_dir)
    dev = resolve_device(device)
    from evaluator.cases.suites import cpu_runnable

    # On the CPU, cases the interpreter can run come first, so the cap keeps testable ones; the
    # agent's workers select with the same rule, so both phases see the same cases.
    prefer = (lambda c: cpu_runnable(c, config.cpu.max_case_numel)) if dev == "cpu" else None
    selection = select_operators(
        suite,
        ops=ops,
        num_operators=num_operators,
        trace_file=trace_file,
        max_cases_per_op=config.max_cases_per_op,
        prefer=prefer,
        hidden_per_set=config.hidden_per_set(),
        hidden_salt=hidden_salt(config),
    )
    if excluded is not None:
        selection.excluded = list(excluded)
    if write and run_dir is None:
        run_dir = create_run_dir(log_dir)
    started = datetime.now(UTC).isoformat(timespec="seconds")
    run_info = {
        "kind": "evaluate",
        "command": shlex.join(["python", *sys.argv]),
        "kernels_dir": str(kdir.resolve()),
        "suite": selection.suite,
        "device": dev,
        "environment": environment_info(dev, confine=config.sandbox.confine),
        "eval_config": config.model_dump(mode="json"),
        "started": started,
    }
    box = shared_sandbox(config, dev)

    cancel = threading.Event()
    log_path = Path(run_dir) / "evaluation.jsonl" if write and run_dir is not None else None
    if log_path is not None:
        log_path.parent.mkdir(parents=True, exist_ok=True)

    def one(op: str, cases: list[TestCase]) -> OperatorResult:
        path = find_kernel_file(kdir, op, config.kernel_file_glob)
        if cancel.is_set():
            res = verdict_without_run(
                op,
                Status.SKIPPED,
                "not evaluated: the evaluation was interrupted first",
                kernel_file=str(path) if path is not None else None,
            )
        elif path is None:
            folder = kdir / op_to_folder(op)
            pattern = config.kernel_file_glob.replace("{folder}", folder.name)
            reason = f"no kernel at {folder}/{pattern}"
            missing = not_run([c.serialize() for c in cases], "Missing", reason)
            res = verdict_without_run(op, Status.MISSING, reason, tests=len(cases), results=missing)
        elif not cases:
            res = verdict_without_run(op, Status.SKIPPED, "no test cases", kernel_file=str(path))
        else:
            res = box.judge(path, op, cases, measure_performance=measure_performance, cancel=cancel)
            if cancel.is_set() and res.reason.startswith("cancelled"):
                res.status = Status.SKIPPED
                res.reason = "not evaluated: the evaluation was interrupted first"
            elif res.status == Status.ERROR and not res.results:
                # The kernel never got to a test (import error, crash while loading).
                res.results = not_run([c.serialize() for c in cases], "NotRun", res.reason)
                res.tests = len(cases)
        if log_path is not None:  # each verdict is on disk as soon as it exists
            _append_line(log_path, res.to_json())
        if progress is not None and not cancel.is_set():
            progress(res)
        return res

    interrupted = False
    with ThreadPoolExecutor(max_workers=box.capacity) as pool:
        # the final evaluation: shown cases and the hidden set no round of the agent judged
        futures = [
            pool.submit(one, oc.op, [*oc.cases, *oc.hidden_final]) for oc in selection.ops
        ]
        try:
            results = [f.result() for f in futures]
        except KeyboardInterrupt:
            # Kill the sandboxes in flight, account for every operator, write what we have.
            interrupted = True
            cancel.set()
            results = [f.result() for f in futures]
    run_info["finished"] = datetime.now(UTC).isoformat(timespec="seconds")
    run_info["suite_summary"] = selection.summary()
    notes = [selection.summary(), *selection.errors]
    for oc in selection.ops:
        files = kernel_files(kdir, oc.op, config.kernel_file_glob)
        if len(files) > 1:
            notes.append(
                f"{oc.op}: {len(files)} files match {config.kernel_file_glob!r}; judged "
                f"{files[0].name}, the first sorted, as BackendBench loads it "
                "(--kernel-file-glob picks another)"
            )
    if interrupted:
        notes.insert(0, "INTERRUPTED: operators marked 'not evaluated' were not judged.")
    if dev == "cpu":
        notes.append("CPU run: kernels ran in Triton's interpreter; performance is not measured.")
    report = Report(
        run=run_info,
        operators=results,
        excluded=list(selection.excluded),
        suite=selection.suite,
        device=dev,
        notes=notes,
        run_dir=run_dir,
        profile=config.correctness.tolerance_profile,
    )
    if write and run_dir is not None:
        if not (Path(run_dir) / "run.json").exists():
            write_json(Path(run_dir) / "run.json", run_info)
        write_reports(Path(run_dir), report)
    if interrupted:
        raise KeyboardInterrupt
    return report


def _append_line(path: Path, data: dict) -> None:
    import json

    with path.open("a", encoding="utf-8") as fh:
        fh.write(json.dumps(data) + "\n")
        fh.flush()
