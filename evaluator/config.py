"""Evaluator settings as pydantic models (one per concern). The agent's config embeds `EvalConfig`.

Units are in field names (`_s`, `_ms`, `_gbps`); counts are `num_*`. Every model forbids unknown
keys so a typo in a TOML file is an error that names the key.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Tolerance(_Model):
    atol: float = Field(ge=0, description="absolute tolerance")
    rtol: float = Field(ge=0, description="relative tolerance")


def _strict() -> dict[str, Tolerance]:
    return {
        "f16": Tolerance(atol=1e-3, rtol=2e-3),
        "bf16": Tolerance(atol=1e-2, rtol=1.6e-2),
        "f32": Tolerance(atol=1e-4, rtol=1e-4),
        "f64": Tolerance(atol=1e-7, rtol=1e-7),
        "c32": Tolerance(atol=1e-3, rtol=2e-3),
        "c64": Tolerance(atol=1e-4, rtol=1e-4),
        "c128": Tolerance(atol=1e-7, rtol=1e-7),
    }


class CorrectnessConfig(_Model):
    tolerance_profile: Literal["strict", "backendbench"] = Field(
        "strict",
        description="strict: per-dtype tolerances below; backendbench: atol = rtol = 1e-2 for every float dtype",
    )
    strict: dict[str, Tolerance] = Field(
        default_factory=_strict, description="per-dtype tolerances of the strict profile"
    )
    num_seeds: int = Field(
        2, ge=2, le=8, description="distinct seeded inputs per case (>= 2 catches stale results)"
    )
    seed: int = Field(0, description="base seed for input materialisation")

    def tolerance(self, dtype_code: str) -> Tolerance | None:
        """None means exact comparison (integers, bools)."""
        if dtype_code not in self.strict:
            return None
        if self.tolerance_profile == "backendbench":
            return Tolerance(atol=1e-2, rtol=1e-2)
        return self.strict[dtype_code]


class TimingConfig(_Model):
    measure: bool = Field(True, description="time kernels vs eager on a GPU (never on the CPU)")
    num_warmup: int = Field(5, ge=0, le=1000, description="untimed calls before timing")
    num_reps: int = Field(
        50, ge=3, le=10000, description="timed repetitions per case (median reported)"
    )
    max_time_per_case_s: float = Field(
        2.0, gt=0, description="stop repeating a case after this much time"
    )
    flush_l2_mib: int = Field(
        256, ge=0, description="MiB touched between reps to flush L2 (H200 L2 = 60 MB)"
    )
    l2_state: Literal["steady", "flushed"] = Field(
        "steady",
        description="what L2 holds when a timed call starts: 'steady' = another call's data, its "
        "output dirty, as in a model (each side rotates through `steady_sets` argument sets after "
        "a read flush); 'flushed' = the flush buffer's dirty lines (zeroed before every call; the "
        "call also pays for writing them back)",
    )
    steady_sets: int = Field(
        4, ge=2, le=64, description="argument sets per side for l2_state = 'steady'"
    )
    steady_max_mib: int = Field(
        8192,
        ge=1,
        description="fewer sets (never under two) for cases whose sets would exceed this per side",
    )
    host_window_us: float = Field(
        200.0,
        ge=0,
        description="GPU-side wait before each timed call, so host time up to this is not timed "
        "as GPU time (0: flush only)",
    )
    hbm_bandwidth_gbps: float = Field(
        4260.0,
        gt=0,
        description="measured HBM bandwidth used for the roofline floor (H200: 4.26 TB/s)",
    )
    empty_launch_ms: float = Field(
        0.0013,
        gt=0,
        description="time of an empty launch; kernels within 1.3x of it are overhead_dominated",
    )
    suspicious_speedup: float = Field(
        10.0, gt=1, description="speedups above this are flagged suspicious_speedup"
    )
    baselines: list[Literal["eager", "compile"]] = Field(
        default_factory=lambda: ["eager"],
        description="what kernels are timed against: eager ATen always; 'compile' adds the op "
        "compiled by torch.compile (Inductor), timed paired with the kernel (slower: compiles "
        "per case shape)",
    )

    @field_validator("baselines")
    @classmethod
    def _eager_first(cls, value: list[str]) -> list[str]:
        if "eager" not in value:
            raise ValueError("'eager' must be among the baselines (speedups are against eager)")
        return list(dict.fromkeys(value))


class SandboxConfig(_Model):
    mode: Literal["fork", "fresh"] = Field(
        "fork",
        description="fork: a pre-imported server forks one child per candidate; fresh: a new python per candidate",
    )
    test_timeout_s: float = Field(
        60.0, gt=0, description="one test (all its calls) may take at most this long"
    )
    operator_timeout_s: float = Field(
        600.0, gt=0, description="one operator's whole run may take at most this long"
    )
    num_parallel: int = Field(2, ge=1, le=64, description="sandboxes running at once")
    confine: bool = Field(
        True,
        description="confine each candidate with Landlock, seccomp, dropped capabilities, a PID "
        "namespace and the limits below (docs/SANDBOX.md); off only to measure what it costs",
    )
    require_containment: bool = Field(
        False,
        description="refuse to judge candidates when this machine cannot confine them fully",
    )
    max_data_mib: int = Field(
        32768,
        ge=256,
        description="a candidate's heap and other private writable memory (RLIMIT_DATA; CUDA's "
        "address-space reservations do not count), MiB",
    )
    max_open_files: int = Field(1024, ge=64, description="open file descriptors per process")
    max_file_mib: int = Field(
        4096, ge=1, description="largest file a candidate may write (RLIMIT_FSIZE), MiB"
    )
    max_processes: int = Field(
        512,
        ge=301,
        le=4194304,
        description="processes and threads a candidate may have at once (its PID namespace's "
        "pid_max; the kernel's minimum is 301)",
    )


class CpuLimits(_Model):
    max_case_numel: int = Field(
        1 << 18,
        ge=1,
        description="on the CPU (Triton interpreter) cases whose tensors hold more elements than this are skipped",
    )


class EvalConfig(_Model):
    kernel_file_glob: str = Field(
        "{folder}_implementation*.py",
        min_length=1,
        pattern=r"^[^/\\]+$",
        description="which file of an operator's folder is judged: the first, sorted, matching this glob ({folder} = the folder's name); the default is BackendBench's choice",
    )
    devices: str = Field(
        "1",
        pattern=r"^\s*(all|\d+|\d+\s*(,\s*\d+\s*)*,?)\s*$",
        description="judges: on a GPU 'all', N (the first N GPUs) or indices '0,1,3' (one: '3,'), "
        "one fork server pinned to each; on the CPU N interpreter judges",
    )
    executor: Literal["local", "ray"] = Field(
        "local", description="local: judges are processes of this host; ray: Ray actors"
    )
    ray_address: str | None = Field(
        None,
        description="executor ray: 'auto', 'ray://host:port' or None (start a local Ray)",
    )
    correctness: CorrectnessConfig = Field(default_factory=CorrectnessConfig)
    timing: TimingConfig = Field(default_factory=TimingConfig)
    sandbox: SandboxConfig = Field(default_factory=SandboxConfig)
    cpu: CpuLimits = Field(default_factory=CpuLimits)
    max_cases_per_op: int = Field(
        10,
        ge=1,
        le=10000,
        description="cap of test cases per operator (most frequent and largest first)",
    )
    hidden_cases_per_op: int = Field(
        2,
        ge=0,
        le=100,
        description="hidden cases per operator in each of two sets (one judges the agent's rounds, one the kept kernels; never in a prompt): further trace cases, odd sizes, one more row, non-contiguous layouts; 0 turns them off; the backendbench profile uses none",
    )
    hidden_salt: str | None = Field(
        None,
        description="secret that shuffles the hidden cases; None: a fresh random one per run (recorded in run.json)",
    )

    def hidden_per_set(self) -> int:
        """Hidden cases per set: none under BackendBench's semantics (trace cases only)."""
        if self.correctness.tolerance_profile == "backendbench":
            return 0
        return self.hidden_cases_per_op
