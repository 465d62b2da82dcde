"""Every process a candidate starts dies with it: a PID namespace per candidate, the candidate its init.

Contract: `run_contained(target, max_processes, report)` is called in a sandbox process S (a
fork-server child or `python -m evaluator.harness`) and never returns: S ends as the candidate
ended (same exit code, or killed by the same signal). S forks the candidate C as pid 1 of a new
PID namespace:
- C caps the namespace at `max_processes` pids (the namespace's own `pid_max`, Linux >= 6.14)
  before running `target`, so a fork bomb stops there, for root as for any user (RLIMIT_NPROC
  does not bind uid 0).
- Every orphan in the namespace (a `setsid()` + fork grandchild included) becomes C's child; when
  `target` returns, C reports the children still alive to `report` as a violation. When C ends,
  however it ends (a time-limit SIGKILL of its process group included), the kernel kills every
  process left in the namespace: nothing a candidate starts outlives it.
- As init, C ignores signals it sends itself whose action is the default (kill(getpid(), SIGTERM)
  does nothing); faults (SIGSEGV, SIGBUS, ...) still end it. Signals from outside work.
- Root creates the namespace directly; another user creates a user namespace first (mapped to
  the same uid, so files keep their owners), when the kernel allows unprivileged ones.
- Where neither works, S is a child subreaper instead: orphans come to S, which reports and kills
  them when C ends; a process that left the group survives a time-limit kill in that case, and
  the process cap is missing. `tree_mode()` says which case the machine is in.
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import time
from collections.abc import Callable
from typing import Any

CLONE_NEWUSER = 0x10000000
CLONE_NEWPID = 0x20000000
_PR_SET_CHILD_SUBREAPER = 36
_LEFTOVER_GRACE_S = 0.05

_libc = ctypes.CDLL(None, use_errno=True)


def _check(ret: int) -> None:
    if ret != 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))


def _unshare_pid_namespace() -> None:
    """Make S's next child the init of a new PID namespace (via a user namespace unless root)."""
    if os.geteuid() == 0:
        _check(_libc.unshare(CLONE_NEWPID))
        return
    uid, gid = os.geteuid(), os.getegid()
    _check(_libc.unshare(CLONE_NEWUSER | CLONE_NEWPID))
    with open("/proc/self/setgroups", "w") as fh:
        fh.write("deny")
    with open("/proc/self/uid_map", "w") as fh:
        fh.write(f"{uid} {uid} 1")
    with open("/proc/self/gid_map", "w") as fh:
        fh.write(f"{gid} {gid} 1")


def tree_mode() -> tuple[str, bool]:
    """('pid_namespace', pid cap works) where a candidate can get its own PID namespace here,
    else ('subreaper', False). Tries both in a short-lived child."""
    pid = os.fork()
    if pid == 0:
        try:
            _unshare_pid_namespace()
            inner = os.fork()
            if inner == 0:
                try:
                    with open("/proc/sys/kernel/pid_max", "w") as fh:
                        fh.write("1000")
                except OSError:
                    os._exit(3)
                os._exit(0)
            _, status = os.waitpid(inner, 0)
            os._exit(os.waitstatus_to_exitcode(status))
        except BaseException:  # noqa: BLE001 - any failure means: not available
            os._exit(1)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code in (0, 3):
        return "pid_namespace", code == 0
    return "subreaper", False


def run_contained(
    target: Callable[[], int],
    max_processes: int,
    report: Callable[[dict[str, Any]], None] | None = None,
    *,
    pid_namespace: bool = True,
) -> None:
    """Run `target` (returns an exit code) as C, pid 1 of a new PID namespace; end S as C ended.
    Without `pid_namespace` (or where the kernel refuses one), S is C's subreaper instead."""
    try:
        if not pid_namespace:
            raise OSError("no PID namespace asked for")
        _unshare_pid_namespace()
        namespace = True
    except OSError:
        namespace = False
        _libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    child = os.fork()
    if child == 0:
        _candidate(target, namespace, max_processes, report)
    if namespace:
        _, status = os.waitpid(child, 0)
    else:
        status = _wait_for(child)
        _report_leftovers(report)
        _kill_children()
    _end_like(status)


def _end_like(status: int) -> None:
    code = os.waitstatus_to_exitcode(status)
    if code < 0:
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        time.sleep(1)
        code = 128 - code
    os._exit(code)


def _candidate(
    target: Callable[[], int],
    namespace: bool,
    max_processes: int,
    report: Callable[[dict[str, Any]], None] | None,
) -> None:
    code = 70
    try:
        if namespace:
            try:
                with open("/proc/sys/kernel/pid_max", "w") as fh:
                    fh.write(str(max_processes))
            except OSError:
                pass  # older kernels share pid_max with the host: no cap, reported by probe()
        code = exit_code_of(target)
        if namespace:
            _report_leftovers(report)
    finally:
        os._exit(code)


def _report_leftovers(report: Callable[[dict[str, Any]], None] | None) -> None:
    alive = _drain_children(_LEFTOVER_GRACE_S)
    if alive and report is not None:
        report(
            {
                "event": "violation",
                "kind": "process",
                "detail": f"{alive} process(es) outlived the candidate's work",
            }
        )


def _wait_for(child: int) -> int:
    """Reap every process that ends (orphans included) until `child` ends; its wait status."""
    while True:
        try:
            pid, status = os.waitpid(-1, 0)
        except InterruptedError:
            continue
        if pid == child:
            return status


def _drain_children(grace_s: float) -> int:
    """Reap what ends within `grace_s`; how many children are still alive then."""
    deadline = time.monotonic() + grace_s
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return 0
        if pid:
            continue
        if time.monotonic() >= deadline:
            return len(_children())
        time.sleep(0.002)


def _children() -> list[int]:
    out = []
    for task in os.listdir("/proc/self/task"):
        try:
            with open(f"/proc/self/task/{task}/children") as fh:
                out += [int(p) for p in fh.read().split()]
        except OSError:
            continue
    return out


def _kill_children() -> None:
    """Subreaper case: kill children until none is left (their orphans come back to us)."""
    for _ in range(10000):
        pids = _children()
        if not pids:
            try:
                while os.waitpid(-1, os.WNOHANG)[0]:
                    pass
            except ChildProcessError:
                return
            continue
        for pid in pids:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            while os.waitpid(-1, os.WNOHANG)[0]:
                pass
        except ChildProcessError:
            return


def exit_code_of(run: Callable[..., Any], *args: Any) -> int:
    """Run a candidate's work; its exit code (sys.exit's code or what `run` returns when it is an
    int, 70 for a harness failure)."""
    code = 0
    try:
        returned = run(*args)
        code = returned if isinstance(returned, int) else 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - a harness failure is reported through the exit code
        import traceback

        traceback.print_exc()
        code = 70
    finally:
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except Exception:  # noqa: BLE001, S110 - the streams may be gone; the code still counts
            pass
    return code
