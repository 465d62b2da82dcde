"""Guards for what only shows on a GPU, and for global numerics switches, in the runner.

- `StreamWatch`: every Triton launch passes a CUDA stream to the compiled kernel's launcher. A
  launch on a stream other than the caller's current one runs beside the caller's work: the
  caller's events (the timer) and its reads do not wait for it unless the kernel joins it back
  (`Stream.wait_stream` / `wait_event` on the caller's stream, `Event.wait` there, or a
  synchronize). A call that returns with a side launch not joined back is `side_stream`: its
  time is not measured and its output may be read before it is written.
- `NumericsState`: torch's global switches that change what eager computes or how fast it runs
  (TF32, reduced-precision reductions, matmul precision, cuDNN, attention backends, default
  dtype). A kernel that flips one changes the baseline it is timed against (the runner times
  eager in its own process) or hides a precision downcast: `global_state_changed:<switch>`.

Both run in the kernel's own process, like `evaluator.judge.guards`: evidence against a kernel, never
for it. The timed-output check and the verifier's own references back them up.
"""

from __future__ import annotations

from typing import Any

import torch


def _switches() -> dict[str, Any]:
    cuda = torch.backends.cuda
    state: dict[str, Any] = {
        "matmul.allow_tf32": cuda.matmul.allow_tf32,
        "cudnn.allow_tf32": torch.backends.cudnn.allow_tf32,
        "float32_matmul_precision": torch.get_float32_matmul_precision(),
        "matmul.allow_fp16_reduced_precision_reduction": (
            cuda.matmul.allow_fp16_reduced_precision_reduction
        ),
        "matmul.allow_bf16_reduced_precision_reduction": (
            cuda.matmul.allow_bf16_reduced_precision_reduction
        ),
        "cudnn.enabled": torch.backends.cudnn.enabled,
        "cudnn.benchmark": torch.backends.cudnn.benchmark,
        "cudnn.deterministic": torch.backends.cudnn.deterministic,
        "default_dtype": str(torch.get_default_dtype()),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
    }
    for name in ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "math_sdp_enabled"):
        probe = getattr(cuda, name, None)
        if probe is not None:
            state[f"sdp.{name}"] = probe()
    return state


class NumericsState:
    """The switches as the harness set them; `changed()` names those that differ now and sets
    them back, so one kernel's switch does not leak into the next measurement."""

    def __init__(self) -> None:
        self.original = _switches()

    def changed(self, *, ghost: bool = False) -> list[str]:
        now = _switches()
        names = [k for k, v in now.items() if self.original.get(k) != v]
        if ghost:  # the ghost replay itself turns deterministic algorithms on
            names = [n for n in names if n != "deterministic_algorithms"]
        if names:
            self._restore()
        return sorted(names)

    def _restore(self) -> None:
        o = self.original
        cuda, cudnn = torch.backends.cuda, torch.backends.cudnn
        setters = [
            lambda: setattr(cuda.matmul, "allow_tf32", o["matmul.allow_tf32"]),
            lambda: setattr(cudnn, "allow_tf32", o["cudnn.allow_tf32"]),
            lambda: torch.set_float32_matmul_precision(o["float32_matmul_precision"]),
            lambda: setattr(
                cuda.matmul,
                "allow_fp16_reduced_precision_reduction",
                o["matmul.allow_fp16_reduced_precision_reduction"],
            ),
            lambda: setattr(
                cuda.matmul,
                "allow_bf16_reduced_precision_reduction",
                o["matmul.allow_bf16_reduced_precision_reduction"],
            ),
            lambda: setattr(cudnn, "enabled", o["cudnn.enabled"]),
            lambda: setattr(cudnn, "benchmark", o["cudnn.benchmark"]),
            lambda: setattr(cudnn, "deterministic", o["cudnn.deterministic"]),
            lambda: torch.set_default_dtype(
                getattr(torch, o["default_dtype"].removeprefix("torch."))
            ),
            lambda: torch.use_deterministic_algorithms(o["deterministic_algorithms"]),
        ]
        for key, enable in (
            ("sdp.flash_sdp_enabled", "enable_flash_sdp"),
            ("sdp.mem_efficient_sdp_enabled", "enable_mem_efficient_sdp"),
            ("sdp.math_sdp_enabled", "enable_math_sdp"),
        ):
            if key in o and hasattr(cuda, enable):
                setters.append(lambda key=key, enable=enable: getattr(cuda, enable)(o[key]))
        for set_back in setters:
            try:
                set_back()
            except RuntimeError:  # a process that froze a flag (torch's disable_global_flags)
                pass


class StreamWatch:
    """Side-stream launches of the current call and whether they were joined back (cuda)."""

    def __init__(self) -> None:
        self.expected: int | None = None  # the caller's stream handle while a call runs
        self.side: set[int] = set()
        self.pending = False  # a side launch since the last join
        self._originals: list[tuple[Any, str, Any]] = []

    # -- the call's bounds
    def begin(self) -> None:
        self.expected = torch.cuda.current_stream().cuda_stream
        self.side = set()
        self.pending = False

    def end(self) -> list[str]:
        """Flags for the call that just returned (before the harness synchronizes)."""
        self.expected = None
        return ["side_stream"] if self.pending else []

    # -- hooks
    def on_launch(self, stream: Any) -> None:
        if self.expected is None:
            return
        handle = stream if type(stream) is int else getattr(stream, "cuda_stream", stream)
        if handle != self.expected:
            self.side.add(handle if type(handle) is int else id(handle))
            self.pending = True

    def _joined(self) -> None:
        self.pending = False

    def install(self) -> dict[str, tuple[Any, str]]:
        """Wrap the join points; returns them for the harness snapshot."""
        watch = self
        stream_cls = torch.cuda.Stream
        event_cls = torch.cuda.Event

        def wrap(owner: Any, attr: str, joins: Any) -> None:
            original = getattr(owner, attr)

            def hooked(*args: Any, **kwargs: Any) -> Any:
                result = original(*args, **kwargs)
                if watch.expected is not None and joins(*args, **kwargs):
                    watch._joined()
                return result

            self._originals.append((owner, attr, original))
            setattr(owner, attr, hooked)

        def on_caller(stream: Any) -> bool:
            return getattr(stream, "cuda_stream", None) == watch.expected

        wrap(stream_cls, "wait_event", lambda s, *a, **k: on_caller(s))
        wrap(stream_cls, "wait_stream", lambda s, *a, **k: on_caller(s))
        wrap(
            event_cls,
            "wait",
            lambda e, stream=None: on_caller(
                stream if stream is not None else torch.cuda.current_stream()
            ),
        )
        wrap(stream_cls, "synchronize", lambda *a, **k: True)
        wrap(event_cls, "synchronize", lambda *a, **k: True)
        wrap(torch.cuda, "synchronize", lambda *a, **k: True)
        return {
            "torch.cuda.Stream.wait_event": (stream_cls, "wait_event"),
            "torch.cuda.Stream.wait_stream": (stream_cls, "wait_stream"),
            "torch.cuda.Event.wait": (event_cls, "wait"),
            "torch.cuda.Stream.synchronize": (stream_cls, "synchronize"),
            "torch.cuda.Event.synchronize": (event_cls, "synchronize"),
        }
