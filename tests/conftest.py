"""Shared test setup: Triton's interpreter on CPU-only machines, the `gpu` marker, tests/ on sys.path."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import torch  # noqa: E402

HAS_GPU = torch.cuda.is_available()
if not HAS_GPU:
    # Must be set before triton is imported anywhere in the test process.
    os.environ.setdefault("TRITON_INTERPRET", "1")

ROOT = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if HAS_GPU:
        if os.environ.get("TRITON_INTERPRET") == "1":
            # A CPU-only test module (builtin_support) switched this process to the interpreter
            # while it was collected: CUDA tests cannot run in it.
            skip = pytest.mark.skip(
                reason="this process runs Triton's interpreter (set by the CPU family tests): "
                "run the GPU tests apart: pytest tests/gpu/test_gpu.py tests/gpu/test_backend.py tests/gpu/test_fast_launch.py"
                " tests/gpu/test_gpu_scalars.py tests/gpu/test_gpu_embedding.py tests/gpu/test_gpu_softmax.py"
                " tests/gpu/test_gpu_batch_norm.py tests/gpu/test_gpu_conv.py"
            )
            for item in items:
                if "gpu" in item.keywords or "on_gpu_when_present" in item.keywords:
                    item.add_marker(skip)
        return
    skip = pytest.mark.skip(reason="needs a CUDA GPU (run on the GPU machine)")
    for item in items:
        if "gpu" in item.keywords:
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
