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
"""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import os
import re
import secrets
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from queue import Empty, Queue
from typing import Any

from evaluator.cases.testcase import TestCase
from evaluator.config import EvalConfig
from evaluator.judge.guards import is_secret_name
from evaluator.judging.sandbox_server import kill_group
from evaluator.kernel_errors import load_error_reason, show_user_path
from evaluator.naming import op_to_folder
from evaluator.results import (
    ERROR_FLAGS,
    REJECT_FLAGS,
    Flag,
    OperatorResult,
    Status,
    TestResult,
    flag_name,
    geomean,
)

log = logging.getLogger(__name__)
_MAC_TAIL = re.compile(rb', "mac": "([0-9a-f]{64})"\}$')
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


@dataclass
class JobState:
    """What the parent has read of a child's results file so far."""

    events: list[dict[str, Any]] = field(default_factory=list)
    offset: int = 0
    current_test: int | None = None
    test_started_at: float | None = None
    prepared_at: float | None = None
    loaded_at: float | None = None
    done: bool = False
    begun_at: float | None = None  # the child exists (forked or spawned)
    done_at: float | None = None
    test_s: list[float] = field(default_factory=list)  # seconds per finished test
    key: bytes | None = None  # lines must carry this key's HMAC and the next sequence number
    seq: int = 0
    forged: int = 0  # lines that did not verify: written by someone without the key

    def phases(self) -> dict[str, float]:
        """Seconds per phase as seen by the parent: spawn, prepare (inputs + eager
        references, CUDA init), import (kernel module), tests (calls, checks, timing)."""
        marks = [("prepare", self.prepared_at), ("import", self.loaded_at), ("tests", self.done_at)]
        out: dict[str, float] = {}
        last = self.begun_at
        for name, mark in marks:
            if last is None or mark is None:
                break
            out[name] = round(mark - last, 4)
            last = mark
        if self.test_s:
            # The first test pays one-time costs (CUDA context, first Triton launches).
            out["first_test"] = round(self.test_s[0], 4)
            out["later_tests_median"] = round(statistics.median(self.test_s[1:] or [0.0]), 4)
        return out

    def read(self, path: Path) -> None:
        try:
            with path.open("rb") as fh:
                fh.seek(self.offset)
                data = fh.read()
        except FileNotFoundError:
            return
        if not data:
            return
        complete, _, _ = data.rpartition(b"\n")
        if not complete and not data.endswith(b"\n"):
            return
        self.offset += len(complete) + 1
        read_at = time.monotonic()
        for line in complete.split(b"\n"):
            if not line.strip():
                continue
            if self.key is not None:
                signed = self._verified(line)
                if signed is None:
                    evidence = _unsigned_violation(line)
                    if evidence is not None:
                        self.events.append(evidence)
                    else:
                        self.forged += 1
                    continue
                line = signed
            try:
                event = json.loads(line)
            except json.JSONDecodeError:
                continue
            if self.key is not None:
                if event.get("seq") != self.seq:
                    self.forged += 1
                    continue
                self.seq += 1
            self.events.append(event)
            kind = event.get("event")
            stamp = event.get("t")
            now = stamp if isinstance(stamp, float) and stamp <= read_at else read_at
            if kind == "prepared":
                self.prepared_at = now
            elif kind in ("loaded", "load_error"):
                self.loaded_at = self.loaded_at or now
            elif kind == "test_start":
                self.current_test = event["index"]
                self.test_started_at = now
            elif kind == "test_result":
                if self.test_started_at is not None and self.current_test is not None:
                    self.test_s.append(now - self.test_started_at)
                self.current_test = None
                self.test_started_at = now
            elif kind == "done":
                self.done = True
                self.done_at = now

    def _verified(self, line: bytes) -> bytes | None:
        """The line without its MAC when the MAC verifies, else None."""
        assert self.key is not None
        m = _MAC_TAIL.search(line.rstrip())
        if m is None:
            return None
        body = line[: m.start()] + b"}"
        want = hmac.new(self.key, body, hashlib.sha256).hexdigest().encode()
        return body if hmac.compare_digest(want, m.group(1)) else None


def _unsigned_violation(line: bytes) -> dict[str, Any] | None:
    """A containment violation reported by a process that holds no results key (the candidate's
    process-tree keeper, which reports leftover processes after the verifier is gone). Accepted
    unsigned because it can only make the verdict worse; anything else unsigned is a forgery."""
    try:
        event = json.loads(line)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return None
    if (
        isinstance(event, dict)
        and event.get("event") == "violation"
        and set(event) <= {"event", "kind", "detail"}
        and isinstance(event.get("kind"), str)
        and len(event["kind"]) <= 32
    ):
        return {"event": "violation", "kind": event["kind"], "detail": str(event.get("detail"))[:300]}
    return None


class _ForkServer:
    """Client side of `evaluator.judging.sandbox_server`; thread-safe; restarted if it dies."""

    def __init__(self, env: dict[str, str], cwd: Path) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "evaluator.judging.sandbox_server"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=open(cwd / "fork_server.stderr.txt", "ab"),  # noqa: SIM115
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        self.lock = threading.Lock()
        self.queues: dict[str, Queue[dict[str, Any]]] = {}
        self.ready = threading.Event()
        self.reader = threading.Thread(target=self._read, name="fork-server-reader", daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            try:
                msg = json.loads(line)
            except json.JSONDecodeError:
                continue
            if msg.get("event") == "ready":
                self.ready.set()
                continue
            queue = self.queues.get(msg.get("id", ""))
            if queue is not None:
                queue.put(msg)
        self.ready.set()
        for queue in list(self.queues.values()):
            queue.put({"event": "server_gone"})

    def alive(self) -> bool:
        return self.proc.poll() is None

    def submit(self, job_id: str, spec: Path, job_dir: Path) -> Queue[dict[str, Any]]:
        queue: Queue[dict[str, Any]] = Queue()
        self.queues[job_id] = queue
        msg = json.dumps({"cmd": "run", "id": job_id, "spec": str(spec), "job_dir": str(job_dir)})
        with self.lock:
            assert self.proc.stdin is not None
            self.proc.stdin.write((msg + "\n").encode())
            self.proc.stdin.flush()
        return queue

    def close(self) -> None:
        try:
            with self.lock:
                if self.proc.stdin is not None and not self.proc.stdin.closed:
                    self.proc.stdin.write(b'{"cmd": "shutdown"}\n')
                    self.proc.stdin.close()
            self.proc.wait(timeout=10)
        except (OSError, subprocess.TimeoutExpired, ValueError):
            self.proc.kill()


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
        self._server: _ForkServer | None = None
        self._server_lock = threading.Lock()

    # ------------------------------------------------------------ process control

    def _fork_server(self) -> _ForkServer:
        with self._server_lock:
            if self._server is None or not self._server.alive():
                self._server = _ForkServer(self.env, self.scratch)
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


@dataclass
class Outcome:
    state: JobState
    exit_code: int | None = None
    killed: str | None = None
    infra_error: str | None = None
    stderr_tail: str = ""


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


_GPU_OOM_MARKERS = ("out of memory", "OutOfMemoryError", "cudaErrorMemoryAllocation")


def ran_out_of_gpu_memory(result: OperatorResult, stderr_tail: str = "") -> bool:
    """Whether a verdict that is not a pass says the GPU's memory ran out, in the operator's
    reason, a test's message or the child's stderr (the reason keeps only the end of a long
    allocator message). An H200 evaluation with eight sandboxes at once lost a 4.7 GB
    log_softmax backward this way: its child alone held 41 GiB of inputs and references."""
    if result.status == Status.PASSED:
        return False
    texts = [result.reason, stderr_tail] + [r.error_msg or "" for r in result.results]
    return any(marker in text for text in texts for marker in _GPU_OOM_MARKERS)


def assemble(op: str, kernel_file: str, cases: list[TestCase], outcome: Outcome) -> OperatorResult:
    """Turn a child's events and exit into a verdict. Every case appears in the results."""
    result = OperatorResult(
        op=op, folder=op_to_folder(op), status=Status.ERROR, kernel_file=kernel_file
    )
    state = outcome.state
    if state.forged:
        result.status = Status.REJECTED
        result.flags = [f"{Flag.FORGED_RESULT}:{state.forged} line(s)"]
        result.reason = (
            f"rejected: {state.forged} line(s) of the results file were not written by the"
            " verifier (the kernel's process wrote to it)"
        )
        result.tests = len(cases)
        return result
    tests: dict[int, TestResult] = {}
    op_flags: list[str] = []
    load_error: dict[str, Any] | None = None
    for event in state.events:
        kind = event.get("event")
        if kind == "load_error":
            load_error = event
        elif kind == "loaded":
            op_flags += [f for f in event.get("flags", []) if f not in op_flags]
        elif kind == "violation":  # evaluator.containment.watch / confine_tree
            flag = f"{Flag.SANDBOX_VIOLATION}:{event.get('kind')}"
            op_flags += [flag] if flag not in op_flags else []
        elif kind == "test_result":
            tests[event["index"]] = TestResult.from_json(event["result"])
        elif kind == "timing" and event["index"] in tests:
            t = tests[event["index"]]
            if "error" in event:
                t.error_msg = f"timing failed: {event['error']}"
                continue
            t.eager_ms, t.kernel_ms, t.speedup, t.floor_ms = (
                event["eager_ms"],
                event["kernel_ms"],
                event["speedup"],
                event["floor_ms"],
            )
            t.kernel_host_ms = event.get("kernel_host_ms")
            t.eager_host_ms = event.get("eager_host_ms")
            t.l2_state = event.get("l2_state")
            t.compile_ms = event.get("compile_ms")
            t.speedup_vs_compile = event.get("speedup_vs_compile")
            if event.get("compile_error") and "compile_baseline_error" not in t.flags:
                t.flags.append("compile_baseline_error")  # a note: the verdict stands
            t.flags += [f for f in event.get("flags", []) if f not in t.flags]

    def _fault() -> tuple[str, str]:
        if outcome.killed:
            if outcome.killed == "cancelled":
                return "cancelled", "cancelled: another candidate won or the run stopped"
            return Flag.TIMEOUT, f"killed: {outcome.killed}"
        code = outcome.exit_code
        if code is None:
            return Flag.CRASHED, "the sandbox process could not be reaped"
        if code < 0:
            return (
                f"{Flag.CRASHED}:{_signal_name(code)}",
                f"the process died of {_signal_name(code)}",
            )
        if code == 70:
            return Flag.CRASHED, f"the harness failed: {outcome.stderr_tail[-400:]}"
        return f"{Flag.EXIT_CALLED}:{code}", f"the process exited with code {code} before finishing"

    if outcome.infra_error:
        result.reason = outcome.infra_error
        result.flags = [Flag.CRASHED]
        return result
    if load_error is not None:
        result.flags = [load_error["flag"]] + op_flags
        result.reason = load_error_reason(load_error["error_type"], load_error["error_msg"])
        result.tests = len(cases)  # none of them could run: each counts as not passed
        result.status = (
            Status.REJECTED if any(flag_name(f) in REJECT_FLAGS for f in op_flags) else Status.ERROR
        )
        return result
    fault = None if state.done else _fault()
    if fault is not None and state.loaded_at is None:
        result.flags = [fault[0]] + op_flags
        where = "while importing the kernel" if state.events else "while preparing the tests"
        result.reason = f"{fault[1]} {where}"
        result.tests = len(cases)
        result.status = (
            Status.REJECTED if any(flag_name(f) in REJECT_FLAGS for f in op_flags) else Status.ERROR
        )
        return result
    for i, case in enumerate(cases):
        if i in tests:
            continue
        if fault is not None and i == state.current_test:
            tests[i] = TestResult(
                args=case.serialize(),
                passed=False,
                error_type="Fault",
                error_msg=fault[1],
                flags=[fault[0]],
            )
        else:
            tests[i] = TestResult(
                args=case.serialize(),
                passed=False,
                error_type="NotRun",
                error_msg="not run: the sandbox ended before this test",
            )
    ordered = [tests[i] for i in range(len(cases))]
    for case, t in zip(cases, ordered, strict=True):
        if getattr(case, "hidden", False):
            t.hidden = True
            if not t.passed and not t.skipped and Flag.HIDDEN_CASE not in t.flags:
                t.flags.append(Flag.HIDDEN_CASE)
    result.results = ordered
    ran = [t for t in ordered if not t.skipped]
    result.tests = len(ran)
    result.skipped_tests = len(ordered) - len(ran)
    result.passed = sum(1 for t in ran if t.passed)
    result.hidden_tests = sum(1 for t in ran if t.hidden)
    result.hidden_passed = sum(1 for t in ran if t.hidden and t.passed)
    flags = list(op_flags)
    for t in ordered:
        flags += [f for f in t.flags if f not in flags and flag_name(f) != Flag.SKIPPED_SIZE]
    if fault is not None and fault[0] not in flags:
        flags.append(fault[0])
    result.flags = flags
    names = {flag_name(f) for f in flags}
    first_bad = next((t for t in ran if not t.passed), None)
    if names & REJECT_FLAGS:
        result.status = Status.REJECTED
        bad = [f for f in flags if flag_name(f) in REJECT_FLAGS]
        detail = first_bad.error_msg if first_bad and first_bad.error_msg else ""
        keep = detail and not detail.startswith("flags:")
        result.reason = f"rejected: {', '.join(bad)}" + (f"; {detail}" if keep else "")
    elif names & ERROR_FLAGS or (fault is not None and fault[0] != "cancelled"):
        result.status = Status.ERROR
        result.reason = (first_bad.error_msg if first_bad and first_bad.error_msg else "") or (
            fault[1] if fault else ""
        )
        if first_bad and first_bad.error_type and first_bad.error_type not in ("Fault", "NotRun"):
            result.reason = f"{first_bad.error_type}: {result.reason}"
    elif fault is not None:
        result.status = Status.ERROR
        result.reason = fault[1]
    elif not ran:
        result.status = Status.SKIPPED
        result.reason = ordered[0].error_msg if ordered else "no test cases"
    elif first_bad is None:
        result.status = Status.PASSED
        speeds = [t.speedup for t in ran if t.speedup is not None]
        result.geomean_speedup = geomean(speeds) if speeds and len(speeds) == len(ran) else None
        vs_compile = [t.speedup_vs_compile for t in ran if t.speedup_vs_compile is not None]
        result.geomean_speedup_vs_compile = geomean(vs_compile) if vs_compile else None
        result.reason = ""
    else:
        result.status = Status.FAILED
        where = "hidden case " if first_bad.hidden else ""
        result.reason = f"{result.tests - result.passed} of {result.tests} tests failed; first: {where}{first_bad.args}: {first_bad.error_msg}"
    if result.status is not Status.PASSED and Flag.INTERPRETER_BF16 in names:
        result.reason += " (bf16 cases in Triton's CPU interpreter are unreliable: verify on a GPU)"
    return result
