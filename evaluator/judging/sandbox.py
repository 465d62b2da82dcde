"""Run untrusted kernels in separate processes and turn what happened into an OperatorResult.

What the isolation covers:
- every candidate runs in its own process (a child forked from a pre-imported server, or a fresh
  interpreter), in its own process group, in a scratch working directory, with an environment
  stripped of secrets (any name containing KEY, TOKEN, SECRET, PASSWORD or starting with OPENAI_ /
  ANTHROPIC_); the deciding process never imports generated code;
- a segfault, a hang (the whole process group is killed at the per-test or per-operator limit),
  `sys.exit`/`os._exit`, an exception at import or a lost CUDA context ends only that candidate's
  run; tests already finished keep their results (the child writes one JSON line per event);
- the fork server never initialises CUDA; each child creates its own context;
- on the CPU the kernel runs in a runner process forked by the verifier before any reference,
  key or results file exists there; every results line carries a sequence number and an HMAC
  under a per-job key that only the verifier reads; a line that does not verify makes the
  verdict `rejected` (`forged_result`);
- each candidate's runner is confined at the OS level before its kernel module is imported
  (`evaluator.containment.confine`, docs/SANDBOX.md): writes only to its scratch directory and the Triton and
  CUDA caches, reads only what Python, torch, Triton and the CUDA driver need, no sockets (Unix
  ones on a GPU), no capabilities, no view of other processes' /proc entries, no signals outside
  its sandbox, caps on memory, open files, file size and processes, and every process it starts
  dies with it (a PID namespace per candidate on the CPU, a subreaper on a GPU). Attempts to
  leave are reported as `sandbox_violation:<kind>`.
What it does NOT cover: on a GPU the kernel still runs in the verifier's process (guards detect
known tampering, but it could reach references there); a GPU can be hogged within the time
limits and GPU memory is not capped; timing and cache side channels stay open; the Triton cache
is shared by candidates. `run.json` says how much of the confinement this machine offers
(`containment: full | partial (...)`).

This module starts and watches the child; `job_log` reads and verifies its results file,
`verdict` turns its events and exit into the `OperatorResult`, `fork_client` talks to the fork
server.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path
from queue import Empty, Queue
from typing import Any

from evaluator.cases.testcase import TestCase
from evaluator.config import EvalConfig
from evaluator.judge.guards import is_secret_name
from evaluator.judging.fork_client import ForkServer
from evaluator.judging.job_log import JobState
from evaluator.judging.sandbox_server import kill_group
from evaluator.judging.verdict import Outcome, assemble, ran_out_of_gpu_memory
from evaluator.kernel_errors import show_user_path
from evaluator.naming import op_to_folder
from evaluator.results import OperatorResult, Status

log = logging.getLogger(__name__)
PROJECT_ROOT = Path(__file__).resolve().parents[2]
_POLL_S = 0.005


def clean_env(device: str, cache_dir: Path) -> dict[str, str]:
    """The sandbox's environment: the caller's minus secrets, plus what Triton needs."""
    env = {k: v for k, v in os.environ.items() if not is_secret_name(k)}
    if device == "cpu":
        env["TRITON_INTERPRET"] = "1"
    else:
        env.pop("TRITON_INTERPRET", None)
    env["TRITON_CACHE_DIR"] = str(cache_dir)
    # Writable when confined; Triton's other dirs (dump, override) under the scratch dir too.
    env["CUDA_CACHE_PATH"] = str(cache_dir.parent / "cuda_cache")
    env["TRITON_HOME"] = str(cache_dir.parent)
    env["PYTHONPATH"] = os.pathsep.join([str(PROJECT_ROOT), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    env["PYTHONUNBUFFERED"] = "1"
    return env


class Sandbox:
    """Judges candidates in isolated processes; one instance serves many threads."""

    def __init__(self, config: EvalConfig, device: str, scratch_root: Path | None = None) -> None:
        self.config = config
        self.device = device
        if config.sandbox.confine or config.sandbox.require_containment:
            from evaluator.containment.confine import containment_label, require_full_containment

            require_full_containment(config.sandbox)
            self.containment = containment_label(config.sandbox.confine)
            if self.containment != "full":
                log.warning("candidates are confined only in part: %s", self.containment)
        else:
            self.containment = "off (eval.sandbox.confine = false)"
        self._own_scratch = scratch_root is None
        self.scratch = Path(scratch_root or tempfile.mkdtemp(prefix="atenforge_sandbox_"))
        self.scratch.mkdir(parents=True, exist_ok=True)
        self.env = clean_env(device, self.scratch / "triton_cache")
        self._slots = threading.BoundedSemaphore(config.sandbox.num_parallel)
        self._server: ForkServer | None = None
        self._server_lock = threading.Lock()

    # ------------------------------------------------------------ process control

    def _fork_server(self) -> ForkServer:
        with self._server_lock:
            if self._server is None or not self._server.alive():
                self._server = ForkServer(self.env, self.scratch)
                if not self._server.ready.wait(timeout=120):
                    raise RuntimeError("the sandbox fork server did not start within 120 s")
                if not self._server.alive():
                    raise RuntimeError(
                        f"the sandbox fork server exited; see {self.scratch / 'fork_server.stderr.txt'}"
                    )
            return self._server

    def close(self) -> None:
        with self._server_lock:
            if self._server is not None:
                self._server.close()
                self._server = None
        if self._own_scratch:
            shutil.rmtree(self.scratch, ignore_errors=True)

    def __enter__(self) -> Sandbox:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------ judging

    def judge(
        self,
        kernel_file: Path,
        op: str,
        cases: list[TestCase],
        *,
        measure_performance: bool = False,
        cancel: threading.Event | None = None,
        keep_job_dir: bool = False,
    ) -> OperatorResult:
        folder = op_to_folder(op)
        job_id = uuid.uuid4().hex[:12]
        job_dir = self.scratch / f"job_{folder}_{job_id}"
        job_dir.mkdir(parents=True)
        local_kernel = job_dir / Path(kernel_file).name
        shutil.copyfile(kernel_file, local_kernel)
        results_path = job_dir / "results.jsonl"
        spec = {
            "op": op,
            "kernel_file": str(local_kernel),
            "cases": [c.serialize() for c in cases],
            "device": self.device,
            "config": self.config.model_dump(mode="json"),
            "measure_performance": measure_performance and self.device == "cuda",
            "results_path": str(results_path),
            "timing_lock": str(self.scratch / "gpu_timing.lock"),
            "key_file": str(job_dir / "results.key"),
        }
        spec_path = job_dir / "spec.json"
        spec_path.write_text(json.dumps(spec))
        started = time.monotonic()
        with self._slots:
            outcome = self._run(job_id, spec_path, job_dir, results_path, len(cases), cancel)
        result = show_user_path(
            assemble(op, str(kernel_file), cases, outcome), str(local_kernel), str(kernel_file)
        )
        if self.device == "cuda" and ran_out_of_gpu_memory(
            result, _tail(job_dir / "stderr.txt", 20000)
        ):
            # Other sandboxes share the GPU's memory: a kernel is judged on what it does alone.
            # Run it again holding the GPU exclusively; that verdict stands, whatever it is.
            spec["gpu_alone"] = True
            spec_path.write_text(json.dumps(spec))
            results_path.unlink(missing_ok=True)
            with self._slots:
                outcome = self._run(job_id, spec_path, job_dir, results_path, len(cases), cancel)
            result = show_user_path(
                assemble(op, str(kernel_file), cases, outcome), str(local_kernel), str(kernel_file)
            )
            result.phases_s["rerun_alone"] = 1.0
        if result.status is Status.ERROR:
            from evaluator.containment.confine import limit_hint

            result.reason += limit_hint(result.reason, self.config.sandbox)
        result.wall_s = time.monotonic() - started
        result.phases_s |= {"submit": round((outcome.state.begun_at or started) - started, 4)}
        result.phases_s |= outcome.state.phases()
        if not keep_job_dir:
            shutil.rmtree(job_dir, ignore_errors=True)
        return result

    def _run(
        self,
        job_id: str,
        spec: Path,
        job_dir: Path,
        results: Path,
        n_cases: int,
        cancel: threading.Event | None,
    ) -> Outcome:
        cfg = self.config.sandbox
        key = secrets.token_bytes(32)
        key_file = job_dir / "results.key"
        fd = os.open(key_file, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        os.write(fd, key.hex().encode())
        os.close(fd)
        state = JobState(key=key)
        outcome = Outcome(state=state)
        proc: subprocess.Popen[bytes] | None = None
        queue: Queue[dict[str, Any]] | None = None
        if cfg.mode == "fork":
            queue = self._fork_server().submit(job_id, spec, job_dir)
            msg = queue.get(timeout=60)
            if msg.get("event") != "started":
                outcome.infra_error = (
                    "the sandbox fork server stopped before starting the candidate"
                )
                return outcome
            pid = msg["pid"]
        else:
            with (
                open(job_dir / "stdout.txt", "ab") as out,
                open(job_dir / "stderr.txt", "ab") as err,
            ):
                proc = subprocess.Popen(
                    [sys.executable, "-m", "evaluator.judge.verifier", str(spec)],
                    cwd=job_dir,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=out,
                    stderr=err,
                    start_new_session=True,
                )
            pid = proc.pid
        begin = time.monotonic()
        state.begun_at = begin
        while True:
            code = self._exit_code(proc, queue)
            state.read(results)
            if code is not None:
                if queue is not None and code == -int(signal.SIGKILL):
                    kill_group(pid)  # the fork server died: its orphaned child must not run on
                state.read(results)
                outcome.exit_code = code
                break
            now = time.monotonic()
            why = None
            if cancel is not None and cancel.is_set():
                why = "cancelled"
            elif now - begin > cfg.operator_timeout_s:
                why = f"operator time limit {cfg.operator_timeout_s:g} s (eval.sandbox.operator_timeout_s)"
            elif (
                state.current_test is not None
                and state.test_started_at
                and now - state.test_started_at > cfg.test_timeout_s
            ):
                why = f"test time limit {cfg.test_timeout_s:g} s (eval.sandbox.test_timeout_s)"
            elif (
                state.prepared_at
                and not state.loaded_at
                and now - state.prepared_at > cfg.test_timeout_s
            ):
                why = f"import of the kernel took over {cfg.test_timeout_s:g} s (eval.sandbox.test_timeout_s)"
            if why is not None:
                kill_group(pid)
                outcome.killed = why
                outcome.exit_code = self._wait_exit(proc, queue)
                state.read(results)
                break
            time.sleep(_POLL_S)
        outcome.stderr_tail = _tail(job_dir / "stderr.txt")
        return outcome

    def _exit_code(
        self, proc: subprocess.Popen[bytes] | None, queue: Queue[dict[str, Any]] | None
    ) -> int | None:
        if proc is not None:
            return proc.poll()
        assert queue is not None
        try:
            msg = queue.get_nowait()
        except Empty:
            return None
        if msg.get("event") == "server_gone":
            return -int(signal.SIGKILL)
        return int(msg["code"]) if msg.get("event") == "exit" else None

    def _wait_exit(
        self, proc: subprocess.Popen[bytes] | None, queue: Queue[dict[str, Any]] | None
    ) -> int | None:
        if proc is not None:
            try:
                return proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                return None
        assert queue is not None
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                msg = queue.get(timeout=0.5)
            except Empty:
                continue
            if msg.get("event") == "exit":
                return int(msg["code"])
            if msg.get("event") == "server_gone":
                return None
        return None


def _tail(path: Path, limit: int = 1500) -> str:
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return ""
    return data[-limit:].decode(errors="replace").strip()
