"""A non-editable install works from any directory: configs/ and prompts/ ship inside the wheel.

The project is copied to a temporary folder (so the build leaves nothing in the checkout),
installed with `pip install --no-deps --no-build-isolation` into a fresh venv that sees this
machine's torch, triton, pip and setuptools (`--system-site-packages --without-pip`: the venv's
own old setuptools would shadow the build backend; no network), and the README's first
command runs from a third folder with that venv's python and no PYTHONPATH.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SHIPPED = ("pyproject.toml", "setup.py", "MANIFEST.in", "README.md")
PACKAGES = ("agent", "evaluator", "configs", "prompts")


def _clean_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in {"PYTHONPATH", "PYTHONHOME"}}
    for key in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY"):
        env.pop(key, None)
    env["PIP_NO_INDEX"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.fixture(scope="module")
def installed_python(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("wheel")
    source = base / "src"
    source.mkdir()
    for name in SHIPPED:
        shutil.copy2(ROOT / name, source / name)
    ignore = shutil.ignore_patterns("__pycache__", "*.pyc", "*.egg-info")
    for name in PACKAGES:
        shutil.copytree(ROOT / name, source / name, ignore=ignore)
    venv = base / "venv"
    env = _clean_env()
    subprocess.run(
        [sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)],
        check=True,
        env=env,
    )
    python = venv / "bin" / "python"
    done = subprocess.run(
        [
            str(python),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--no-build-isolation",
            str(source),
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return python


@pytest.mark.slow
def test_installed_package_finds_its_configs_and_prompts(installed_python, tmp_path) -> None:
    probe = (
        "import agent, json; from agent.config import CONFIG_DIR, PROMPTS_DIR;"
        "print(json.dumps([agent.__file__, str(CONFIG_DIR), str(PROMPTS_DIR)]))"
    )
    done = subprocess.run(
        [str(installed_python), "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=_clean_env(),
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    package, configs, prompts = (Path(p) for p in json.loads(done.stdout))
    venv = installed_python.parent.parent
    for path in (package, configs, prompts):
        assert path.is_relative_to(venv), f"{path} is not from the installed wheel"
    assert (configs / "default.toml").is_file()
    assert (configs / "builtin.toml").is_file()
    assert {p.name for p in prompts.glob("*.j2")} >= {"system.j2", "generate.j2", "refine.j2"}


@pytest.mark.slow
def test_readme_command_runs_from_another_directory(installed_python, tmp_path) -> None:
    work = tmp_path / "elsewhere"
    work.mkdir()
    done = subprocess.run(
        [str(installed_python), "-m", "agent.run", "--suite", "smoke", "--num-operators", "1"],
        capture_output=True,
        text=True,
        cwd=work,
        env=_clean_env(),
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    runs = sorted((work / "agent_logs").glob("run_*"))
    assert len(runs) == 1
    assert (runs[0] / "atenforge_results.json").is_file()
    assert any((work / "generated_kernels").iterdir())
