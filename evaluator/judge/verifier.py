"""The sandbox child: judge one kernel file on a list of cases, writing results as it goes.

Runs only inside a sandbox process (fork-server child or fresh interpreter), never in the process
that decides. It is the verifier: the kernel runs in a runner process it forks first
(`evaluator.judge`), on the CPU and on a GPU alike. Order matters:
0. fork the runner (before anything below exists in memory), then take the results key;
1. materialise every case and compute eager references on pristine copies BEFORE the kernel
   module is imported (so nothing the kernel does at import time can change the reference);
2. confine the process that imports the kernel (`evaluator.containment.confine`: files, network,
   capabilities, limits), then have the kernel imported with `os.environ` watched for secret
   probes;
3. per case: call the kernel on seed A, seed B, then seed A again, each on fresh copies, under the
   guards (ATen trace in every thread, launch counter, host reads, harness identity, a canary
   proving each observer alive); check launches, compute ops, plain dense outputs, input
   mutation, values, staleness (B answered with A's result, or A's buffer overwritten by B) and
   determinism; then one ghost call per operator with every launch a no-op;
4. on a GPU, have the runner time passing operators against eager (evaluator.judge.timing), check the
   output of each case's last timed call against this process's eager result on the same
   inputs, and derive floor, clamp and speedup from the runner's raw numbers.
Each event is one JSON line appended to the results file and flushed, so a crash or a kill loses
only the test in progress. Usage: python -m evaluator.harness SPEC.json
"""

from __future__ import annotations

import hashlib
import hmac
import importlib.util
import json
import math
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import torch

from evaluator.cases.inputs import materialize
from evaluator.cases.testcase import TestCase, map_values, parse_case
from evaluator.judge import checks
from evaluator.judge.gpu_guards import NumericsState, StreamWatch
from evaluator.judge.gpu_lock import GpuLock
from evaluator.judge.guards import (
    AtenTrace,
    HarnessSnapshot,
    HostEscapeWatch,
    LaunchCounter,
    SecretWatch,
    ThreadWatch,
    launcher_classes,
)
from evaluator.judge.outputs import output_flags
from evaluator.judge.runner import CallReply, RunnerClient, start_runner
from evaluator.naming import kernel_function_name, normalize_op
from evaluator.results import REJECT_FLAGS, Flag, TestResult, flag_name

_CUDA_ERROR_MARKERS = (
    "CUDA error",
    "cudaError",
    "illegal memory access",
    "CUBLAS_STATUS",
    "device-side assert",
)
_MAX_MSG = 600


def config_view(data: dict[str, Any]) -> Any:
    """Attribute access over the EvalConfig the parent validated and dumped: the child imports
    only torch, triton, numpy, the standard library and `evaluator` (no pydantic)."""
    view = SimpleNamespace(**data)
    for section in ("correctness", "timing", "sandbox", "cpu"):
        setattr(view, section, SimpleNamespace(**data[section]))
    return view


class ResultWriter:
    """Append-only JSON lines; each write is one `os.write` on an O_APPEND descriptor.

    With a key, every line carries a sequence number and ends with `, "mac": HEX}`, an HMAC-SHA256
    of the line up to that point: the kernel's process can reach the file by its path but holds
    no key, so a line it writes, replays or reorders does not verify (`sandbox.JobState`)."""

    def __init__(self, path: str, key: bytes | None = None) -> None:
        self.fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        self.key = key
        self.seq = 0

    def write(self, event: dict[str, Any]) -> None:
        # CLOCK_MONOTONIC is system-wide on Linux: the parent can subtract these stamps.
        event.setdefault("t", time.monotonic())
        if self.key is not None:
            event["seq"] = self.seq
            self.seq += 1
        body = json.dumps(event, default=str)
        if self.key is not None:
            mac = hmac.new(self.key, body.encode(), hashlib.sha256).hexdigest()
            body = f'{body[:-1]}, "mac": "{mac}"}}'
        os.write(self.fd, (body + "\n").encode())


def _confinement_functions() -> dict[str, tuple[Any, str]]:
    """What reports a candidate's leftover processes and its attempts to leave confinement."""
    from evaluator.containment import process_tree as confine_tree
    from evaluator.containment.watch import ViolationWatch

    names = ("exit_code_of", "_report_leftovers", "_drain_children", "_children")
    out = {f"evaluator.containment.process_tree.{n}": (confine_tree, n) for n in names}
    for n in ("_hook", "_check", "_flag", "_check_read", "_check_write", "_under"):
        out[f"evaluator.containment.watch.ViolationWatch.{n}"] = (ViolationWatch, n)
    return out


def aten_overload(op: str) -> Any:
    base, overload = normalize_op(op).split(".", 1)
    return getattr(getattr(torch.ops.aten, base), overload)


def mutable_positions(packet: Any) -> tuple[set[int], set[str]]:
    """Positions and names of arguments the overload writes to (in-place self, out=)."""
    positions: set[int] = set()
    names: set[str] = set()
    for i, arg in enumerate(packet._schema.arguments):
        if arg.alias_info is not None and arg.alias_info.is_write:
            names.add(arg.name)
            if not arg.kwarg_only:
                positions.add(i)
    return positions, names


def clone_tree(value: Any) -> Any:
    """Every tensor in `value` (through lists, tuples and dicts) cloned with its strides."""
    return map_values(value, _clone_tensor)


def _clone_tensor(value: Any) -> Any:
    if isinstance(value, torch.Tensor):
        if value.is_contiguous() and value.storage_offset() == 0:
            return value.clone()
        # Keep strides, overlapping ones (stride 0) included: copy the whole backing storage and
        # rebuild the same view on it, so a strided input reaches the kernel strided.
        out = torch.empty(0, dtype=value.dtype, device=value.device)
        out.set_(
            value.untyped_storage().clone(), value.storage_offset(), value.size(), value.stride()
        )
        return out
    return value


def _tensors(value: Any, prefix: str) -> list[tuple[str, torch.Tensor]]:
    if isinstance(value, torch.Tensor):
        return [(prefix, value)]
    if isinstance(value, list | tuple):
        out: list[tuple[str, torch.Tensor]] = []
        for i, v in enumerate(value):
            out += _tensors(v, f"{prefix}[{i}]")
        return out
    return []


def _leaves(value: Any) -> list[Any]:
    """Every non-container value inside `value` (lists and tuples opened), Nones left out."""
    if isinstance(value, list | tuple):
        return [leaf for v in value for leaf in _leaves(v)]
    return [] if value is None else [value]


def _poison(value: Any) -> None:
    """Fill caller-provided output buffers so unwritten elements show."""
    for _, t in _tensors(value, ""):
        if t.is_floating_point() or t.is_complex():
            t.fill_(math.nan)
        elif t.dtype == torch.bool:
            t.fill_(True)
        else:
            t.fill_(torch.iinfo(t.dtype).max)


def _poison_allocator(ref_out: Any, device: str) -> None:
    """On CUDA the caching allocator hands a just-freed block to the next same-sized request:
    fill such blocks with 0xFF (NaN for floats) so a kernel that leaves outputs unwritten shows."""
    if device != "cuda":
        return
    for _, t in _tensors(ref_out if isinstance(ref_out, list | tuple) else [ref_out], "out"):
        nbytes = t.numel() * t.element_size()
        if nbytes:
            block = torch.empty(nbytes, dtype=torch.uint8, device=device)
            block.fill_(255)
            del block


@dataclass
class Seeded:
    seed: int
    args: tuple
    kwargs: dict
    ref_args: tuple  # reference inputs after eager ran (mutated ones show the expected state)
    ref_kwargs: dict
    ref_out: Any


@dataclass
class Prepared:
    case: TestCase
    runs: list[Seeded] = field(default_factory=list)
    skip_reason: str | None = None
    skip_flag: str | None = None


def _is_cuda_error(exc: BaseException) -> bool:
    text = f"{type(exc).__name__}: {exc}"
    return any(m in text for m in _CUDA_ERROR_MARKERS) or type(exc).__name__ == "AcceleratorError"


def _short(exc: BaseException) -> str:
    text = f"{exc}".strip().splitlines()
    first = text[0] if text else ""
    return first[:_MAX_MSG]


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
            "error_msg": "".join(tb).strip()[-_MAX_MSG:],
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
        err_type, err_msg = type(exc).__name__, _short(exc)
        flags.append(Flag.CUDA_ERROR if _is_cuda_error(exc) else Flag.EXCEPTION)
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


def _nbytes(value: Any) -> int:
    return sum(t.untyped_storage().nbytes() for _, t in _tensors(value, ""))


class Judge:
    def __init__(self, spec: dict[str, Any], runner: RunnerClient | None = None) -> None:
        self.spec = spec
        self.cfg = config_view(spec["config"])
        self.op = normalize_op(spec["op"])
        self.device: str = spec["device"]
        self.packet = aten_overload(self.op)
        self.mut_pos, self.mut_names = mutable_positions(self.packet)
        self.out = ResultWriter(spec["results_path"], spec.get("_key"))
        # Split (the default): the kernel lives in the runner process and these guards live there.
        # With `split_judge: false` in the spec this process calls the kernel itself.
        self.runner = runner
        self.inst = Instruments.install(self.device) if runner is None else None
        self.runner_flags: list[str] = []
        self.sync = torch.cuda.synchronize if self.device == "cuda" else (lambda: None)
        self.gpu_lock: GpuLock | None = None
        if self.device == "cuda" and spec.get("timing_lock"):
            self.gpu_lock = GpuLock(spec["timing_lock"])

    # ------------------------------------------------------------ preparation

    def prepare(self, cases: list[TestCase]) -> list[Prepared]:
        prepared = []
        base_seed = self.cfg.correctness.seed
        for i, case in enumerate(cases):
            item = Prepared(case)
            if self.device == "cpu" and case.total_numel() > self.cfg.cpu.max_case_numel:
                item.skip_reason = (
                    f"skipped on the CPU: {case.total_numel()} elements > eval.cpu.max_case_numel "
                    f"= {self.cfg.cpu.max_case_numel} (run on a GPU to test it)"
                )
                item.skip_flag = Flag.SKIPPED_SIZE
                prepared.append(item)
                continue
            try:
                for k in range(self.cfg.correctness.num_seeds):
                    seed = base_seed + 7919 * i + 104729 * k
                    args, kwargs = materialize(
                        self.op,
                        case,
                        self.device,
                        seed,
                        profile=self.cfg.correctness.tolerance_profile,
                    )
                    ref_args, ref_kwargs = clone_tree(args), clone_tree(kwargs)
                    ref_out = self.packet(*ref_args, **ref_kwargs)
                    item.runs.append(Seeded(seed, args, kwargs, ref_args, ref_kwargs, ref_out))
                self.sync()
            except Exception as exc:  # the case cannot run eagerly here: not the kernel's fault
                if self.device == "cuda" and _is_cuda_error(exc):
                    raise
                item.runs = []
                item.skip_reason = (
                    f"eager reference failed on {self.device}: {type(exc).__name__}: {_short(exc)}"
                )
            prepared.append(item)
        return prepared

    # ------------------------------------------------------------ kernel import

    def load_kernel(self, prepared: list[Prepared] | None = None) -> Any | None:
        if self.runner is not None:
            began = time.monotonic()
            meanwhile = None
            if self.device == "cuda" and prepared:
                meanwhile = lambda: self.warm_checks(prepared)  # noqa: E731
            loaded = self.runner.load(self.spec["kernel_file"], meanwhile)
            self.runner_flags = loaded["flags"]
            if self.cfg.sandbox.confine:
                took = round(time.monotonic() - began, 4)
                self.out.write(
                    {
                        "event": "confined",
                        "containment": loaded.get("containment", "unknown"),
                        "took_s": took,
                    }
                )
            if loaded["error"] is not None:
                self.out.write(loaded["error"])
                return None
            return self.runner
        assert self.inst is not None
        fn, error = import_kernel(self.spec["kernel_file"], self.op, self.inst.secrets)
        if error is not None:
            self.out.write(error)
        return fn

    def warm_checks(self, prepared: list[Prepared]) -> None:
        """Run the comparisons once on each output dtype's smallest reference against itself, while
        the runner makes its context and imports the kernel: the first test then does not pay the
        loading of the comparison's CUDA kernels (about 0.2 s on an H200). Nothing here is kept."""
        smallest: dict[str, Seeded] = {}
        for item in sorted(prepared, key=lambda it: it.case.total_numel()):
            if item.skip_reason is not None or not item.runs:
                continue
            run = item.runs[0]
            outs = run.ref_out if isinstance(run.ref_out, list | tuple) else [run.ref_out]
            key = ",".join(str(getattr(t, "dtype", type(t).__name__)) for t in outs)
            smallest.setdefault(key, run)
        try:
            for run in smallest.values():
                checks.compare(run.ref_out, run.ref_out, self.cfg.correctness)
                checks.bitwise_equal(run.ref_out, run.ref_out)
            self.sync()
        except Exception:  # noqa: BLE001 - a warm-up that fails leaves the first test to pay it
            pass

    def op_flags(self) -> list[str]:
        return list(self.runner_flags) if self.inst is None else self.inst.op_flags()

    # ------------------------------------------------------------ one test

    def invoke(
        self, fn: Any, args: tuple, kwargs: dict, run: Seeded, ghost: bool, first: bool
    ) -> CallReply:
        """One call of the kernel on (args, kwargs): through the runner, or here under this
        process's guards. With `ghost`, every Triton launch is a no-op."""
        if self.runner is not None:
            cap = 2 * (_nbytes(args) + _nbytes(list(kwargs.values())))
            cap += 8 * _nbytes([run.ref_out]) + (1 << 20)
            return self.runner.call(args, kwargs, ghost=ghost, first=first, reply_cap_bytes=cap)
        assert self.inst is not None
        self.inst.launches.ghost = ghost
        if ghost:
            torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            out, flags, err_type, err_msg, n = guarded_call(
                self.inst, fn, self.op, args, kwargs, self.device
            )
        finally:
            self.inst.launches.ghost = False
            if ghost:
                torch.use_deterministic_algorithms(False)
        return CallReply(out, (args, kwargs), flags, n, err_type, err_msg)

    def call(
        self, fn: Any, run: Seeded, ghost: bool = False, first: bool = False
    ) -> tuple[Any, list[str], str | None, str | None, Any]:
        """Call the kernel once on fresh copies. Returns (out, flags, error_type, error_msg, inputs)."""
        args, kwargs = clone_tree(run.args), clone_tree(run.kwargs)
        for name in self.mut_names:
            if name in kwargs and name != "self":
                _poison(kwargs[name])
        if self.runner is None:  # a split-off runner has its own allocator
            _poison_allocator(run.ref_out, self.device)
        reply = self.invoke(fn, args, kwargs, run, ghost, first)
        flags = list(reply.flags)
        if reply.error_type is None:
            if reply.launches == 0 and not self.outputs_empty(run):
                flags.append(Flag.NO_TRITON_LAUNCH)
            flags += output_flags(reply.out, run.ref_out)
        return reply.out, flags, reply.error_type, reply.error_msg, reply.inputs

    def outputs_empty(self, run: Seeded) -> bool:
        """True when every output eager produced (returned and written in place) has zero elements:
        such a call has nothing to compute, so it needs no launch. Judged on eager's outputs, which
        the kernel cannot influence; a result with a non-tensor value is never exempt."""
        outs: list[Any] = [run.ref_out]
        outs += [run.ref_args[i] for i in sorted(self.mut_pos) if i < len(run.ref_args)]
        outs += [run.ref_kwargs[n] for n in sorted(self.mut_names) if n in run.ref_kwargs]
        leaves = _leaves(outs)
        return bool(leaves) and all(isinstance(t, torch.Tensor) and t.numel() == 0 for t in leaves)

    def mutation_flags(self, run: Seeded, inputs: tuple[tuple, dict]) -> list[str]:
        """Inputs must end as eager left them: untouched (bitwise) where eager did not write,
        and equal within tolerance where eager writes without saying so in the schema
        (`native_batch_norm`'s running statistics)."""
        args, kwargs = inputs
        pairs: list[tuple[str, Any, Any, Any]] = [
            (f"arg{i}", a, p, r)
            for i, (a, p, r) in enumerate(zip(args, run.args, run.ref_args, strict=False))
            if i not in self.mut_pos
        ]
        pairs += [
            (name, v, run.kwargs.get(name), run.ref_kwargs.get(name))
            for name, v in kwargs.items()
            if name not in self.mut_names
        ]
        flags = []
        for label, value, pristine, after_eager in pairs:
            for (where, t), (_, pt), (_, rt) in zip(
                _tensors(value, label),
                _tensors(pristine, ""),
                _tensors(after_eager, ""),
                strict=False,
            ):
                if checks.bitwise_equal(rt, pt):
                    if not checks.bitwise_equal(t, pt):
                        flags.append(f"{Flag.INPUT_MUTATED}:{where}")
                elif not checks.compare(t, rt, self.cfg.correctness, where).ok:
                    flags.append(f"{Flag.WRONG_VALUES}:{where} (eager updates it in place)")
        return flags

    def matches_eager(self, out: Any, ref_out: Any, args: tuple, kwargs: dict) -> checks.Comparison:
        """`out` against eager's `ref_out` on pristine inputs (args, kwargs). Under the strict
        profile a value mismatch in a 16-bit float output is measured again against the op run in
        float64 on the same inputs (`checks.compare`'s `exact`): the kernel passes where it is no
        farther from that than the tolerance plus twice eager's own error."""
        cmp = checks.compare(out, ref_out, self.cfg.correctness)
        if (
            cmp.ok
            or cmp.flags != [Flag.WRONG_VALUES]
            or self.cfg.correctness.tolerance_profile != "strict"
            or not any(t.dtype in checks.SHORT_FLOATS for t in checks.tensor_leaves(ref_out))
        ):
            return cmp
        try:
            exact = self.packet(*checks.widen_to_f64(args), **checks.widen_to_f64(kwargs))
            self.sync()
        except Exception:  # noqa: BLE001 - no float64 kernel for this op/device: eager decides
            return cmp
        wide = checks.compare(out, ref_out, self.cfg.correctness, exact=exact)
        return wide if wide.ok else cmp

    def check_result(self, out: Any, run: Seeded, inputs: tuple[tuple, dict]) -> checks.Comparison:
        cmp = self.matches_eager(out, run.ref_out, run.args, run.kwargs)
        args, kwargs = inputs
        for i in sorted(self.mut_pos):
            if i < len(args):
                cmp = cmp.merge(
                    checks.compare(
                        args[i], run.ref_args[i], self.cfg.correctness, f"mutated arg{i}"
                    )
                )
        for name in sorted(self.mut_names):
            if name in kwargs:
                cmp = cmp.merge(
                    checks.compare(
                        kwargs[name], run.ref_kwargs[name], self.cfg.correctness, f"out {name}"
                    )
                )
        return cmp

    def f64_note(self, out: Any, run: Seeded) -> str:
        """For a failed comparison: how far the kernel and eager each are from the same op run in
        float64 (a diagnostic; the verdict is unchanged). Empty when the op has no float64 form."""
        try:
            args, kwargs = checks.widen_to_f64(run.args), checks.widen_to_f64(run.kwargs)
            exact = self.packet(*args, **kwargs)
            self.sync()
            errs = checks.errors_vs_f64(out, run.ref_out, exact)
        except Exception:  # noqa: BLE001 - no float64 kernel for this op/device: no note
            return ""
        if errs is None:
            return ""
        ours, eager = errs
        closer = "closer to it than eager" if ours < eager else "farther from it than eager"
        return (
            f" [float64 run of the op: kernel off by up to {ours:.3g}, eager by {eager:.3g}:"
            f" the kernel is {closer}]"
        )

    def run_test(self, fn: Any, item: Prepared) -> TestResult:
        args_text = item.case.serialize()
        result = TestResult(args=args_text, passed=False)
        schedule = list(range(len(item.runs))) + [0]  # seeds A, B, ..., then A again
        # Correct outputs of earlier calls and their bitwise snapshots, kept alive: if a later call
        # changes one, the kernel reuses its result buffer. (A wrong output's memory is garbage
        # whose changes prove nothing, so only correct ones are watched.)
        kept: list[tuple[Any, Any]] = []
        first_ok: bool | None = None
        messages: list[str] = []
        for step, k in enumerate(schedule):
            run = item.runs[k]
            out, flags, err_type, err_msg, inputs = self.call(fn, run, first=step == 0)
            for f in flags:
                if f not in result.flags:
                    result.flags.append(f)
            if err_type is not None:
                result.error_type, result.error_msg = (
                    err_type,
                    f"call {step + 1} (seed {run.seed}): {err_msg}",
                )
                return result
            for f in self.mutation_flags(run, inputs):
                if f.startswith(Flag.WRONG_VALUES):
                    messages.append(
                        f"call {step + 1} (seed {run.seed}): {f.split(':', 1)[1]} differs from eager"
                    )
                    f = Flag.WRONG_VALUES
                if f not in result.flags:
                    result.flags.append(f)
            cmp = self.check_result(out, run, inputs)
            _update_errors(result, cmp)
            repeat = step == len(schedule) - 1
            if not cmp.ok:
                for f in cmp.flags:
                    if f not in result.flags and not repeat:
                        result.flags.append(f)
                if (
                    step > 0
                    and not repeat
                    and checks.compare(out, item.runs[0].ref_out, self.cfg.correctness).ok
                ):
                    result.flags.append(Flag.STALE_RESULT)
                    messages.append(
                        f"call {step + 1} (seed {run.seed}) returned the answer for seed {item.runs[0].seed}: a cached result"
                    )
                elif repeat and first_ok:
                    result.flags.append(Flag.NONDETERMINISTIC)
                    messages.append(
                        f"call {step + 1} repeats call 1 on the same input but disagrees with eager ({cmp.message}) while call 1 agreed"
                    )
                else:
                    note = self.f64_note(out, run) if not messages else ""
                    messages.append(f"call {step + 1} (seed {run.seed}): {cmp.message}{note}")
            if cmp.ok and Flag.WITHIN_EAGER_ERROR in cmp.flags:
                if Flag.WITHIN_EAGER_ERROR not in result.flags:
                    result.flags.append(Flag.WITHIN_EAGER_ERROR)
            if step == 0:
                first_ok = cmp.ok
            for prev_out, prev_bits in kept:
                if (
                    not checks.bitwise_equal(prev_out, prev_bits)
                    and Flag.STALE_RESULT not in result.flags
                ):
                    result.flags.append(Flag.STALE_RESULT)
                    messages.append(
                        f"call {step + 1} overwrote the result of an earlier call: the kernel reuses its output buffer"
                    )
            if cmp.ok:
                kept.append((out, checks.snapshot(out)))
        result.passed = not messages and not _has_reject_or_error(result.flags)
        if messages:
            result.error_type = (
                "WrongResult" if not _has_reject_or_error(result.flags) else "Rejected"
            )
            result.error_msg = "; ".join(messages)[:_MAX_MSG]
        elif not result.passed:
            result.error_type = "Rejected"
            result.error_msg = "flags: " + ", ".join(result.flags)
        if not result.passed and self.device == "cpu" and _has_bf16(item.case):
            result.flags.append(Flag.INTERPRETER_BF16)
        return result

    def ghost_eligible(self, run: Seeded) -> bool:
        """Whether a right answer with every launch a no-op would prove compute outside Triton:
        not when an expected output is empty, constant (fills may make it) or equal to an input
        (a copy may make it), or when the op returns no tensor."""
        outs: list[Any] = [run.ref_out]
        outs += [run.ref_args[i] for i in sorted(self.mut_pos) if i < len(run.ref_args)]
        outs += [run.ref_kwargs[n] for n in sorted(self.mut_names) if n in run.ref_kwargs]
        leaves = _leaves(outs)
        if not leaves or not all(isinstance(t, torch.Tensor) and t.numel() > 1 for t in leaves):
            return False
        inputs = [t for _, t in _tensors([list(run.args), list(run.kwargs.values())], "")]
        for t in leaves:
            flat = t.reshape(-1)
            if bool((flat == flat[0]).all()) or bool(torch.isnan(flat).all()):
                return False
            if any(
                i.dtype == t.dtype and i.shape == t.shape and checks.bitwise_equal(i, t)
                for i in inputs
            ):
                return False
        return True

    def ghost_replay(
        self, fn: Any, prepared: list[Prepared], results: list[TestResult]
    ) -> list[str]:
        """One extra call per operator, on its smallest passing test where a ghost result means
        something: every Triton launch a no-op and fresh memory poisoned. If the result still
        matches eager, the launches did not compute it. Returns operator flags."""
        passing = [item for item, res in zip(prepared, results, strict=True) if res.passed]
        for item in sorted(passing, key=lambda it: it.case.total_numel()):
            run = item.runs[min(1, len(item.runs) - 1)]
            if not self.ghost_eligible(run):
                continue
            out, flags, err_type, _, inputs = self.call(fn, run, ghost=True, first=True)
            found = [f for f in flags if flag_name(f) in REJECT_FLAGS]
            if err_type is None and self.check_result(out, run, inputs).ok:
                found.append(f"{Flag.COMPUTED_OUTSIDE_TRITON}:{item.case.serialize()[:200]}")
            return found  # an error is fine: a kernel may fail on what skipped launches left
        return []

    # ------------------------------------------------------------ the whole job

    def run(self) -> None:
        cases = [parse_case(text) for text in self.spec["cases"]]
        for i, text in enumerate(self.spec["cases"]):
            cases[i].count = 0
            cases[i].source = text
        if self.gpu_lock is not None:
            if self.spec.get("gpu_alone"):
                self.gpu_lock.exclusive()  # a rerun after the GPU ran out of memory: alone
            else:
                self.gpu_lock.share()  # before any CUDA work: a timing sandbox may own the GPU
        if self.runner is not None and self.device == "cuda":
            self.runner.warm()  # its context while this process computes references
        prepared = self.prepare(cases)
        self.out.write({"event": "prepared", "n": len(prepared)})
        # Trusted setup is over: confine the process that imports the kernel before it loads
        # (a split-off runner confines itself and says how far, see load_kernel).
        if self.cfg.sandbox.confine and self.runner is None:
            from evaluator.containment import confine

            began = time.monotonic()
            job_dir = os.path.dirname(os.path.abspath(self.spec["results_path"]))
            policy = confine.build_policy(job_dir, self.device, self.cfg.sandbox)
            status = confine.confine_current_process(policy, self.out.write)
            took = round(time.monotonic() - began, 4)
            self.out.write({"event": "confined", "containment": status.label, "took_s": took})
            if self.cfg.sandbox.require_containment and not status.full:
                raise RuntimeError(
                    f"containment is {status.label} (eval.sandbox.require_containment)"
                )
        fn = self.load_kernel(prepared)
        if fn is None:
            self.out.write({"event": "done"})
            return
        flags = self.op_flags()
        self.out.write({"event": "loaded", "flags": flags})
        results: list[TestResult] = []
        broken = False
        for i, item in enumerate(prepared):
            self.out.write({"event": "test_start", "index": i, "phase": "correctness"})
            if broken:
                res = TestResult(
                    args=item.case.serialize(),
                    passed=False,
                    error_type="NotRun",
                    error_msg="not run: the CUDA context or the kernel's process was lost earlier",
                )
            elif item.skip_reason is not None:
                res = TestResult(
                    args=item.case.serialize(),
                    passed=False,
                    skipped=True,
                    error_type="Skipped",
                    error_msg=item.skip_reason,
                    flags=[item.skip_flag] if item.skip_flag else [],
                )
            else:
                res = self.run_test(fn, item)
                broken = Flag.CUDA_ERROR in res.flags or (
                    self.runner is not None and self.runner.exit_flag is not None
                )
            results.append(res)
            self.out.write({"event": "test_result", "index": i, "result": res.to_json()})
        if not broken:
            ghost_flags = self.ghost_replay(fn, prepared, results)
            if ghost_flags:
                self.out.write({"event": "loaded", "flags": ghost_flags})
        if (
            self.device == "cuda"
            and self.spec.get("measure_performance")
            and not broken
            and all(r.passed or r.skipped for r in results)
        ):
            if self.runner is not None:
                self.time_in_runner(prepared)
            else:
                from evaluator.judge.timing import time_tests

                for i, timing in time_tests(self, fn, prepared):
                    self.out.write({"event": "timing", "index": i, **timing})
                post = self.op_flags()
                if post:
                    self.out.write({"event": "loaded", "flags": post})
        self.out.write({"event": "done"})

    def time_in_runner(self, prepared: list[Prepared]) -> None:
        """Timing where the judge is split: the runner times eager and the kernel on the case's
        timing inputs and sends raw numbers and the kernel's last timed output; here that output
        is checked against this process's own eager result on the same inputs (ops that write
        their inputs excepted: their last call's inputs are not the drawn ones), and the floor,
        clamp and speedup are derived from the numbers (`evaluator.judge.timing.derive`)."""
        from evaluator.judge.timing import derive, timing_inputs

        if not self.cfg.timing.measure:
            return
        assert self.runner is not None
        if self.gpu_lock is not None:
            self.gpu_lock.exclusive()  # held until the process exits
        checks_output = not self.mut_pos and not self.mut_names
        for i, item in enumerate(prepared):
            if item.skip_reason is not None or not item.runs:
                continue
            args, kwargs = timing_inputs(self, item)
            ref_out = self.packet(*clone_tree(args), **clone_tree(kwargs))
            self.sync()
            cap = 8 * _nbytes([ref_out]) + (1 << 20)
            raw, timed_out, flags = self.runner.time_case(
                item.case.source or item.case.serialize(), item.runs[0].seed, cap
            )
            if checks_output and "error" not in raw:
                wrong = output_flags(timed_out, ref_out)
                if not wrong and not self.matches_eager(timed_out, ref_out, args, kwargs).ok:
                    wrong = ["values"]
                if wrong:
                    flags.append(f"{Flag.TIMED_OUTPUT_WRONG}:case {i} ({wrong[0]})")
            if flags:
                self.out.write({"event": "loaded", "flags": flags})
            if "error" in raw:
                self.out.write({"event": "timing", "index": i, "error": raw["error"]})
                if self.runner.exit_flag is not None:
                    return
                continue
            timing = derive(self.op, self.cfg.timing, raw, args, ref_out)
            self.out.write({"event": "timing", "index": i, **timing})


def _update_errors(result: TestResult, cmp: checks.Comparison) -> None:
    for key in ("max_abs_error", "max_rel_error"):
        new = getattr(cmp, key)
        old = getattr(result, key)
        if new is not None and (old is None or new > old):
            setattr(result, key, new)


def _has_reject_or_error(flags: list[str]) -> bool:
    from evaluator.results import ERROR_FLAGS, REJECT_FLAGS, flag_name

    return any(flag_name(f) in REJECT_FLAGS | ERROR_FLAGS for f in flags)


def _has_bf16(case: TestCase) -> bool:
    return any(s.dtype == torch.bfloat16 for s in case.tensor_specs())


def _read_key(spec: dict[str, Any]) -> None:
    """Take the results key out of its file (read once, then deleted): only this process holds
    it, and the runner, forked before, never saw it."""
    key_file = spec.get("key_file")
    if key_file:
        spec["_key"] = bytes.fromhex(Path(key_file).read_text().strip())
        Path(key_file).unlink()


def run_job(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    # The runner is forked first: before this process reads the results key, opens the results
    # file, touches CUDA or computes a reference, so its memory holds none of them.
    split = spec.get("split_judge", True)
    if split:
        import gc

        gc.freeze()  # the collector then leaves inherited objects alone: fewer copy-on-write pages
    runner = start_runner(spec) if split else None
    try:
        _read_key(spec)
        Judge(spec, runner).run()
    finally:
        if runner is not None:
            runner.close()


if __name__ == "__main__":
    from evaluator.containment.confine import contain_job
    from evaluator.containment.process_tree import exit_code_of

    contain_job(sys.argv[1], lambda: exit_code_of(run_job, sys.argv[1]))
