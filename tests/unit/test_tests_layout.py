"""The tests' layout holds: every test lives in a folder that says what it needs, each folder's
conftest gives its marker, and no test module changes the environment when imported."""

from __future__ import annotations

import ast
import os
import subprocess
import sys

import pytest
from layout import ROOT, TESTS

FOLDERS = ("unit", "builtin", "integration", "gpu")


def test_no_test_file_lies_flat_in_tests() -> None:
    assert sorted(p.name for p in TESTS.glob("test_*.py")) == []
    assert {p.parent.name for p in TESTS.glob("*/test_*.py")} <= set(FOLDERS)


def test_each_folder_conftest_gives_its_marker(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("unit") is not None  # this test's own folder
    for folder in FOLDERS:
        text = (TESTS / folder / "conftest.py").read_text(encoding="utf-8")
        assert "mark_folder(" in text and f'"{folder}"' in text, folder


def _sets_environment(statement: ast.stmt) -> bool:
    """A module-level `os.environ[...] = ...` or `os.environ.setdefault/update/pop(...)`
    (function and class bodies run later, not at import)."""
    if isinstance(statement, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return False
    for node in ast.walk(statement):
        if isinstance(node, ast.Assign | ast.AugAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Subscript) and _is_environ(t.value):
                    return True
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            if node.func.attr in {"setdefault", "update", "pop", "clear"}:
                if _is_environ(node.func.value):
                    return True
    return False


def _is_environ(node: ast.expr) -> bool:
    return isinstance(node, ast.Attribute) and node.attr == "environ"


def test_no_test_module_changes_the_environment_at_import() -> None:
    offenders = []
    for path in sorted(TESTS.rglob("*.py")):
        if path == TESTS / "conftest.py" or "fixtures" in path.parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        offenders += [
            f"{path.relative_to(ROOT)}:{s.lineno}" for s in tree.body if _sets_environment(s)
        ]
    assert offenders == [], "only tests/conftest.py may set the environment at import"


def test_importing_builtin_support_leaves_triton_interpret_alone() -> None:
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    code = (
        "import os, sys; sys.path[:0] = sys.argv[1:]; import builtin_support; "
        "print(os.environ.get('TRITON_INTERPRET'))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(TESTS / "builtin"), str(TESTS), str(ROOT)],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=True,
    )
    assert out.stdout.strip() == "None"
