"""The parent's client of the fork server (`evaluator.judging.sandbox_server`): start it, submit
jobs, and hand each job's messages (started, exit, server gone) to the thread that waits on it."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from queue import Queue
from typing import Any


class ForkServer:
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
