"""tests/integration/: real sandboxes, subprocesses, the agent end to end, installs; marker
`integration`."""

from __future__ import annotations

from pathlib import Path

import pytest
from layout import mark_folder


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    mark_folder(items, Path(__file__).resolve().parent, "integration")
