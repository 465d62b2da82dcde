"""Judges as Ray actors (`eval.executor = "ray"`), for evaluator.judging.judge_pool.JudgePool.

Contract:
- `make_ray_judges(config, device)` joins the Ray cluster at `eval.ray_address` (`auto`,
  `ray://host:port`), or starts a local Ray when it is None (or uses the Ray this process already
  started), and creates one actor per judge: on a GPU one per GPU (`num_gpus=1`: Ray sets the
  actor's CUDA_VISIBLE_DEVICES, so its fork server sees that GPU alone); on the CPU one per
  interpreter judge (`num_cpus=1`). `eval.devices` gives the count: `all` = every GPU (CPU) of the
  cluster, `N` = N actors, a list = one per entry (a GPU index names no GPU across hosts).
- Each actor owns a `Sandbox` (its own fork server and scratch folder on its node). A kernel
  travels as source text; the verdict comes back as the same `OperatorResult`, its paths naming
  the driver's file. The run folder, the kernels directory and the provider calls stay with the
  driver. A cancel event on the driver is forwarded to the actor, which kills the candidate.
- A dead actor (its process or node lost) raises `JudgeLost(gone=True)`: the pool retries the
  candidate elsewhere and shrinks. An actor whose fork server died raises `JudgeLost()`; the
  actor's Sandbox starts a new server for its next candidate.
Every node needs this atenforge (same version) and its dependencies installed.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import uuid
from pathlib import Path
from typing import Any

from evaluator.cases.testcase import TestCase
from evaluator.config import EvalConfig
from evaluator.errors import UsageError
from evaluator.judging.judge_pool import JudgeLost
from evaluator.kernel_errors import show_user_path
from evaluator.results import OperatorResult

POLL_S = 0.05
START_TIMEOUT_S = 180.0  # an actor waits for its resources (a free GPU) at most this long


def _ray() -> Any:
    try:
        import ray
    except ImportError:
        raise UsageError(
            "--executor ray needs Ray: pip install 'atenforge[ray]' (or pip install ray)."
        ) from None
    return ray


class RemoteJudge:
    """The actor: a Sandbox on the node Ray placed it on."""

    def __init__(self, config: dict[str, Any], device: str) -> None:
        from evaluator.judging.judge_pool import LocalJudge

        self.device = device
        # Not pinned here: Ray already gave this process its GPU (CUDA_VISIBLE_DEVICES).
        self.local = LocalJudge(EvalConfig.model_validate(config), device, 0, pin=False)
        self.files = Path(tempfile.mkdtemp(prefix="atenforge_ray_kernels_"))
        self.cancels: dict[str, threading.Event] = {}

    def label(self) -> str:
        import ray

        where = ray.util.get_node_ip_address()
        gpus = ray.get_gpu_ids()
        unit = f"cuda:{gpus[0]}" if self.device == "cuda" and gpus else self.device
        return f"ray:{where}/{unit}"

    def judge(
        self,
        token: str,
        filename: str,
        source: str,
        op: str,
        cases: list[str],
        measure_performance: bool,
    ) -> dict[str, Any]:
        from evaluator.cases.testcase import parse_case

        folder = self.files / token
        folder.mkdir(parents=True)
        path = folder / Path(filename).name
        path.write_text(source, encoding="utf-8")
        cancel = self.cancels.setdefault(token, threading.Event())
        try:
            result = self.local.judge(
                path,
                op,
                [parse_case(c) for c in cases],
                measure_performance=measure_performance,
                cancel=cancel,
            )
        except JudgeLost as lost:
            return {"lost": lost.reason, "gone": lost.gone}
        finally:
            self.cancels.pop(token, None)
            shutil.rmtree(folder, ignore_errors=True)
        return {"result": result.to_json(), "kernel_path": str(path)}

    def cancel(self, token: str) -> None:
        self.cancels.setdefault(token, threading.Event()).set()

    def server_pid(self) -> int | None:
        return self.local.server_pid()

    def close(self) -> None:
        self.local.close()
        shutil.rmtree(self.files, ignore_errors=True)


class RayJudge:
    """The driver's handle on one actor, with `LocalJudge`'s interface."""

    def __init__(self, actor: Any, label: str, slots: int) -> None:
        self.actor = actor
        self.label = label
        self.slots = slots

    def judge(
        self,
        kernel_file: Path,
        op: str,
        cases: list[TestCase],
        *,
        measure_performance: bool = False,
        cancel: threading.Event | None = None,
        keep_job_dir: bool = False,
    ) -> OperatorResult:
        ray = _ray()
        token = uuid.uuid4().hex[:12]
        try:
            source = Path(kernel_file).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise JudgeLost(f"cannot send {kernel_file} to judge {self.label}: {exc}") from exc
        try:
            ref = self.actor.judge.remote(
                token,
                Path(kernel_file).name,
                source,
                op,
                [c.serialize() for c in cases],
                measure_performance,
            )
            told = False
            while not ray.wait([ref], timeout=POLL_S)[0]:
                if cancel is not None and cancel.is_set() and not told:
                    self.actor.cancel.remote(token)
                    told = True
            out = ray.get(ref)
        except ray.exceptions.RayActorError as exc:
            raise JudgeLost(f"judge {self.label} died: {_first_line(exc)}", gone=True) from exc
        except ray.exceptions.RayError as exc:
            raise JudgeLost(f"judge {self.label}: {_first_line(exc)}") from exc
        if "lost" in out:
            raise JudgeLost(f"{self.label}: {out['lost']}", gone=out["gone"])
        result = OperatorResult.from_json(out["result"])
        result.kernel_file = str(kernel_file)
        return show_user_path(result, out["kernel_path"], str(kernel_file))

    def server_pid(self) -> int | None:
        return _ray().get(self.actor.server_pid.remote(), timeout=30)

    def close(self) -> None:
        ray = _ray()
        try:
            ray.get(self.actor.close.remote(), timeout=30)
        except Exception:  # noqa: BLE001 - a dead actor has nothing left to close
            pass
        try:
            ray.kill(self.actor)
        except Exception:  # noqa: BLE001
            pass


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0][:300] if lines else type(exc).__name__


def _connect(ray: Any, address: str | None) -> None:
    if ray.is_initialized():
        return
    try:
        if address:
            ray.init(address=address, include_dashboard=False, log_to_driver=False)
        else:
            ray.init(include_dashboard=False, log_to_driver=False)
    except (ConnectionError, RuntimeError, ValueError) as exc:
        raise UsageError(
            f"could not reach Ray at {address or 'a new local cluster'}: {_first_line(exc)}: "
            "check --ray-address (auto, ray://host:port) or leave it out for a local Ray."
        ) from None


def _count(config: EvalConfig, device: str, resources: dict[str, float]) -> int:
    spec = str(config.devices).strip().replace(" ", "")
    if spec == "all":
        return int(resources.get("GPU" if device == "cuda" else "CPU", 0))
    if "," in spec:
        return len([s for s in spec.split(",") if s])
    return int(spec)


def make_ray_judges(config: EvalConfig, device: str) -> list[RayJudge]:
    ray = _ray()
    _connect(ray, config.ray_address)
    count = _count(config, device, ray.cluster_resources())
    if count < 1:
        raise UsageError(
            f"--devices {config.devices} gives no judge on this Ray cluster "
            f"({ray.cluster_resources()}): pass a number >= 1."
        )
    slots = config.sandbox.num_parallel
    resources = {"num_gpus": 1} if device == "cuda" else {"num_cpus": 1}
    actor_class = ray.remote(RemoteJudge).options(max_concurrency=slots + 2, **resources)
    actors = [actor_class.remote(config.model_dump(mode="json"), device) for _ in range(count)]
    try:
        labels = ray.get([a.label.remote() for a in actors], timeout=START_TIMEOUT_S)
    except ray.exceptions.GetTimeoutError:
        for a in actors:
            ray.kill(a)
        raise UsageError(
            f"{count} Ray judge(s) did not start within {START_TIMEOUT_S:g} s: the cluster has "
            f"{ray.cluster_resources()}; pass fewer --devices."
        ) from None
    seen: dict[str, int] = {}
    judges = []
    for actor, label in zip(actors, labels, strict=True):
        # CPU judges of one node are numbered (cpu:0, cpu:1); a GPU label is unique already.
        n = seen[label] = seen.get(label, -1) + 1
        name = f"{label}:{n}" if device == "cpu" else label if n == 0 else f"{label}#{n}"
        judges.append(RayJudge(actor, name, slots))
    return judges
