"""`python -m evaluator.confine --check [--json]`: what this machine enforces, proven by trying.

Prints the probe (Landlock ABI, seccomp, capabilities, PID namespace, process cap), then runs a
child confined exactly as a candidate is (`evaluator.containment.confine`) that tries what a hostile kernel
would: read a decoy process's /proc/<pid>/environ holding a fake secret, write to $HOME and /tmp,
connect to a TCP listener and send to a UDP one on 127.0.0.1, signal the decoy, and leave a
`setsid()` grandchild behind. Each line says whether the attempt was blocked. Exit code 0 when
every attempt was blocked, 1 otherwise. Needs only the standard library (and pyseccomp for the
seccomp part), so it runs under any python3 on the machine.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
import uuid
from typing import Any

from evaluator.containment import confine
from evaluator.containment import process_tree as confine_tree

# SandboxConfig's defaults (kept here so the check needs no pydantic).
_LIMITS = types.SimpleNamespace(
    max_data_mib=32768, max_open_files=1024, max_file_mib=4096, max_processes=512
)


def _attempts(job: str, decoy: int, secret: str, tcp: int, udp: int) -> dict[str, Any]:
    """Runs in the confined candidate: what each attempt achieved."""
    got: dict[str, Any] = {}

    def attempt(name: str, fn: Any) -> None:
        try:
            fn()
            got[name] = "NOT BLOCKED"
        except OSError as exc:
            got[name] = f"blocked ({type(exc).__name__})"

    def read_environ() -> None:
        with open(f"/proc/{decoy}/environ", "rb") as fh:
            if secret.encode() not in fh.read():
                raise PermissionError("secret not visible")

    def write(path: str) -> None:
        with open(path, "w") as fh:
            fh.write("x")
        os.unlink(path)

    def tcp_connect() -> None:
        socket.create_connection(("127.0.0.1", tcp), timeout=2).close()

    def udp_send() -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.sendto(b"x", ("127.0.0.1", udp))

    attempt("read another process's environ", read_environ)
    name = f"atenforge_check_{uuid.uuid4().hex[:8]}"
    attempt("write to $HOME", lambda: write(os.path.join(os.path.expanduser("~"), name)))
    attempt("write to /tmp", lambda: write(os.path.join("/tmp", name)))
    attempt("TCP connect to 127.0.0.1", tcp_connect)
    attempt("UDP send to 127.0.0.1", udp_send)
    attempt("signal another process", lambda: os.kill(decoy, signal.SIGTERM))
    attempt("write to its scratch dir", lambda: write(os.path.join(job, "ok")))
    if got["write to its scratch dir"] == "NOT BLOCKED":
        got["write to its scratch dir"] = "allowed (as it should be)"
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            with open(os.path.join(job, "escaped.pid"), "w") as fh:
                fh.write(os.readlink("/proc/self"))
            time.sleep(300)
        os._exit(0)
    os.wait()
    while not os.path.exists(os.path.join(job, "escaped.pid")):
        time.sleep(0.01)
    return got


def run_check() -> dict[str, Any]:
    probe = confine.probe()
    job = tempfile.mkdtemp(prefix="atenforge_check_")
    secret = f"atenforge-check-{uuid.uuid4().hex}"
    decoy = subprocess.Popen(["sleep", "60"], env={"FAKE_API_KEY": secret, "PATH": os.defpath})
    tcp = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    tcp.bind(("127.0.0.1", 0))
    tcp.listen(1)
    udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    udp.bind(("127.0.0.1", 0))
    violations: list[str] = []
    try:
        pid = os.fork()
        if pid == 0:

            def candidate() -> int:
                policy = confine.build_policy(job, "cpu", _LIMITS)
                status = confine.confine_current_process(
                    policy, lambda e: violations.append(e["kind"])
                )
                got = _attempts(job, decoy.pid, secret, tcp.getsockname()[1], udp.getsockname()[1])
                got["_enforced"], got["_missing"] = status.enforced, status.missing
                got["_violations"] = sorted(violations)
                with open(os.path.join(job, "got.json"), "w") as fh:
                    json.dump(got, fh)
                return 0

            def report(event: dict[str, Any]) -> None:
                with open(os.path.join(job, "tree.jsonl"), "a") as fh:
                    fh.write(json.dumps(event) + "\n")

            confine_tree.run_contained(candidate, _LIMITS.max_processes, report)
        os.waitpid(pid, 0)
        with open(os.path.join(job, "got.json")) as fh:
            got = json.load(fh)
        time.sleep(0.1)
        with open(os.path.join(job, "escaped.pid")) as fh:
            escaped = int(fh.read())
        survived = os.path.exists(f"/proc/{escaped}") and _state(escaped) != "Z"
        got["leave a setsid() grandchild running"] = (
            "NOT BLOCKED" if survived else "blocked (killed)"
        )
        got["_tree"] = os.path.exists(os.path.join(job, "tree.jsonl"))
        tcp.setblocking(False)
        udp.setblocking(False)
        for name, sock in (("TCP connect to 127.0.0.1", tcp), ("UDP send to 127.0.0.1", udp)):
            try:
                sock.accept() if sock is tcp else sock.recv(16)
                got[name] = "NOT BLOCKED (the listener saw it)"
            except BlockingIOError:
                pass
        if decoy.poll() is not None:
            got["signal another process"] = "NOT BLOCKED (the decoy died)"
    finally:
        decoy.kill()
        tcp.close()
        udp.close()
        shutil.rmtree(job, ignore_errors=True)
    return {"containment": probe.label, "probe": probe.enforced, **got}


def _state(pid: int) -> str:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0]
    except (OSError, IndexError):
        return "gone"


def main(argv: list[str]) -> int:
    if "--check" not in argv:
        print("usage: python -m evaluator.confine --check [--json]", file=sys.stderr)
        return 2
    result = run_check()
    attempts = {
        k: v
        for k, v in result.items()
        if not k.startswith("_") and k not in ("containment", "probe")
    }
    if "--json" in argv:
        print(json.dumps(result))
    else:
        print(f"containment: {result['containment']}")
        print(f"offered:     {', '.join(result['probe'])}")
        print(f"applied:     {', '.join(result['_enforced'])}")
        for missing in result["_missing"]:
            print(f"missing:     {missing}")
        for name, outcome in attempts.items():
            print(f"  {name:40s} {outcome}")
        print(
            f"reported as violations: {', '.join(result['_violations']) or 'none'}"
            + (" + process" if result["_tree"] else "")
        )
    return 0 if all(not str(v).startswith("NOT BLOCKED") for v in attempts.values()) else 1
