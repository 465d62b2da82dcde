"""Import the kernel and call it once under the guards, in the process that holds the kernel.

That process is the runner (`evaluator.judge.runner`), or the sandbox child itself where the judge
is not split (`split_judge: false`). `Instruments.install` puts the guards in place (launch
counter, host-read watch, harness snapshot, secret watch, thread watch, numerics state, and on a
GPU the stream watch); `import_kernel` loads the kernel file with the environment watched;
`guarded_call` makes one call under the ATen trace and proves each observer alive with a canary
afterwards. Nothing here holds a reference or writes a verdict: the calls return flags and
outputs, and the verifier decides.
"""

from __future__ import annotations

import importlib.util
import sys
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from evaluator.judge import checks
from evaluator.judge.gpu_guards import NumericsState, StreamWatch
from evaluator.judge.guards import (
    AtenTrace,
    HarnessSnapshot,
    HostEscapeWatch,
    LaunchCounter,
    SecretWatch,
    ThreadWatch,
    launcher_classes,
)
from evaluator.naming import kernel_function_name
from evaluator.results import Flag

_CUDA_ERROR_MARKERS = (
    "CUDA error",
    "cudaError",
    "illegal memory access",
    "CUBLAS_STATUS",
    "device-side assert",
)
MAX_MSG = 600


def _confinement_functions() -> dict[str, tuple[Any, str]]:
    """What reports a candidate's leftover processes and its attempts to leave confinement."""
    from evaluator.containment import process_tree as confine_tree
    from evaluator.containment.watch import ViolationWatch

    names = ("exit_code_of", "_report_leftovers", "_drain_children", "_children")
    out = {f"evaluator.containment.process_tree.{n}": (confine_tree, n) for n in names}
    for n in ("_hook", "_check", "_flag", "_check_read", "_check_write", "_under"):
        out[f"evaluator.containment.watch.ViolationWatch.{n}"] = (ViolationWatch, n)
    return out


def is_cuda_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return any(m in text for m in _CUDA_ERROR_MARKERS) or type(exc).__name__ == "AcceleratorError"


def short_error(exc: BaseException) -> str:
    text = f"{exc}".strip().splitlines()
    first = text[0] if text else ""
    return first[:MAX_MSG]


def _launch_owners() -> dict[str, type]:
    from triton.runtime.jit import JITFunction

    owners: dict[str, type] = {"triton.JITFunction.run": JITFunction}
    try:
        from triton.runtime.interpreter import InterpretedFunction

        owners["triton.InterpretedFunction.run"] = InterpretedFunction
    except ImportError:  # pragma: no cover
        pass
    return owners


@dataclass
class Instruments:
    """The guards of the process that calls the kernel (the runner, or the sandbox child itself
    where no runner is split off)."""

    launches: LaunchCounter
    host: HostEscapeWatch
    harness: HarnessSnapshot
    secrets: SecretWatch
    threads: ThreadWatch
    numerics: NumericsState
    streams: StreamWatch | None = None  # cuda only

    @classmethod
    def install(cls, device: str = "cpu") -> Instruments:
        launches = LaunchCounter()
        launches.install()
        host = HostEscapeWatch(launches)
        host.install()
        streams = None
        joins: dict[str, tuple[Any, str]] = {}
        if device == "cuda":
            streams = StreamWatch()
            joins = streams.install()
            launches.on_stream = streams.on_launch
        harness = HarnessSnapshot(
            extra=joins
            | {name: (owner_cls, "run") for name, owner_cls in _launch_owners().items()}
            | {f"triton.{c.__name__}.__call__": (c, "__call__") for c in launcher_classes()}
            | {
                "evaluator.judge.checks.compare": (checks, "compare"),
                "evaluator.judge.checks._equal": (checks, "_equal"),
                **_confinement_functions(),
                **{
                    f"torch.Tensor.{name}": (torch.Tensor, name)
                    for name in HostEscapeWatch._METHODS
                },
                "torch.utils._python_dispatch.TorchDispatchMode.__enter__": (
                    torch.utils._python_dispatch.TorchDispatchMode,
                    "__enter__",
                ),
            }
        )
        threads = ThreadWatch()
        threads.install()
        return cls(launches, host, harness, SecretWatch(), threads, NumericsState(), streams)

    def op_flags(self) -> list[str]:
        flags = [f"{Flag.HARNESS_TAMPERING}:{name}" for name in self.harness.check()]
        flags += [f"{Flag.SECRET_PROBE}:{name}" for name in self.secrets.probes]
        changed = self.numerics.changed(ghost=self.launches.ghost)
        flags += [f"{Flag.GLOBAL_STATE_CHANGED}:{name}" for name in changed]
        return flags


def import_kernel(
    kernel_file: str, op: str, secrets: SecretWatch
) -> tuple[Any | None, dict[str, Any] | None]:
    """Import the kernel file with the environment watched. Returns (function, None) or
    (None, a load_error event)."""
    path = Path(kernel_file)
    fn_name = kernel_function_name(op)
    secrets.install()
    try:
        module_name = f"atenforge_candidate_{path.stem}"
        spec = importlib.util.spec_from_file_location(module_name, path)
        if spec is None or spec.loader is None:
            raise ImportError(f"cannot load {path}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[module_name] = module
        spec.loader.exec_module(module)
    except SystemExit as exc:
        return None, {
            "event": "load_error",
            "flag": Flag.EXIT_CALLED,
            "error_type": "SystemExit",
            "error_msg": f"sys.exit({exc.code}) at import",
        }
    except BaseException as exc:  # noqa: BLE001 - any import failure is the kernel's verdict
        tb = traceback.format_exception_only(type(exc), exc)
        return None, {
            "event": "load_error",
            "flag": Flag.IMPORT_ERROR,
            "error_type": type(exc).__name__,
            "error_msg": "".join(tb).strip()[-MAX_MSG:],
        }
    fn = getattr(module, fn_name, None)
    if not callable(fn):
        found = sorted(n for n in vars(module) if n.endswith("_kernel_impl"))
        hint = f"; it defines {', '.join(found)}" if found else ""
        return None, {
            "event": "load_error",
            "flag": Flag.MISSING_FUNCTION,
            "error_type": "MissingFunction",
            "error_msg": f"{path.name} does not define {fn_name}{hint}",
        }
    return fn, None


def guarded_call(
    inst: Instruments, fn: Any, op: str, args: tuple, kwargs: dict, device: str
) -> tuple[Any, list[str], str | None, str | None, int]:
    """Call the kernel once under the guards. Returns (out, flags, error_type, error_msg,
    launches); the caller decides whether zero launches is a cheat (it depends on eager)."""
    sync = torch.cuda.synchronize if device == "cuda" else (lambda: None)
    trace = AtenTrace(inst.launches)
    before = inst.launches.launches
    flags: list[str] = []
    out = None
    err_type = err_msg = None
    inst.host.calls = []
    alive: list[str] = []
    try:
        inst.host.active = True
        inst.threads.current = trace
        with trace:
            if inst.streams is not None:
                inst.streams.begin()
            out = fn(*args, **kwargs)
            if inst.streams is not None:
                flags += inst.streams.end()
            alive = _canary(inst, trace)
        inst.host.active = False
        sync()
    except SystemExit as exc:
        flags.append(Flag.EXIT_CALLED)
        err_type, err_msg = "SystemExit", f"the kernel called sys.exit({exc.code})"
    except BaseException as exc:  # noqa: BLE001
        err_type, err_msg = type(exc).__name__, short_error(exc)
        flags.append(Flag.CUDA_ERROR if is_cuda_error(exc) else Flag.EXCEPTION)
    if inst.streams is not None:
        inst.streams.expected = None
    inst.host.active = False
    inst.threads.current = None
    flags += inst.op_flags()
    if err_type is None:
        flags += [f"{Flag.INSTRUMENTATION_DISABLED}:{name}" for name in alive]
        flags += [f"{Flag.HOST_COMPUTE}:{name}" for name in inst.host.calls]
        flags += [f"{Flag.ATEN_FALLBACK}:{name}" for name in trace.compute_ops(op)]
    return out, flags, err_type, err_msg, inst.launches.launches - before


_CANARY: dict[str, Any] = {}


def _canary(inst: Instruments, trace: AtenTrace) -> list[str]:
    """After the kernel returns, still inside its trace: one ATen op, one Triton launch and one
    host read by the harness must each be seen by their observer. Returns the blind ones (their
    own records are removed again)."""
    import triton
    import triton.language as tl

    if "kernel" not in _CANARY:

        @triton.jit
        def _canary_kernel(x_ptr):
            tl.store(x_ptr, tl.load(x_ptr) + 1)

        _CANARY["kernel"] = _canary_kernel
    blind: list[str] = []
    n_ops, n_launches, ghost = len(trace.ops), inst.launches.launches, inst.launches.ghost
    x = torch.zeros(1, dtype=torch.int32)
    torch.ops.aten.atan2.default(x.float(), x.float())
    if not any(name == "aten.atan2.default" for name, _ in trace.ops[n_ops:]):
        blind.append("aten_trace")
    del trace.ops[n_ops:]
    # A launch through the same entry point a kernel's `kernel[grid](...)` takes; as a ghost it
    # is counted but not run (the interpreter would spend a millisecond on it).
    inst.launches.ghost = True
    _CANARY["kernel"][(1,)](x)
    inst.launches.ghost = ghost
    if inst.launches.launches != n_launches + 1:
        blind.append("launch_counter")
    inst.launches.launches = n_launches
    calls = list(inst.host.calls)
    x.tolist()
    if "tolist" not in inst.host.calls:
        blind.append("host_escape_watch")
    inst.host.calls[:] = calls
    return blind
