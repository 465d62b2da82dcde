"""Run folders: unique names, an event log that survives crashes, atomic JSON files,
and an environment record that does not touch CUDA on the CPU."""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import threading
from datetime import datetime
from pathlib import Path

import pytest

from evaluator.reports.runfolder import (
    EVENTS_FILE,
    EventLog,
    create_run_dir,
    environment_info,
    project_version,
    read_events,
    write_json,
)

REPO = Path(__file__).resolve().parents[2]
NOW = datetime(2026, 11, 30, 12, 34, 56)


def test_run_dir_name_is_run_timestamp_and_parents_are_created(tmp_path):
    run_dir = create_run_dir(tmp_path / "a" / "logs", now=NOW)
    assert run_dir == tmp_path / "a" / "logs" / "run_20261130_123456"
    assert run_dir.is_dir()


def test_run_dirs_in_the_same_second_get_suffixes(tmp_path):
    dirs = [create_run_dir(tmp_path, now=NOW) for _ in range(3)]
    assert [d.name for d in dirs] == [
        "run_20261130_123456",
        "run_20261130_123456_2",
        "run_20261130_123456_3",
    ]


def test_run_dirs_created_concurrently_never_collide(tmp_path):
    found: list[Path] = []
    lock = threading.Lock()

    def make() -> None:
        d = create_run_dir(tmp_path, now=NOW)
        with lock:
            found.append(d)

    threads = [threading.Thread(target=make) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(set(found)) == 8


def test_event_log_appends_json_lines_with_utc_timestamp(tmp_path):
    log = EventLog(tmp_path)
    log.append({"event": "start", "op": "add.Tensor"})
    log.append({"event": "end", "value": math.inf})
    events = read_events(tmp_path)
    assert [e["event"] for e in events] == ["start", "end"]
    assert events[0]["ts"].endswith("+00:00")
    assert events[1]["value"] == "inf"
    assert len((tmp_path / EVENTS_FILE).read_text().splitlines()) == 2


def test_read_events_ignores_truncated_last_line(tmp_path):
    EventLog(tmp_path).append({"event": "a"})
    with open(tmp_path / EVENTS_FILE, "a") as f:
        f.write('{"event": "b", "ts": "2026-')  # a crash mid-write
    assert [e["event"] for e in read_events(tmp_path)] == ["a"]


def test_event_after_truncated_line_is_not_glued_to_it(tmp_path):
    EventLog(tmp_path).append({"event": "a"})
    with open(tmp_path / EVENTS_FILE, "a") as f:
        f.write('{"event": "b", "ts')
    EventLog(tmp_path).append({"event": "c"})
    assert [e["event"] for e in read_events(tmp_path)] == ["a", "c"]


def test_read_events_of_missing_log_is_empty(tmp_path):
    assert read_events(tmp_path) == []


def test_event_log_threads_write_whole_lines(tmp_path):
    log = EventLog(tmp_path)

    def spam(worker: int) -> None:
        for i in range(25):
            log.append({"worker": worker, "i": i, "pad": "x" * 500})

    threads = [threading.Thread(target=spam, args=(w,)) for w in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    events = read_events(tmp_path)
    assert len(events) == 100
    assert all(len(e["pad"]) == 500 for e in events)


def test_write_json_writes_indented_json_with_inf_nan_as_strings(tmp_path):
    path = tmp_path / "sub" / "x.json"
    write_json(path, {"a": math.inf, "b": [math.nan, -math.inf], "p": Path("/x"), "t": (1, 2)})
    text = path.read_text()
    assert text.startswith('{\n  "a"')
    assert json.loads(text) == {"a": "inf", "b": ["nan", "-inf"], "p": "/x", "t": [1, 2]}


def test_write_json_leaves_no_partial_file_on_error(tmp_path):
    path = tmp_path / "x.json"
    with pytest.raises(TypeError):
        write_json(path, {"bad": object()})
    assert list(tmp_path.iterdir()) == []


def test_write_json_keeps_old_file_when_write_fails(tmp_path, monkeypatch):
    path = tmp_path / "x.json"
    write_json(path, {"v": 1})

    def boom(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        write_json(path, {"v": 2})
    assert json.loads(path.read_text()) == {"v": 1}
    assert [p.name for p in tmp_path.iterdir()] == ["x.json"]  # temp file removed


def test_environment_info_on_cpu_reports_interpreter_and_versions():
    info = environment_info("cpu")
    assert info["gpu"] == "cpu-interpreter"
    assert info["python"] and info["torch"] and info["triton"] and info["numpy"]
    assert info["project"] == project_version() and info["hostname"]


def test_environment_info_on_cpu_does_not_initialise_cuda():
    code = (
        "import torch, evaluator.reports.runfolder as rf; rf.environment_info('cpu'); "
        "print(torch.cuda.is_initialized())"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "False"


def test_project_version_falls_back_to_pyproject():
    assert project_version() == "0.1.0"
