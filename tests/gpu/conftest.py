"""tests/gpu/: tests that run on CUDA; marker `gpu` (tests/conftest.py skips them without a GPU).

A module marked `on_gpu_when_present` runs on CUDA when a GPU is visible and in Triton's
interpreter otherwise: it is not given `gpu` (its own CUDA-only tests carry `gpu` themselves).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from layout import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    here = Path(__file__).resolve().parent
    mine = [item for item in items if item.path.is_relative_to(here)]
    mark_folder(
        [item for item in mine if item.get_closest_marker("on_gpu_when_present") is None],
        here,
        "gpu",
    )
