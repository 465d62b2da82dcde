"""The sandbox child's job driver: judge one kernel file on a list of cases, writing results as
it goes.

Runs only inside a sandbox process (fork-server child or fresh interpreter), never in the process
that decides. It is the verifier: the kernel runs in a runner process it forks first
(`evaluator.judge`), on the CPU and on a GPU alike. Order matters:
0. fork the runner (before anything below exists in memory), then take the results key
   (`results_file`);
1. materialise every case and compute eager references on pristine copies BEFORE the kernel
   module is imported (so nothing the kernel does at import time can change the reference;
   `references`);
2. confine the process that imports the kernel (`evaluator.containment.confine`: files, network,
   capabilities, limits), then have the kernel imported with `os.environ` watched for secret
   probes (`calling`);
3. per case: call the kernel on seed A, seed B, then seed A again, each on fresh copies, under the
   guards (ATen trace in every thread, launch counter, host reads, harness identity, a canary
   proving each observer alive); check launches, compute ops, plain dense outputs, input
   mutation, values, staleness (B answered with A's result, or A's buffer overwritten by B) and
   determinism; then one ghost call per operator with every launch a no-op (`case_checks`);
4. on a GPU, have the runner time passing operators against eager (evaluator.judge.timing), check the
   output of each case's last timed call against this process's eager result on the same
   inputs, and derive floor, clamp and speedup from the runner's raw numbers (`timed_check`).
Each event is one JSON line appended to the results file and flushed, so a crash or a kill loses
only the test in progress. Usage: python -m evaluator.judge.verifier SPEC.json (or
python -m evaluator.harness SPEC.json)
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from evaluator.cases.testcase import parse_case
from evaluator.judge.calling import Instruments, import_kernel
from evaluator.judge.case_checks import ghost_replay, run_test
from evaluator.judge.gpu_lock import GpuLock
from evaluator.judge.references import Prepared, prepare, warm_checks
from evaluator.judge.results_file import ResultWriter, read_key
from evaluator.judge.runner import RunnerClient, start_runner
from evaluator.judge.spec_view import aten_overload, config_view, mutable_positions
from evaluator.judge.timed_check import time_in_runner
from evaluator.naming import normalize_op
from evaluator.results import Flag, TestResult


class Judge:
    """One job's state, which the verifier's parts take as their first argument (`references`,
    `case_checks`, `timed_check`, `evaluator.judge.timing`): the spec and its config view, the
    op's overload and the arguments it writes, the results writer, the runner (or, unsplit, this
    process's guards) and the GPU lock. `run` is the whole job, in the order the module says."""

    def __init__(self, spec: dict[str, Any], runner: RunnerClient | None = None) -> None:
        self.spec = spec
        self.cfg = config_view(spec["config"])
        self.op = normalize_op(spec["op"])
        self.device: str = spec["device"]
        self.packet = aten_overload(self.op)
        self.mut_pos, self.mut_names = mutable_positions(self.packet)
        self.out = ResultWriter(spec["results_path"], spec.get("_key"))
        # Split (the default): the kernel lives in the runner process and these guards live there.
        # With `split_judge: false` in the spec this process calls the kernel itself.
        self.runner = runner
        self.inst = Instruments.install(self.device) if runner is None else None
        self.runner_flags: list[str] = []
        self.sync = torch.cuda.synchronize if self.device == "cuda" else (lambda: None)
        self.gpu_lock: GpuLock | None = None
        if self.device == "cuda" and spec.get("timing_lock"):
            self.gpu_lock = GpuLock(spec["timing_lock"])

    def load_kernel(self, prepared: list[Prepared] | None = None) -> Any | None:
        if self.runner is not None:
            began = time.monotonic()
            meanwhile = None
            if self.device == "cuda" and prepared:
                meanwhile = lambda: warm_checks(self, prepared)  # noqa: E731
            loaded = self.runner.load(self.spec["kernel_file"], meanwhile)
            self.runner_flags = loaded["flags"]
            if self.cfg.sandbox.confine:
                took = round(time.monotonic() - began, 4)
                self.out.write(
                    {
                        "event": "confined",
                        "containment": loaded.get("containment", "unknown"),
                        "took_s": took,
                    }
                )
            if loaded["error"] is not None:
                self.out.write(loaded["error"])
                return None
            return self.runner
        assert self.inst is not None
        fn, error = import_kernel(self.spec["kernel_file"], self.op, self.inst.secrets)
        if error is not None:
            self.out.write(error)
        return fn

    def op_flags(self) -> list[str]:
        return list(self.runner_flags) if self.inst is None else self.inst.op_flags()

    # ------------------------------------------------------------ the whole job

    def run(self) -> None:
        cases = [parse_case(text) for text in self.spec["cases"]]
        for i, text in enumerate(self.spec["cases"]):
            cases[i].count = 0
            cases[i].source = text
        if self.gpu_lock is not None:
            if self.spec.get("gpu_alone"):
                self.gpu_lock.exclusive()  # a rerun after the GPU ran out of memory: alone
            else:
                self.gpu_lock.share()  # before any CUDA work: a timing sandbox may own the GPU
        if self.runner is not None and self.device == "cuda":
            self.runner.warm()  # its context while this process computes references
        prepared = prepare(self, cases)
        self.out.write({"event": "prepared", "n": len(prepared)})
        # Trusted setup is over: confine the process that imports the kernel before it loads
        # (a split-off runner confines itself and says how far, see load_kernel).
        if self.cfg.sandbox.confine and self.runner is None:
            from evaluator.containment import confine

            began = time.monotonic()
            job_dir = os.path.dirname(os.path.abspath(self.spec["results_path"]))
            policy = confine.build_policy(job_dir, self.device, self.cfg.sandbox)
            status = confine.confine_current_process(policy, self.out.write)
            took = round(time.monotonic() - began, 4)
            self.out.write({"event": "confined", "containment": status.label, "took_s": took})
            if self.cfg.sandbox.require_containment and not status.full:
                raise RuntimeError(
                    f"containment is {status.label} (eval.sandbox.require_containment)"
                )
        fn = self.load_kernel(prepared)
        if fn is None:
            self.out.write({"event": "done"})
            return
        flags = self.op_flags()
        self.out.write({"event": "loaded", "flags": flags})
        results: list[TestResult] = []
        broken = False
        for i, item in enumerate(prepared):
            self.out.write({"event": "test_start", "index": i, "phase": "correctness"})
            if broken:
                res = TestResult(
                    args=item.case.serialize(),
                    passed=False,
                    error_type="NotRun",
                    error_msg="not run: the CUDA context or the kernel's process was lost earlier",
                )
            elif item.skip_reason is not None:
                res = TestResult(
                    args=item.case.serialize(),
                    passed=False,
                    skipped=True,
                    error_type="Skipped",
                    error_msg=item.skip_reason,
                    flags=[item.skip_flag] if item.skip_flag else [],
                )
            else:
                res = run_test(self, fn, item)
                broken = Flag.CUDA_ERROR in res.flags or (
                    self.runner is not None and self.runner.exit_flag is not None
                )
            results.append(res)
            self.out.write({"event": "test_result", "index": i, "result": res.to_json()})
        if not broken:
            ghost_flags = ghost_replay(self, fn, prepared, results)
            if ghost_flags:
                self.out.write({"event": "loaded", "flags": ghost_flags})
        if (
            self.device == "cuda"
            and self.spec.get("measure_performance")
            and not broken
            and all(r.passed or r.skipped for r in results)
        ):
            if self.runner is not None:
                time_in_runner(self, prepared)
            else:
                from evaluator.judge.timing import time_tests

                for i, timing in time_tests(self, fn, prepared):
                    self.out.write({"event": "timing", "index": i, **timing})
                post = self.op_flags()
                if post:
                    self.out.write({"event": "loaded", "flags": post})
        self.out.write({"event": "done"})


def run_job(spec_path: str) -> None:
    spec = json.loads(Path(spec_path).read_text())
    # The runner is forked first: before this process reads the results key, opens the results
    # file, touches CUDA or computes a reference, so its memory holds none of them.
    split = spec.get("split_judge", True)
    if split:
        import gc

        gc.freeze()  # the collector then leaves inherited objects alone: fewer copy-on-write pages
    runner = start_runner(spec) if split else None
    try:
        read_key(spec)
        Judge(spec, runner).run()
    finally:
        if runner is not None:
            runner.close()


if __name__ == "__main__":
    from evaluator.containment.confine import contain_job
    from evaluator.containment.process_tree import exit_code_of

    contain_job(sys.argv[1], lambda: exit_code_of(run_job, sys.argv[1]))
