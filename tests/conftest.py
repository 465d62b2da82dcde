"""Shared test setup: where Triton runs, the markers the folders stand for, tests/ on sys.path.

The folder a test lives in says what it needs, and its conftest gives its tests that marker:
  tests/unit/         fast, in-process checks (the evaluator's parts on the CPU included)  `unit`
  tests/builtin/      the builtin writer's kernels, run in Triton's interpreter on CPU tensors  `builtin`
  tests/integration/  real sandboxes, subprocesses, the agent end to end, installs  `integration`
  tests/gpu/          CUDA: needs a GPU (skipped without one), except modules marked
                      `on_gpu_when_present`, which run in the interpreter without a GPU  `gpu`
A test elsewhere may carry `gpu` itself (one CUDA test among CPU ones); it is skipped the same way.

TRITON_INTERPRET is set here and only here: on a machine without CUDA, to 1 (Triton's interpreter),
before any test module imports triton (pytest imports this file first; Triton reads the variable
when a kernel is decorated). On a GPU machine it is left as the caller set it: `python -m pytest
-q -m "gpu or on_gpu_when_present"` runs the GPU tests on CUDA, `TRITON_INTERPRET=1 python -m pytest
-q -n auto` the rest in the interpreter.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402  (torch does not import triton)

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    os.environ.setdefault("TRITON_INTERPRET", "1")
INTERPRETED = os.environ.get("TRITON_INTERPRET") == "1"

from layout import GPU_COMMAND  # noqa: E402


@pytest.hookimpl(trylast=True)  # after the folder conftests added their markers
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not HAS_GPU:
        skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine)")
        for item in items:
            if item.get_closest_marker("gpu"):
                item.add_marker(skip)
        return
    if INTERPRETED:
        skip = pytest.mark.skip(
            reason="this process runs Triton's interpreter (TRITON_INTERPRET=1): run the GPU "
            f"tests in a process without it: {GPU_COMMAND}"
        )
        for item in items:
            if item.get_closest_marker("gpu") or item.get_closest_marker("on_gpu_when_present"):
                item.add_marker(skip)


@pytest.fixture(autouse=True)
def _ctrl_c_raises_keyboard_interrupt():
    """The Ctrl-C tests (a real SIGINT, or `_thread.interrupt_main`) need SIGINT to raise
    KeyboardInterrupt. A test run started in the background by a non-interactive shell
    (`cmd &`) inherits SIGINT ignored, and Python then leaves it ignored: those tests failed
    for the runner, not the code. Restore Python's handler for each test where it is ignored."""
    import signal

    if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        yield
        return
    signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
