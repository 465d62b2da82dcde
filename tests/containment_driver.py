"""Judge hostile kernels, each followed by an honest one, in one Sandbox; print the verdicts as JSON.

Run by tests/integration/test_containment.py in a subprocess whose environment holds a fake API key, so the
sandbox's ancestors hold a secret in their /proc/<pid>/environ, as `agent.run` does.
Usage: python tests/containment_driver.py MODE SCRATCH KERNEL.py... (MODE: fork | fresh)
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

from evaluator.cases.testcase import parse_case
from evaluator.config import EvalConfig
from evaluator.judging.sandbox import Sandbox

ROOT = Path(__file__).resolve().parent
HONEST = ROOT / "fixtures/kernels/corpus/relu__default/relu__default_implementation_v1.py"
CASES = [parse_case("((T([37, 19], f32),), {})"), parse_case("((T([300], f32),), {})")]


def main() -> None:
    mode, scratch, kernels = sys.argv[1], Path(sys.argv[2]), sys.argv[3:]
    cfg = EvalConfig()
    cfg.sandbox.mode = mode  # type: ignore[assignment]
    cfg.sandbox.num_parallel = 1
    cfg.sandbox.test_timeout_s = 30
    cfg.sandbox.max_processes = 301
    cfg.sandbox.max_data_mib = 2048
    cfg.sandbox.max_file_mib = 64
    out = []
    with Sandbox(cfg, "cpu", scratch_root=scratch) as box:
        for kernel in kernels:
            before = set(scratch.glob("job_*"))
            bad = box.judge(Path(kernel), "relu.default", CASES, keep_job_dir=True)
            (job,) = set(scratch.glob("job_*")) - before
            honest = box.judge(HONEST, "relu.default", CASES)
            pids = job / "escaped.pid"
            out.append(
                {
                    "kernel": Path(kernel).stem,
                    "status": str(bad.status),
                    "flags": bad.flags,
                    "reason": bad.reason,
                    "stdout": (job / "stdout.txt").read_text(errors="replace"),
                    "escaped_pids": pids.read_text().split() if pids.exists() else [],
                    "fill_bytes": (job / "fill.bin").stat().st_size
                    if (job / "fill.bin").exists()
                    else 0,
                    "next_status": str(honest.status),
                    "next_reason": honest.reason,
                }
            )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
