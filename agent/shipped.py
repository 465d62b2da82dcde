"""Where the shipped `configs/` and `prompts/` folders are, in a checkout and in an installed wheel.

They live at the top of the repository. In a checkout (or an editable install) they are read
from there; a wheel carries copies as package data under `agent/_shipped/` (setup.py's build
step puts them there), found with importlib.resources. The checkout is recognised by its
pyproject.toml beside the `agent` package, so a stray `configs/` folder in site-packages is
never taken for ours.
"""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path

SHIPPED_FOLDERS = ("configs", "prompts")
PACKAGE_SUBDIR = "_shipped"


def shipped_dir(name: str) -> Path:
    """The folder `name` ("configs" or "prompts"): the checkout's, else the installed copy."""
    if name not in SHIPPED_FOLDERS:
        raise ValueError(f"unknown shipped folder {name!r}")
    root = Path(__file__).resolve().parent.parent
    if (root / "pyproject.toml").is_file() and (root / name).is_dir():
        return root / name
    return Path(str(files("agent").joinpath(PACKAGE_SUBDIR, name)))
