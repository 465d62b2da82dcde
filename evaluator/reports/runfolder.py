"""Run folders: where a run lives on disk, and how it is written so nothing is lost.

Contract:
- `create_run_dir(log_dir)` makes `log_dir/run_<YYYYmmdd_HHMMSS>` (local time), suffixed `_2`,
  `_3`, ... when that name is taken; the directory is created with `exist_ok=False`, so two runs
  started in the same second (even in two processes) never share a folder.
- `EventLog(run_dir).append(event)` adds one JSON line to `run_dir/events.jsonl` with a UTC `ts`,
  flushed and fsynced before it returns: an interrupted run keeps every event it logged.
  `read_events(run_dir)` reads them back, skipping a truncated last line (a crash mid-write).
- `write_json(path, data)` / `write_text(path, text)` are atomic: a reader sees the old file or the
  new one, never half of one (temp file in the same folder + `os.replace`).
- `environment_info(device)` records versions and the GPU (or "cpu-interpreter"); on the CPU it
  never touches `torch.cuda`, so it cannot initialise CUDA in a process that may later fork.
"""

from __future__ import annotations

import contextlib
import dataclasses
import enum
import importlib.metadata
import json
import logging
import math
import os
import platform
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)

EVENTS_FILE = "events.jsonl"
# The report files of an evaluation, at the run folder's root. RESULTS_JSON is atenforge's own
# object (schema_version 1); the other four have BackendBench's names and content, plus our columns.
RESULTS_JSON = "atenforge_results.json"
BB_FULL_RESULTS = "full_results.json"  # BackendBench's flat list of per-test records
BB_FAILED_TESTS = "failed_tests.json"
OPERATOR_CSV = "operator_summary.csv"
SUMMARY_MD = "OVERALL_SUMMARY.md"
PROJECT = "atenforge"
_PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"
_FALLBACK_VERSION = "0.1.0"


# --------------------------------------------------------------------------- run folder


def create_run_dir(log_dir: str | Path, *, now: datetime | None = None) -> Path:
    """Create and return a new, unique `log_dir/run_<YYYYmmdd_HHMMSS>[_N]` folder."""
    log_dir = Path(log_dir)
    log_dir.mkdir(parents=True, exist_ok=True)
    stamp = (now or datetime.now()).strftime("%Y%m%d_%H%M%S")
    suffix = 1
    while True:
        name = f"run_{stamp}" if suffix == 1 else f"run_{stamp}_{suffix}"
        candidate = log_dir / name
        try:
            # mkdir without exist_ok is the atomic claim: a check-then-create would race.
            candidate.mkdir()
            return candidate
        except FileExistsError:
            suffix += 1


def results_file(path: str | Path) -> Path:
    """atenforge's results file for a run folder or a results path.

    A folder gives `folder/atenforge_results.json`; a BackendBench-format `full_results.json` (a
    list) gives its sibling `atenforge_results.json`. A folder or file from before the split,
    whose `full_results.json` holds the object form, is returned as it is. The path may not exist.
    """
    path = Path(path)
    legacy = None
    if path.is_dir():
        legacy, path = path / BB_FULL_RESULTS, path / RESULTS_JSON
    elif path.name == BB_FULL_RESULTS:
        legacy, path = path, path.with_name(RESULTS_JSON)
    if not path.exists() and legacy is not None and legacy.is_file():
        try:
            head = legacy.read_text(encoding="utf-8").lstrip()[:1]
        except (OSError, UnicodeDecodeError):
            head = ""
        if head == "{":
            return legacy
    return path


# --------------------------------------------------------------------------- JSON


def to_jsonable(value: Any) -> Any:
    """Plain JSON data from `value`; inf/nan become the strings "inf", "-inf", "nan".

    JSON has no inf/nan and `json` would write invalid tokens for them; a string keeps what
    happened visible to a reader. Paths, enums, sets, tuples, dates, dataclasses and pydantic
    models are converted; anything else raises TypeError rather than becoming an opaque `str()`.
    """
    if value is None or isinstance(value, bool | int | str):
        return value if not isinstance(value, enum.Enum) else value.value
    if isinstance(value, float):
        return value if math.isfinite(value) else str(value)
    if isinstance(value, enum.Enum):
        return to_jsonable(value.value)
    if isinstance(value, dict):
        return {str(to_jsonable(k)): to_jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_jsonable(v) for v in value]
    if isinstance(value, set | frozenset):
        return sorted((to_jsonable(v) for v in value), key=repr)
    if isinstance(value, Path):
        return str(value)
    if isinstance(value, datetime | date):
        return value.isoformat()
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return to_jsonable(dataclasses.asdict(value))
    if callable(getattr(value, "model_dump", None)):  # pydantic models (the resolved config)
        # Python mode, not "json": pydantic's JSON mode would turn inf/nan into null.
        return to_jsonable(value.model_dump())
    raise TypeError(f"cannot write {type(value).__name__} as JSON: {value!r:.80}")


def dumps(data: Any, *, indent: int | None = 2) -> str:
    """Serialize with `to_jsonable`; strict JSON (no NaN tokens)."""
    return json.dumps(to_jsonable(data), indent=indent, allow_nan=False, ensure_ascii=False)


def write_text(path: str | Path, text: str) -> None:
    """Write `text` to `path` atomically (temp file in the same folder, fsync, `os.replace`)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        # Never leave a half-written temp file next to the real one.
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def write_json(path: str | Path, data: Any) -> None:
    """Write `data` as indented JSON to `path` atomically; inf/nan are written as strings.

    Serialization happens before any file is touched, so bad data leaves the old file intact.
    """
    write_text(path, dumps(data) + "\n")


# --------------------------------------------------------------------------- event log

# One lock per events file, shared by every EventLog on it in this process.
_LOCKS: dict[Path, threading.Lock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(path: Path) -> threading.Lock:
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(path, threading.Lock())


class EventLog:
    """Append-only `run_dir/events.jsonl`: one JSON object per line, each with a UTC `ts`.

    Each append is one `write` on an O_APPEND descriptor followed by fsync, so lines from several
    threads (a lock) or processes (O_APPEND) do not interleave, and a crash loses at most the line
    being written. If the file ends in a truncated line (an earlier crash), a newline is written
    first so the new event is not glued onto the broken one.
    """

    def __init__(self, run_dir: str | Path) -> None:
        self.run_dir = Path(run_dir)
        self.path = (self.run_dir / EVENTS_FILE).resolve()
        self._lock = _lock_for(self.path)

    def append(self, event: dict[str, Any]) -> dict[str, Any]:
        """Write `event` (plus `ts` unless it has one) as one line; return what was written."""
        record = {"ts": datetime.now(UTC).isoformat(timespec="milliseconds"), **event}
        line = dumps(record, indent=None)
        assert "\n" not in line  # json.dumps escapes newlines inside strings
        data = (line + "\n").encode("utf-8")
        with self._lock:
            self.run_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
            try:
                if _ends_without_newline(fd):
                    data = b"\n" + data
                os.write(fd, data)
                os.fsync(fd)
            finally:
                os.close(fd)
        return record


def _ends_without_newline(fd: int) -> bool:
    size = os.fstat(fd).st_size
    return size > 0 and os.pread(fd, 1, size - 1) != b"\n"


def read_events(run_dir: str | Path) -> list[dict[str, Any]]:
    """All events of a run, in order. A line that is not a JSON object is skipped with a warning
    (normally only a last line cut short by a crash); a missing file is an empty log."""
    path = Path(run_dir) / EVENTS_FILE
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return []
    # When the file does not end in a newline, the last element is a line cut short by a crash.
    lines = raw.split(b"\n")
    events: list[dict[str, Any]] = []
    for index, line in enumerate(lines):
        if not line.strip():
            continue
        try:
            event = json.loads(line.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError):
            event = None
        if not isinstance(event, dict):
            if index == len(lines) - 1:
                log.info("%s:%d: truncated last line ignored", path, index + 1)
            else:
                log.warning("%s:%d: unreadable event line skipped", path, index + 1)
            continue
        events.append(event)
    return events


# --------------------------------------------------------------------------- environment


def project_version() -> str:
    """The installed atenforge version; from pyproject.toml when running from a checkout."""
    try:
        return importlib.metadata.version(PROJECT)
    except importlib.metadata.PackageNotFoundError:
        pass
    try:
        import tomllib

        with open(_PYPROJECT, "rb") as f:
            project = tomllib.load(f).get("project", {})
        if project.get("name") == PROJECT and project.get("version"):
            return str(project["version"])
    except (OSError, ValueError):
        pass
    return _FALLBACK_VERSION


def _module_version(name: str) -> str | None:
    try:
        module = __import__(name)
    except Exception:  # a broken install must not stop a run from recording the rest
        return None
    return getattr(module, "__version__", None)


def _nvidia_smi_driver() -> str | None:
    exe = shutil.which("nvidia-smi")
    if exe is None:
        return None
    try:
        out = subprocess.run(
            [exe, "--query-gpu=driver_version", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [line.strip() for line in out.splitlines() if line.strip()]
    return lines[0] if lines else None


def environment_info(device: str, *, confine: bool = True) -> dict[str, Any]:
    """Versions, host and accelerator for run.json and the summary.

    `gpu` is the CUDA device name, or "cpu-interpreter" when `device == "cpu"` (kernels run in
    Triton's interpreter). On the CPU `torch.cuda` is never called: initialising CUDA in the
    evaluator's process would make forking sandbox children unsafe. `containment` says how far
    candidates are confined here (`evaluator.containment.confine`; `confine` = eval.sandbox.confine).
    """
    from evaluator.containment.confine import containment_label

    torch_version = _module_version("torch")
    info: dict[str, Any] = {
        "project": project_version(),
        "python": platform.python_version(),
        "torch": torch_version,
        "triton": _module_version("triton"),
        "numpy": _module_version("numpy"),
        "platform": platform.platform(),
        "hostname": socket.gethostname(),
        "device": device,
        "executable": sys.executable,
        "triton_interpret": os.environ.get("TRITON_INTERPRET"),
        "cuda": None,
        "gpu": None,
        "gpu_driver": None,
        "containment": containment_label(confine),
    }
    if device == "cpu":
        info["gpu"] = "cpu-interpreter"
        return info
    try:
        import torch

        info["cuda"] = torch.version.cuda
        if device == "cuda" and torch.cuda.is_available():
            info["gpu"] = torch.cuda.get_device_name(0)
    except Exception as exc:  # record the failure, do not hide the rest of the environment
        log.warning("could not query the GPU: %s", exc)
    info["gpu_driver"] = _nvidia_smi_driver()
    return info
