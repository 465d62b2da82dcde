"""Verdicts as data: per-test results, per-operator results, statuses and flags.

A kernel's failure is never an exception in the evaluator: it is a result with a status, an excerpt
of the error and numbers with units. These dataclasses serialize 1:1 to `atenforge_results.json`.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from enum import StrEnum
from typing import Any

from evaluator.naming import op_to_folder


class Status(StrEnum):
    PASSED = "passed"  # every test that ran passed (and at least one ran)
    FAILED = "failed"  # a test gave a wrong result
    REJECTED = "rejected"  # the kernel cheated; evidence in flags
    ERROR = "error"  # would not import, crashed, hung, exited
    MISSING = "missing"  # no kernel for a selected operator
    SKIPPED = "skipped"  # no test could run on this device; reason says why


# Worst first: an operator's status is the worst of what its tests showed.
STATUS_SEVERITY = [Status.REJECTED, Status.ERROR, Status.FAILED, Status.SKIPPED, Status.PASSED]


class Flag:
    """Flag names. A flag with evidence is `name:detail`, e.g. `aten_fallback:aten.add.Tensor`."""

    # cheating -> rejected
    ATEN_FALLBACK = "aten_fallback"
    NO_TRITON_LAUNCH = "no_triton_launch"
    INPUT_MUTATED = "input_mutated"
    STALE_RESULT = "stale_result"
    NONDETERMINISTIC = "nondeterministic"
    HARNESS_TAMPERING = "harness_tampering"
    SECRET_PROBE = "secret_probe"
    HOST_COMPUTE = "host_compute"  # tensor data taken to the host (numpy, tolist) during the call
    SANDBOX_VIOLATION = "sandbox_violation"  # tried to leave its confinement: write, network, ...
    NON_TENSOR_OUTPUT = "non_tensor_output"  # not a plain dense torch.Tensor where eager has one
    COMPUTED_OUTSIDE_TRITON = "computed_outside_triton"  # right answer with every launch a no-op
    INSTRUMENTATION_DISABLED = "instrumentation_disabled"  # a guard stopped observing
    RUNNER_PROTOCOL = "runner_protocol"  # the kernel's process sent malformed data
    FORGED_RESULT = "forged_result"  # a results line the verifier did not sign
    SIDE_STREAM = "side_stream"  # a launch on another stream than the caller's, never joined back
    TIMED_OUTPUT_WRONG = "timed_output_wrong"  # a timed call's output differs from eager's
    GLOBAL_STATE_CHANGED = "global_state_changed"  # torch numerics/backend flags switched
    # faults -> error
    IMPORT_ERROR = "import_error"
    MISSING_FUNCTION = "missing_function"
    CRASHED = "crashed"  # killed by a signal (segfault, abort)
    TIMEOUT = "timeout"
    EXIT_CALLED = "exit_called"
    CUDA_ERROR = "cuda_error"
    EXCEPTION = "exception"
    # wrong answers -> failed
    WRONG_DTYPE = "wrong_dtype"
    WRONG_SHAPE = "wrong_shape"
    WRONG_VALUES = "wrong_values"
    NAN_MISMATCH = "nan_mismatch"
    # notes that do not change the status
    SUSPICIOUS_SPEEDUP = "suspicious_speedup"
    OVERHEAD_DOMINATED = "overhead_dominated"
    INTERPRETER_BF16 = "interpreter_bf16"  # bf16 in Triton's CPU interpreter is unreliable
    ROOFLINE_CLAMPED = "roofline_clamped"
    SKIPPED_SIZE = "skipped_size"
    HIDDEN_CASE = "hidden_case"  # a failed test on a case no prompt showed
    # 16-bit float output outside the tolerance of eager's, within it of the float64 result
    # widened by eager's own error (eager is that far from the truth there)
    WITHIN_EAGER_ERROR = "within_eager_error"


REJECT_FLAGS = {
    Flag.ATEN_FALLBACK,
    Flag.NO_TRITON_LAUNCH,
    Flag.INPUT_MUTATED,
    Flag.STALE_RESULT,
    Flag.NONDETERMINISTIC,
    Flag.HARNESS_TAMPERING,
    Flag.SECRET_PROBE,
    Flag.HOST_COMPUTE,
    Flag.SANDBOX_VIOLATION,
    Flag.NON_TENSOR_OUTPUT,
    Flag.COMPUTED_OUTSIDE_TRITON,
    Flag.INSTRUMENTATION_DISABLED,
    Flag.RUNNER_PROTOCOL,
    Flag.FORGED_RESULT,
    Flag.SIDE_STREAM,
    Flag.TIMED_OUTPUT_WRONG,
    Flag.GLOBAL_STATE_CHANGED,
}
ERROR_FLAGS = {
    Flag.IMPORT_ERROR,
    Flag.MISSING_FUNCTION,
    Flag.CRASHED,
    Flag.TIMEOUT,
    Flag.EXIT_CALLED,
    Flag.CUDA_ERROR,
    Flag.EXCEPTION,
}


def flag_name(flag: str) -> str:
    return flag.split(":", 1)[0]


@dataclass
class TestResult:
    """One serialized case, run with at least two seeded inputs and a repeat."""

    __test__ = False  # not a pytest class

    args: str
    passed: bool
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    error_type: str | None = None
    error_msg: str | None = None
    speedup: float | None = None
    kernel_ms: float | None = None
    eager_ms: float | None = None
    flags: list[str] = field(default_factory=list)
    skipped: bool = False
    floor_ms: float | None = None  # memory-bandwidth floor for this case, when measured
    # host wall time of one call, GPU busy (median), when measured: launch-bound calls show here
    kernel_host_ms: float | None = None
    eager_host_ms: float | None = None
    # what L2 held when the timed calls started ("steady" or "flushed", timing.TimingConfig)
    l2_state: str | None = None
    # the op compiled by torch.compile, timed paired with the kernel (eval.timing.baselines)
    compile_ms: float | None = None
    speedup_vs_compile: float | None = None
    hidden: bool = False  # a case no prompt showed (evaluator.cases.hidden_cases)

    def to_json(self) -> dict[str, Any]:
        return {k: _finite(v) for k, v in asdict(self).items()}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TestResult:
        known = set(cls.__dataclass_fields__)
        return cls(**{k: _number(v) for k, v in data.items() if k in known})


@dataclass
class OperatorResult:
    op: str
    folder: str
    status: Status
    flags: list[str] = field(default_factory=list)
    tests: int = 0  # tests that ran (skipped ones excluded)
    passed: int = 0
    skipped_tests: int = 0
    geomean_speedup: float | None = None
    geomean_speedup_vs_compile: float | None = None  # when torch.compile was timed too
    kernel_file: str | None = None
    reason: str = ""
    results: list[TestResult] = field(default_factory=list)
    wall_s: float | None = None
    phases_s: dict[str, float] = field(default_factory=dict)  # sandbox phases, for cost analysis
    # relative spread of geomean_speedup over repeated timings of this kernel, when measured
    timing_noise: float | None = None
    judged_on: str | None = None  # the judge that gave the verdict: cuda:1, cpu:0, ray:HOST/cuda:0
    hidden_tests: int = 0  # of `tests`, those on hidden cases (never in a prompt)
    hidden_passed: int = 0

    @property
    def pass_rate(self) -> float:
        return self.passed / self.tests if self.tests else 0.0

    def max_error(self, key: str) -> float | None:
        values = [getattr(r, key) for r in self.results if getattr(r, key) is not None]
        finite = [v for v in values if math.isfinite(v)]
        if len(finite) != len(values):
            return math.inf
        return max(finite) if finite else None

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["status"] = str(self.status)
        data["results"] = [r.to_json() for r in self.results]
        data["geomean_speedup"] = _finite(self.geomean_speedup)
        data["geomean_speedup_vs_compile"] = _finite(self.geomean_speedup_vs_compile)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> OperatorResult:
        data = dict(data)
        data["status"] = Status(data["status"])
        data["results"] = [TestResult.from_json(r) for r in data.get("results", [])]
        data["geomean_speedup"] = _number(data.get("geomean_speedup"))
        data["geomean_speedup_vs_compile"] = _number(data.get("geomean_speedup_vs_compile"))
        known = set(cls.__dataclass_fields__)
        return cls(**{k: v for k, v in data.items() if k in known})


def verdict_without_run(
    op: str,
    status: Status,
    reason: str,
    *,
    kernel_file: str | None = None,
    flags: list[str] | None = None,
    tests: int = 0,
    results: list[TestResult] | None = None,
) -> OperatorResult:
    """The verdict on an operator whose kernel did not run here: missing, skipped, cancelled, or
    its judge lost."""
    return OperatorResult(
        op=op,
        folder=op_to_folder(op),
        status=status,
        flags=list(flags or []),
        tests=tests,
        kernel_file=kernel_file,
        reason=reason,
        results=list(results or []),
    )


def not_run(case_args: list[str], error_type: str, reason: str) -> list[TestResult]:
    """One failed result per case for an operator none of whose tests could run (no kernel, or a
    kernel that does not import): every case the suite selected stays visible in the reports."""
    return [
        TestResult(args=args, passed=False, error_type=error_type, error_msg=reason)
        for args in case_args
    ]


def _finite(value: Any) -> Any:
    """JSON has no inf/nan: write them as strings so a reader sees what happened."""
    if isinstance(value, float) and not math.isfinite(value):
        return str(value)
    return value


def _number(value: Any) -> Any:
    """Inverse of `_finite` for the strings it writes."""
    if value in ("inf", "-inf", "nan"):
        return float(value)
    return value


def geomean(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None and v > 0 and math.isfinite(v)]
    if not vals:
        return None
    return math.exp(sum(math.log(v) for v in vals) / len(vals))
