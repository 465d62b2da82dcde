"""The imports match docs/ARCHITECTURE.md's parts table, and the one-way rules hold.

Every import statement counts, those inside functions too (a lazy import is still an arrow).
"""

from __future__ import annotations

import ast
import re
from collections import defaultdict
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "ARCHITECTURE.md"
# The evaluator's entry points that run candidates: only agent.judging may import them.
# docs/ARCHITECTURE.md's tables and the top folders each one covers: the whole project's parts,
# and the evaluator's sub-packages.
TABLES = {"parts": ("agent", "evaluator"), "evaluator parts": ("evaluator",)}
JUDGING_ENTRY = ("evaluator.evaluate", "evaluator.judging.sandbox", "evaluator.judge.verifier")


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(tops: tuple[str, ...] = ("agent", "evaluator")) -> dict[Path, set[str]]:
    """Each source file under `tops` and the agent/evaluator modules it imports."""
    out: dict[Path, set[str]] = {}
    for top in tops:
        for path in sorted((ROOT / top).rglob("*.py")):
            names: set[str] = set()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names.update(alias.name for alias in node.names)
                elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                    names.add(node.module)
                    names.update(f"{node.module}.{alias.name}" for alias in node.names)
            out[path] = {n for n in names if n.split(".")[0] in ("agent", "evaluator")}
    return out


def _parts_table(table_name: str = "parts") -> tuple[dict[str, str], dict[str, set[str]]]:
    """(module path or folder -> part, part -> the parts it imports) from one of the doc's tables."""
    text = DOC.read_text(encoding="utf-8")
    table = text.split(f"<!-- {table_name}: begin -->")[1].split(f"<!-- {table_name}: end -->")[0]
    where: dict[str, str] = {}
    arrows: dict[str, set[str]] = {}
    for line in table.strip().splitlines()[2:]:
        part, modules, imports = (cell.strip() for cell in line.strip("|").split("|"))
        for module in re.findall(r"`([^`]+)`", modules):
            where[module] = part
        arrows[part] = {name.strip() for name in imports.split(",") if name.strip()}
    return where, arrows


def _part_of(path: Path, where: dict[str, str]) -> str | None:
    rel = path.relative_to(ROOT).as_posix()
    if rel in where:
        return where[rel]
    folders = [f for f in where if f.endswith("/") and rel.startswith(f)]
    return where[max(folders, key=len)] if folders else None


def _module_part(module: str, files: dict[str, Path], where: dict[str, str]) -> str | None:
    """The part of an imported name (a module, or a name inside one)."""
    while module:
        if module in files:
            return _part_of(files[module], where)
        module = module.rpartition(".")[0]
    return None


def _actual_arrows(table_name: str = "parts") -> tuple[dict[str, set[str]], list[str]]:
    where, _ = _parts_table(table_name)
    imports = _imports(TABLES[table_name])
    files = {_module_name(path): path for path in imports}
    arrows: dict[str, set[str]] = defaultdict(set)
    unplaced = []
    for path, names in imports.items():
        part = _part_of(path, where)
        if part is None:
            if path != ROOT / "agent" / "__init__.py":
                unplaced.append(path.relative_to(ROOT).as_posix())
            continue
        for name in names:
            target = _module_part(name, files, where)
            if target is not None and target != part:
                arrows[part].add(target)
    return arrows, unplaced


@pytest.mark.parametrize("table_name", sorted(TABLES))
def test_every_module_belongs_to_a_part_of_the_doc(table_name: str) -> None:
    _, unplaced = _actual_arrows(table_name)
    assert not unplaced, f"give these a part in docs/ARCHITECTURE.md's {table_name} table: {unplaced}"


@pytest.mark.parametrize("table_name", sorted(TABLES))
def test_imports_are_exactly_the_arrows_of_the_doc(table_name: str) -> None:
    _, documented = _parts_table(table_name)
    actual, _ = _actual_arrows(table_name)
    for part in sorted(set(documented) | set(actual)):
        missing = actual.get(part, set()) - documented.get(part, set())
        stale = documented.get(part, set()) - actual.get(part, set())
        assert not missing, f"{part} imports {sorted(missing)}: not drawn in docs/ARCHITECTURE.md"
        assert not stale, f"docs/ARCHITECTURE.md draws {part} -> {sorted(stale)}: no import does"


@pytest.mark.parametrize("table_name", sorted(TABLES))
def test_the_arrows_have_no_cycle(table_name: str) -> None:
    _, arrows = _parts_table(table_name)
    state: dict[str, int] = {}

    def visit(part: str, path: list[str]) -> None:
        state[part] = 1
        for nxt in arrows.get(part, ()):
            assert state.get(nxt) != 1, f"cycle: {' -> '.join([*path, part, nxt])}"
            if nxt not in state:
                visit(nxt, [*path, part])
        state[part] = 2

    for part in arrows:
        if part not in state:
            visit(part, [])


def test_evaluator_never_imports_the_agent() -> None:
    bad = {
        path.relative_to(ROOT).as_posix(): sorted(n for n in names if n.startswith("agent"))
        for path, names in _imports().items()
        if path.is_relative_to(ROOT / "evaluator") and any(n.startswith("agent") for n in names)
    }
    assert not bad, bad


def test_providers_and_the_run_log_do_not_import_each_other() -> None:
    imports = _imports()
    providers = ROOT / "agent" / "providers"
    for path, names in imports.items():
        if path.is_relative_to(providers):
            assert not {n for n in names if n.startswith("agent.runlog")}, path
    runlog = imports[ROOT / "agent" / "runlog.py"]
    assert not {n for n in runlog if n.startswith("agent.providers")}
    messages = imports[ROOT / "agent" / "messages.py"]
    assert not messages, "agent/messages.py is plain data: it imports no other part"


def test_only_judging_imports_the_evaluators_entry_points() -> None:
    judging = ROOT / "agent" / "judging.py"
    for path, names in _imports().items():
        if path.is_relative_to(ROOT / "agent") and path != judging:
            hits = [n for n in names if n.startswith(JUDGING_ENTRY)]
            assert not hits, f"{path.relative_to(ROOT)} imports {hits}: go through agent.judging"


def _runtime_imports(path: Path) -> set[str]:
    """The evaluator modules `path` imports when it runs (blocks under `if TYPE_CHECKING:` left out)."""
    names: set[str] = set()

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and ast.unparse(node.test) == "TYPE_CHECKING":
            return
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(ast.parse(path.read_text(encoding="utf-8")))
    return {n for n in names if n.startswith("evaluator.")}


def test_the_runner_reaches_none_of_the_verifiers_own_modules() -> None:
    """The runner (the kernel's process) imports what calls the kernel under the guards, never,
    even through another module, what holds the results key, the references or the checks. (The
    forked runner inherits the verifier's loaded modules; this checks which code it can call.)"""
    verifier_only = {
        "evaluator.judge.verifier",
        "evaluator.judge.results_file",
        "evaluator.judge.references",
        "evaluator.judge.case_checks",
        "evaluator.judge.timed_check",
    }
    seen: set[str] = set()
    todo = ["evaluator.judge.runner"]
    while todo:
        module = todo.pop()
        if module in seen:
            continue
        seen.add(module)
        path = ROOT / (module.replace(".", "/") + ".py")
        if not path.exists():
            path = path.with_suffix("") / "__init__.py"
        if not path.exists():  # a name inside a module: its module is imported too
            todo.append(module.rpartition(".")[0])
            continue
        todo += sorted(_runtime_imports(path))
    assert not seen & verifier_only, sorted(seen & verifier_only)
    assert "evaluator.judge.calling" in seen
