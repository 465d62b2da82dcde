"""Anti-cheating instruments that run inside the sandbox child.

- `LaunchCounter` wraps Triton's launch entry points (JIT and interpreter) to count real launches
  and to mark "inside a launch" so the dispatch trace can ignore what a launch itself does (the
  interpreter moves arguments with `copy_`, `new_empty`, `set_`).
- `AtenTrace` is a TorchDispatchMode that records every ATen op the kernel's wrapper dispatches
  outside a launch; `compute_ops()` says which of them compute (anything but allocation, views and
  same-dtype layout copies, and always the operator under test itself).
- `HarnessSnapshot` remembers the identity of the functions the harness relies on (timers,
  synchronisation, comparisons, the launch hooks) and reports - and undoes - any replacement.
- `SecretWatch` swaps `os.environ` for a proxy that records reads of secret-looking names.
- `ThreadWatch` puts the current call's trace into every thread started during the call.

These detect; they do not contain. They run in the kernel's own process (the runner), so a kernel
can defeat any of them with enough effort; what they report is evidence against it, never for
it. References, comparisons and verdicts live in another process (evaluator.judge).
"""

from __future__ import annotations

import importlib
import os
import re
import time
from collections.abc import Iterator, MutableMapping
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode

# Ops a wrapper may dispatch itself: allocation, views, metadata, fills of fresh buffers and
# layout copies. Names are `torch._ops.OpOverload.__name__` bases (e.g. "empty_like").
ALLOWED_BASES = frozenset(
    {
        # allocation
        "empty",
        "empty_like",
        "empty_strided",
        "new_empty",
        "new_empty_strided",
        "resize_",
        "zeros",
        "zeros_like",
        "new_zeros",
        "ones",
        "ones_like",
        "new_ones",
        "full",
        "full_like",
        "new_full",
        "fill_",
        "zero_",
        "scalar_tensor",
        "lift_fresh",
        "lift_fresh_copy",
        # views and metadata
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "expand",
        "expand_as",
        "permute",
        "transpose",
        "t",
        "squeeze",
        "unsqueeze",
        "select",
        "slice",
        "narrow",
        "as_strided",
        "alias",
        "detach",
        "unfold",
        "split",
        "split_with_sizes",
        "unbind",
        "chunk",
        "movedim",
        "diagonal",
        "view_as",
        "view_as_real",
        "view_as_complex",
        "_local_scalar_dense",
        "is_same_size",
        "sym_size",
        "sym_stride",
        "sym_numel",
        "sym_storage_offset",
        "set_",
        "_has_compatible_shallow_copy_type",
        "is_nonzero",
        "_to_copy",
        "copy_",
        "clone",
        "contiguous",
        "promote_types",
        "result_type",
        "to",
        "record_stream",
    }
)
# Layout copies are allowed only when they do not change dtype (a cast is compute).
_DTYPE_SENSITIVE = frozenset({"_to_copy", "copy_", "to"})

SECRET_NAME = re.compile(r"KEY|TOKEN|SECRET|PASSWORD|^OPENAI_|^ANTHROPIC_", re.IGNORECASE)


def is_secret_name(name: str) -> bool:
    return bool(SECRET_NAME.search(name))


def launcher_classes() -> list[type]:
    """Triton's compiled-kernel launcher classes (CUDA, HIP) that import here.

    A kernel may call a compiled kernel's launcher directly (`compiled.run(grid..., *args)`, as
    torch inductor and the builtin writer's fast path do) instead of `kernel[grid](...)`; every
    GPU launch passes through one of these `__call__`s either way. Importing the class does not
    touch the GPU (the fork server stays CUDA-free).
    """
    found: list[type] = []
    for module, name in (
        ("triton.backends.nvidia.driver", "CudaLauncher"),
        ("triton.backends.amd.driver", "HIPLauncher"),
    ):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError, OSError, RuntimeError):
            continue
    return found


class LaunchCounter:
    """Counts Triton launches: `kernel[grid](...)` (JIT, autotuner, interpreter) and direct calls
    of a compiled kernel's launcher; a launch nested in another (JIT run -> launcher) counts once."""

    def __init__(self) -> None:
        self.launches = 0
        self.depth = 0
        self.ghost = False  # launches are counted but not run (the runner's ghost replay)
        self.on_stream: Any = None  # called with each launcher call's CUDA stream (StreamWatch)
        self._originals: list[tuple[type, str, Any]] = []

    def install(self) -> None:
        from triton.runtime.jit import JITFunction

        targets: list[type] = [JITFunction]
        try:
            from triton.runtime.interpreter import InterpretedFunction

            targets.append(InterpretedFunction)
        except ImportError:  # pragma: no cover - older triton
            pass
        for cls in targets:
            original = cls.run
            self._originals.append((cls, "run", original))
            cls.run = self._wrap(original)  # type: ignore[method-assign]
        for cls in launcher_classes():
            original = cls.__call__
            self._originals.append((cls, "__call__", original))
            cls.__call__ = self._wrap(original, launcher=True)  # type: ignore[method-assign]

    def _wrap(self, original: Any, launcher: bool = False) -> Any:
        counter = self

        def run(fn_self: Any, *args: Any, **kwargs: Any) -> Any:
            # a launcher's arguments: gridX, gridY, gridZ, stream, function, ...
            if launcher and counter.on_stream is not None and len(args) > 3:
                counter.on_stream(args[3])
            if not kwargs.get("warmup", False) and counter.depth == 0:
                counter.launches += 1
                if counter.ghost:
                    return None
            counter.depth += 1
            try:
                return original(fn_self, *args, **kwargs)
            finally:
                counter.depth -= 1

        run.__atenforge_wrapper__ = True  # type: ignore[attr-defined]
        return run

    def wrapped_runs(self) -> dict[str, Any]:
        return {
            f"{cls.__module__}.{cls.__name__}.{attr}": getattr(cls, attr)
            for cls, attr, _ in self._originals
        }


class AtenTrace(TorchDispatchMode):
    """Records ATen ops dispatched outside Triton launches while the kernel's wrapper runs."""

    def __init__(self, launches: LaunchCounter) -> None:
        super().__init__()
        self.launches = launches
        self.ops: list[tuple[str, str]] = []  # (qualified name, why it computes or "")

    def __torch_dispatch__(
        self, func: Any, types: Any, args: tuple = (), kwargs: dict | None = None
    ) -> Any:
        kwargs = kwargs or {}
        if self.launches.depth == 0:
            self.ops.append((f"aten.{func.__name__}", _compute_reason(func, args, kwargs)))
        return func(*args, **kwargs)

    def compute_ops(self, op_under_test: str) -> list[str]:
        """Distinct ops that computed, or that share the base name of the op under test."""
        target_base = op_under_test.split(".")[0]
        found: list[str] = []
        for name, reason in self.ops:
            base = name.split(".")[1]
            if (reason or base == target_base) and name not in found:
                found.append(name)
        return found


def _compute_reason(func: Any, args: tuple, kwargs: dict) -> str:
    base = func.__name__.split(".")[0]
    if base not in ALLOWED_BASES:
        return "compute"
    if base in ("_to_copy", "copy_") and _moves_between_devices(base, args, kwargs):
        return "device transfer"  # data sent to the host is data computed outside Triton
    if base in _DTYPE_SENSITIVE:
        src = args[1] if base == "copy_" and len(args) > 1 else (args[0] if args else None)
        dst_dtype = None
        if base == "copy_" and args and isinstance(args[0], torch.Tensor):
            dst_dtype = args[0].dtype
        else:
            dst_dtype = kwargs.get("dtype")
        if isinstance(src, torch.Tensor) and dst_dtype is not None and dst_dtype != src.dtype:
            return "cast"
    return ""


def _moves_between_devices(base: str, args: tuple, kwargs: dict) -> bool:
    if base == "copy_":
        dst, src = (args + (None, None))[:2]
        return (
            isinstance(dst, torch.Tensor)
            and isinstance(src, torch.Tensor)
            and dst.device != src.device
        )
    src, device = (args[0] if args else None), kwargs.get("device")
    return (
        isinstance(src, torch.Tensor) and device is not None and torch.device(device) != src.device
    )


class ThreadWatch:
    """Puts the current call's ATen trace in every thread started while the kernel runs (dispatch
    modes are per thread): `threading.Thread` of any subclass, and `_thread.start_new_thread`."""

    def __init__(self) -> None:
        self.current: AtenTrace | None = None

    def install(self) -> None:
        import _thread
        import threading

        watch = self
        inner = threading.Thread._bootstrap_inner  # type: ignore[attr-defined]

        def bootstrap_inner(thread: Any) -> Any:
            with watch._traced():
                return inner(thread)

        threading.Thread._bootstrap_inner = bootstrap_inner  # type: ignore[attr-defined]
        start_new = _thread.start_new_thread

        def start_new_thread(function: Any, args: tuple, kwargs: Any = None) -> Any:
            def traced(*a: Any, **k: Any) -> Any:
                with watch._traced():
                    return function(*a, **k)

            return start_new(traced, args, kwargs or {})

        _thread.start_new_thread = start_new_thread

    def _traced(self) -> Any:
        import contextlib

        parent = self.current
        if parent is None:
            return contextlib.nullcontext()
        trace = AtenTrace(parent.launches)
        trace.ops = parent.ops  # one record for every thread of the call
        return trace


class HostEscapeWatch:
    """Records tensor data leaving torch for the host (`.numpy()`, `__array__`, `.tolist()`)
    while the kernel's wrapper runs outside a launch: an answer computed with numpy and dressed
    up with a decoy launch passes the ATen trace and the launch count, but not this."""

    _METHODS = ("numpy", "__array__", "tolist")

    def __init__(self, launches: LaunchCounter) -> None:
        self.launches = launches
        self.active = False
        self.calls: list[str] = []

    def install(self) -> None:
        for name in self._METHODS:
            setattr(torch.Tensor, name, self._wrap(name, getattr(torch.Tensor, name)))

    def _wrap(self, name: str, original: Any) -> Any:
        watch = self

        def method(tensor: Any, *args: Any, **kwargs: Any) -> Any:
            if watch.active and watch.launches.depth == 0 and name not in watch.calls:
                watch.calls.append(name)
            return original(tensor, *args, **kwargs)

        return method


class HarnessSnapshot:
    """Identity of every function the harness trusts; `check()` reports and restores changes."""

    def __init__(self, extra: dict[str, tuple[Any, str]] | None = None) -> None:
        import triton.testing

        targets: dict[str, tuple[Any, str]] = {
            "time.perf_counter": (time, "perf_counter"),
            "time.perf_counter_ns": (time, "perf_counter_ns"),
            "time.time": (time, "time"),
            "time.monotonic": (time, "monotonic"),
            "torch.allclose": (torch, "allclose"),
            "torch.isclose": (torch, "isclose"),
            "torch.equal": (torch, "equal"),
            "torch.isnan": (torch, "isnan"),
            "torch.abs": (torch, "abs"),
            "torch.testing.assert_close": (torch.testing, "assert_close"),
            "torch.Tensor.__eq__": (torch.Tensor, "__eq__"),
            "torch.Tensor.__sub__": (torch.Tensor, "__sub__"),
            "torch.Tensor.abs": (torch.Tensor, "abs"),
            "torch.Tensor.max": (torch.Tensor, "max"),
            "torch.Tensor.clone": (torch.Tensor, "clone"),
            "torch.Tensor.to": (torch.Tensor, "to"),
            "torch.Tensor.copy_": (torch.Tensor, "copy_"),
            "torch.cuda.synchronize": (torch.cuda, "synchronize"),
            "torch.cuda.Event": (torch.cuda, "Event"),
            "torch.cuda._sleep": (torch.cuda, "_sleep"),
            "triton.testing.do_bench": (triton.testing, "do_bench"),
            "os._exit": (os, "_exit"),
        }
        targets.update(extra or {})
        self.targets = targets
        self.originals = {name: getattr(owner, attr) for name, (owner, attr) in targets.items()}

    def check(self) -> list[str]:
        changed: list[str] = []
        for name, (owner, attr) in self.targets.items():
            current = getattr(owner, attr, None)
            if current is not self.originals[name]:
                changed.append(name)
                setattr(owner, attr, self.originals[name])
        return changed


class _WatchedEnviron(MutableMapping[str, str]):
    """`os.environ` stand-in that records reads of secret-looking variable names."""

    def __init__(self, inner: MutableMapping[str, str], probes: list[str]) -> None:
        self._inner = inner
        self._probes = probes

    def _note(self, key: object) -> None:
        if isinstance(key, str) and is_secret_name(key) and key not in self._probes:
            self._probes.append(key)

    def __getitem__(self, key: str) -> str:
        self._note(key)
        return self._inner[key]

    def __contains__(self, key: object) -> bool:
        self._note(key)
        return key in self._inner

    def get(self, key: str, default: Any = None) -> Any:  # type: ignore[override]
        self._note(key)
        return self._inner.get(key, default)

    def __setitem__(self, key: str, value: str) -> None:
        self._inner[key] = value

    def __delitem__(self, key: str) -> None:
        del self._inner[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._inner)

    def __len__(self) -> int:
        return len(self._inner)

    def copy(self) -> dict[str, str]:
        return dict(self._inner)


class SecretWatch:
    """Installs the watched environ; `probes` lists secret-looking names the kernel asked for."""

    def __init__(self) -> None:
        self.probes: list[str] = []
        self._original = os.environ

    def install(self) -> None:
        os.environ = _WatchedEnviron(self._original, self.probes)  # type: ignore[assignment]  # noqa: B003

    def uninstall(self) -> None:
        os.environ = self._original  # type: ignore[assignment]  # noqa: B003
