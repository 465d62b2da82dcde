"""configs/default.toml is the config models' rendering: every key, its default, its meaning."""

from __future__ import annotations

import tomllib
from pathlib import Path

from pydantic import BaseModel

from agent.config import RunConfig, default_config_path, load_config, resolve_config_path
from agent.config_doc import main, render_default_toml

FIX = "configs/default.toml is out of date: run `python -m agent.config_doc --write`."


def _keys(model: type[BaseModel], prefix: str = "") -> set[str]:
    out = set()
    for name, field in model.model_fields.items():
        ann = field.annotation
        if isinstance(ann, type) and issubclass(ann, BaseModel):
            out |= _keys(ann, f"{prefix}{name}.")
        else:
            out.add(f"{prefix}{name}")
    return out


def test_checked_in_default_toml_equals_the_rendering_of_the_models() -> None:
    assert default_config_path().read_text(encoding="utf-8") == render_default_toml(), FIX


def test_default_toml_loads_to_exactly_the_models_defaults() -> None:
    with default_config_path().open("rb") as fh:
        data = tomllib.load(fh)
    assert RunConfig.model_validate(data) == RunConfig()
    assert load_config() == RunConfig()


def test_default_toml_names_every_key_with_a_meaning() -> None:
    text = default_config_path().read_text(encoding="utf-8")
    lines = text.splitlines()
    for key in sorted(_keys(RunConfig)):
        leaf = key.rsplit(".", 1)[-1]
        hits = [
            i
            for i, line in enumerate(lines)
            if line.startswith((f"{leaf} = ", f"# {leaf} = ", f"[{key}]"))
        ]
        assert hits, f"{key} is not in configs/default.toml"
        assert any(lines[i - 1].startswith("# ") for i in hits), f"{key} has no comment"


def test_unset_defaults_are_commented_lines() -> None:
    text = render_default_toml()
    assert "# context_tokens = ...  (unset)" in text
    assert "\ncontext_tokens =" not in text


def test_check_flag_says_how_to_fix_a_stale_file(tmp_path, monkeypatch, capsys) -> None:
    stale = tmp_path / "default.toml"
    stale.write_text("seed = 1\n", encoding="utf-8")
    monkeypatch.setattr("agent.config_doc.default_config_path", lambda: stale)
    assert main(["--check"]) == 1
    assert "python -m agent.config_doc --write" in capsys.readouterr().err
    assert main(["--write"]) == 0
    assert main(["--check"]) == 0


def test_config_flag_names_a_shipped_config_from_any_directory(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    for given in ("configs/builtin.toml", "builtin.toml", "builtin"):
        assert resolve_config_path(given) == default_config_path().parent / "builtin.toml"
        assert load_config(given).provider.name == "builtin"
    (tmp_path / "configs").mkdir()
    own = tmp_path / "configs" / "builtin.toml"
    own.write_text('[provider]\nname = "openai"\n', encoding="utf-8")
    assert load_config("configs/builtin.toml").provider.name == "openai"
    assert resolve_config_path("other/builtin.toml") == Path("other/builtin.toml")
