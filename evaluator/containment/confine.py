"""Confine the process that imports an untrusted kernel, with the Linux kernel's own features.

Contract:
- `confine_current_process(policy, report)` is called once, in the candidate process, after its
  trusted setup (inputs, references, CUDA context) and right before the kernel module is imported.
  It drops every capability and sets no_new_privs, applies Landlock (writes only to the job's
  scratch directory and the Triton and CUDA caches; reads only what Python, torch, Triton and the
  CUDA driver need; no TCP; no signals or abstract Unix sockets to outside processes), loads a
  seccomp filter (no sockets of any family, no io_uring, no ptrace, no new namespaces), sets
  resource limits and installs an audit hook that reports attempts to leave as violations.
  It returns a `ContainmentStatus`: what is enforced, what this machine lacks. It never raises
  for a missing feature.
- `build_policy(...)` is the one place that decides paths and limits.
- `contain_job(spec_path, run)` wraps a whole candidate process tree (see `evaluator.containment.process_tree`):
  a PID namespace with a process cap whose init reaps and reports leftover processes.
- `probe()` says what this machine supports, without confining anything (cached per process);
  `python -m evaluator.confine --check` prints it and proves it in a confined child.
- `make_undumpable()` closes this process's /proc files to other processes of the same user.

The kernel-level rules block the effect; the audit hook is evidence only (code that skips Python's
audit events, e.g. raw syscalls through ctypes, is still blocked, just not reported).
"""

from __future__ import annotations

import ctypes
import errno
import functools
import json
import os
import resource
import shutil
import socket
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evaluator.containment import landlock as confine_landlock
from evaluator.containment import process_tree as confine_tree
from evaluator.errors import UsageError

_PR_SET_DUMPABLE = 4
_PR_CAPBSET_DROP = 24
_PR_SET_NO_NEW_PRIVS = 38
_PR_CAP_AMBIENT = 47
_PR_CAP_AMBIENT_CLEAR_ALL = 4
_CAP_SETPCAP = 8
_CAP_VERSION_3 = 0x20080522
_NAMESPACE_FLAGS = (
    0x80,
    0x20000,
    0x02000000,
    0x04000000,
    0x08000000,
    0x10000000,
    0x20000000,
    0x40000000,
)
_DENIED_SYSCALLS = (
    "io_uring_setup",
    "io_uring_enter",
    "io_uring_register",
    "ptrace",
    "process_vm_readv",
    "process_vm_writev",
    "pidfd_getfd",
    "unshare",
    "setns",
    "mount",
    "umount2",
    "pivot_root",
    "chroot",
    "bpf",
    "perf_event_open",
    "userfaultfd",
    "keyctl",
    "add_key",
    "request_key",
    "open_by_handle_at",
    "name_to_handle_at",
)
PROJECT_ROOT = Path(__file__).resolve().parents[2]

_libc = ctypes.CDLL(None, use_errno=True)


@dataclass
class Policy:
    """What a confined candidate may touch. Paths that do not exist are skipped."""

    read: list[str]
    write: list[str]
    devices: list[str]
    tmp_dir: str
    max_data_mib: int
    max_open_files: int
    max_file_mib: int
    max_processes: int
    # The CUDA driver opens Unix sockets while it initialises (with them refused, or abstract ones
    # scoped away by Landlock, cudaGetDeviceCount fails with error 304): allowed on a GPU only.
    unix_sockets: bool = False


@dataclass
class ContainmentStatus:
    enforced: list[str] = field(default_factory=list)
    missing: list[str] = field(default_factory=list)

    @property
    def full(self) -> bool:
        return not self.missing

    @property
    def label(self) -> str:
        return "full" if self.full else f"partial ({'; '.join(self.missing)})"


def _existing(paths: list[str]) -> list[str]:
    return sorted({p for p in paths if p and os.path.exists(p)})


def _python_read_paths() -> list[str]:
    """The interpreter and its import path; a source checkout on sys.path contributes only its
    `evaluator` package (the rest of a checkout may hold a .env file or run folders)."""
    paths = [sys.prefix, sys.base_prefix, sys.exec_prefix, os.path.dirname(sys.executable)]
    for entry in sys.path:
        if not entry or not os.path.isdir(entry):
            continue
        if os.path.exists(os.path.join(entry, "evaluator", "judge", "verifier.py")):
            paths.append(os.path.join(entry, "evaluator"))
        else:
            paths.append(entry)
    paths.append(str(PROJECT_ROOT / "evaluator"))
    return paths


def _c_compiler_roots() -> list[str]:
    """Where the C compiler lives: Triton builds each kernel's launcher with it on a GPU. A
    compiler outside /usr (the H200 image's /opt/gcc) brings its whole install tree."""
    roots = []
    for name in (os.environ.get("CC", ""), "gcc", "clang", "cc"):
        found = shutil.which(name) if name else None
        if found:
            real = os.path.realpath(found)
            root = os.path.dirname(os.path.dirname(real))
            roots.append(root if root != "/" else os.path.dirname(real))
    return roots


def _gpu_devices() -> list[str]:
    try:
        names = os.listdir("/dev")
    except OSError:
        return []
    return [f"/dev/{n}" for n in names if n.startswith("nvidia")] + ["/dev/dri"]


def build_policy(job_dir: str, device: str, limits: Any) -> Policy:
    """The policy of one candidate. `limits` has the `max_*` fields of SandboxConfig."""
    read = _python_read_paths() + [
        "/usr", "/lib", "/lib64", "/lib32", "/bin", "/sbin",
        "/etc/ld.so.cache", "/etc/ld.so.conf", "/etc/ld.so.conf.d", "/etc/localtime",
        "/etc/nsswitch.conf", "/etc/passwd", "/etc/group", "/etc/os-release",
        "/proc/self", "/proc/cpuinfo", "/proc/meminfo", "/proc/stat", "/proc/sys/kernel",
        "/proc/sys/vm", "/sys/devices/system/cpu", "/sys/devices/system/node",
        "/dev/urandom", "/dev/random", "/dev/zero",
    ]  # fmt: skip
    devices = ["/dev/null"]
    if device == "cuda":
        # The CUDA driver: its device files (ioctl), its /proc and sysfs entries.
        read += ["/proc/driver/nvidia", "/proc/devices", "/proc/modules", "/sys"]
        read += ["/usr/local/cuda", "/opt/nvidia", "/etc/nvidia"] + _c_compiler_roots()
        devices += _gpu_devices()
    write = [job_dir]
    for var in ("TRITON_CACHE_DIR", "CUDA_CACHE_PATH"):
        if os.environ.get(var):
            os.makedirs(os.environ[var], exist_ok=True)
            write.append(os.environ[var])
    return Policy(
        read=_existing(read),
        write=_existing(write),
        devices=_existing(devices),
        tmp_dir=os.path.join(job_dir, "tmp"),
        max_data_mib=limits.max_data_mib,
        max_open_files=limits.max_open_files,
        max_file_mib=limits.max_file_mib,
        max_processes=limits.max_processes,
        unix_sockets=device == "cuda",
    )


# ---------------------------------------------------------------------------- the steps


def make_undumpable() -> None:
    """Other processes of this user can no longer read this process's /proc/<pid>/environ,
    mem or maps (root keeps CAP_SYS_PTRACE; confined candidates have none)."""
    _libc.prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)


def _capability_set_holds(cap: int) -> bool:
    try:
        text = Path("/proc/self/status").read_text()
    except OSError:
        return False
    for line in text.splitlines():
        if line.startswith("CapEff:"):
            return bool(int(line.split()[1], 16) >> cap & 1)
    return False


def _drop_capabilities() -> None:
    """Empty the bounding, ambient, inheritable, permitted and effective sets; no_new_privs."""
    try:
        last = int(Path("/proc/sys/kernel/cap_last_cap").read_text())
    except (OSError, ValueError):
        last = 63
    if _capability_set_holds(_CAP_SETPCAP):
        for cap in range(last + 1):
            _libc.prctl(_PR_CAPBSET_DROP, cap, 0, 0, 0)
    _libc.prctl(_PR_CAP_AMBIENT, _PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0)
    if _libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS) failed")
    header = (ctypes.c_uint32 * 2)(_CAP_VERSION_3, 0)
    data = (ctypes.c_uint32 * 6)()
    if _libc.capset(header, data) != 0:
        raise OSError(ctypes.get_errno(), "capset failed")


def _load_seccomp(unix_sockets: bool = False) -> None:
    import pyseccomp as sc  # needs libseccomp.so.2

    flt = sc.SyscallFilter(sc.ALLOW)
    if unix_sockets:
        flt.add_rule(sc.ERRNO(errno.EACCES), "socket", sc.Arg(0, sc.NE, socket.AF_UNIX))
    else:
        flt.add_rule(sc.ERRNO(errno.EACCES), "socket")
    for name in _DENIED_SYSCALLS:
        try:
            flt.add_rule(sc.ERRNO(errno.EPERM), name)
        except (OSError, ValueError, RuntimeError):
            continue  # not a syscall on this architecture
    # clone3 hides its flags in memory a filter cannot read: make callers fall back to clone.
    flt.add_rule(sc.ERRNO(errno.ENOSYS), "clone3")
    for flag in _NAMESPACE_FLAGS:
        flt.add_rule(sc.ERRNO(errno.EPERM), "clone", sc.Arg(0, sc.MASKED_EQ, flag, flag))
    flt.load()


def _set_limits(policy: Policy) -> None:
    mib = 1 << 20
    for which, value in (
        (resource.RLIMIT_DATA, policy.max_data_mib * mib),
        (resource.RLIMIT_NOFILE, policy.max_open_files),
        (resource.RLIMIT_FSIZE, policy.max_file_mib * mib),
        (resource.RLIMIT_CORE, 0),
    ):
        _, hard = resource.getrlimit(which)
        value = value if hard == resource.RLIM_INFINITY else min(value, hard)
        resource.setrlimit(which, (value, value))


def confine_current_process(
    policy: Policy, report: Callable[[dict[str, Any]], None] | None = None
) -> ContainmentStatus:
    """Apply `policy` to this process and all it starts from now on (see the module docstring)."""
    status = ContainmentStatus()
    os.makedirs(policy.tmp_dir, exist_ok=True)
    os.environ["TMPDIR"] = policy.tmp_dir
    import tempfile

    tempfile.tempdir = None
    from evaluator.containment.watch import ViolationWatch

    ViolationWatch(policy.read + policy.devices, policy.write, report).install()
    status.enforced.append("audit_hook")
    steps: list[tuple[str, Callable[[], Any]]] = [
        ("rlimits", lambda: _set_limits(policy)),
        ("capabilities", _drop_capabilities),
        (
            "landlock",
            lambda: confine_landlock.restrict(
                policy.read, policy.write, policy.devices, scope_unix=not policy.unix_sockets
            ),
        ),
        ("seccomp", lambda: _load_seccomp(policy.unix_sockets)),
    ]
    for name, step in steps:
        try:
            applied = step()
        except Exception as exc:  # noqa: BLE001 - a missing feature is reported, not fatal
            status.missing.append(f"{name}: {type(exc).__name__}: {exc}"[:160])
            continue
        status.enforced.append(name)
        if isinstance(applied, confine_landlock.Applied):
            if not applied.net:
                status.missing.append(f"landlock TCP rules (ABI {applied.abi} < 4)")
            if not applied.scoped:
                status.missing.append(f"landlock signal scope (ABI {applied.abi} < 6)")
    return status


# ---------------------------------------------------------------------------- process tree


def contain_job(spec_path: str, run: Callable[[], int]) -> None:
    """Run a candidate process (`run` returns its exit code) inside a contained process tree when
    the job's config asks for confinement; never returns."""
    spec = json.loads(Path(spec_path).read_text())
    sandbox = spec["config"]["sandbox"]
    if not sandbox.get("confine", False):
        os._exit(run())
    results_path = spec["results_path"]

    def report(event: dict[str, Any]) -> None:
        fd = os.open(results_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, (json.dumps(event) + "\n").encode())
        finally:
            os.close(fd)

    # The CUDA driver fails to initialise as pid 1 of a new PID namespace (error 304 on the H200):
    # on a GPU the candidate's process tree is held by a subreaper instead.
    confine_tree.run_contained(
        run, sandbox["max_processes"], report, pid_namespace=spec.get("device") != "cuda"
    )


# ---------------------------------------------------------------------------- probing

_LIMIT_MARKERS = (
    (
        ("MemoryError", "can't allocate memory", "Cannot allocate memory"),
        "max_data_mib",
        "MiB of heap per process",
    ),
    (("File too large",), "max_file_mib", "MiB per file"),
    (("Too many open files",), "max_open_files", "open files per process"),
)


def limit_hint(reason: str, sandbox: Any) -> str:
    """The confinement limit an error message points at, as a note for the verdict's reason
    ('' when none): the candidate met `sandbox.max_*`, not a fault of the machine."""
    if not sandbox.confine:
        return ""
    for markers, key, unit in _LIMIT_MARKERS:
        if any(marker in reason for marker in markers):
            return f" (the sandbox allows {getattr(sandbox, key)} {unit}: eval.sandbox.{key})"
    return ""


def containment_label(enabled: bool) -> str:
    """For run.json and the summary: `full`, `partial (<what is missing>)` or `off (...)`."""
    return probe().label if enabled else "off (eval.sandbox.confine = false)"


def require_full_containment(sandbox: Any) -> None:
    """UsageError when `sandbox.require_containment` is set and candidates would not be fully
    confined here (`sandbox` is a SandboxConfig)."""
    if not sandbox.require_containment:
        return
    label = containment_label(sandbox.confine)
    if label != "full":
        raise UsageError(
            f"containment on this machine is {label}: run where `python -m evaluator.confine "
            "--check` says full, or drop --require-containment (eval.sandbox.require_containment)."
        )


@functools.cache
def probe() -> ContainmentStatus:
    """What a candidate would get on this machine (nothing is confined here)."""
    status = ContainmentStatus()
    abi = confine_landlock.abi_version()
    if abi >= 1:
        status.enforced.append(f"landlock ABI {abi}")
        if abi < 4:
            status.missing.append(f"landlock TCP rules (ABI {abi} < 4)")
        if abi < 6:
            status.missing.append(f"landlock signal scope (ABI {abi} < 6)")
    else:
        status.missing.append("landlock (kernel without it, or disabled)")
    try:
        import pyseccomp  # noqa: F401

        status.enforced.append("seccomp")
    except (ImportError, OSError) as exc:
        status.missing.append(f"seccomp ({type(exc).__name__}: {exc})"[:120])
    if os.geteuid() == 0 and not _capability_set_holds(_CAP_SETPCAP):
        status.missing.append("capability bounding set (no CAP_SETPCAP)")
    else:
        status.enforced.append("capabilities")
    mode, pid_cap = confine_tree.tree_mode()
    if mode == "pid_namespace":
        status.enforced.append("pid_namespace")
        if pid_cap:
            status.enforced.append("process cap")
        else:
            status.missing.append("process cap (no per-namespace pid_max: Linux < 6.14)")
    else:
        status.missing.append(
            "pid namespace (descendants that leave the process group survive a time-limit kill;"
            " no process cap)"
        )
    return status


if __name__ == "__main__":
    from evaluator.containment.check import main

    sys.exit(main(sys.argv[1:]))
