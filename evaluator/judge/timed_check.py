"""The verifier's side of GPU timing where the judge is split: check the kernel's last timed
output against this process's own eager result, and derive the numbers that count from the
runner's raw ones."""

from __future__ import annotations

from typing import TYPE_CHECKING

from evaluator.judge.case_checks import matches_eager
from evaluator.judge.outputs import output_flags
from evaluator.judge.references import Prepared
from evaluator.judge.tensor_trees import clone_tree, storage_bytes
from evaluator.results import Flag

if TYPE_CHECKING:
    from evaluator.judge.verifier import Judge


def time_in_runner(judge: Judge, prepared: list[Prepared]) -> None:
    """Timing where the judge is split: the runner times eager and the kernel on the case's
    timing inputs and sends raw numbers and the kernel's last timed output; here that output
    is checked against this process's own eager result on the same inputs (ops that write
    their inputs excepted: their last call's inputs are not the drawn ones), and the floor,
    clamp and speedup are derived from the numbers (`evaluator.judge.timing.derive`)."""
    from evaluator.judge.timing import derive, timing_inputs

    if not judge.cfg.timing.measure:
        return
    assert judge.runner is not None
    if judge.gpu_lock is not None:
        judge.gpu_lock.exclusive()  # held until the process exits
    checks_output = not judge.mut_pos and not judge.mut_names
    for i, item in enumerate(prepared):
        if item.skip_reason is not None or not item.runs:
            continue
        args, kwargs = timing_inputs(judge, item)
        ref_out = judge.packet(*clone_tree(args), **clone_tree(kwargs))
        judge.sync()
        cap = 8 * storage_bytes([ref_out]) + (1 << 20)
        raw, timed_out, flags = judge.runner.time_case(
            item.case.source or item.case.serialize(), item.runs[0].seed, cap
        )
        if checks_output and "error" not in raw:
            wrong = output_flags(timed_out, ref_out)
            if not wrong and not matches_eager(judge, timed_out, ref_out, args, kwargs).ok:
                wrong = ["values"]
            if wrong:
                flags.append(f"{Flag.TIMED_OUTPUT_WRONG}:case {i} ({wrong[0]})")
        if flags:
            judge.out.write({"event": "loaded", "flags": flags})
        if "error" in raw:
            judge.out.write({"event": "timing", "index": i, "error": raw["error"]})
            if judge.runner.exit_flag is not None:
                return
            continue
        timing = derive(judge.op, judge.cfg.timing, raw, args, ref_out)
        judge.out.write({"event": "timing", "index": i, **timing})
