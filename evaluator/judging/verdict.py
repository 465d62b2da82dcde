"""A sandbox child's verdict: its events and its exit turned into an `OperatorResult`.

`assemble` rejects the whole result when any line was forged; otherwise every case appears in the
results (a fault names the test it interrupted, later ones are marked not run), and the status
follows the flags: reject flags first, then error flags and faults, then skips, passes and
failures. `ran_out_of_gpu_memory` tells a verdict lost to shared GPU memory (run again alone).
"""

from __future__ import annotations

import signal
from dataclasses import dataclass
from typing import Any

from evaluator.cases.testcase import TestCase
from evaluator.judging.job_log import JobState
from evaluator.kernel_errors import load_error_reason
from evaluator.naming import op_to_folder
from evaluator.results import (
    ERROR_FLAGS,
    REJECT_FLAGS,
    Flag,
    OperatorResult,
    Status,
    TestResult,
    flag_name,
    geomean,
)


@dataclass
class Outcome:
    state: JobState
    exit_code: int | None = None
    killed: str | None = None
    infra_error: str | None = None
    stderr_tail: str = ""


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


_GPU_OOM_MARKERS = ("out of memory", "OutOfMemoryError", "cudaErrorMemoryAllocation")


def ran_out_of_gpu_memory(result: OperatorResult, stderr_tail: str = "") -> bool:
    """Whether a verdict that is not a pass says the GPU's memory ran out, in the operator's
    reason, a test's message or the child's stderr (the reason keeps only the end of a long
    allocator message). An H200 evaluation with eight sandboxes at once lost a 4.7 GB
    log_softmax backward this way: its child alone held 41 GiB of inputs and references."""
    if result.status == Status.PASSED:
        return False
    texts = [result.reason, stderr_tail] + [r.error_msg or "" for r in result.results]
    return any(marker in text for text in texts for marker in _GPU_OOM_MARKERS)


def assemble(op: str, kernel_file: str, cases: list[TestCase], outcome: Outcome) -> OperatorResult:
    """Turn a child's events and exit into a verdict. Every case appears in the results."""
    result = OperatorResult(
        op=op, folder=op_to_folder(op), status=Status.ERROR, kernel_file=kernel_file
    )
    state = outcome.state
    if state.forged:
        result.status = Status.REJECTED
        result.flags = [f"{Flag.FORGED_RESULT}:{state.forged} line(s)"]
        result.reason = (
            f"rejected: {state.forged} line(s) of the results file were not written by the"
            " verifier (the kernel's process wrote to it)"
        )
        result.tests = len(cases)
        return result
    tests: dict[int, TestResult] = {}
    op_flags: list[str] = []
    load_error: dict[str, Any] | None = None
    for event in state.events:
        kind = event.get("event")
        if kind == "load_error":
            load_error = event
        elif kind == "loaded":
            op_flags += [f for f in event.get("flags", []) if f not in op_flags]
        elif kind == "violation":  # evaluator.containment.watch / confine_tree
            flag = f"{Flag.SANDBOX_VIOLATION}:{event.get('kind')}"
            op_flags += [flag] if flag not in op_flags else []
        elif kind == "test_result":
            tests[event["index"]] = TestResult.from_json(event["result"])
        elif kind == "timing" and event["index"] in tests:
            t = tests[event["index"]]
            if "error" in event:
                t.error_msg = f"timing failed: {event['error']}"
                continue
            t.eager_ms, t.kernel_ms, t.speedup, t.floor_ms = (
                event["eager_ms"],
                event["kernel_ms"],
                event["speedup"],
                event["floor_ms"],
            )
            t.kernel_host_ms = event.get("kernel_host_ms")
            t.eager_host_ms = event.get("eager_host_ms")
            t.l2_state = event.get("l2_state")
            t.compile_ms = event.get("compile_ms")
            t.speedup_vs_compile = event.get("speedup_vs_compile")
            if event.get("compile_error") and "compile_baseline_error" not in t.flags:
                t.flags.append("compile_baseline_error")  # a note: the verdict stands
            t.flags += [f for f in event.get("flags", []) if f not in t.flags]

    def _fault() -> tuple[str, str]:
        if outcome.killed:
            if outcome.killed == "cancelled":
                return "cancelled", "cancelled: another candidate won or the run stopped"
            return Flag.TIMEOUT, f"killed: {outcome.killed}"
        code = outcome.exit_code
        if code is None:
            return Flag.CRASHED, "the sandbox process could not be reaped"
        if code < 0:
            return (
                f"{Flag.CRASHED}:{_signal_name(code)}",
                f"the process died of {_signal_name(code)}",
            )
        if code == 70:
            return Flag.CRASHED, f"the harness failed: {outcome.stderr_tail[-400:]}"
        return f"{Flag.EXIT_CALLED}:{code}", f"the process exited with code {code} before finishing"

    if outcome.infra_error:
        result.reason = outcome.infra_error
        result.flags = [Flag.CRASHED]
        return result
    if load_error is not None:
        result.flags = [load_error["flag"]] + op_flags
        result.reason = load_error_reason(load_error["error_type"], load_error["error_msg"])
        result.tests = len(cases)  # none of them could run: each counts as not passed
        result.status = (
            Status.REJECTED if any(flag_name(f) in REJECT_FLAGS for f in op_flags) else Status.ERROR
        )
        return result
    fault = None if state.done else _fault()
    if fault is not None and state.loaded_at is None:
        result.flags = [fault[0]] + op_flags
        where = "while importing the kernel" if state.events else "while preparing the tests"
        result.reason = f"{fault[1]} {where}"
        result.tests = len(cases)
        result.status = (
            Status.REJECTED if any(flag_name(f) in REJECT_FLAGS for f in op_flags) else Status.ERROR
        )
        return result
    for i, case in enumerate(cases):
        if i in tests:
            continue
        if fault is not None and i == state.current_test:
            tests[i] = TestResult(
                args=case.serialize(),
                passed=False,
                error_type="Fault",
                error_msg=fault[1],
                flags=[fault[0]],
            )
        else:
            tests[i] = TestResult(
                args=case.serialize(),
                passed=False,
                error_type="NotRun",
                error_msg="not run: the sandbox ended before this test",
            )
    ordered = [tests[i] for i in range(len(cases))]
    for case, t in zip(cases, ordered, strict=True):
        if getattr(case, "hidden", False):
            t.hidden = True
            if not t.passed and not t.skipped and Flag.HIDDEN_CASE not in t.flags:
                t.flags.append(Flag.HIDDEN_CASE)
    result.results = ordered
    ran = [t for t in ordered if not t.skipped]
    result.tests = len(ran)
    result.skipped_tests = len(ordered) - len(ran)
    result.passed = sum(1 for t in ran if t.passed)
    result.hidden_tests = sum(1 for t in ran if t.hidden)
    result.hidden_passed = sum(1 for t in ran if t.hidden and t.passed)
    flags = list(op_flags)
    for t in ordered:
        flags += [f for f in t.flags if f not in flags and flag_name(f) != Flag.SKIPPED_SIZE]
    if fault is not None and fault[0] not in flags:
        flags.append(fault[0])
    result.flags = flags
    names = {flag_name(f) for f in flags}
    first_bad = next((t for t in ran if not t.passed), None)
    if names & REJECT_FLAGS:
        result.status = Status.REJECTED
        bad = [f for f in flags if flag_name(f) in REJECT_FLAGS]
        detail = first_bad.error_msg if first_bad and first_bad.error_msg else ""
        keep = detail and not detail.startswith("flags:")
        result.reason = f"rejected: {', '.join(bad)}" + (f"; {detail}" if keep else "")
    elif names & ERROR_FLAGS or (fault is not None and fault[0] != "cancelled"):
        result.status = Status.ERROR
        result.reason = (first_bad.error_msg if first_bad and first_bad.error_msg else "") or (
            fault[1] if fault else ""
        )
        if first_bad and first_bad.error_type and first_bad.error_type not in ("Fault", "NotRun"):
            result.reason = f"{first_bad.error_type}: {result.reason}"
    elif fault is not None:
        result.status = Status.ERROR
        result.reason = fault[1]
    elif not ran:
        result.status = Status.SKIPPED
        result.reason = ordered[0].error_msg if ordered else "no test cases"
    elif first_bad is None:
        result.status = Status.PASSED
        speeds = [t.speedup for t in ran if t.speedup is not None]
        result.geomean_speedup = geomean(speeds) if speeds and len(speeds) == len(ran) else None
        vs_compile = [t.speedup_vs_compile for t in ran if t.speedup_vs_compile is not None]
        result.geomean_speedup_vs_compile = geomean(vs_compile) if vs_compile else None
        result.reason = ""
    else:
        result.status = Status.FAILED
        where = "hidden case " if first_bad.hidden else ""
        result.reason = f"{result.tests - result.passed} of {result.tests} tests failed; first: {where}{first_bad.args}: {first_bad.error_msg}"
    if result.status is not Status.PASSED and Flag.INTERPRETER_BF16 in names:
        result.reason += " (bf16 cases in Triton's CPU interpreter are unreliable: verify on a GPU)"
    return result
