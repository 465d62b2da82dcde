"""Which provider writes kernels: a plain registry of factories.

Contract: `PROVIDERS[name](cfg, env) -> (provider, why)` for auto, builtin, openai, anthropic and
replay; `make_provider(cfg, env=None)` looks `cfg.name` up (an unknown name is a UsageError, never
a silent fallback) and returns the provider with one line saying which was chosen and why.
`auto` picks anthropic when ANTHROPIC_API_KEY is set, else openai when OPENAI_API_KEY is set, else
the offline builtin writer. An explicit openai/anthropic without its key, or replay without a
recorded folder, is a UsageError that says how to fix it.

API keys and base URLs come only from `env` (the process environment by default). A provider's
default model, price table and context-window table live in `configs/<name>.toml` (section
[provider]); the run's own config wins over them.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from agent.config import CONFIG_DIR, Price, ProviderConfig
from agent.providers.base import Provider
from agent.providers.pricing import undated_model
from evaluator.errors import UsageError

Env = Mapping[str, str]
Factory = Callable[[ProviderConfig, Env], tuple[Provider, str]]

KEY_VARS = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
BASE_URL_VARS = {"openai": "OPENAI_BASE_URL", "anthropic": "ANTHROPIC_BASE_URL"}


def provider_defaults(name: str, config_dir: Path = CONFIG_DIR) -> dict[str, Any]:
    """The [provider] table of `configs/<name>.toml`, or {} when there is none."""
    path = config_dir / f"{name}.toml"
    if not path.is_file():
        return {}
    try:
        with path.open("rb") as fh:
            section = tomllib.load(fh).get("provider", {})
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"config file '{path}' is not valid TOML: {exc}.") from None
    return section if isinstance(section, dict) else {}


def resolve_model_and_prices(name: str, cfg: ProviderConfig) -> tuple[str, dict[str, Price]]:
    """The model to ask (config, else the provider's default) and the merged price table."""
    defaults = provider_defaults(name)
    model = cfg.model or defaults.get("model")
    if not model:
        raise UsageError(f"No model for {name}: set provider.model in your config or pass --model.")
    prices = {k: Price.model_validate(v) for k, v in defaults.get("prices", {}).items()}
    prices.update(cfg.prices)
    return str(model), prices


def resolve_context_tokens(name: str, cfg: ProviderConfig, model: str) -> int | None:
    """The model's context window: `context_tokens`, else the merged `context_windows` table
    (a dated snapshot name uses its undated entry), else None (the provider may ask the server)."""
    if cfg.context_tokens is not None:
        return cfg.context_tokens
    table = {str(k): int(v) for k, v in provider_defaults(name).get("context_windows", {}).items()}
    table.update(cfg.context_windows)
    return table.get(model) or table.get(undated_model(model))


def _env_value(env: Env, var: str) -> str | None:
    value = env.get(var, "").strip()
    return value or None


def _require_key(name: str, env: Env) -> str:
    key = _env_value(env, KEY_VARS[name])
    if key is None:
        # A local server (vLLM, Ollama) ignores the key but the SDK still wants one.
        hint = " (any value for a local server)" if _env_value(env, BASE_URL_VARS[name]) else ""
        raise UsageError(
            f"No API key for {name}: set {KEY_VARS[name]}{hint}, or use --provider builtin."
        )
    return key


def _make_sdk(name: str, cfg: ProviderConfig, env: Env) -> tuple[Provider, str]:
    """An SDK-backed provider (`openai` or `anthropic`) from its key, base URL and the config."""
    if name == "openai":
        from agent.providers.openai_provider import OpenAIProvider as provider_class
    else:
        from agent.providers.anthropic_provider import AnthropicProvider as provider_class

    key = _require_key(name, env)
    base_url = _env_value(env, BASE_URL_VARS[name])
    model, prices = resolve_model_and_prices(name, cfg)
    window = resolve_context_tokens(name, cfg, model)
    provider = provider_class(
        cfg, api_key=key, base_url=base_url, model=model, prices=prices, context_tokens=window
    )
    where = f" at {base_url} ({BASE_URL_VARS[name]})" if base_url else ""
    return provider, f"{name}, model {model}{where}"


def _make_openai(cfg: ProviderConfig, env: Env) -> tuple[Provider, str]:
    return _make_sdk("openai", cfg, env)


def _make_anthropic(cfg: ProviderConfig, env: Env) -> tuple[Provider, str]:
    return _make_sdk("anthropic", cfg, env)


def _make_builtin(cfg: ProviderConfig, env: Env) -> tuple[Provider, str]:
    # Imported here: the builtin writer is large and only needed when chosen.
    from agent.providers.builtin import BuiltinProvider

    # The builtin writer is deterministic and offline: nothing in ProviderConfig applies to it.
    provider = BuiltinProvider()
    return provider, "builtin, the offline kernel writer (no API calls, no cost)"


def _make_replay(cfg: ProviderConfig, env: Env) -> tuple[Provider, str]:
    from agent.providers.replay import ReplayProvider

    if not cfg.replay_dir:
        raise UsageError(
            "The replay provider needs a recorded run folder: set provider.replay_dir "
            "(e.g. agent_logs/run_20260101_120000) in your config."
        )
    run_dir = Path(cfg.replay_dir).expanduser()
    if not run_dir.is_dir():
        raise UsageError(
            f"replay folder '{cfg.replay_dir}' does not exist: set provider.replay_dir "
            "to a recorded run folder."
        )
    return ReplayProvider(run_dir, model=cfg.model), f"replay, answers recorded in {run_dir}"


def _make_auto(cfg: ProviderConfig, env: Env) -> tuple[Provider, str]:
    # Looked up in PROVIDERS at call time so a test (or a plugin) can swap an entry.
    if _env_value(env, KEY_VARS["anthropic"]):
        provider, what = PROVIDERS["anthropic"](cfg, env)
        return provider, f"auto chose {what}: ANTHROPIC_API_KEY is set"
    if _env_value(env, KEY_VARS["openai"]):
        provider, what = PROVIDERS["openai"](cfg, env)
        return provider, f"auto chose {what}: OPENAI_API_KEY is set (ANTHROPIC_API_KEY is not)"
    provider, what = PROVIDERS["builtin"](cfg, env)
    why = f"auto chose {what}: neither ANTHROPIC_API_KEY nor OPENAI_API_KEY is set"
    if _env_value(env, BASE_URL_VARS["openai"]):
        why += " (OPENAI_BASE_URL is set: set OPENAI_API_KEY too, any value for a local server)"
    return provider, why


PROVIDERS: dict[str, Factory] = {
    "auto": _make_auto,
    "builtin": _make_builtin,
    "openai": _make_openai,
    "anthropic": _make_anthropic,
    "replay": _make_replay,
}


def make_provider(cfg: ProviderConfig, env: Env | None = None) -> tuple[Provider, str]:
    """The provider `cfg.name` asks for, and one line saying which it is and why."""
    factory = PROVIDERS.get(cfg.name)
    if factory is None:
        known = ", ".join(PROVIDERS)
        raise UsageError(f"unknown provider '{cfg.name}': choose one of {known}.")
    return factory(cfg, os.environ if env is None else env)
