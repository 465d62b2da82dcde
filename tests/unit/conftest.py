"""tests/unit/: fast, in-process checks (the evaluator's parts on the CPU included); marker `unit`."""

from __future__ import annotations

from pathlib import Path

import pytest
from layout import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).resolve().parent, "unit")
