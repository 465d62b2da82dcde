"""Evidence of a candidate trying to leave its confinement, from Python's audit events.

Contract: `ViolationWatch(readable, writable, report).install()` adds a `sys.addaudithook` hook (hooks cannot
be removed from Python) that calls `report({"event": "violation", "kind": K, "detail": D})` once
per kind, where K is one of:
- `write`: a file opened for writing, created, removed, renamed, linked or re-moded outside the
  writable roots (the job's scratch directory, the Triton and CUDA caches, /dev/null);
- `proc`: another process's /proc entry opened (its environ, mem, cmdline, ...), or /proc listed;
- `read`: a file opened under a home directory, /root or /etc outside what the policy allows;
- `network`: a socket created, connected, bound or sent to;
- `signal`: a signal sent to another process or process group.
The kernel's rules (Landlock, seccomp) block each of these; the hook only records the attempt, so a
failure inside it is swallowed rather than allowed to change what the candidate sees.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from typing import Any

_WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND
_PATH_EVENTS = {
    "os.mkdir": 0, "os.rmdir": 0, "os.remove": 0, "os.truncate": 0, "os.chmod": 0,
    "os.chown": 0, "os.utime": 0, "os.mknod": 0, "os.mkfifo": 0,
}  # fmt: skip
_TWO_PATH_EVENTS = {"os.rename", "os.link", "os.symlink"}
_SOCKET_EVENTS = {
    "socket.__new__",
    "socket.connect",
    "socket.bind",
    "socket.sendto",
    "socket.sendmsg",
}
_SIGNAL_EVENTS = {"os.kill", "os.killpg"}
_LIST_EVENTS = {"os.listdir", "os.scandir"}
_WATCHED = (
    {"open"} | _LIST_EVENTS | set(_PATH_EVENTS) | _TWO_PATH_EVENTS | _SOCKET_EVENTS | _SIGNAL_EVENTS
)
_PROC_PID = re.compile(r"^/proc/(\d+)(/|$)")


class ViolationWatch:
    def __init__(
        self,
        readable: list[str],
        writable: list[str],
        report: Callable[[dict[str, Any]], None] | None,
    ) -> None:
        self.writable = [os.path.realpath(p) for p in writable] + ["/dev/null"]
        self.private = [
            p for p in {os.path.expanduser("~"), "/root", "/home", "/etc"} if p and p != "/"
        ]
        self.report = report
        self.seen: set[str] = set()
        self.pid = os.getpid()
        try:
            self.proc_pid = os.path.basename(os.path.realpath("/proc/self"))
        except OSError:
            self.proc_pid = str(self.pid)
        self.readable = [os.path.realpath(p) for p in readable]

    def install(self) -> None:
        sys.addaudithook(self._hook)

    def _flag(self, kind: str, detail: str) -> None:
        if kind in self.seen:
            return
        self.seen.add(kind)
        if self.report is not None:
            self.report({"event": "violation", "kind": kind, "detail": detail[:300]})

    def _hook(self, event: str, args: tuple[Any, ...]) -> None:
        if event not in _WATCHED:
            return
        try:
            self._check(event, args)
        except Exception:  # noqa: BLE001, S110 - evidence only: never change the candidate's call
            pass

    def _check(self, event: str, args: tuple[Any, ...]) -> None:
        if event == "open":
            path, mode, flags = (list(args) + [None, None, None])[:3]
            if isinstance(path, int) or path is None:
                return
            text = os.path.abspath(os.fsdecode(path))
            writes = (isinstance(flags, int) and flags >= 0 and flags & _WRITE_FLAGS) or (
                isinstance(mode, str) and any(c in mode for c in "wax+")
            )
            if not writes:
                self._check_read(text)
            elif not self._under(text, self.writable):
                self._flag("write", f"open({text!r}, {mode or flags!r})")
        elif event in _LIST_EVENTS:
            if args[0] is not None and not isinstance(args[0], int):
                self._check_read(os.path.abspath(os.fsdecode(args[0])))
        elif event in _PATH_EVENTS:
            self._check_write(event, args[0])
        elif event in _TWO_PATH_EVENTS:
            self._check_write(event, args[1])
            if event == "os.rename":
                self._check_write(event, args[0])
        elif event in _SOCKET_EVENTS:
            self._flag("network", f"{event}{args[1:]!r}")
        elif event in _SIGNAL_EVENTS:
            target, sig = args[0], args[1]
            if event == "os.kill" and target == self.pid and os.getpid() == self.pid:
                return
            self._flag("signal", f"{event}({target}, {sig})")

    def _check_write(self, event: str, path: Any) -> None:
        if isinstance(path, int) or path is None:
            return
        text = os.path.abspath(os.fsdecode(path))
        if event == "os.mkdir" and os.path.isdir(text):
            return  # it can only fail with EEXIST (Inductor's C++ builder "creates" its cwd)
        if not self._under(text, self.writable):
            self._flag("write", f"{event}({text!r})")

    def _check_read(self, text: str) -> None:
        match = _PROC_PID.match(text)
        if text == "/proc" or match and match.group(1) not in (self.proc_pid, str(os.getpid())):
            self._flag("proc", f"open({text!r})")
            return
        if self._under(text, self.private) and not self._under(text, self.readable + self.writable):
            self._flag("read", f"open({text!r})")

    @staticmethod
    def _under(path: str, roots: list[str]) -> bool:
        real = os.path.realpath(path)
        for candidate in {path, real}:
            for root in roots:
                if candidate == root or candidate.startswith(root.rstrip("/") + "/"):
                    return True
        return False
