"""Provider selection (registry), the replay provider, and cost estimates from the price table."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from agent.config import CONFIG_DIR, Price, ProviderConfig, load_config
from agent.providers import registry
from agent.providers.base import Completion, Message, OperatorContext, ProviderError
from agent.providers.pricing import estimate_cost_usd
from agent.providers.registry import PROVIDERS, make_provider
from agent.providers.replay import ReplayProvider
from evaluator.errors import UsageError


class FakeBuiltin:
    name = "builtin"
    model = "builtin"

    def complete(self, messages: list[Message], context: OperatorContext) -> Completion:
        return Completion(text="", model=self.model)


@pytest.fixture(autouse=True)
def _fake_builtin(monkeypatch: pytest.MonkeyPatch) -> None:
    # The real builtin writer is another part's; selection is what is tested here.
    monkeypatch.setitem(PROVIDERS, "builtin", lambda cfg, env: (FakeBuiltin(), "builtin, fake"))


def test_registry_is_a_plain_dict_of_every_provider() -> None:
    assert set(PROVIDERS) == {"auto", "builtin", "openai", "anthropic", "replay"}


def test_auto_picks_anthropic_when_its_key_is_set_and_says_why() -> None:
    env = {"ANTHROPIC_API_KEY": "sk-ant-x", "OPENAI_API_KEY": "sk-x"}
    provider, why = make_provider(ProviderConfig(), env)
    assert provider.name == "anthropic"
    assert provider.model == "claude-sonnet-4-5"  # configs/anthropic.toml
    assert "anthropic" in why and "ANTHROPIC_API_KEY is set" in why


def test_auto_picks_openai_when_only_its_key_is_set() -> None:
    provider, why = make_provider(ProviderConfig(), {"OPENAI_API_KEY": "sk-x"})
    assert provider.name == "openai"
    assert provider.model == "gpt-4.1"  # configs/openai.toml
    assert "OPENAI_API_KEY is set" in why


def test_auto_falls_back_to_builtin_without_keys_and_says_so() -> None:
    provider, why = make_provider(ProviderConfig(), {"ANTHROPIC_API_KEY": "  "})
    assert provider.name == "builtin"
    assert "neither ANTHROPIC_API_KEY nor OPENAI_API_KEY is set" in why


def test_auto_without_key_mentions_a_set_openai_base_url() -> None:
    _, why = make_provider(ProviderConfig(), {"OPENAI_BASE_URL": "http://localhost:8000/v1"})
    assert "set OPENAI_API_KEY too" in why


def test_model_from_config_wins_over_the_default() -> None:
    provider, _ = make_provider(
        ProviderConfig(name="openai", model="llama3"), {"OPENAI_API_KEY": "k"}
    )
    assert provider.model == "llama3"


def test_explicit_anthropic_without_key_is_a_usage_error() -> None:
    with pytest.raises(UsageError) as info:
        make_provider(ProviderConfig(name="anthropic"), {"OPENAI_API_KEY": "sk-x"})
    assert str(info.value) == (
        "No API key for anthropic: set ANTHROPIC_API_KEY, or use --provider builtin."
    )


def test_explicit_openai_without_key_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="^No API key for openai: set OPENAI_API_KEY"):
        make_provider(ProviderConfig(name="openai"), {})


def test_replay_without_a_folder_is_a_usage_error() -> None:
    with pytest.raises(UsageError, match="provider.replay_dir"):
        make_provider(ProviderConfig(name="replay"), {})


def test_replay_with_a_missing_folder_is_a_usage_error(tmp_path: Path) -> None:
    cfg = ProviderConfig(name="replay", replay_dir=str(tmp_path / "absent"))
    with pytest.raises(UsageError, match="does not exist"):
        make_provider(cfg, {})


def test_unknown_provider_name_is_a_usage_error() -> None:
    cfg = ProviderConfig.model_construct(name="gemini")
    with pytest.raises(UsageError, match="unknown provider 'gemini'"):
        make_provider(cfg, {})


def test_missing_default_model_is_a_usage_error(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(registry, "provider_defaults", lambda name: {})
    with pytest.raises(UsageError, match="No model for openai"):
        make_provider(ProviderConfig(name="openai"), {"OPENAI_API_KEY": "k"})


def test_prices_come_from_the_provider_file_and_config_overrides_them() -> None:
    cfg = ProviderConfig(
        name="openai",
        prices={"gpt-4.1": Price(input_usd_per_mtok=1.0, output_usd_per_mtok=1.0)},
    )
    provider, _ = make_provider(cfg, {"OPENAI_API_KEY": "k"})
    assert provider.prices["gpt-4.1"].input_usd_per_mtok == 1.0
    assert provider.prices["gpt-4.1-mini"].input_usd_per_mtok == 0.4


@pytest.mark.parametrize("name", ["openai", "anthropic", "builtin", "replay"])
def test_shipped_provider_configs_load(name: str) -> None:
    assert load_config(CONFIG_DIR / f"{name}.toml").provider.name == name


def test_the_real_builtin_is_built_when_it_exists(monkeypatch: pytest.MonkeyPatch) -> None:
    builtin = pytest.importorskip("agent.providers.builtin")
    if not hasattr(builtin, "BuiltinProvider"):
        pytest.skip("agent.providers.builtin has no BuiltinProvider yet")
    monkeypatch.setitem(PROVIDERS, "builtin", registry._make_builtin)
    provider, _ = make_provider(ProviderConfig(name="builtin"), {})
    assert isinstance(provider, builtin.BuiltinProvider)
    assert provider.can_write("relu.default")  # its own writer table, not a config in its place


# ---------------------------------------------------------------- replay


def _record(run_dir: Path, folder: str, worker: int, round_: int, **files: Any) -> Path:
    where = run_dir / "ops" / folder / f"worker_{worker}" / f"round_{round_}"
    where.mkdir(parents=True)
    for name, content in files.items():
        text = content if isinstance(content, str) else json.dumps(content)
        (where / name.replace("_", ".")).write_text(text)
    return where


def test_replay_answers_the_recorded_round_with_its_tokens(tmp_path: Path) -> None:
    meta = {"model": "claude-sonnet-4-5", "input_tokens": 900, "output_tokens": 450}
    _record(tmp_path, "add__Tensor", 2, 3, response_md="answer 2/3", meta_json=meta)
    provider, why = make_provider(ProviderConfig(name="replay", replay_dir=str(tmp_path)), {})
    ctx = OperatorContext(op="aten.add.Tensor", schema="", cases=[], worker=2, round=3)
    completion = provider.complete([Message("user", "x")], ctx)
    assert completion.text == "answer 2/3"
    assert (completion.input_tokens, completion.output_tokens) == (900, 450)
    assert completion.model == "claude-sonnet-4-5"
    assert str(tmp_path) in why


def test_replay_without_a_recorded_round_raises_with_where(tmp_path: Path) -> None:
    _record(tmp_path, "add__Tensor", 1, 1, response_md="round 1")
    ctx = OperatorContext(op="add.Tensor", schema="", cases=[], worker=1, round=2)
    with pytest.raises(ProviderError) as info:
        ReplayProvider(tmp_path).complete([], ctx)
    assert info.value.reason == (
        f"replay has no recorded response for add.Tensor worker 1 round 2 in {tmp_path}"
    )


def test_replay_of_a_recorded_failed_call_fails_again(tmp_path: Path) -> None:
    meta = {"error": "openai HTTP 503: down", "outcome": "provider_error"}
    _record(tmp_path, "add__Tensor", 1, 1, meta_json=meta)
    ctx = OperatorContext(op="add.Tensor", schema="", cases=[], worker=1, round=1)
    with pytest.raises(ProviderError, match="openai HTTP 503: down"):
        ReplayProvider(tmp_path).complete([], ctx)


def test_replay_of_a_cancelled_round_has_no_recorded_response(tmp_path: Path) -> None:
    meta = {"error": "cancelled while waiting for the provider", "outcome": "cancelled"}
    _record(tmp_path, "add__Tensor", 1, 1, meta_json=meta)
    ctx = OperatorContext(op="add.Tensor", schema="", cases=[], worker=1, round=1)
    with pytest.raises(ProviderError, match="replay has no recorded response"):
        ReplayProvider(tmp_path).complete([], ctx)


def test_replay_without_meta_counts_zero_tokens(tmp_path: Path) -> None:
    _record(tmp_path, "relu__default", 1, 1, response_md="r")
    ctx = OperatorContext(op="relu", schema="", cases=[], worker=1, round=1)
    completion = ReplayProvider(tmp_path).complete([], ctx)
    assert (completion.input_tokens, completion.output_tokens) == (0, 0)


# ---------------------------------------------------------------- pricing

PRICES = {
    "gpt-4.1": Price(input_usd_per_mtok=2.0, output_usd_per_mtok=8.0),
    "claude-sonnet-4-5": Price(input_usd_per_mtok=3.0, output_usd_per_mtok=15.0),
}


def test_cost_is_tokens_times_price_per_million() -> None:
    assert estimate_cost_usd("gpt-4.1", 1_000_000, 500_000, PRICES) == pytest.approx(6.0)


def test_dated_snapshot_uses_the_undated_price() -> None:
    cost = estimate_cost_usd("claude-sonnet-4-5-20250929", 1000, 1000, PRICES)
    assert cost == pytest.approx(0.018)
    assert estimate_cost_usd("gpt-4.1-2025-04-14", 1000, 0, PRICES) == pytest.approx(0.002)


def test_unknown_model_has_unknown_cost_not_zero() -> None:
    assert estimate_cost_usd("gpt-4.1-mini", 1000, 1000, PRICES) is None
    assert estimate_cost_usd("llama3.1:8b", 1000, 1000, {}) is None
