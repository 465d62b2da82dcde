"""Trace real models into a BackendBench-format trace file: `python -m evaluator.trace`.

    python -m evaluator.trace --zoo [--models a,b] [--max-models N] --out PATH.txt
    python -m evaluator.trace --model package.module:build_fn --inputs "T([2, 16], i64)" --out my.txt
    python -m evaluator.trace --zoo --format parquet --out PATH.parquet   # BackendBench's format
    python -m evaluator.trace --convert evaluator/data/torchbench_trace.txt --format parquet --out tb.parquet

Each model runs one step (inference, or forward + `loss.backward()` with `--train`) under
`evaluator.cases.trace_recorder.Recorder`. By default tensors are fake (`FakeTensorMode`): full-size
batches cost no memory and little time, and the model is even built inside the fake mode so its
weights never exist. Host reads of `all()`/`any()` results are answered True/False
(`trace_recorder.HostScalars`); a model whose code needs other real values (`.item()`,
data-dependent shapes) falls back to a real run on the same device, and the log says so.
Model construction and input creation are not recorded, only the step.

Output (`trace_recorder.write_trace`): PATH.txt in BackendBench's test-case format and the sidecar
PATH.json (COMMON.md). Models come from `evaluator.cases.model_zoo` (`--zoo`) or from the user
(`--model MODULE:FUNCTION`, wrapped by `user_model_entry`).

The tracer imports only torch, the standard library and `evaluator` (no pydantic): the model
libraries (transformers, torchvision, timm) are imported when a model needs them, and a zoo model
whose library is missing is skipped with the reason.
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import importlib
import importlib.util
import logging
import os
import re
import shlex
import sys
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch import nn

from evaluator.cases.model_zoo import ZOO, ZooModel, loss_of, missing_library
from evaluator.cases.parquet_trace import write_parquet_trace
from evaluator.cases.testcase import (
    DTYPE_CODES,
    CaseSyntaxError,
    Device,
    TensorSpec,
    format_trace,
    load_trace,
    map_values,
    parse_case,
)
from evaluator.cases.trace_recorder import HostScalars, Recorder, TraceTable, write_trace
from evaluator.errors import UsageError

log = logging.getLogger("evaluator.cases.trace")

DEVICES = ("cpu", "cuda", "meta")
FORMATS = ("txt", "parquet")


# ---------------------------------------------------------------- one model


@dataclass
class ModelTrace:
    """What tracing one model produced. `calls` is empty when the model was skipped."""

    name: str
    calls: Counter[tuple[str, str]] = field(default_factory=Counter)
    how: str = ""  # 'fake', 'meta', 'real', or 'real (fake failed: ...)'
    seconds: float = 0.0
    skipped: str | None = None  # the reason, when nothing was recorded
    unserializable: Counter[str] = field(default_factory=Counter)

    @property
    def num_calls(self) -> int:
        return sum(self.calls.values())

    @property
    def num_ops(self) -> int:
        return len({op for op, _ in self.calls})


@contextlib.contextmanager
def _default_dtype(dtype: torch.dtype | None) -> Iterator[None]:
    if dtype is None:
        yield
        return
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def _one_line(exc: BaseException, limit: int = 160) -> str:
    text = " ".join(str(exc).split()) or "(no message)"
    text = f"{type(exc).__name__}: {text}"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _run_step(entry: ZooModel, device: str, *, fake: bool, seed: int) -> Recorder:
    """Build the model and inputs (unrecorded), then record one step on `device`."""
    torch.manual_seed(seed)
    param_dtype = torch.float32 if entry.amp else entry.dtype
    autocast_device = "cuda" if device == "cuda" else "cpu"
    with contextlib.ExitStack() as stack:
        if fake:
            from torch._subclasses.fake_tensor import FakeTensorMode

            stack.enter_context(FakeTensorMode(allow_non_fake_inputs=True))
        stack.enter_context(torch.device(device))
        valueless = fake or device == "meta"
        with (
            _default_dtype(param_dtype),
            HostScalars(any_value=True) if valueless else contextlib.nullcontext(),
        ):
            model = entry.build()
            inputs = entry.make_inputs(model)
        if valueless:
            stack.enter_context(HostScalars())
        train = entry.mode == "train"
        model.train(train)
        amp = (
            torch.autocast(autocast_device, dtype=entry.dtype)
            if entry.amp and entry.dtype is not None
            else contextlib.nullcontext()
        )
        recorder = Recorder()
        with recorder:
            if train:
                with amp:
                    loss = loss_of(entry.step(model, inputs))
                loss.backward()
            else:
                with torch.no_grad(), amp:
                    entry.step(model, inputs)
        del model, inputs
    return recorder


def _attempts(device: str, *, fake: bool, fallback: bool) -> list[tuple[str, str, bool]]:
    """(label, device, fake?) in the order to try: fake or meta first, a real run as fallback."""
    real_device = "cpu" if device == "meta" else device
    first = (
        ("meta", "meta", False) if device == "meta" else ("fake", device, True) if fake else None
    )
    real = ("real", real_device, False)
    if first is None:
        return [real]
    return [first, real] if fallback else [first]


def trace_model(
    entry: ZooModel,
    *,
    device: str = "cpu",
    fake: bool = True,
    fallback: bool = True,
    seed: int = 0,
) -> ModelTrace:
    """Trace one workload. Never raises for a model's own failure: it becomes `skipped`."""
    result = ModelTrace(entry.name)
    start = time.perf_counter()
    missing = missing_library(entry)
    if missing:
        result.skipped = missing
        return result
    failures: list[str] = []
    for label, run_device, use_fake in _attempts(device, fake=fake, fallback=fallback):
        try:
            recorder = _run_step(entry, run_device, fake=use_fake, seed=seed)
        except UsageError:
            raise
        except Exception as exc:  # a model's own failure is data: try the next way, then skip
            log.debug("tracing %s (%s) failed", entry.name, label, exc_info=True)
            failures.append(f"{label} run failed: {_one_line(exc)}")
            continue
        finally:
            gc.collect()
            if run_device == "cuda":
                torch.cuda.empty_cache()
        result.calls = recorder.calls
        result.unserializable = recorder.unserializable
        result.how = label if not failures else f"{label} ({failures[-1]})"
        break
    else:
        result.skipped = "; ".join(failures) or "nothing to run"
    result.seconds = time.perf_counter() - start
    return result


# ---------------------------------------------------------------- many models


def trace_models(
    entries: Sequence[ZooModel],
    *,
    device: str = "cpu",
    fake: bool = True,
    fallback: bool = True,
    seed: int = 0,
    progress: Callable[[str], None] = log.info,
) -> tuple[TraceTable, list[ModelTrace]]:
    """Trace each entry in turn into one table; skipped models are in the returned list too."""
    table = TraceTable()
    results = []
    width = max((len(e.name) for e in entries), default=0)
    for i, entry in enumerate(entries, start=1):
        result = trace_model(entry, device=device, fake=fake, fallback=fallback, seed=seed)
        results.append(result)
        head = f"[{i}/{len(entries)}] {entry.name:<{width}}  {entry.mode:<5} {entry.precision:<9}"
        if result.skipped:
            progress(f"{head} skipped after {result.seconds:.1f} s: {result.skipped}")
            continue
        table.add(entry.name, result.calls)
        lost = sum(result.unserializable.values())
        progress(
            f"{head} {result.how:<5} {result.seconds:6.1f} s  {result.num_calls} calls, "
            f"{result.num_ops} ops, {len(result.calls)} cases"
            + (f", {lost} calls not expressible in the format" if lost else "")
        )
    return table, results


# ---------------------------------------------------------------- user models


def load_build_function(spec: str) -> Callable[[], Any]:
    """`package.module:function` or `path/to/file.py:function` -> the function; UsageError otherwise."""
    module_name, sep, func_name = spec.rpartition(":")
    if not sep or not module_name or not func_name:
        raise UsageError(
            f"--model {spec!r} is not MODULE:FUNCTION: write e.g. --model mypkg.models:build"
        )
    hint = "put its folder on PYTHONPATH or run from there"
    try:
        if module_name.endswith(".py") or os.sep in module_name:
            path = Path(module_name)
            if not path.is_file():
                raise UsageError(
                    f"--model file {str(path)!r} does not exist: pass an existing .py file"
                )
            # A private module name: never shadow an importable module of the same stem.
            unique = f"_atenforge_user_model_{path.stem}"
            loader_spec = importlib.util.spec_from_file_location(unique, path)
            if loader_spec is None or loader_spec.loader is None:
                raise UsageError(f"--model file {str(path)!r} cannot be imported as Python")
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[unique] = module  # dataclasses and pickling look modules up here
            loader_spec.loader.exec_module(module)
        else:
            if os.getcwd() not in sys.path and "" not in sys.path:
                sys.path.insert(0, os.getcwd())
            module = importlib.import_module(module_name)
    except UsageError:
        raise
    except ImportError as exc:
        raise UsageError(f"cannot import {module_name!r} ({_one_line(exc)}): {hint}") from None
    except Exception as exc:  # the module itself raised while importing
        raise UsageError(
            f"importing {module_name!r} failed ({_one_line(exc)}): fix the module"
        ) from None
    func = getattr(module, func_name, None)
    if func is None:
        raise UsageError(
            f"module {module_name!r} has no {func_name!r}: name a function that builds the model"
        )
    if not callable(func):
        raise UsageError(
            f"{module_name}:{func_name} is not callable: name a function that builds the model"
        )
    return func


_KEYWORD = re.compile(r"^\s*([A-Za-z_]\w*)\s*=(.*)$", re.S)


def parse_inputs(texts: Sequence[str]) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """`--inputs` values: each a case value (`T([2, 16], i64)`, `3`, ...) or `name=value`."""
    args: list[Any] = []
    kwargs: dict[str, Any] = {}
    for text in texts:
        match = _KEYWORD.match(text)
        name, value_text = (match.group(1), match.group(2)) if match else (None, text)
        try:
            value = parse_case(f"(({value_text},), {{}})").args[0]
        except CaseSyntaxError as exc:
            raise UsageError(
                f"--inputs {text!r} is not a case value ({exc}): write tensors as T([2, 16], i64)"
            ) from None
        if name is None:
            if kwargs:
                raise UsageError(
                    f"--inputs {text!r}: positional inputs must come before name=value ones"
                )
            args.append(value)
        else:
            kwargs[name] = value
    return tuple(args), kwargs


def materialize_value(value: Any, generator: torch.Generator, *, max_int: int) -> Any:
    """Seeded tensors for TensorSpecs: floats ~ N(0, 1), ints in [0, max_int), bools True.

    Tensors and devices land on the current default device (the traced device).
    """
    return map_values(value, lambda v: _materialize_leaf(v, generator, max_int))


def _materialize_leaf(value: Any, generator: torch.Generator, max_int: int) -> Any:
    if isinstance(value, TensorSpec):
        size = value.storage_numel() if value.stride is not None else value.numel()
        dtype = value.dtype
        if dtype == torch.bool:
            flat = torch.ones(size, dtype=torch.bool)
        elif dtype.is_floating_point or dtype.is_complex:
            flat = torch.randn(size, generator=generator, dtype=torch.float32, device="cpu")
            flat = flat.to(dtype)
        else:
            flat = torch.randint(0, max_int, (size,), generator=generator, device="cpu").to(dtype)
        flat = flat.to(torch.get_default_device())
        if value.stride is not None:
            return flat.as_strided(value.shape, value.stride)
        return flat.reshape(value.shape)
    if isinstance(value, Device):
        return torch.get_default_device()
    return value


def user_model_entry(
    build_fn: Callable[[], Any],
    *,
    name: str,
    inputs: tuple[tuple[Any, ...], dict[str, Any]] | None,
    train: bool,
    dtype: torch.dtype | None,
    seed: int = 0,
    max_int: int = 100,
) -> ZooModel:
    """Wrap a user's `build_fn` (returning a module, or (module, inputs)) as a traceable workload."""
    built_inputs: dict[int, Any] = {}

    def build() -> nn.Module:
        # An exception from build_fn is the model's failure (it may only fail on fake tensors,
        # e.g. when it loads a checkpoint): trace_model tries a real run, then reports it.
        made = build_fn()
        module, own_inputs = made if isinstance(made, tuple) and len(made) == 2 else (made, None)
        if not isinstance(module, nn.Module):
            raise UsageError(
                f"{name}() returned {type(module).__name__}: return an nn.Module or (module, inputs)"
            )
        built_inputs[id(module)] = own_inputs
        return module

    def make_inputs(module: nn.Module) -> Any:
        if inputs is not None:
            generator = torch.Generator().manual_seed(seed)
            args, kwargs = inputs
            args = materialize_value(args, generator, max_int=max_int)
            kwargs = materialize_value(kwargs, generator, max_int=max_int)
            return _ArgsKwargs(args, kwargs)
        own = built_inputs.pop(id(module), None)
        if own is None:
            raise UsageError(
                f"no inputs for {name}: pass --inputs SPEC ... or return (module, inputs)"
            )
        if isinstance(own, dict):
            return _ArgsKwargs((), own)
        if isinstance(own, torch.Tensor):
            return _ArgsKwargs((own,), {})
        return _ArgsKwargs(tuple(own), {})

    return ZooModel(
        name=name,
        library=None,
        build=build,
        make_inputs=make_inputs,
        mode="train" if train else "infer",
        dtype=dtype,
        step=_call_with,
    )


@dataclass
class _ArgsKwargs:
    args: tuple[Any, ...]
    kwargs: dict[str, Any]


def _call_with(model: nn.Module, inputs: _ArgsKwargs) -> Any:
    return model(*inputs.args, **inputs.kwargs)


# ---------------------------------------------------------------- CLI


def _parse_dtype(text: str | None) -> torch.dtype | None:
    if text is None:
        return None
    code = text.removeprefix("torch.")
    aliases = {
        "float16": "f16",
        "half": "f16",
        "bfloat16": "bf16",
        "float32": "f32",
        "float": "f32",
        "float64": "f64",
    }
    code = aliases.get(code, code)
    dtype = DTYPE_CODES.get(code)
    if dtype is None or not dtype.is_floating_point:
        raise UsageError(f"--dtype {text!r} is not a floating dtype: use f16, bf16, f32 or f64")
    return dtype


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m evaluator.trace",
        description="Trace real models into a BackendBench-format trace file (+ JSON sidecar).",
    )
    what = p.add_mutually_exclusive_group(required=True)
    what.add_argument(
        "--zoo",
        action="store_true",
        help="trace the built-in model zoo (evaluator.cases.model_zoo)",
    )
    what.add_argument(
        "--model",
        metavar="MODULE:FUNCTION",
        help="trace your model: FUNCTION() returns an nn.Module or (module, inputs)",
    )
    what.add_argument("--list", action="store_true", help="list the zoo's models and exit")
    what.add_argument(
        "--convert",
        metavar="TRACE",
        type=Path,
        help="rewrite an existing trace (.txt or .parquet) in --format, without tracing",
    )
    p.add_argument(
        "--out", type=Path, help="trace file to write (the sidecar goes next to it as .json)"
    )
    p.add_argument(
        "--format",
        choices=FORMATS,
        default="txt",
        help="txt: the text trace; parquet: BackendBench's parquet test set (needs pyarrow)",
    )
    p.add_argument("--models", help="zoo: comma-separated model names (default: all)")
    p.add_argument("--max-models", type=int, help="zoo: trace at most N models")
    p.add_argument(
        "--inputs",
        nargs="+",
        metavar="SPEC",
        help="--model inputs: T([2, 16], i64), literals, or name=SPEC",
    )
    p.add_argument(
        "--train",
        action="store_true",
        help="--model: forward + loss.backward() (default: inference)",
    )
    p.add_argument("--dtype", help="--model: build the model in this dtype (f16, bf16, f32)")
    p.add_argument(
        "--name", help="--model: the model's name in the sidecar (default: the function name)"
    )
    p.add_argument(
        "--max-int",
        type=int,
        default=100,
        help="--model: integer inputs are drawn from [0, N) (default 100)",
    )
    p.add_argument(
        "--device",
        default="cpu",
        choices=DEVICES,
        help="device the traced tensors live on (default cpu); it decides device-specific ops such as the SDPA kernel",
    )
    p.add_argument(
        "--real",
        action="store_true",
        help="run on real tensors instead of fake ones (slower, needs memory)",
    )
    p.add_argument(
        "--no-fallback",
        action="store_true",
        help="skip a model whose fake/meta run fails instead of running it for real",
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("-v", "--verbose", action="store_true", help="debug logging and tracebacks")
    return p


def _select_zoo(models: str | None, max_models: int | None) -> list[ZooModel]:
    if models:
        names = [n.strip() for n in models.split(",") if n.strip()]
        unknown = [n for n in names if n not in ZOO]
        if unknown:
            raise UsageError(
                f"unknown zoo model(s) {', '.join(unknown)}: see python -m evaluator.trace --list"
            )
        entries = [ZOO[n] for n in names]
    else:
        entries = list(ZOO.values())
    if max_models is not None:
        if max_models < 1:
            raise UsageError("--max-models must be at least 1")
        entries = entries[:max_models]
    return entries


def run(argv: Sequence[str] | None = None) -> int:
    """The CLI without error mapping (main() maps UsageError to one line and exit code 2)."""
    args = build_parser().parse_args(argv)
    if args.list:
        for entry in ZOO.values():
            missing = missing_library(entry)
            note = f"  [skipped here: {missing}]" if missing else ""
            log.info(
                "%-24s %-13s %-5s %-9s %s%s",
                entry.name,
                entry.library or "torch",
                entry.mode,
                entry.precision,
                entry.sizes,
                note,
            )
        return 0
    if args.out is None:
        raise UsageError(
            f"--out is required: pass the trace file to write, e.g. --out my_trace.{args.format}"
        )
    if args.out.suffix != f".{args.format}":
        raise UsageError(
            f"--out {str(args.out)!r} must end in .{args.format} for --format {args.format}"
            " (the sidecar is written next to it as .json)"
        )
    if args.convert is not None:
        return convert(args.convert, args.out)
    if args.device == "cuda" and not torch.cuda.is_available():
        raise UsageError("--device cuda but CUDA is not available: use --device cpu")
    if args.zoo:
        if args.inputs or args.train or args.dtype or args.name:
            raise UsageError("--inputs/--train/--dtype/--name apply to --model, not --zoo")
        entries = _select_zoo(args.models, args.max_models)
    else:
        if args.models or args.max_models is not None:
            raise UsageError("--models/--max-models apply to --zoo, not --model")
        build_fn = load_build_function(args.model)
        name = args.name or args.model.rpartition(":")[2]
        entries = [
            user_model_entry(
                build_fn,
                name=name,
                inputs=parse_inputs(args.inputs) if args.inputs else None,
                train=args.train,
                dtype=_parse_dtype(args.dtype),
                seed=args.seed,
                max_int=args.max_int,
            )
        ]
    command = "python -m evaluator.trace " + " ".join(
        shlex.quote(a) for a in (argv if argv is not None else sys.argv[1:])
    )
    mode = "meta" if args.device == "meta" else "real" if args.real else "fake"
    log.info(
        "tracing %d model(s) on %s with %s tensors (torch %s)",
        len(entries),
        args.device,
        mode,
        torch.__version__,
    )
    start = time.perf_counter()
    table, results = trace_models(
        entries,
        device=args.device,
        fake=not args.real,
        fallback=not args.no_fallback,
        seed=args.seed,
    )
    skipped = [(r.name, r.skipped) for r in results if r.skipped]
    if not table.models:
        if not args.zoo:
            raise UsageError(
                f"tracing {entries[0].name} failed ({skipped[0][1]}): fix the model or --inputs"
            )
        raise UsageError(
            "no zoo model could be traced (reasons above): pip install 'atenforge[trace]'"
        )
    json_path = write_trace(
        table,
        args.out,
        command=command,
        extra={
            "device": args.device,
            "tensors": mode,
            "versions": _versions(),
            "skipped_models": [{"model": n, "reason": r} for n, r in skipped],
        },
    )
    log.info(
        "wrote %s and %s: %d ops, %d cases, %d models traced in %.1f s",
        args.out,
        json_path.name,
        len(table.ops),
        table.num_cases,
        len(table.models),
        time.perf_counter() - start,
    )
    for name, reason in skipped:
        log.info("  skipped %s: %s", name, reason)
    dropped = sum(table.dropped.values())
    if dropped:
        log.info(
            "  %d calls dropped: their arguments do not round-trip through the case format", dropped
        )
    return 0


def convert(source: Path, out: Path) -> int:
    """Rewrite the trace `source` as `out` (format from its suffix); cases and counts unchanged."""
    if not source.is_file():
        raise UsageError(f"--convert '{source}' does not exist: pass an existing trace file.")
    if source.suffix not in (".txt", ".parquet"):
        raise UsageError(f"--convert '{source}' must be a .txt or .parquet trace.")
    trace = load_trace(source)
    for error in trace.errors:
        log.warning("skipped: %s", error)
    cases = {op: op_cases for op, op_cases in trace.cases.items() if op_cases}
    if out.suffix == ".parquet":
        write_parquet_trace(cases, out)
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(format_trace(cases), encoding="utf-8")
    log.info("wrote %s: %d ops, %d cases", out, len(cases), sum(map(len, cases.values())))
    return 0


def _versions() -> dict[str, str]:
    versions = {"torch": torch.__version__}
    for lib in ("transformers", "torchvision", "timm"):
        module = sys.modules.get(lib)
        if module is not None:
            versions[lib] = getattr(module, "__version__", "?")
    return versions


def main(argv: Sequence[str] | None = None) -> int:
    verbose = "-v" in (argv or sys.argv[1:]) or "--verbose" in (argv or sys.argv[1:])
    handler = logging.StreamHandler(sys.stdout)
    handler.setFormatter(logging.Formatter("%(message)s"))
    log.addHandler(handler)
    log.setLevel(logging.DEBUG if verbose else logging.INFO)
    log.propagate = False
    try:
        with warnings.catch_warnings():
            if not verbose:  # model libraries warn about deprecated kwargs on every call
                warnings.simplefilter("ignore")
                os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")
            return run(argv)
    except UsageError as exc:
        if verbose:
            raise
        print(f"error: {exc}", file=sys.stderr)
        return 2
    finally:
        log.removeHandler(handler)


if __name__ == "__main__":
    sys.exit(main())
