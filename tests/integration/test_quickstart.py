"""The README's quick start, run as written: its commands come from README.md, so they cannot drift.

The `bash` block under "## Quick start" is read line by line. Lines that install or make an
environment (`pip`, `python3 -m venv`) are skipped on purpose: the test runs in the environment
that runs the tests. Every other line must be a `python -m ...` command; each runs in a fresh
temporary folder (so `generated_kernels/` and `agent_logs/` land there) with this checkout on
PYTHONPATH, must exit 0, and the reports it leaves are checked.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from evaluator.naming import op_to_folder

ROOT = Path(__file__).resolve().parents[2]
SKIPPED = ("pip ", "python3 -m venv ")  # installs and environments: not the test's to run


def quickstart_lines() -> list[str]:
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    section = text.split("## Quick start", 1)[1].split("\n## ", 1)[0]
    block = re.search(r"```bash\n(.*?)```", section, re.S)
    assert block, "README.md's quick start has no ```bash block"
    return [line.strip() for line in block.group(1).splitlines() if line.strip()]


def test_quickstart_block_holds_only_installs_and_python_commands():
    lines = quickstart_lines()
    runnable = [line for line in lines if not line.startswith(SKIPPED)]
    assert any(line.startswith("pip install torch") and "whl/cpu" in line for line in lines)
    assert runnable and all(line.startswith("python -m ") for line in runnable), runnable


@pytest.mark.slow
def test_quickstart_commands_run_and_the_reports_match_what_was_generated(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    env = {k: v for k, v in env.items() if k not in ("ANTHROPIC_API_KEY", "OPENAI_API_KEY")}
    outputs = []
    for line in quickstart_lines():
        if line.startswith(SKIPPED):
            continue
        argv = shlex.split(line, comments=True)
        proc = subprocess.run(
            [sys.executable, *argv[1:]], cwd=tmp_path, env=env, capture_output=True, text=True,
            timeout=600,
        )  # fmt: skip
        assert proc.returncode == 0, f"{line}\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
        outputs.append(proc.stdout)

    kernels = sorted(p.parent.name for p in (tmp_path / "generated_kernels").glob("*/*_v1.py"))
    runs = sorted((tmp_path / "agent_logs").glob("run_*"))
    assert len(kernels) == 3 and len(runs) == 2, (kernels, runs)
    for run_dir in runs:
        scores = json.loads((run_dir / "run.json").read_text())["scores"]
        assert (scores["num_passed"], scores["num_missing"]) == (3, 0), scores
        summary = (run_dir / "OVERALL_SUMMARY.md").read_text()
        assert "| correctness_score | 100.0% (3/3) |" in summary, summary[:2000]
    evaluated = json.loads((runs[-1] / "run.json").read_text())
    assert evaluated["mode"] == "evaluate"
    assert sorted(op_to_folder(op) for op in evaluated["ops"]) == kernels
    assert runs[-1].name in outputs[-1]  # agent.logs latest shows the evaluation just made
