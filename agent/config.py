"""Run configuration: pydantic models loaded from TOML in `configs/`, overridden by a few flags.

API keys never live here: they come only from the environment. The resolved config is written to
every run folder (`run.json`) so a run can be reproduced from its folder alone.
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from agent.shipped import shipped_dir
from evaluator.config import EvalConfig
from evaluator.errors import UsageError

CONFIG_DIR = shipped_dir("configs")
PROMPTS_DIR = shipped_dir("prompts")

ProviderName = Literal["auto", "builtin", "openai", "anthropic", "replay"]


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", validate_assignment=True)


class Price(_Model):
    input_usd_per_mtok: float = Field(ge=0, description="USD per million input tokens")
    output_usd_per_mtok: float = Field(ge=0, description="USD per million output tokens")


class ProviderConfig(_Model):
    name: ProviderName = Field("auto", description="which provider writes kernels")
    model: str | None = Field(None, description="model name; None = the provider's default")
    temperature: float | None = Field(
        None, ge=0, le=2, description="sampling temperature; None = the API's default"
    )
    max_output_tokens: int = Field(
        8192, ge=256, le=200_000, description="cap on tokens per completion"
    )
    timeout_s: float = Field(300.0, gt=0, description="per-request timeout")
    num_retries: int = Field(
        4, ge=0, le=10, description="retries on rate limits, timeouts and 5xx (never on 4xx)"
    )
    retry_min_wait_s: float = Field(1.0, ge=0, description="first backoff wait")
    retry_max_wait_s: float = Field(30.0, ge=0, description="longest backoff wait")
    replay_dir: str | None = Field(
        None, description="replay provider: the recorded run folder to answer from"
    )
    prices: dict[str, Price] = Field(
        default_factory=dict, description="price table per model for cost estimates"
    )
    context_tokens: int | None = Field(
        None,
        ge=512,
        description="the model's context window in tokens (prompt + answer); None = the "
        "context_windows table, else asked of the server (vLLM, llama.cpp), else unknown; match "
        "llama-server -c",
    )
    context_windows: dict[str, int] = Field(
        default_factory=dict, description="context window in tokens per model name"
    )
    chars_per_token: float = Field(
        3.0,
        gt=0.5,
        le=10,
        description="conservative characters per token, for prompts the server has not counted",
    )
    max_consecutive_failures: int = Field(
        3,
        ge=1,
        le=100,
        description="provider calls in a row without an answer (across the run) before the run "
        "stops calling the provider (exit code 3; --resume continues later)",
    )
    outage_wait_s: float = Field(
        120.0,
        ge=0,
        description="at that limit, how long to wait for an unreachable or failing server to "
        "answer a probe before stopping",
    )
    probe_interval_s: float = Field(
        5.0, gt=0, description="how often the server is probed during that wait"
    )


class SpeedConfig(_Model):
    num_noise_repeats: int = Field(
        2, ge=2, le=10, description="timed judgings of the kept kernel that measure timing noise"
    )
    min_gain: float = Field(
        0.03,
        ge=0,
        le=1,
        description="a faster kernel must beat the kept one by at least this share, and by the "
        "measured noise when that is larger",
    )
    ceiling_fraction: float = Field(
        0.9, gt=0, le=1, description="stop once every case reaches this share of its ceiling"
    )
    num_idle_rounds: int = Field(
        2, ge=1, le=20, description="stop after this many speed rounds in a row kept nothing"
    )
    peak_tflops: dict[str, float] = Field(
        default_factory=lambda: {"f16": 989.0, "bf16": 989.0, "f32": 67.0, "f64": 34.0},
        description="dense compute peak per dtype for the compute ceiling (H200 SXM figures)",
    )


class AgentConfig(_Model):
    num_workers: int = Field(
        4, ge=1, le=64, description="workers per operator, each its own conversation"
    )
    max_rounds: int = Field(5, ge=1, le=100, description="generate/test rounds per worker")
    parallel_ops: Annotated[int, Field(ge=1, le=64)] | Literal["auto"] = Field(
        2,
        description="operators in flight at once; auto = enough to keep every judge busy",
    )
    max_cost_usd: float | None = Field(
        None, ge=0, description="stop new calls once the estimated cost reaches this"
    )
    max_tokens: int | None = Field(
        None, ge=0, description="stop new calls once input+output tokens reach this"
    )
    templates_dir: str | None = Field(
        None, description="your own prompt templates; None = the shipped prompts/"
    )
    feedback_max_chars: int = Field(
        4000, ge=200, description="budget for evaluator feedback in a refine prompt"
    )
    num_prompt_cases: int = Field(6, ge=1, le=50, description="test cases shown in a prompt")
    speed_rounds: Annotated[int, Field(ge=0, le=50)] | Literal["auto"] = Field(
        "auto",
        description="rounds that ask for a faster kernel once an operator passed; auto = 3 on a "
        "GPU, 0 on the CPU (nothing is timed there)",
    )
    speed: SpeedConfig = Field(default_factory=SpeedConfig)


class SuiteConfig(_Model):
    suite: str = Field("torchbench", description="smoke, torchbench or opinfo")
    ops: list[str] | None = Field(
        None, description="exact overloads (add.Tensor) or base names (add)"
    )
    num_operators: int | None = Field(None, ge=1, description="take the N most used operators")
    trace_file: str | None = Field(
        None, description="a BackendBench-format trace file instead of a suite"
    )


class RunConfig(_Model):
    provider: ProviderConfig = Field(default_factory=ProviderConfig)
    agent: AgentConfig = Field(default_factory=AgentConfig)
    suite: SuiteConfig = Field(default_factory=SuiteConfig)
    eval: EvalConfig = Field(default_factory=EvalConfig)
    kernels_dir: str = Field("generated_kernels", description="where kept kernels go")
    log_dir: str = Field("agent_logs", description="where run folders go")
    device: Literal["auto", "cuda", "cpu"] = Field(
        "auto", description="where candidates are tested"
    )
    seed: int = Field(0, description="seed for inputs and sampling where the API takes one")


def _deep_merge(base: dict[str, Any], override: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in override.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _deep_merge(out[key], value)
        else:
            out[key] = value
    return out


def _read_toml(path: Path) -> dict[str, Any]:
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh)
    except FileNotFoundError:
        raise UsageError(
            f"config file '{path}' does not exist: pass an existing TOML file to --config."
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file '{path}' is not valid TOML: {exc}.") from None


def default_config_path() -> Path:
    """`configs/default.toml`: every key with its default (written by `agent.config_doc`)."""
    return CONFIG_DIR / "default.toml"


def resolve_config_path(path: str | Path) -> Path:
    """A --config path as given; when it does not exist from here, a shipped config it names
    (`configs/builtin.toml`, `builtin.toml` or `builtin`), so the README's commands work from
    any directory with an installed package."""
    given = Path(path)
    if given.exists() or given.is_absolute() or len(given.parts) > 2:
        return given
    if len(given.parts) == 2 and given.parts[0] != "configs":
        return given
    shipped = CONFIG_DIR / (given.name if given.suffix == ".toml" else f"{given.name}.toml")
    return shipped if shipped.is_file() else given


def load_config(
    path: str | Path | None = None, overrides: dict[str, Any] | None = None
) -> RunConfig:
    """`configs/default.toml`, then the user's file, then flag overrides (nested dict)."""
    data: dict[str, Any] = {}
    default = default_config_path()
    if default.exists():
        data = _read_toml(default)
    if path is not None:
        data = _deep_merge(data, _read_toml(resolve_config_path(path)))
    if overrides:
        data = _deep_merge(data, overrides)
    try:
        return RunConfig.model_validate(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        raise UsageError(
            f"config key '{where}': {err['msg']} (fix it in the TOML file or the flag that sets it)."
        ) from None
