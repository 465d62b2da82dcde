"""Import a kernel file written by a test, without touching the process's Triton mode.

Shared by the builtin family tests (in the interpreter) and the GPU tests (compiled for the device):
the process's Triton mode decides which.
"""

from __future__ import annotations

import importlib.util
import itertools
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from evaluator.naming import kernel_file_name, kernel_function_name, op_to_folder

_counter = itertools.count()


def load_kernel(op: str, source: str, directory: Path) -> Callable[..., Any]:
    """Write `source` as the op's kernel file under `directory` and import its entry point."""
    folder = directory / op_to_folder(op)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / kernel_file_name(op)
    path.write_text(source, encoding="utf-8")
    module_name = f"_builtin_kernel_{op_to_folder(op)}_{next(_counter)}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # triton's JIT looks functions up through their module
    spec.loader.exec_module(module)
    return getattr(module, kernel_function_name(op))
