"""GPU timing of a passing kernel against eager ATen, run inside the sandbox child.

Per case: fresh inputs (a seed the correctness pass did not use), warm-up of both, then
repetitions that interleave eager and kernel, each call preceded by a GPU-side wait of
`host_window_us` and timed with CUDA events; the median of each side is kept. What L2 holds when a
timed call starts is `l2_state`: "steady" (default) rotates each side through exact copies of the
case's arguments after a read flush and times all calls but the first, so a call finds another
call's data in L2 (never its own inputs) and pays for evicting it, dirty output included, as an
op in a model does; "flushed" zeroes `flush_l2_mib` before every call, which leaves L2 full of
dirty lines that the timed call pays to write back (H200: a 64 MiB sum 24.5 vs 18.8 us).

The wait keeps the GPU busy while the host runs the call, so the events measure what the GPU did
for the call, not how fast the host's CPU was at that moment: without it, the
flush alone hid only ~37 us of host time on the H200 lease's host, and calls whose Python took
about that long were timed at 4 us or 22 us from one run to the next (benchmarks/timing_window.py,
docs/history/BENCHMARKS-2026-11-to-12.md §11). The host time of each call (wall clock around it,
GPU busy) is measured
in the same loop and reported beside it (`kernel_host_ms`, `eager_host_ms`): a call that needs
more host time than its GPU time is launch-bound wherever the GPU waits on the host. A case whose
warm-up calls needed more host time than the window gets a longer wait (`case_window_us`), and is
timed again with a longer one when its timed calls did, so a slow or contended host does not show
up as GPU time.

The kernel time is clamped at the memory-bandwidth floor (bytes that must move / measured HBM
bandwidth): a time below it is physically impossible and means the measurement (or the kernel) is
lying. Never on the CPU.
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import torch

from evaluator.cases.inputs import materialize
from evaluator.results import Flag

if TYPE_CHECKING:
    from evaluator.config import TimingConfig
    from evaluator.judge.references import Prepared
    from evaluator.judge.verifier import Judge

_Event = torch.cuda.Event
_sync = torch.cuda.synchronize
_perf = time.perf_counter
_gpu_wait = torch.cuda._sleep
_torch_compile = torch.compile


# Ops that read only part of an input (a table row per index, a slice, one log-probability per
# target for nll_loss; nll_loss_backward reads none of `self`, only its shape): only their outputs
# and index tensors are bytes that must move, so the floor stays a true lower bound. (The H200
# evaluation showed eager nll_loss at 18x "the floor" before they were listed here.)
PARTIAL_READ_OPS = frozenset(
    {
        "nll_loss_forward",
        "nll_loss_backward",
        "nll_loss2d_forward",
        "nll_loss2d_backward",
        "embedding",
        "index",
        "gather",
        "index_select",
        "take",
        "select",
        "slice",
        "narrow",
        "_unsafe_index",
    }
)


# Positional tensor inputs an op never reads: not bytes that must move. Pooling backwards take the
# forward input for its geometry only (the gradient goes where the windows or the saved indices
# say); the *_like / new_* factories copy metadata only; fill_, zero_, copy_ and the in-place
# random fills overwrite `self` without reading it (its write is counted as the output). Counting
# them made the H200 floor of avg_pool2d_backward 1.7x too high, so a kernel at ~70% of the
# bandwidth read "100%" and its time was clamped up to that floor.
UNREAD_INPUTS: dict[str, tuple[int, ...]] = {
    "avg_pool2d_backward": (1,),
    "avg_pool3d_backward": (1,),
    "max_pool2d_with_indices_backward": (1,),
    "max_pool3d_with_indices_backward": (1,),
    "_adaptive_avg_pool2d_backward": (1,),
    "_adaptive_avg_pool3d_backward": (1,),
    "empty_like": (0,),
    "zeros_like": (0,),
    "ones_like": (0,),
    "full_like": (0,),
    "rand_like": (0,),
    "randn_like": (0,),
    "new_empty": (0,),
    "new_empty_strided": (0,),
    "new_zeros": (0,),
    "new_ones": (0,),
    "new_full": (0,),
    "fill_": (0,),
    "zero_": (0,),
    "copy_": (0,),
    "random_": (0,),
    "uniform_": (0,),
    "normal_": (0,),
    "bernoulli_": (0,),
    "exponential_": (0,),
}


def _distinct_bytes(t: torch.Tensor) -> int:
    """Bytes of the distinct elements a tensor view addresses: a broadcast (stride-0) dim repeats
    the same bytes, so it does not multiply what must move (an expanded [4, 2048, 2048] view of a
    [4, 2048] tensor is 32 KiB of data, not 64 MiB)."""
    n = 1
    for size, stride in zip(t.shape, t.stride(), strict=True):
        if stride != 0:
            n *= size
    return (n if t.numel() else 0) * t.element_size()


def _bytes_moved(op: str, args: Any, out: Any) -> int:
    """Bytes any implementation must move: every output written, every input read once
    (for partial-read ops only integer index inputs; inputs in UNREAD_INPUTS not at all)."""
    base = op.split(".")[0]
    partial = base in PARTIAL_READ_OPS
    if not partial and base in UNREAD_INPUTS and isinstance(args, list | tuple):
        skip = UNREAD_INPUTS[base]
        args = [a for i, a in enumerate(args) if i not in skip]
    total = 0
    for value in (out,) if partial else (args, out):
        stack = [value]
        while stack:
            v = stack.pop()
            if isinstance(v, torch.Tensor):
                total += _distinct_bytes(v)
            elif isinstance(v, list | tuple):
                stack.extend(v)
            elif isinstance(v, dict):
                stack.extend(v.values())
    return total


def l2_flusher(mib: int, mode: str) -> Callable[[], object]:
    """A call that evicts the L2 cache before a timed call, by touching `mib` MiB on the GPU.

    "write" zeroes the buffer, the common way; it leaves L2 full of the buffer's dirty lines, so the
    timed call that follows also pays for writing them back to HBM, traffic that is not its own.
    "read" reads the buffer instead: the previous call's dirty lines are written back during the
    flush, and the timed call finds L2 holding clean lines it can drop for free."""
    if mode not in ("write", "read"):
        raise ValueError(f"flush mode {mode!r}: use 'write' or 'read'")
    if mib <= 0:
        return lambda: None
    buf = torch.zeros(mib * (1 << 20) // 4, dtype=torch.int32, device="cuda")
    return buf.zero_ if mode == "write" else buf.amax


def _timed_call(fn: Any, wait_cycles: int) -> tuple[Any, float, float]:
    """(result, device ms, host ms) of one call, the GPU kept busy for `wait_cycles` before it
    so that the host time of the call stays out of the events."""
    if wait_cycles:
        _gpu_wait(wait_cycles)
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    start.record()
    t0 = _perf()
    result = fn()
    t1 = _perf()
    end.record()
    end.synchronize()
    return result, start.elapsed_time(end), (t1 - t0) * 1e3


def time_sides(
    fns_a: list[Any],
    fns_b: list[Any],
    flush: Callable[[], object],
    reps: int,
    budget_s: float,
    wait_cycles: int = 0,
    poison_a: bool = False,
) -> tuple[list[float], list[float], list[float], list[float]]:
    """Device ms of sides a and b per timed call (`reps` each, fewer past `budget_s`), and the
    host ms of each call. Per batch and side: `flush()`, then one call on each of the side's
    argument sets in turn, each after a GPU wait of `wait_cycles`. With `poison_a`, side a's
    outputs (eager's) are overwritten after the batch, before their memory is freed: side b
    (the kernel) cannot return eager's answer from a block the allocator hands back.

    With one set per side every call is timed right after the flush (the "flushed" state). With
    two or more, the first call of a batch is not timed (the "steady" state a model's next op
    meets): each timed call's inputs are cold (another set's data fills L2) and it pays for
    evicting the previous call's data, dirty output included, which on average is its own
    write-back. Results are kept alive through the batch, so every call writes fresh memory, as
    an op in a model does."""
    steady = len(fns_a) > 1
    inputs_a = _storages(fns_a) if poison_a else set()
    times_a: list[float] = []
    times_b: list[float] = []
    host_a: list[float] = []
    host_b: list[float] = []
    start_wall = _perf()
    while len(times_a) < reps:
        for fns, times, host in ((fns_a, times_a, host_a), (fns_b, times_b, host_b)):
            flush()
            kept = []
            for k, fn in enumerate(fns):
                result, device_ms, host_ms = _timed_call(fn, wait_cycles)
                kept.append(result)
                if k or not steady:
                    times.append(device_ms)
                    host.append(host_ms)
            if poison_a and fns is fns_a:
                _poison_tree(kept, inputs_a)
            del kept
        if _perf() - start_wall > budget_s and len(times_a) >= 3:
            break
    return times_a, times_b, host_a, host_b


def _time_pair(
    fn_a: Any,
    fn_b: Any,
    flush: Callable[[], object],
    reps: int,
    budget_s: float,
    wait_cycles: int = 0,
) -> tuple[list[float], list[float], list[float], list[float]]:
    """`time_sides` with one argument set per side: a flush before every timed call."""
    return time_sides([fn_a], [fn_b], flush, reps, budget_s, wait_cycles)


def flusher_for(cfg: TimingConfig) -> Callable[[], object]:
    """The flush the configured method uses: a write for 'flushed' (the classic way, kept for
    comparison), a read for 'steady' (the batch's first call is not timed anyway)."""
    return l2_flusher(cfg.flush_l2_mib, "write" if cfg.l2_state == "flushed" else "read")


def rotation_sets(case_bytes: int, cfg: TimingConfig) -> int:
    """Argument sets per side for the steady method: `steady_sets`, fewer for big cases (at most
    `steady_max_mib` of inputs per side), never under two; 1 for the flushed method."""
    if cfg.l2_state != "steady":
        return 1
    fit = (cfg.steady_max_mib << 20) // max(case_bytes, 1)
    return max(2, min(cfg.steady_sets, fit))


# A case whose call needs more host time than the configured window gets a wait of this many
# times its host time (up to the cap): on the H200 lease, with eight sandboxes compiling and
# preparing beside the timer, convolution's wrapper took 260-340 us of host time instead of
# ~125, past the 200 us window, and its GPU time read 2-18x too long.
HOST_WINDOW_MARGIN = 1.5
MAX_HOST_WINDOW_US = 20_000.0


def case_window_us(base_us: float, host_ms: list[float]) -> float:
    """The GPU-side wait for one case: the configured window, or HOST_WINDOW_MARGIN times the
    larger of the two sides' median warm-up host time when that is longer (capped at
    MAX_HOST_WINDOW_US)."""
    if base_us <= 0 or not host_ms:
        return base_us
    return max(base_us, min(MAX_HOST_WINDOW_US, HOST_WINDOW_MARGIN * max(host_ms) * 1e3))


def _wait_cycles(window_us: float) -> int:
    """GPU clock cycles for a `_gpu_wait` of about `window_us` (measured: clocks vary by part)."""
    if window_us <= 0:
        return 0
    probe = 200_000
    start, end = _Event(enable_timing=True), _Event(enable_timing=True)
    _gpu_wait(probe)  # first use
    runs = []
    for _ in range(3):
        start.record()
        _gpu_wait(probe)
        end.record()
        end.synchronize()
        runs.append(start.elapsed_time(end) * 1e3)  # us
    per_us = probe / max(statistics.median(runs), 1e-3)
    return int(window_us * per_us)


class _Call:
    """One side's call on one argument set; the set stays readable (`args`): the floor counts the
    bytes of the kernel's arguments."""

    def __init__(
        self, fn: Any, args: list[Any], kwargs: dict[str, Any], sink: dict | None = None
    ) -> None:
        self.fn, self.args, self.kwargs, self.sink = fn, args, kwargs, sink

    def __call__(self) -> Any:
        result = self.fn(*self.args, **self.kwargs)
        if self.sink is not None:
            self.sink["out"] = result  # the side's latest output: the timed-output check
        return result


def _exact_copy(value: Any) -> Any:
    """A copy of an argument in new memory with the same layout: the whole storage is cloned, so
    strides, storage offset and stride-0 (expanded) dims stay as the case made them."""
    if isinstance(value, torch.Tensor):
        storage = value.untyped_storage().clone()
        copy = torch.empty(0, dtype=value.dtype, device=value.device)
        return copy.set_(storage, value.storage_offset(), value.size(), value.stride())
    if isinstance(value, list | tuple):
        return type(value)(_exact_copy(v) for v in value)
    if isinstance(value, dict):
        return {k: _exact_copy(v) for k, v in value.items()}
    return value


def _argument_sets(
    judge: Judge,
    fn: Any,
    item: Prepared,
    cfg: TimingConfig,
    sets: int | None = None,
    sink: dict | None = None,
) -> tuple[list[_Call], list[_Call]]:
    """Eager's and the kernel's calls, one per argument set: the case materialized once, every
    other set an exact copy of it, so both sides and all sets get equal inputs (values and
    layouts) in separate memory."""
    n = rotation_sets(item.case.total_bytes(), cfg) if sets is None else sets
    args, kwargs = timing_inputs(judge, item)
    eager_fns = [
        _Call(judge.packet, _exact_copy(list(args)), _exact_copy(kwargs)) for _ in range(n)
    ]
    kernel_fns = [_Call(fn, list(args), kwargs, sink)]
    kernel_fns += [
        _Call(fn, _exact_copy(list(args)), _exact_copy(kwargs), sink) for _ in range(n - 1)
    ]
    return eager_fns, kernel_fns


TIMING_SEED_OFFSET = 1_000_003


def timing_inputs(judge: Any, item: Any) -> tuple[tuple, dict]:
    """The case's timing inputs: a seed the correctness calls did not use, drawn the same way
    in the runner (which times) and the verifier (which checks the timed calls' output)."""
    return materialize(
        judge.op,
        item.case,
        "cuda",
        item.runs[0].seed + TIMING_SEED_OFFSET,
        profile=judge.cfg.correctness.tolerance_profile,
    )


def _storages(calls: list[Any]) -> set[int]:
    """Storage addresses of the calls' tensor arguments."""
    found: set[int] = set()

    def walk(value: Any) -> None:
        if isinstance(value, torch.Tensor):
            found.add(value.untyped_storage().data_ptr())
        elif isinstance(value, list | tuple):
            for v in value:
                walk(v)
        elif isinstance(value, dict):
            for v in value.values():
                walk(v)

    for call in calls:
        walk(getattr(call, "args", None))
        walk(getattr(call, "kwargs", None))
    return found


def _poison_tree(value: Any, inputs: set[int]) -> None:
    """Fill a finished call's outputs before their memory is freed (NaN, the largest integer,
    True): a later call that leaves its output unwritten, in a block the caching allocator
    hands back, finds garbage instead of eager's answer. Outputs that share storage with an
    input (in-place ops, views) are left alone: that memory is not freed."""
    if isinstance(value, torch.Tensor):
        if value.numel() == 0 or value.device.type != "cuda":
            return
        if value.untyped_storage().data_ptr() in inputs:
            return
        if value.is_floating_point() or value.is_complex():
            value.fill_(float("nan"))
        elif value.dtype == torch.bool:
            value.fill_(True)
        else:
            value.fill_(torch.iinfo(value.dtype).max)
    elif isinstance(value, list | tuple):
        for v in value:
            _poison_tree(v, inputs)


def timed_with_window(
    eager_fns: list[Any],
    kernel_fns: list[Any],
    flush: Callable[[], object],
    cfg: TimingConfig,
    wait_cycles: int,
) -> tuple[list[float], list[float], list[float], list[float], float]:
    """Warm-up calls of both sides (their host time sets the case's GPU window,
    `case_window_us`), then `time_sides`, once more with a longer window when the host got slower
    while timing. `wait_cycles` is the configured window's wait. Returns the device ms and host
    ms of each side's timed calls and the window used (us). Shared by the evaluator and
    benchmarks/knob_sweep.py, so a sweep on a slow host does not count host time as GPU time."""
    eager, kernel = eager_fns[0], kernel_fns[0]

    def measure(window_us: float) -> tuple[list[float], list[float], list[float], list[float]]:
        cycles = (
            wait_cycles
            if window_us == cfg.host_window_us
            else int(wait_cycles * window_us / cfg.host_window_us)
        )
        return time_sides(
            eager_fns,
            kernel_fns,
            flush,
            cfg.num_reps,
            cfg.max_time_per_case_s,
            cycles,
            poison_a=True,
        )

    eager_inputs = _storages([eager])
    warm_host: tuple[list[float], list[float]] = ([], [])
    for _ in range(cfg.num_warmup):
        for side, (call, host) in enumerate(zip((eager, kernel), warm_host, strict=True)):
            t0 = _perf()
            result = call()
            host.append((_perf() - t0) * 1e3)
            if side == 0:
                _poison_tree(result, eager_inputs)
            del result
    _sync()
    window_us = case_window_us(cfg.host_window_us, [statistics.median(h) for h in warm_host if h])
    eager_ms, kernel_ms, eager_host, kernel_host = measure(window_us)
    host_ms = [statistics.median(eager_host), statistics.median(kernel_host)]
    if window_us > 0 and max(host_ms) * 1e3 > window_us:
        # the host got slower while timing (other sandboxes): again with a longer wait
        window_us = case_window_us(window_us, host_ms)
        eager_ms, kernel_ms, eager_host, kernel_host = measure(window_us)
    return eager_ms, kernel_ms, eager_host, kernel_host, window_us


def _measure_case(
    judge: Judge,
    fn: Any,
    item: Prepared,
    flush: Callable[[], object],
    wait_cycles: int,
    sets: int | None = None,
) -> dict[str, Any]:
    """Warm-up, the case's GPU window, then the timed calls of both sides (see the module doc).
    `timed_out` is the output of the kernel's last timed call."""
    cfg = judge.cfg.timing
    sink: dict[str, Any] = {}
    eager_fns, kernel_fns = _argument_sets(judge, fn, item, cfg, sets, sink)
    steady = len(eager_fns) > 1
    out = eager_fns[0]()
    eager_ms, kernel_ms, eager_host, kernel_host, window_us = timed_with_window(
        eager_fns, kernel_fns, flush, cfg, wait_cycles
    )
    return {
        "eager_ms": eager_ms,
        "kernel_ms": kernel_ms,
        "eager_host_ms": statistics.median(eager_host),
        "kernel_host_ms": statistics.median(kernel_host),
        "host_window_us": window_us,
        "l2_state": "steady" if steady else "flushed",
        "args": kernel_fns[0].args,
        "out": out,
        "timed_out": sink.get("out"),
    }


_COMPILED: dict[Any, Any] = {}


def _compiled(packet: Any) -> Any:
    """The op compiled by torch.compile (Inductor), once per process; no compile workers."""
    fn = _COMPILED.get(packet)
    if fn is None:
        # Inductor's cache goes beside Triton's, the one cache folder a sandbox child may write
        # (set before Inductor is imported: importing it fills in its /tmp default)
        triton_cache = os.environ.get("TRITON_CACHE_DIR")
        if triton_cache and "torch._inductor" not in sys.modules:
            os.environ["TORCHINDUCTOR_CACHE_DIR"] = os.path.join(triton_cache, "inductor")
        import torch._inductor.config as inductor_config

        inductor_config.compile_threads = 1  # the sandbox child starts no worker processes

        def call(*args: Any, **kwargs: Any) -> Any:
            return packet(*args, **kwargs)

        fn = _COMPILED[packet] = _torch_compile(call, dynamic=False)
    return fn


def compile_baseline(
    judge: Judge,
    fn: Any,
    item: Prepared,
    flush: Callable[[], object],
    wait_cycles: int,
) -> dict[str, Any]:
    """torch.compile's time for one case, timed paired with the kernel on the same inputs (as
    eager is): `compile_ms`, or `compile_error` when Inductor could not compile or run it.
    Informational: it never changes a verdict or a score."""
    cfg = judge.cfg.timing
    try:
        compiled_fns, kernel_fns = _argument_sets(judge, fn, item, cfg)
        compiled = _compiled(judge.packet)
        for call in compiled_fns:  # the same argument sets, called through torch.compile
            call.fn = compiled
        compiled_fns[0]()  # compiles for this case's shapes, outside the timed calls
        _sync()
        c_ms, _, _, _, _ = timed_with_window(compiled_fns, kernel_fns, flush, cfg, wait_cycles)
    except Exception as exc:  # noqa: BLE001 - a baseline that cannot run is data
        return {"compile_error": f"{type(exc).__name__}: {exc}"[:300]}
    return {"compile_ms": statistics.median(c_ms)}


class CaseTimer:
    """One process's timing setup (the L2 flush, the GPU wait before each call, the time of the
    smallest launch it can make) and the raw measurements of a case. Where the judge is split,
    the runner measures and the verifier derives the numbers that count (`derive`)."""

    def __init__(self, cfg: TimingConfig) -> None:
        self.cfg = cfg
        self.flush = flusher_for(cfg)
        # An op whose eager time is within 1.3x of the smallest launch measures launch paths,
        # not kernels (overhead_dominated).
        tiny = torch.zeros(1, device="cuda")
        self.wait_cycles = _wait_cycles(cfg.host_window_us)
        self.empty_ms = statistics.median(
            _time_pair(tiny.zero_, tiny.zero_, self.flush, 20, 1.0, self.wait_cycles)[0]
        )

    def measure(self, judge: Any, fn: Any, item: Any) -> dict[str, Any]:
        """Raw numbers of one case: both sides' device ms per timed call, host ms, the window,
        `args`/`out`/`timed_out` tensors, and the compile baseline's when configured."""
        try:
            m = _measure_case(judge, fn, item, self.flush, self.wait_cycles)
        except torch.cuda.OutOfMemoryError:
            if rotation_sets(item.case.total_bytes(), self.cfg) == 1:
                raise
            # no room for the steady method's argument sets: this case is timed flushed
            torch.cuda.empty_cache()
            m = _measure_case(judge, fn, item, self.flush, self.wait_cycles, sets=1)
        m["empty_launch_ms"] = self.empty_ms
        if "compile" in self.cfg.baselines:
            m.update(compile_baseline(judge, fn, item, self.flush, self.wait_cycles))
        return m


def derive(op: str, cfg: TimingConfig, raw: dict[str, Any], args: Any, out: Any) -> dict[str, Any]:
    """The timing record of a case from its raw numbers: medians, the memory-bandwidth floor
    (from the arguments and eager's output), the clamped kernel time, speedups and flags."""
    e_med = statistics.median(raw["eager_ms"])
    k_med = statistics.median(raw["kernel_ms"])
    empty_ms = raw["empty_launch_ms"]
    moved = _bytes_moved(op, args, out)
    if op.split(".")[0] in PARTIAL_READ_OPS:
        moved += sum(
            _distinct_bytes(a)
            for a in args
            if isinstance(a, torch.Tensor) and not a.is_floating_point()
        )
    floor_ms = moved / (cfg.hbm_bandwidth_gbps * 1e9) * 1e3
    flags: list[str] = []
    k_used = k_med
    if k_med < floor_ms:
        k_used = floor_ms
        flags.append(Flag.ROOFLINE_CLAMPED)
    speedup = e_med / k_used if k_used > 0 else None
    if speedup is not None and speedup > cfg.suspicious_speedup:
        flags.append(Flag.SUSPICIOUS_SPEEDUP)
    if min(e_med, k_med) < 1.3 * max(empty_ms, cfg.empty_launch_ms):
        flags.append(Flag.OVERHEAD_DOMINATED)
    extra: dict[str, Any] = {}
    if raw.get("compile_error"):
        extra["compile_error"] = str(raw["compile_error"])[:300]
    elif raw.get("compile_ms") is not None:
        c_med = float(raw["compile_ms"])
        extra["compile_ms"] = c_med
        extra["speedup_vs_compile"] = c_med / k_used if k_used > 0 else None
    return {
        **extra,
        "eager_ms": e_med,
        "empty_launch_ms": empty_ms,
        "kernel_ms": k_used,
        "kernel_ms_measured": k_med,
        "floor_ms": floor_ms,
        "speedup": speedup,
        "eager_host_ms": raw["eager_host_ms"],
        "kernel_host_ms": raw["kernel_host_ms"],
        "host_window_us": raw["host_window_us"],
        "l2_state": raw["l2_state"],
        "flags": flags,
    }


def time_tests(
    judge: Judge, fn: Any, prepared: list[Prepared]
) -> Iterator[tuple[int, dict[str, Any]]]:
    """Time each passing case in this process (the judge not split): raw numbers, then `derive`."""
    cfg = judge.cfg.timing
    if not cfg.measure:
        return
    if judge.gpu_lock is not None:
        judge.gpu_lock.exclusive()  # held until the process exits
    timer = CaseTimer(cfg)
    for i, item in enumerate(prepared):
        if item.skip_reason is not None or not item.runs:
            continue
        try:
            raw = timer.measure(judge, fn, item)
        except Exception as exc:  # noqa: BLE001 - timing failure is data
            yield i, {"error": f"{type(exc).__name__}: {exc}"[:300]}
            continue
        yield i, derive(judge.op, cfg, raw, raw["args"], raw["out"])
