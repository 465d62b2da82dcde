"""tests/builtin/: the builtin writer's kernels, run in Triton's interpreter on CPU tensors and
judged with the evaluator's inputs and comparison (builtin_support.py); marker `builtin`.

They need TRITON_INTERPRET=1 in the process (tests/conftest.py sets it without a GPU); on a GPU
machine they are skipped unless it is set, apart from their CUDA tests (marked `gpu`).
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from layout import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mine = mark_folder(items, Path(__file__).resolve().parent, "builtin")
    if os.environ.get("TRITON_INTERPRET") == "1":
        return
    skip = pytest.mark.skip(
        reason="runs kernels in Triton's interpreter on CPU tensors: "
        "TRITON_INTERPRET=1 python -m pytest -q tests/builtin"
    )
    for item in mine:
        if item.get_closest_marker("gpu") is None:
            item.add_marker(skip)
