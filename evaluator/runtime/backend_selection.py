"""Which kernels of a directory the backend enables (evaluator.backend), and from what evidence.

Contract:
- `discover_kernels(dir)`: each operator folder's kernel file, chosen as BackendBench chooses it
  (the first sorted `<folder>_implementation*.py`, naming.find_kernel_file), by overload.
- `find_results(dir, log_dir)`: the newest `log_dir/*/atenforge_results.json` whose run evaluated `dir`
  (its `run.kernels_dir`, compared after resolving paths), by file time.
- `select_kernels(dir, ops=, skip=, results=, only_passed=, log_dir=) -> Selection`: the kernels to
  enable and, for every other one, why not. With `only_passed`, an operator needs status
  `passed` in the results; no results is a UsageError that says to evaluate first. Nothing is
  imported here: selecting is safe, enabling is the trust decision.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evaluator.errors import UsageError
from evaluator.naming import find_kernel_file, folder_to_op, normalize_op
from evaluator.reports.runfolder import RESULTS_JSON, results_file

# --------------------------------------------------------------------------- kernels on disk


def discover_kernels(kernels_dir: Path | str) -> dict[str, Path]:
    """Each operator folder's kernel file in `kernels_dir` (naming.find_kernel_file), by overload."""
    found: dict[str, Path] = {}
    for sub in sorted(Path(kernels_dir).iterdir()):
        if not sub.is_dir() or "__" not in sub.name:
            continue
        try:
            op = folder_to_op(sub.name)
        except ValueError:
            continue
        path = find_kernel_file(kernels_dir, op)
        if path is not None:
            found[op] = path
    return found


def _check_kernels_dir(kernels_dir: Path | str) -> Path:
    path = Path(kernels_dir)
    if not path.is_dir():
        raise UsageError(
            f"kernels dir '{path}' is not an existing folder: pass the folder that holds the kernels."
        )
    return path


# --------------------------------------------------------------------------- evaluation results


def find_results(kernels_dir: Path | str, log_dir: Path | str = "agent_logs") -> Path | None:
    """The newest results file under `log_dir` whose run evaluated `kernels_dir`."""
    target = Path(kernels_dir).resolve()
    best: tuple[float, str, Path] | None = None
    root = Path(log_dir)
    if not root.is_dir():
        return None
    for run in root.iterdir():
        if not run.is_dir() or not (path := results_file(run)).is_file():
            continue
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
            evaluated = (data.get("run") or {}).get("kernels_dir")
        except (OSError, ValueError, AttributeError):
            continue
        if not evaluated or Path(evaluated).resolve() != target:
            continue
        key = (path.stat().st_mtime, path.parent.name, path)
        if best is None or key[:2] > best[:2]:
            best = key
    return best[2] if best else None


def _results_path(
    results: str | Path | None, kernels_dir: Path, log_dir: Path | str
) -> Path | None:
    if results is None:
        return None
    if isinstance(results, str) and results == "auto":
        return find_results(kernels_dir, log_dir)
    path = results_file(results)
    if not path.is_file():
        raise UsageError(
            f"results file '{path}' does not exist: pass a run folder or its {RESULTS_JSON}."
        )
    return path


def read_results(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise UsageError(
            f"cannot read '{path}' ({exc}): pass a {RESULTS_JSON} written by an evaluation."
        ) from None
    if not isinstance(data, dict) or not isinstance(data.get("operators"), list):
        raise UsageError(
            f"'{path}' has no 'operators' list: pass a {RESULTS_JSON} written by an evaluation."
        )
    return data


def load_statuses(path: Path | str) -> dict[str, str]:
    """`{op: status}` from an atenforge_results.json."""
    data = read_results(Path(path))
    return {
        normalize_op(str(o["op"])): str(o.get("status")) for o in data["operators"] if "op" in o
    }


def expand_ops(
    values: Iterable[str] | str | None, available: Iterable[str]
) -> tuple[list[str], list[str]]:
    """(overloads, unknown names). `add.Tensor` / `aten.add.Tensor` name one overload; a bare
    `add` names `add.default` if there is a kernel for it, else every kernel of base `add`."""
    if values is None:
        return [], []
    if isinstance(values, str):
        values = values.split(",")
    available = sorted(available)
    found: list[str] = []
    unknown: list[str] = []
    for raw in (v.strip() for v in values):
        if not raw:
            continue
        op = normalize_op(raw)
        bare = raw.split("::")[-1].removeprefix("aten.")
        if op in available:
            matches = [op]
        elif "." not in bare:
            matches = [a for a in available if a.split(".", 1)[0] == bare]
        else:
            matches = []
        if not matches:
            unknown.append(op)
        found.extend(m for m in matches if m not in found)
    return found, unknown


@dataclass
class Selection:
    """Which kernels of a directory would be enabled, and why the others would not."""

    kernels_dir: Path
    kernels: dict[str, Path]  # op -> kernel file, to be enabled
    not_enabled: dict[str, str]  # op -> reason
    results_path: Path | None


def select_kernels(
    kernels_dir: Path | str,
    *,
    ops: Iterable[str] | str | None = None,
    skip: Iterable[str] | str | None = None,
    results: str | Path | None = "auto",
    only_passed: bool = True,
    log_dir: Path | str = "agent_logs",
) -> Selection:
    """Decide what `enable()` would enable, without importing any kernel. UsageError when none."""
    kdir = _check_kernels_dir(kernels_dir)
    available = discover_kernels(kdir)
    if not available:
        raise UsageError(
            f"kernels dir '{kdir}' holds no kernels (expected e.g. add__Tensor/add__Tensor_implementation_v1.py)."
        )
    wanted, unknown = expand_ops(ops, available)
    wanted = wanted or sorted(available)
    if unknown:
        raise UsageError(
            f"no kernel for {', '.join(unknown)} in '{kdir}': pass operators that have a kernel folder."
        )
    skipped = set(expand_ops(skip, available)[0])
    path = _results_path(results, kdir, log_dir)
    if only_passed and path is None:
        raise UsageError(
            f"no evaluation results for '{kdir}' (looked under '{log_dir}'): evaluate it first "
            f"(python -m agent.run --evaluate-only --kernels-dir {kdir}), pass results=PATH, "
            "or pass only_passed=False."
        )
    statuses = load_statuses(path) if only_passed and path is not None else None
    selection = Selection(kdir, {}, {}, path)
    for op in wanted:
        if op in skipped:
            selection.not_enabled[op] = "skipped by request"
        elif statuses is not None and statuses.get(op) != "passed":
            status = statuses.get(op)
            selection.not_enabled[op] = (
                f"latest evaluation: {status}" if status else f"not evaluated in {path}"
            )
        else:
            selection.kernels[op] = available[op]
    if not selection.kernels:
        raise UsageError(nothing_enabled(kdir, selection.not_enabled))
    return selection


def nothing_enabled(kdir: Path, not_enabled: dict[str, str]) -> str:
    reasons = Counter(why[:60] for why in not_enabled.values())
    detail = "; ".join(f"{n}x {why}" for why, n in reasons.most_common(3))
    return f"no kernel of '{kdir}' can be enabled ({detail}): fix or re-evaluate them, or pass only_passed=False."
