"""The runner: the only process that imports and calls the candidate kernel.

`start_runner` forks it from the sandbox child before the child computes any reference or opens
the results file, so nothing of the verdict is in its memory. The runner closes every inherited
descriptor except stdin/stdout/stderr (files in the job directory) and its channel, waits for the
verifier's `load` message, enters confinement, imports the kernel, and then serves `call`
messages: it rebuilds the input copies it receives, calls the kernel under the guards
(`evaluator.judge.guards`) and sends back the outputs, the inputs as the call left them, and what the
guards saw. It never holds a reference and never writes a verdict; the verifier treats all of it
as hostile (`evaluator.judge.outputs`).

A `ghost` call makes every Triton launch of the kernel a no-op (still counted, so the count does
not give the replay away) and has `torch.empty` and friends fill fresh memory with NaN / the
largest integer: a result that still matches the reference was not computed by the launches.
"""

from __future__ import annotations

import os
import signal
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from evaluator.judge import channel
from evaluator.judge.channel import ChannelError

_MAX_FLAGS = 64
_MAX_TEXT = 600


def _enter_confinement(spec: dict[str, Any], violations: list[str]) -> tuple[str, bool]:
    """Confine the runner before the kernel is imported (files, network, capabilities, resource
    limits: `evaluator.containment.confine`). Attempts to leave are appended to `violations` as flags (the
    runner cannot sign results lines, so its evidence travels with its replies). Returns the
    containment label and whether it is full; ("off", False) when the config turns it off."""
    from types import SimpleNamespace

    sandbox = spec["config"]["sandbox"]
    if not sandbox.get("confine", False):
        return "off", False
    from evaluator.containment import confine
    from evaluator.results import Flag

    def report(event: dict[str, Any]) -> None:
        if event.get("event") == "violation":
            violations.append(f"{Flag.SANDBOX_VIOLATION}:{event.get('kind')}")

    job_dir = os.path.dirname(os.path.abspath(spec["results_path"]))
    policy = confine.build_policy(job_dir, spec["device"], SimpleNamespace(**sandbox))
    status = confine.confine_current_process(policy, report)
    return status.label, status.full


def _drain(items: list[str]) -> list[str]:
    out = sorted(set(items))
    items.clear()
    return out


def _close_inherited_fds(keep: set[int]) -> None:
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        fds = list(range(3, 1024))
    for fd in fds:
        if fd not in keep:
            try:
                os.close(fd)
            except OSError:
                pass


@dataclass
class CallReply:
    """What the verifier takes from one call: outputs and inputs rebuilt from the runner's bytes,
    the guards' flags (evidence only) and an error if the call raised or the runner went away."""

    out: Any = None
    inputs: tuple[tuple, dict] = ((), {})
    flags: list[str] = field(default_factory=list)
    launches: int = 0
    error_type: str | None = None
    error_msg: str | None = None


class RunnerClient:
    """Verifier side of the runner: load the kernel, send calls, notice a runner that is gone."""

    def __init__(self, pid: int, sock: socket.socket, device: str) -> None:
        self.pid = pid
        self.sock = sock
        self.device = device
        self.exit_flag: str | None = None

    def _gone(self, why: str) -> str:
        """The flag for a runner that stopped answering: how it ended, or a protocol breach."""
        if self.exit_flag is None:
            self.exit_flag = why
            try:
                pid, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                return self.exit_flag
            code = os.waitstatus_to_exitcode(status)
            if code < 0:
                try:
                    name = signal.Signals(-code).name
                except ValueError:
                    name = f"signal {-code}"
                self.exit_flag = f"crashed:{name}"
            else:
                self.exit_flag = f"exit_called:{code}"
        return self.exit_flag

    def warm(self) -> None:
        """Let the runner make its CUDA context ready now (no reply: it overlaps the verifier's
        references). Send only while holding the shared GPU lock."""
        try:
            channel.send(self.sock, {"kind": "warm"}, [])
        except OSError as exc:
            self._gone(str(exc))

    def load(self, kernel_file: str, meanwhile: Callable[[], None] | None = None) -> dict[str, Any]:
        """Have the runner import the kernel; `meanwhile` runs here while it does. Returns
        {"error": load_error event or None, "flags": [...]}; a runner that dies importing yields
        an error event for its exit."""
        try:
            channel.send(self.sock, {"kind": "load", "kernel_file": kernel_file}, [])
            if meanwhile is not None:
                meanwhile()
            header, _ = channel.recv(self.sock, 0)
        except (ChannelError, OSError) as exc:
            flag = self._gone(str(exc))
            return {
                "error": {
                    "event": "load_error",
                    "flag": flag,
                    "error_type": "RunnerExit",
                    "error_msg": f"the kernel's process ended while importing it ({flag})",
                },
                "flags": [],
            }
        from evaluator.judge.outputs import clean_flags, clean_load_error

        error = clean_load_error(header.get("error"))
        containment = header.get("containment")
        containment = containment[:200] if isinstance(containment, str) else "unknown"
        return {
            "error": error,
            "flags": clean_flags(header.get("flags")),
            "containment": containment,
        }

    def call(
        self,
        args: tuple,
        kwargs: dict,
        *,
        ghost: bool = False,
        first: bool = False,
        reply_cap_bytes: int,
    ) -> CallReply:
        """One call on copies of (args, kwargs). `first` starts a new test: outputs the runner
        keeps to catch a reused result buffer are those of the current test's calls."""
        from evaluator.judge.outputs import decode_reply

        if self.exit_flag is not None:
            return CallReply(
                flags=[self.exit_flag],
                error_type="RunnerGone",
                error_msg="the kernel's process ended earlier",
            )
        blobs: list[memoryview] = []
        tree = channel.encode_tree([list(args), kwargs], blobs)
        try:
            channel.send(
                self.sock, {"kind": "call", "inputs": tree, "ghost": ghost, "first": first}, blobs
            )
            header, data = channel.recv(self.sock, reply_cap_bytes)
        except ChannelError as exc:
            if "closed" in str(exc) or "read failed" in str(exc):
                flag = self._gone(str(exc))
                return CallReply(
                    flags=[flag],
                    error_type="RunnerExit",
                    error_msg=f"the kernel's process ended during the call ({flag})",
                )
            return CallReply(
                flags=[f"runner_protocol:{str(exc)[:200]}"],
                error_type="RunnerProtocol",
                error_msg=str(exc)[:_MAX_TEXT],
            )
        except OSError as exc:
            flag = self._gone(str(exc))
            return CallReply(
                flags=[flag],
                error_type="RunnerExit",
                error_msg=f"the kernel's process ended during the call ({flag})",
            )
        return decode_reply(header, data, args, kwargs, self.device)

    def time_case(
        self, case_text: str, seed: int, reply_cap_bytes: int
    ) -> tuple[dict[str, Any], Any, list[str]]:
        """Have the runner time one case. Returns (raw numbers or {"error": ...}, the kernel's
        last timed output rebuilt here, the guards' flags); a runner that goes away or breaks
        the protocol yields its flag and an error."""
        from evaluator.judge.outputs import clean_flags, clean_raw_timing

        if self.exit_flag is not None:
            return {"error": "the kernel's process ended earlier"}, None, [self.exit_flag]
        try:
            channel.send(self.sock, {"kind": "time", "case": case_text, "seed": seed}, [])
            header, data = channel.recv(self.sock, reply_cap_bytes)
        except (ChannelError, OSError) as exc:
            if isinstance(exc, ChannelError) and not (
                "closed" in str(exc) or "read failed" in str(exc)
            ):
                flag = f"runner_protocol:{str(exc)[:200]}"
            else:
                flag = self._gone(str(exc))
            return {"error": f"the kernel's process failed while timed ({flag})"}, None, [flag]
        flags = clean_flags(header.get("flags"))
        if header.get("kind") != "timed":
            return {"error": "malformed timing reply"}, None, flags + ["runner_protocol:timing"]
        if isinstance(header.get("error"), str):
            return {"error": header["error"][:300]}, None, flags
        raw = clean_raw_timing(header.get("raw"))
        if raw is None:
            return {"error": "malformed timing numbers"}, None, flags + ["runner_protocol:timing"]
        try:
            out = channel.decode_tree(header.get("timed_out"), data, self.device)
        except ChannelError as exc:
            return {"error": str(exc)[:300]}, None, flags + [f"runner_protocol:{str(exc)[:200]}"]
        return raw, out, flags

    def close(self) -> None:
        try:
            channel.send(self.sock, {"kind": "stop"}, [])
        except OSError:
            pass
        self.sock.close()
        try:
            os.kill(self.pid, signal.SIGKILL)
            os.waitpid(self.pid, 0)
        except (OSError, ChildProcessError):
            pass


def start_runner(spec: dict[str, Any]) -> RunnerClient:
    """Fork the runner. Call before the verifier touches CUDA, computes references or opens the
    results file: the runner inherits this process's memory as it is now."""
    ours, theirs = socket.socketpair()
    for end in (ours, theirs):
        _widen(end)
    pid = os.fork()
    if pid == 0:  # the runner
        code = 0
        try:
            ours.close()
            _serve(theirs, spec)
        except BaseException:  # noqa: BLE001 - the exit code says it; the verifier reports it
            import traceback

            traceback.print_exc()  # into the job's stderr file, for whoever debugs the harness
            code = 71
        finally:
            os._exit(code)
    theirs.close()
    return RunnerClient(pid, ours, spec["device"])


_SOCKET_BUFFER_BYTES = 8 << 20
_SO_SNDBUFFORCE, _SO_RCVBUFFORCE = 32, 33  # Linux: past net.core.[wr]mem_max, for root


def _widen(sock: socket.socket) -> None:
    """Socket buffers large enough for a call's tensors: with the default ~200 KB, a megabyte of
    inputs or outputs crosses in many sender/receiver hand-offs, each a wake-up of the other side."""
    for force, plain in ((_SO_SNDBUFFORCE, socket.SO_SNDBUF), (_SO_RCVBUFFORCE, socket.SO_RCVBUF)):
        try:
            sock.setsockopt(socket.SOL_SOCKET, force, _SOCKET_BUFFER_BYTES)
        except OSError:  # not root: as large as the system allows
            try:
                sock.setsockopt(socket.SOL_SOCKET, plain, _SOCKET_BUFFER_BYTES)
            except OSError:
                pass


def _die_with_parent() -> None:
    """SIGKILL this process when the verifier ends (also when a timeout kills the verifier's
    process group and the kernel had left it)."""
    import ctypes

    try:
        ctypes.CDLL(None, use_errno=True).prctl(1, int(signal.SIGKILL))  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


_TRACE = os.environ.get("ATENFORGE_RUNNER_TRACE") == "1"


def _mark(what: str) -> None:
    """With ATENFORGE_RUNNER_TRACE=1: a monotonic timestamp on stderr (the job's stderr file),
    to line up with the `t` of the verifier's results lines."""
    if _TRACE:
        import sys
        import time

        print(f"runner {what} t={time.monotonic():.4f}", file=sys.stderr, flush=True)


def _warm_cuda() -> None:
    """Make the CUDA context and Triton's driver and launcher ready while the verifier computes
    its references, before confinement (the driver's first use opens and maps what the confined
    process may no longer reach): the candidate's first call then pays only its own kernel. Only
    on the verifier's `warm` message, which it sends once it holds the shared GPU lock: this work
    is covered by that hold (the runner takes no lock of its own: waiting for one here while the
    verifier waits for this process would deadlock behind a queued timer)."""
    import triton
    import triton.language as tl

    torch.cuda.init()
    x = torch.zeros(1, device="cuda")
    try:

        @triton.jit
        def _warm(x_ptr):
            tl.store(x_ptr, tl.load(x_ptr) + 1)

        _warm[(1,)](x)  # counted, but a call's launches are counted as a difference
    except Exception:  # noqa: BLE001 - a warm-up that fails leaves the first call to pay it
        pass
    torch.cuda.synchronize()


def _serve(sock: socket.socket, spec: dict[str, Any]) -> None:
    from evaluator.judge.calling import Instruments, guarded_call, import_kernel
    from evaluator.naming import normalize_op

    _die_with_parent()
    _close_inherited_fds({0, 1, 2, sock.fileno()})
    op = normalize_op(spec["op"])
    device = spec["device"]
    inst = Instruments.install(device)  # while the verifier computes its references
    header, _ = channel.recv(sock, 0)
    if header.get("kind") == "warm" and device == "cuda":
        _warm_cuda()
        _mark("warm")
        header, _ = channel.recv(sock, 0)
    if header.get("kind") != "load":
        return
    if device == "cuda" and not torch.cuda.is_initialized():
        torch.cuda.init()  # the context before confinement, in any case
        torch.empty(1, device="cuda")
    violations: list[str] = []
    containment, full = _enter_confinement(spec, violations)
    _mark("confined")
    if spec["config"]["sandbox"].get("require_containment") and not full:
        fn, error = None, {
            "event": "load_error",
            "flag": "import_error",
            "error_type": "ContainmentError",
            "error_msg": f"containment is {containment} (eval.sandbox.require_containment)",
        }
    else:
        fn, error = import_kernel(header["kernel_file"], op, inst.secrets)
    flags = inst.op_flags() + _drain(violations)
    loaded = {"kind": "loaded", "error": error, "flags": flags, "containment": containment}
    channel.send(sock, loaded, [])
    if fn is None:
        return
    from evaluator.judge import checks

    kept: list[tuple[Any, Any]] = []  # this test's earlier outputs and their bits
    timer: list[Any] = []  # the process's CaseTimer, made on the first timing request
    while True:
        header, blobs = channel.recv(sock, 1 << 62)
        if header.get("kind") == "time":
            channel.send(sock, *_time_case(header, spec, inst, fn, timer, violations))
            continue
        if header.get("kind") != "call":
            return
        _mark("call")
        args, kwargs = channel.decode_tree(header["inputs"], blobs, device)
        args = tuple(args)
        ghost = bool(header.get("ghost"))
        if ghost:
            inst.launches.ghost = True
            torch.use_deterministic_algorithms(True, warn_only=True)
        try:
            out, flags, err_type, err_msg, launches = guarded_call(
                inst, fn, op, args, kwargs, device
            )
        finally:
            inst.launches.ghost = False
            if ghost:
                torch.use_deterministic_algorithms(False)
        _mark("called")
        reply: dict[str, Any] = {
            "kind": "result",
            "flags": (flags + _drain(violations))[:_MAX_FLAGS],
            "launches": launches,
            "error_type": err_type,
            "error_msg": err_msg,
        }
        if header.get("first"):
            kept = []
        if err_type is None:
            # A later call that changes an earlier call's result reuses its output buffer: the
            # caller's tensor changes under it. Only this process can see that.
            try:
                if any(not checks.bitwise_equal(o, bits) for o, bits in kept):
                    reply["flags"].append("stale_result")
                kept.append((out, checks.snapshot(out)))
            except Exception:  # noqa: BLE001 - not plain tensors: the verifier rejects those
                pass
        out_blobs: list[memoryview] = []
        if err_type is None:
            reply["out"] = channel.encode_tree(out, out_blobs)
            reply["inputs"] = channel.encode_tree([list(args), kwargs], out_blobs)
        channel.send(sock, reply, out_blobs)
        _mark("sent")


_RAW_NUMBERS = ("eager_host_ms", "kernel_host_ms", "host_window_us", "empty_launch_ms")


def _time_case(
    header: dict[str, Any],
    spec: dict[str, Any],
    inst: Any,
    fn: Any,
    timer: list[Any],
    violations: list[str],
) -> tuple[dict[str, Any], list[memoryview]]:
    """Time one case (eager and the kernel, `evaluator.judge.timing`) and send the raw numbers with
    the kernel's last timed output. Every kernel call is bounded by the stream watch; what the
    guards saw travels with the reply."""
    from types import SimpleNamespace

    from evaluator.cases.testcase import parse_case
    from evaluator.judge import timing
    from evaluator.judge.spec_view import aten_overload, config_view
    from evaluator.naming import normalize_op

    cfg = config_view(spec["config"])
    streams = inst.streams
    side: list[str] = []

    def watched(*args: Any, **kwargs: Any) -> Any:
        if streams is not None:
            streams.begin()
        out = fn(*args, **kwargs)
        if streams is not None:
            side.extend(f for f in streams.end() if f not in side)
        return out

    reply: dict[str, Any] = {"kind": "timed"}
    blobs: list[memoryview] = []
    try:
        ctx = SimpleNamespace(
            op=normalize_op(spec["op"]),
            cfg=cfg,
            packet=aten_overload(spec["op"]),
        )
        item = SimpleNamespace(
            case=parse_case(str(header.get("case", ""))),
            runs=[SimpleNamespace(seed=int(header.get("seed", 0)))],
            skip_reason=None,
        )
        if not timer:
            timer.append(timing.CaseTimer(cfg.timing))
        raw = timer[0].measure(ctx, watched, item)
        reply["raw"] = {
            "eager_ms": [float(v) for v in raw["eager_ms"]],
            "kernel_ms": [float(v) for v in raw["kernel_ms"]],
            "l2_state": raw["l2_state"],
            **{k: float(raw[k]) for k in _RAW_NUMBERS},
        }
        for key in ("compile_ms", "compile_error"):
            if raw.get(key) is not None:
                reply["raw"][key] = raw[key] if key == "compile_error" else float(raw[key])
        reply["timed_out"] = channel.encode_tree(raw["timed_out"], blobs)
    except Exception as exc:  # noqa: BLE001 - a timing failure is data
        reply["error"] = f"{type(exc).__name__}: {exc}"[:300]
        blobs = []
    reply["flags"] = (side + inst.op_flags() + _drain(violations))[:_MAX_FLAGS]
    return reply, blobs
