"""Fork server: a pre-imported Python that forks one isolated child per candidate.

Started by `evaluator.judging.sandbox.Sandbox` with an environment already stripped of secrets. It imports
torch, triton and the harness once (about 1.3 s on the CPU, 3 s with CUDA libraries) and never
touches CUDA itself, so each forked child initialises its own CUDA context (a parent that had
initialised CUDA could not fork safely). The server is single-threaded for the same reason.

Protocol, one JSON object per line:
    in:  {"cmd": "run", "id": ID, "spec": PATH, "job_dir": DIR}      out: {"event": "started", "id": ID, "pid": PID}
                                                                     out: {"event": "exit", "id": ID, "code": C}
    in:  {"cmd": "shutdown"}   (or end of input): kill every child and exit
`code` follows subprocess conventions: negative = killed by that signal.
"""

from __future__ import annotations

import json
import os
import select
import signal
import sys
import traceback


def _emit(event: dict) -> None:
    os.write(1, (json.dumps(event) + "\n").encode())


def _child(spec: str, job_dir: str) -> None:
    try:
        os.setsid()  # own process group: the evaluator kills the whole group on a timeout
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        os.chdir(job_dir)
        devnull = os.open(os.devnull, os.O_RDONLY)
        os.dup2(devnull, 0)
        out = os.open("stdout.txt", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        err = os.open("stderr.txt", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.dup2(out, 1)
        os.dup2(err, 2)
        sys.stdout = os.fdopen(1, "w", buffering=1, closefd=False)
        sys.stderr = os.fdopen(2, "w", buffering=1, closefd=False)
        from evaluator.containment.confine import contain_job
        from evaluator.containment.process_tree import exit_code_of
        from evaluator.judge.verifier import run_job

        contain_job(spec, lambda: exit_code_of(run_job, spec))
    except BaseException:  # noqa: BLE001 - a harness failure is reported through the exit code
        traceback.print_exc()
        sys.stderr.flush()
    os._exit(70)


def serve() -> None:
    import torch  # pre-import: this is what the children inherit
    import triton  # noqa: F401

    import evaluator.containment.confine  # noqa: F401
    import evaluator.containment.watch  # noqa: F401
    import evaluator.judge.timing  # noqa: F401
    import evaluator.judge.verifier  # noqa: F401 - and with it every evaluator.judge module it uses

    try:
        import pyseccomp  # noqa: F401 - loading libseccomp costs a child 20 ms
    except (ImportError, OSError):
        pass  # reported as missing by evaluator.containment.confine.probe()

    if os.environ.get("TRITON_INTERPRET") == "1":
        import triton.runtime.interpreter  # noqa: F401
    else:
        # What a child's first launch would otherwise import; importing creates no CUDA context.
        import importlib

        for name in (
            "triton.compiler.compiler",
            "triton.backends.nvidia.compiler",
            "triton.backends.nvidia.driver",
            "triton.runtime.build",
            "triton.runtime.autotuner",
        ):
            try:
                importlib.import_module(name)
            except Exception:  # noqa: BLE001 - best effort: a missing backend only costs time
                pass

    # Warm what every child would otherwise load on its first guarded call: entering a
    # TorchDispatchMode imports torch._dynamo lazily (~1.2-1.5 s per child on 2 cores). CPU
    # tensors only: the server must never create a CUDA context.
    from evaluator.judge.guards import AtenTrace, LaunchCounter

    with AtenTrace(LaunchCounter()):
        torch.empty(1).add_(1)
    assert not torch.cuda.is_initialized()

    children: dict[int, str] = {}
    buf = b""
    _emit({"event": "ready", "pid": os.getpid()})
    stdin = sys.stdin.fileno()
    open_input = True
    while open_input or children:
        ready, _, _ = select.select([stdin] if open_input else [], [], [], 0.005)
        if ready:
            data = os.read(stdin, 65536)
            if not data:
                open_input = False
                _kill_all(children)
            buf += data
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                if not line.strip():
                    continue
                msg = json.loads(line)
                if msg.get("cmd") == "shutdown":
                    open_input = False
                    _kill_all(children)
                elif msg.get("cmd") == "run":
                    assert not torch.cuda.is_initialized(), "fork server must never initialise CUDA"
                    pid = os.fork()
                    if pid == 0:
                        _child(msg["spec"], msg["job_dir"])
                    children[pid] = msg["id"]
                    _emit({"event": "started", "id": msg["id"], "pid": pid})
        while children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                children.clear()
                break
            if pid == 0:
                break
            job = children.pop(pid, None)
            if job is not None:
                _emit({"event": "exit", "id": job, "code": os.waitstatus_to_exitcode(status)})


def kill_group(pid: int) -> None:
    """SIGKILL the process group `pid` leads, or the process alone when it leads none."""
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _kill_all(children: dict[int, str]) -> None:
    for pid in list(children):
        kill_group(pid)


if __name__ == "__main__":
    serve()
