"""The tests' layout: the repository's paths, and the marker each test folder stands for.

Test modules import paths from here (`from layout import FIXTURES`); a folder's conftest calls
`mark_folder` so that the folder is the marker (see tests/conftest.py for what each folder needs).
"""

from __future__ import annotations

from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
FIXTURES = TESTS / "fixtures"
GPU_COMMAND = 'python -m pytest -q -m "gpu or on_gpu_when_present"'


def mark_folder(items: list[pytest.Item], folder: Path, marker: str) -> list[pytest.Item]:
    """Give every collected test under `folder` the marker `marker`; returns those tests."""
    mine = [item for item in items if item.path.is_relative_to(folder)]
    for item in mine:
        item.add_marker(marker)
    return mine
