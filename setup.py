"""Build step that ships the top-level `configs/` and `prompts/` folders inside the wheel.

Everything else about the package is in pyproject.toml. The folders stay at the top of the
repository (where users read and edit them); a built wheel carries copies as package data under
`agent/_shipped/`, where `agent.shipped.shipped_dir` finds them once installed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

ROOT = Path(__file__).resolve().parent
SHIPPED = {"configs": "*.toml", "prompts": "*.j2"}


class BuildWithShippedFolders(build_py):
    def run(self) -> None:
        super().run()
        for name, pattern in SHIPPED.items():
            target = Path(self.build_lib) / "agent" / "_shipped" / name
            target.mkdir(parents=True, exist_ok=True)
            for source in sorted((ROOT / name).glob(pattern)):
                shutil.copyfile(source, target / source.name)


setup(cmdclass={"build_py": BuildWithShippedFolders})
