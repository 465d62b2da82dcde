"""Kept kernels as a PyTorch backend: any model's calls of an overload run our Triton kernel.

TRUST: `enable()` imports every selected kernel file into *this* process and runs it on the
model's tensors. Unlike the evaluator, nothing here is sandboxed: a kernel can read your files,
your environment and your model, crash the process or corrupt the CUDA context. Enable only
kernels you would run as your own code. By default only kernels whose latest evaluation passed
are enabled, which shows they computed the right answers on the suite's cases and did not cheat
in ways the evaluator detects; it does not make them safe to import.

Contract:
- `enable(kernels_dir, ...) -> Backend` registers each selected kernel for exactly its overload
  (`add.Tensor`, not every `add`) with `torch.library.Library("aten", "IMPL")`, under the CUDA
  dispatch key on a GPU, or under the CPU key when kernels run in Triton's interpreter
  (`TRITON_INTERPRET=1`, CPU tensors). The registration sits below autograd, so backward formulas
  that call the overload run our kernel too. `disable()` (or leaving `use(...)`) removes the
  registrations and restores eager. One backend at a time.
- Selection: the kernels in `kernels_dir` (DirectoryBackend layout), narrowed by `ops` / `skip`.
  With `only_passed=True` (default) an operator is enabled only if its status in a
  `atenforge_results.json` is `passed`: `results="auto"` takes the newest run under `log_dir` that
  evaluated this `kernels_dir`; a path names a run folder or its `atenforge_results.json`; `None`
  reads none. No results and `only_passed=True` is a UsageError (evaluate first, or pass
  `only_passed=False`).
- A kernel that calls the operator it replaces (a `torch.add` inside the kernel for `add.Tensor`)
  raises `BackendRecursionError` naming the operator and the line, instead of recursing. ATen
  calls made by Triton's interpreter itself while it launches a kernel (it moves arguments with
  `copy_`, `set_`, `new_empty`) go to eager: they are the launch, not the kernel.
- Counting: `Backend.stats()` -> `{"hits": {op: n}, "fallbacks": {op: n}, ...}`. Hits are counted
  always; `fallbacks` (every non-metadata ATen overload the model ran that our kernels did not
  handle) needs `track_fallbacks=True`, which pushes a TorchDispatchMode that sees every call.
  `time_ops=True` also times each call (synchronising the GPU around it: an estimate for the
  operator-time share, never for end-to-end speed).
- Shape-aware dispatch (opt-in, `shape_table=`): our kernel runs only for the argument shapes,
  dtypes and strides that a GPU evaluation measured faster than eager; other calls go to the
  original (eager) kernel, fetched with `torch.library.get_kernel` before we registered ours.
- A kernel that raises is a `BackendKernelError` (a RuntimeError naming the operator and file,
  the kernel's exception as its cause). `on_error="eager"` instead runs that call in eager and
  counts it in `stats()["kernel_errors"]` (never for BackendRecursionError). Caveat: an in-place
  or out= kernel that raised after writing part of its output leaves that part written; eager
  then runs on it. Wrappers that validate before launching (the norm) never do this.
- Python scalars reach a kernel as Python numbers even where the schema says Tensor (`x * 0.5`
  arrives as `mul.Tensor(x, 0.5)`), as in every Python kernel registered with torch.library.
"""

from __future__ import annotations

import contextlib
import importlib.util
import itertools
import logging
import os
import sys
import threading
import time
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode, _get_current_dispatch_mode

from evaluator.cases.trace_recorder import METADATA_OPS
from evaluator.errors import UsageError
from evaluator.naming import base_name, kernel_function_name, normalize_op
from evaluator.runtime.backend_selection import (
    RESULTS_JSON,
    Selection,
    discover_kernels,
    find_results,
    load_statuses,
    nothing_enabled,
    select_kernels,
)
from evaluator.runtime.shape_table import ShapeTable

log = logging.getLogger(__name__)

__all__ = [
    "RESULTS_JSON",
    "Backend",
    "BackendKernelError",
    "BackendRecursionError",
    "Selection",
    "ShapeTable",
    "active",
    "disable",
    "discover_kernels",
    "enable",
    "find_results",
    "load_statuses",
    "resolve_device",
    "select_kernels",
    "use",
]
# Overloads that only relabel memory: counted apart so "compute coverage" is not diluted by them.
VIEW_OPS = frozenset(
    {
        "view",
        "_unsafe_view",
        "reshape",
        "_reshape_alias",
        "t",
        "transpose",
        "permute",
        "expand",
        "squeeze",
        "unsqueeze",
        "select",
        "slice",
        "narrow",
        "as_strided",
        "split",
        "split_with_sizes",
        "unbind",
        "chunk",
        "diagonal",
        "view_as",
        "unfold",
        "_local_scalar_dense",
    }
)
_INTERPRETER_FILE = os.path.join("triton", "runtime", "interpreter")
_MODULE_IDS = itertools.count(1)
_ACTIVE: Backend | None = None
_ACTIVE_LOCK = threading.Lock()


class BackendRecursionError(RecursionError):
    """A kernel called the operator it replaces (it would dispatch back into itself forever)."""


class BackendKernelError(RuntimeError):
    """One of our kernels raised on a call; the original exception is its `__cause__`.

    A RuntimeError like ATen's own kernel errors. Not the kernel's TypeError as is: Python turns a
    TypeError from `Tensor.__add__` and friends into NotImplemented, and the user would see a
    misleading "unsupported operand type(s)" instead of what the kernel said.
    """


# --------------------------------------------------------------------------- device


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "").strip().lower() in ("1", "true", "yes", "on")


def resolve_device(device: str | None = None) -> str:
    """`cuda` or `cpu`; `cpu` means Triton's interpreter on CPU tensors (TRITON_INTERPRET=1)."""
    device = device or "auto"
    if device not in ("auto", "cuda", "cpu"):
        raise UsageError(f"unknown device {device!r}: use auto, cuda or cpu.")
    if device == "auto":
        if _interpreting():
            return "cpu"
        if torch.cuda.is_available():
            return "cuda"
        raise UsageError(
            "no CUDA GPU is visible: set TRITON_INTERPRET=1 to run the kernels on CPU tensors in Triton's interpreter."
        )
    if device == "cuda":
        if not torch.cuda.is_available():
            raise UsageError(
                "device 'cuda' was asked for but no CUDA GPU is visible: use device 'cpu' with TRITON_INTERPRET=1."
            )
        if _interpreting():
            raise UsageError(
                "TRITON_INTERPRET=1 runs kernels in the CPU interpreter: unset it to use the GPU."
            )
        return "cuda"
    if not _interpreting():
        raise UsageError(
            "Triton kernels run on CPU tensors only in its interpreter: set TRITON_INTERPRET=1."
        )
    return "cpu"


def _inside_triton_interpreter() -> bool:
    """True when the current call comes from Triton's interpreter moving a launch's arguments."""
    frame = sys._getframe(2)
    while frame is not None:
        if _INTERPRETER_FILE in frame.f_code.co_filename:
            return True
        frame = frame.f_back
    return False


def _call_site(filename: str) -> str:
    """`file.py:LINE` of the innermost frame running code from `filename`, for error messages."""
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_filename == filename:
            return f"{Path(filename).name}:{frame.f_lineno}"
        frame = frame.f_back
    return Path(filename).name


# --------------------------------------------------------------------------- calling eager

# Type-promotion categories of Python scalars and of dtypes: bool < integer < floating < complex.
_FULL_PRECISION = {0: torch.bool, 1: torch.int64, 2: torch.float64, 3: torch.complex128}


def _category(dtype: torch.dtype) -> int:
    if dtype.is_complex:
        return 3
    if dtype.is_floating_point:
        return 2
    return 0 if dtype == torch.bool else 1


def _tensor_slots(overload: Any) -> tuple[frozenset[int], frozenset[str]]:
    """Positions and names of the schema's `Tensor` / `Tensor?` arguments."""
    positions, names = set(), set()
    for i, arg in enumerate(overload._schema.arguments):
        t = arg.type
        if isinstance(t, torch._C.OptionalType):
            t = t.getElementType()
        if isinstance(t, torch._C.TensorType):
            names.add(arg.name)
            if not arg.kwarg_only:
                positions.add(i)
    return frozenset(positions), frozenset(names)


def _as_wrapped_number(
    value: bool | int | float | complex, tensors: list[torch.Tensor]
) -> torch.Tensor:
    """A 0-dim CPU tensor that promotes like the wrapped number it came from.

    The dispatcher hands Python kernels a wrapped number (`x * 0.5`) as a Python scalar, and
    `call_boxed` will not take a scalar where the schema says Tensor. A plain 0-dim tensor in the
    scalar's full precision promotes like a wrapped number whenever its category is not above the
    other operands' (0-dim tensors do not promote within a category); above it, a wrapped number
    gives the category's default dtype, which `torch.result_type` computes.
    """
    kinds = ((bool, 0), (int, 1), (float, 2))  # bool first: a bool is also an int
    kind = next((k for cls, k in kinds if isinstance(value, cls)), 3)
    if not tensors:
        return torch.tensor(value)
    top = max(tensors, key=lambda t: (_category(t.dtype), t.element_size()))
    dtype = _FULL_PRECISION[kind] if kind <= _category(top.dtype) else torch.result_type(top, value)
    return torch.tensor(value, dtype=dtype)


def _rewrap_numbers(
    slots: tuple[frozenset[int], frozenset[str]], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    positions, names = slots
    numbers = (bool, int, float, complex)
    bad_args = [i for i in positions if i < len(args) and isinstance(args[i], numbers)]
    bad_kwargs = [n for n in names if isinstance(kwargs.get(n), numbers)]
    if not bad_args and not bad_kwargs:
        return args, kwargs
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    new_args = list(args)
    for i in bad_args:
        new_args[i] = _as_wrapped_number(args[i], tensors)
    new_kwargs = dict(kwargs)
    for n in bad_kwargs:
        new_kwargs[n] = _as_wrapped_number(kwargs[n], tensors)
    return tuple(new_args), new_kwargs


# --------------------------------------------------------------------------- the backend


@dataclass
class _Kernel:
    op: str
    path: Path
    fn: Any
    overload: Any
    original: Any  # torch._C._SafeKernelFunction (the eager kernel we replaced) or None
    mutable: bool


class _CallCounter(TorchDispatchMode):
    """Sees every ATen call below autograd; records whether our kernel handled it."""

    def __init__(self, backend: Backend, time_ops: bool) -> None:
        super().__init__()
        self.backend = backend
        self.time_ops = time_ops
        self._names: dict[Any, str | None] = {}

    def _name(self, func: Any) -> str | None:
        name = self._names.get(func, "")
        if name == "":
            name = None
            if getattr(func, "namespace", None) == "aten":
                op = normalize_op(func.name())
                name = None if base_name(op) in METADATA_OPS else op
            self._names[func] = name
        return name

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
        kwargs = kwargs or {}
        name = self._name(func)
        if name is None:
            return func(*args, **kwargs)
        hits = self.backend._thread_hits()
        before = hits.get(name, 0)
        sync = self.time_ops and self.backend.device == "cuda"
        if sync:
            torch.cuda.synchronize()
        start = time.perf_counter()
        out = func(*args, **kwargs)
        if sync:
            torch.cuda.synchronize()
        elapsed_ms = (time.perf_counter() - start) * 1e3
        self.backend._record_call(
            name, hits.get(name, 0) > before, elapsed_ms if self.time_ops else None
        )
        return out


class Backend:
    """An enabled kernel directory. Built by `enable()`; call `disable()` or leave `use()`."""

    def __init__(
        self, kernels_dir: Path, device: str, *, on_error: str, shape_table: ShapeTable | None
    ) -> None:
        self.kernels_dir = kernels_dir
        self.device = device
        self.dispatch_key = "CUDA" if device == "cuda" else "CPU"
        self.on_error = on_error
        self.shape_table = shape_table
        self.results_path: Path | None = None
        self.kernels: dict[str, _Kernel] = {}
        self.not_enabled: dict[str, str] = {}
        self.notes: list[str] = []
        self.enabled = False
        self._lib: torch.library.Library | None = None
        self._mode: _CallCounter | None = None
        self._modules: list[str] = []
        self._lock = threading.Lock()
        self._tls = threading.local()
        self.reset_stats()

    # ---- public

    @property
    def ops(self) -> list[str]:
        return sorted(self.kernels)

    def reset_stats(self) -> None:
        with self._lock:
            self._hits: Counter[str] = Counter()
            self._shape_eager: Counter[str] = Counter()
            self._shape_reasons: Counter[str] = Counter()
            self._errors: Counter[str] = Counter()
            self._last_error: dict[str, str] = {}
            self._calls: dict[str, list[int]] = {}  # op -> [ours, eager]
            self._time_ms: dict[str, list[float]] = {}  # op -> [ours, eager]

    def stats(self) -> dict[str, Any]:
        """Counts since enable (or `reset_stats`). `fallbacks` is empty unless tracking."""
        with self._lock:
            return {
                "hits": dict(sorted(self._hits.items())),
                "fallbacks": {op: c[1] for op, c in sorted(self._calls.items()) if c[1]},
                "calls": {
                    op: {"ours": c[0], "eager": c[1]} for op, c in sorted(self._calls.items())
                },
                "time_ms": {
                    op: {"ours": t[0], "eager": t[1]} for op, t in sorted(self._time_ms.items())
                },
                "eager_by_shape": dict(sorted(self._shape_eager.items())),
                "shape_decisions": dict(sorted(self._shape_reasons.items())),
                "kernel_errors": {
                    op: {"count": n, "last": self._last_error.get(op, "")}
                    for op, n in sorted(self._errors.items())
                },
                "tracking": self._mode is not None,
            }

    def coverage(self) -> dict[str, Any]:
        """Share of the tracked ATen calls (and, when timed, of their time) our kernels ran."""
        with self._lock:
            calls = {op: list(c) for op, c in self._calls.items()}
            times = {op: list(t) for op, t in self._time_ms.items()}
        compute = {op: c for op, c in calls.items() if base_name(op) not in VIEW_OPS}

        def share(part: float, whole: float) -> float | None:
            return part / whole if whole else None

        ours = sum(c[0] for c in calls.values())
        total = sum(sum(c) for c in calls.values())
        c_ours = sum(c[0] for c in compute.values())
        c_total = sum(sum(c) for c in compute.values())
        t_ours = sum(t[0] for t in times.values())
        t_total = sum(sum(t) for t in times.values())
        return {
            "calls_ours": ours,
            "calls_total": total,
            "call_share": share(ours, total),
            "compute_calls_ours": c_ours,
            "compute_calls_total": c_total,
            "compute_call_share": share(c_ours, c_total),
            "time_ms_ours": t_ours if times else None,
            "time_ms_total": t_total if times else None,
            "time_share": share(t_ours, t_total) if times else None,
        }

    def summary(self) -> dict[str, Any]:
        """Everything a report needs, as plain JSON-able data."""
        return {
            "kernels_dir": str(self.kernels_dir),
            "device": self.device,
            "dispatch_key": self.dispatch_key,
            "results": str(self.results_path) if self.results_path else None,
            "enabled": {op: str(k.path) for op, k in sorted(self.kernels.items())},
            "not_enabled": dict(sorted(self.not_enabled.items())),
            "shape_table": None
            if self.shape_table is None
            else {"source": self.shape_table.source, "match": self.shape_table.match},
            "on_error": self.on_error,
            "notes": list(self.notes),
            "stats": self.stats(),
            "coverage": self.coverage(),
        }

    @contextlib.contextmanager
    def tracking(self, *, time_ops: bool = False) -> Iterator[Backend]:
        """Track fallbacks (and time calls) inside a `with` block only."""
        if self._mode is not None:
            raise UsageError("this backend already tracks calls: leave the outer tracking first.")
        self._mode = _CallCounter(self, time_ops)
        self._mode.__enter__()
        try:
            yield self
        finally:
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)

    def disable(self) -> None:
        """Remove our registrations (eager again) and stop tracking; idempotent."""
        global _ACTIVE
        if self._mode is not None:
            if _get_current_dispatch_mode() is not self._mode:
                raise RuntimeError(
                    "a dispatch mode entered after enable() is still active: exit it before disabling the backend."
                )
            mode, self._mode = self._mode, None
            mode.__exit__(None, None, None)
        if self._lib is not None:
            self._lib._destroy()
            self._lib = None
        for name in self._modules:
            sys.modules.pop(name, None)
        self._modules.clear()
        self.enabled = False
        with _ACTIVE_LOCK:
            if _ACTIVE is self:
                _ACTIVE = None

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.disable()

    # ---- internals

    def _thread_hits(self) -> dict[str, int]:
        hits = getattr(self._tls, "hits", None)
        if hits is None:
            hits = self._tls.hits = {}
        return hits

    def _active_ops(self) -> set[str]:
        active = getattr(self._tls, "active", None)
        if active is None:
            active = self._tls.active = set()
        return active

    def _record_call(self, op: str, ours: bool, elapsed_ms: float | None) -> None:
        with self._lock:
            c = self._calls.setdefault(op, [0, 0])
            c[0 if ours else 1] += 1
            if elapsed_ms is not None:
                t = self._time_ms.setdefault(op, [0.0, 0.0])
                t[0 if ours else 1] += elapsed_ms

    def _wrapper(self, k: _Kernel) -> Any:
        op, fn, original = k.op, k.fn, k.original
        table = self.shape_table
        interpreted = self.device == "cpu"
        eager_on_error = self.on_error == "eager" and original is not None
        kernel_file = getattr(getattr(fn, "__code__", None), "co_filename", str(k.path))
        slots = _tensor_slots(k.overload)

        def call_eager(keyset: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
            args, kwargs = _rewrap_numbers(slots, args, kwargs)
            return original.call_boxed(keyset, *args, **kwargs)

        def run(keyset: Any, *args: Any, **kwargs: Any) -> Any:
            active = self._active_ops()
            if interpreted and active and original is not None and _inside_triton_interpreter():
                # Triton's interpreter moves a launch's arguments with ATen ops: that is the
                # launch, not the kernel, and it must not re-enter our kernels.
                return call_eager(keyset, args, kwargs)
            if op in active:
                raise BackendRecursionError(
                    f"kernel for {op} calls aten.{op} itself ({_call_site(kernel_file)}): a kernel must "
                    f"compute with Triton, not with the operator it replaces; fix it or skip {op}."
                )
            if table is not None:
                use, why = table.decide(op, args, kwargs)
                if not use:
                    with self._lock:
                        self._shape_eager[op] += 1
                        self._shape_reasons[why] += 1
                    return call_eager(keyset, args, kwargs)
                with self._lock:
                    self._shape_reasons[why] += 1
            active.add(op)
            try:
                out = fn(*args, **kwargs)
            except BackendRecursionError:
                raise
            except Exception as exc:
                if not eager_on_error:
                    raise BackendKernelError(
                        f"kernel for {op} ({k.path}) raised {type(exc).__name__}: {exc}"[:500]
                        + f" (pass on_error='eager' to run such calls in eager, or skip {op})"
                    ) from exc
                with self._lock:
                    self._errors[op] += 1
                    self._last_error[op] = f"{type(exc).__name__}: {exc}"[:300]
                active.discard(op)
                return call_eager(keyset, args, kwargs)
            finally:
                active.discard(op)
            hits = self._thread_hits()
            hits[op] = hits.get(op, 0) + 1
            with self._lock:
                self._hits[op] += 1
            return out

        run.__name__ = f"atenforge_{k.path.parent.name}"
        return run

    def _load(self, op: str, path: Path) -> _Kernel | str:
        """Import one kernel file; a reason string when it cannot be enabled."""
        name_base, _, overload_name = op.partition(".")
        try:
            overload = getattr(getattr(torch.ops.aten, name_base), overload_name)
        except (AttributeError, RuntimeError):
            return f"aten.{op} is not an ATen overload in torch {torch.__version__}"
        module_name = f"atenforge_backend_{next(_MODULE_IDS)}_{path.parent.name}"
        try:
            spec = importlib.util.spec_from_file_location(module_name, path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[module_name] = module  # triton and dataclasses look modules up by name
            self._modules.append(module_name)
            spec.loader.exec_module(module)
        except Exception as exc:  # the kernel's import error is data for the user, not our crash
            return f"import failed: {type(exc).__name__}: {exc}"[:300]
        fn = getattr(module, kernel_function_name(op), None)
        if not callable(fn):
            return f"{path.name} defines no {kernel_function_name(op)}()"
        try:
            original = torch.library.get_kernel(overload, self.dispatch_key)
        except (AttributeError, RuntimeError, ValueError):  # torch < 2.9 has no get_kernel
            original = None
        return _Kernel(op, path, fn, overload, original, bool(overload._schema.is_mutable))

    def _register(self) -> None:
        self._lib = torch.library.Library("aten", "IMPL")
        with warnings.catch_warnings():
            # "Overriding a previously registered kernel": replacing eager is the point.
            warnings.filterwarnings("ignore", message=".*[Oo]verrid.*")
            for op, k in list(self.kernels.items()):
                # The dispatcher spells the default overload without a suffix ("gelu").
                schema = k.overload._schema
                name = schema.name.split("::", 1)[-1]
                if schema.overload_name:
                    name = f"{name}.{schema.overload_name}"
                try:
                    self._lib.impl(name, self._wrapper(k), self.dispatch_key, with_keyset=True)
                except (RuntimeError, ValueError) as exc:
                    self.not_enabled[op] = f"registration failed: {exc}"[:300]
                    log.warning("not enabling %s: %s", op, self.not_enabled[op])
                    del self.kernels[op]
        self.enabled = True


def enable(
    kernels_dir: Path | str,
    *,
    ops: Iterable[str] | str | None = None,
    skip: Iterable[str] | str | None = None,
    results: str | Path | None = "auto",
    only_passed: bool = True,
    device: str | None = None,
    shape_table: str | Path | dict[str, Any] | ShapeTable | None = None,
    shape_match: str = "exact",
    track_fallbacks: bool = False,
    time_ops: bool = False,
    on_error: str = "raise",
    log_dir: Path | str = "agent_logs",
) -> Backend:
    """Register the selected kernels of `kernels_dir` for their overloads; see the module docstring.

    `ops`: only these operators (each must have a kernel); `skip`: never these. `results`:
    "auto", a run folder / atenforge_results.json, or None. `device`: None/"auto", "cuda" or "cpu".
    `shape_table`: a GPU evaluation's atenforge_results.json (or a ShapeTable) for shape-aware
    dispatch. `track_fallbacks`: count every ATen call (a TorchDispatchMode) so `stats()` lists
    fallbacks; `time_ops` also times them. `on_error`: "raise" or "eager".
    """
    global _ACTIVE
    if on_error not in ("raise", "eager"):
        raise UsageError(f"on_error {on_error!r} is unknown: use 'raise' or 'eager'.")
    dev = resolve_device(device)
    with _ACTIVE_LOCK:
        if _ACTIVE is not None:
            raise UsageError(
                f"a backend for '{_ACTIVE.kernels_dir}' is already enabled: call evaluator.backend.disable() first."
            )
    selection = select_kernels(
        kernels_dir, ops=ops, skip=skip, results=results, only_passed=only_passed, log_dir=log_dir
    )
    if shape_table is None or isinstance(shape_table, ShapeTable):
        table = shape_table
    else:
        table = ShapeTable.load(shape_table, match=shape_match)
    if table is not None and not hasattr(torch.library, "get_kernel"):
        raise UsageError(
            f"shape-aware dispatch needs torch.library.get_kernel (torch >= 2.9), this is torch {torch.__version__}: "
            "upgrade torch or drop the shape table."
        )
    backend = Backend(selection.kernels_dir, dev, on_error=on_error, shape_table=table)
    backend.results_path = selection.results_path
    backend.not_enabled.update(selection.not_enabled)
    try:
        for op, path in selection.kernels.items():
            loaded = backend._load(op, path)
            if isinstance(loaded, str):
                backend.not_enabled[op] = loaded
                log.warning("not enabling %s: %s", op, loaded)
                continue
            if torch._C._dispatch_has_kernel_for_dispatch_key(
                loaded.overload.name(), "CompositeImplicitAutograd"
            ):
                backend.notes.append(
                    f"{op} is CompositeImplicitAutograd: autograd decomposes it before the "
                    f"{backend.dispatch_key} kernel is reached, so ours runs only under torch.inference_mode."
                )
            backend.kernels[op] = loaded
        backend._register()
        if not backend.kernels:
            raise UsageError(nothing_enabled(selection.kernels_dir, backend.not_enabled))
    except BaseException:
        backend.disable()  # drop registrations and the kernel modules imported so far
        raise
    if track_fallbacks or time_ops:
        backend._mode = _CallCounter(backend, time_ops)
        backend._mode.__enter__()
    with _ACTIVE_LOCK:
        _ACTIVE = backend
    log.info(
        "atenforge backend: %d kernel(s) on %s (%s key); %d not enabled",
        len(backend.kernels),
        dev,
        backend.dispatch_key,
        len(backend.not_enabled),
    )
    return backend


def disable() -> None:
    """Disable the active backend, if any (eager again)."""
    backend = active()
    if backend is not None:
        backend.disable()


def active() -> Backend | None:
    return _ACTIVE


@contextlib.contextmanager
def use(kernels_dir: Path | str, **kwargs: Any) -> Iterator[Backend]:
    """`with use(dir) as backend:` enables for the block and disables on the way out."""
    backend = enable(kernels_dir, **kwargs)
    try:
        yield backend
    finally:
        backend.disable()
