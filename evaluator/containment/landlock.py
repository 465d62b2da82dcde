"""Landlock through its three system calls: file-system rules, TCP rules and scopes.

Contract: `abi_version()` says which Landlock ABI the running kernel offers (0 = none);
`restrict(read, write, devices)` applies one ruleset to the calling thread and every thread and
process it starts later, and returns what it handled. It needs no_new_privs (or CAP_SYS_ADMIN)
set beforehand; `evaluator.containment.confine` does that. A ruleset can only be tightened, never lifted.

What the ruleset handles, by ABI: 1 file access (read, write, execute, create, remove), 2 renames
across directories, 3 truncation, 4 TCP bind and connect (no port is allowed: every TCP bind and
connect fails), 5 ioctl on device files, 6 signals and abstract Unix sockets to processes outside
the domain. Landlock applies to root as to any user; capabilities do not bypass it, except
CAP_SYS_PTRACE for the ptrace-style checks on other processes' /proc files.

Written over ctypes because the `landlock` package on PyPI (1.0.0.dev5, a pre-release) handles file
access only: no TCP rules, no ioctl right, no scopes.
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass

# Same numbers on every architecture: Landlock arrived after the syscall tables were unified.
_SYS_CREATE_RULESET = 444
_SYS_ADD_RULE = 445
_SYS_RESTRICT_SELF = 446
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
REMOVE_DIR = 1 << 4
REMOVE_FILE = 1 << 5
MAKE_CHAR = 1 << 6
MAKE_DIR = 1 << 7
MAKE_REG = 1 << 8
MAKE_SOCK = 1 << 9
MAKE_FIFO = 1 << 10
MAKE_BLOCK = 1 << 11
MAKE_SYM = 1 << 12
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
NET_BIND_TCP = 1 << 0  # ABI 4
NET_CONNECT_TCP = 1 << 1  # ABI 4
SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
SCOPE_SIGNAL = 1 << 1  # ABI 6

READ = EXECUTE | READ_FILE | READ_DIR
_FILE_ONLY = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV


class _RulesetAttr(ctypes.Structure):
    _fields_ = [
        ("handled_access_fs", ctypes.c_uint64),
        ("handled_access_net", ctypes.c_uint64),
        ("scoped", ctypes.c_uint64),
    ]


class _PathBeneathAttr(ctypes.Structure):
    _pack_ = 1
    _fields_ = [("allowed_access", ctypes.c_uint64), ("parent_fd", ctypes.c_int32)]


_libc = ctypes.CDLL(None, use_errno=True)
_libc.syscall.restype = ctypes.c_long


def _syscall(*args: object) -> int:
    ret = _libc.syscall(*args)
    if ret < 0:
        err = ctypes.get_errno()
        raise OSError(err, os.strerror(err))
    return int(ret)


def abi_version() -> int:
    """The kernel's Landlock ABI, 0 when Landlock is missing or disabled."""
    try:
        return _syscall(
            ctypes.c_long(_SYS_CREATE_RULESET),
            None,
            ctypes.c_size_t(0),
            ctypes.c_uint32(_CREATE_RULESET_VERSION),
        )
    except OSError:
        return 0


def fs_rights(abi: int) -> int:
    rights = (1 << 13) - 1
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


@dataclass
class Applied:
    abi: int
    net: bool  # TCP bind/connect handled
    scoped: bool  # signals and abstract Unix sockets scoped to the domain
    skipped: list[str]  # paths that did not exist or could not be opened


def restrict(
    read: list[str], write: list[str], devices: list[str], *, scope_unix: bool = True
) -> Applied:
    """Apply a ruleset: `read` = read and execute beneath, `write` = every right beneath,
    `devices` = read, write and ioctl on those device files; signals (and, with `scope_unix`,
    abstract Unix sockets) scoped to the domain. Raises OSError if the kernel refuses; with ABI 0
    it raises OSError(ENOSYS)."""
    abi = abi_version()
    if abi < 1:
        raise OSError(38, "Landlock is not available in this kernel")
    handled = fs_rights(abi)
    attr = _RulesetAttr(handled_access_fs=handled)
    size = 8
    if abi >= 4:
        attr.handled_access_net = NET_BIND_TCP | NET_CONNECT_TCP
        size = 16
    if abi >= 6:
        attr.scoped = SCOPE_SIGNAL | (SCOPE_ABSTRACT_UNIX_SOCKET if scope_unix else 0)
        size = 24
    ruleset = _syscall(
        ctypes.c_long(_SYS_CREATE_RULESET),
        ctypes.byref(attr),
        ctypes.c_size_t(size),
        ctypes.c_uint32(0),
    )
    skipped: list[str] = []
    try:
        for paths, rights in (
            (read, READ),
            (write, handled),
            (devices, READ_FILE | WRITE_FILE | (IOCTL_DEV if abi >= 5 else 0)),
        ):
            for path in paths:
                if not _add_path(ruleset, path, rights & handled):
                    skipped.append(path)
        _syscall(ctypes.c_long(_SYS_RESTRICT_SELF), ctypes.c_int(ruleset), ctypes.c_uint32(0))
    finally:
        os.close(ruleset)
    return Applied(abi=abi, net=abi >= 4, scoped=abi >= 6, skipped=skipped)


def _add_path(ruleset: int, path: str, rights: int) -> bool:
    try:
        fd = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        if not os.path.isdir(path):
            rights &= _FILE_ONLY  # directory rights on a file are refused (EINVAL)
        rule = _PathBeneathAttr(allowed_access=rights, parent_fd=fd)
        _syscall(
            ctypes.c_long(_SYS_ADD_RULE),
            ctypes.c_int(ruleset),
            ctypes.c_int(_RULE_PATH_BENEATH),
            ctypes.byref(rule),
            ctypes.c_uint32(0),
        )
        return True
    except OSError:
        return False
    finally:
        os.close(fd)
