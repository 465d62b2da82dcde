"""Which file of an operator's folder is judged: BackendBench's choice (the first sorted
`<folder>_implementation*.py`) by default, another with --kernel-file-glob; the report names it."""

from __future__ import annotations

from pathlib import Path

import pytest

from agent.providers.builtin.registry import WRITERS
from agent.providers.builtin.request import KernelRequest
from agent.run import make_request
from evaluator.cases.suites import select_operators
from evaluator.config import EvalConfig
from evaluator.evaluate import evaluate
from evaluator.naming import find_kernel_file
from evaluator.results import Status
from evaluator.runtime.backend_selection import discover_kernels

OP = "relu.default"
FOLDER = "relu__default"


def _relu_source() -> str:
    cases = select_operators("smoke", ops=[OP]).ops[0].cases
    source = WRITERS[OP](KernelRequest(op=OP, schema="", cases=cases))
    assert source is not None
    return source


def _folder(tmp_path: Path, files: dict[str, str]) -> Path:
    kdir = tmp_path / "kernels"
    (kdir / FOLDER).mkdir(parents=True)
    for name, text in files.items():
        (kdir / FOLDER / name).write_text(text, encoding="utf-8")
    return kdir


def test_first_sorted_implementation_file_is_chosen(tmp_path: Path) -> None:
    names = [
        f"{FOLDER}_implementation_v2.py",
        f"{FOLDER}_implementation_v10.py",
        f"{FOLDER}_notes.py",
        f"{FOLDER}_implementation_v3.txt",
    ]
    kdir = _folder(tmp_path, dict.fromkeys(names, ""))
    (kdir / FOLDER / f"{FOLDER}_implementation_a.py").mkdir()  # a folder is never a kernel
    assert find_kernel_file(kdir, OP) == kdir / FOLDER / f"{FOLDER}_implementation_v10.py"
    assert find_kernel_file(kdir, OP, "{folder}_implementation_v2.py").name.endswith("_v2.py")
    assert find_kernel_file(kdir, OP, "*_v9.py") is None
    assert find_kernel_file(kdir, "add.Tensor") is None
    assert discover_kernels(kdir) == {OP: kdir / FOLDER / f"{FOLDER}_implementation_v10.py"}


def test_kernel_file_glob_rejects_paths() -> None:
    with pytest.raises(ValueError):
        EvalConfig(kernel_file_glob="../elsewhere/*.py")


def test_a_v2_only_folder_is_judged_and_reported(tmp_path: Path) -> None:
    kdir = _folder(tmp_path, {f"{FOLDER}_implementation_v2.py": _relu_source()})
    report = evaluate(kdir, suite="smoke", ops=[OP], device="cpu", run_dir=tmp_path / "run")
    (result,) = report.operators
    assert result.status is Status.PASSED, result.reason
    assert result.kernel_file == str(kdir / FOLDER / f"{FOLDER}_implementation_v2.py")


def test_the_glob_picks_another_file_and_a_missing_one_says_which_glob(tmp_path: Path) -> None:
    broken = "raise ImportError('this is not the kernel you want')\n"
    kdir = _folder(
        tmp_path,
        {f"{FOLDER}_implementation.py": broken, f"{FOLDER}_implementation_v1.py": _relu_source()},
    )
    default = evaluate(kdir, suite="smoke", ops=[OP], device="cpu", write=False)
    assert default.operators[0].status is Status.ERROR  # `_implementation.py` sorts first
    assert default.operators[0].kernel_file.endswith(f"{FOLDER}_implementation.py")
    assert any(f"{OP}: 2 files match" in note for note in default.notes)
    cfg = EvalConfig(kernel_file_glob="{folder}_implementation_v1.py")
    chosen = evaluate(kdir, suite="smoke", ops=[OP], device="cpu", write=False, config=cfg)
    assert chosen.operators[0].status is Status.PASSED
    assert chosen.operators[0].kernel_file.endswith("_implementation_v1.py")
    cfg = EvalConfig(kernel_file_glob="*_v7.py")
    missing = evaluate(kdir, suite="smoke", ops=[OP], device="cpu", write=False, config=cfg)
    assert missing.operators[0].status is Status.MISSING
    assert f"{FOLDER}/*_v7.py" in missing.operators[0].reason


def test_cli_flags_set_the_glob_and_the_profile() -> None:
    _, req = make_request(
        ["--evaluate-only", "--kernel-file-glob", "{folder}_impl*.py", "--profile", "backendbench"]
    )
    assert req.cfg.eval.kernel_file_glob == "{folder}_impl*.py"
    assert req.cfg.eval.correctness.tolerance_profile == "backendbench"
