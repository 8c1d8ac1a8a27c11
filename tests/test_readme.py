"""The README starts with the two commands a newcomer runs, and the configuration page is the
user's reference: its example config must load, and name every key of the config model."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from watchkeeper.config import Config, parse_config
from watchkeeper.config.model import URL_PROFILE_KEYS, ModelConfig, ProfileConfig

ROOT = Path(__file__).resolve().parents[1]
README = ROOT / "README.md"
CONFIGURATION = ROOT / "docs" / "configuration.md"


def config_block() -> dict[str, Any]:
    text = CONFIGURATION.read_text(encoding="utf-8")
    section = text[text.index("## Every key") :]
    block = re.search(r"```toml\n(.*?)```", section, re.S)
    assert block, "the 'Every key' section of docs/configuration.md has a ```toml block"
    return tomllib.loads(block.group(1))


def documented_keys(model: type[BaseModel]) -> set[str]:
    return {name for name in model.model_fields if name != "source"}


def test_the_readme_starts_with_make_quickstart_and_make_test() -> None:
    text = README.read_text(encoding="utf-8")
    first = re.search(r"```sh\n(.*?)```", text, re.S)
    assert first, "the README has a ```sh block"
    assert text.index("```sh") < text.index("\n## "), "the commands come before any section"
    commands = [line.split("#")[0].strip() for line in first.group(1).splitlines()]
    assert commands == ["make quickstart", "make test"]
    # CI runs exactly the README's test command.
    assert "exec make test" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


def test_the_documented_example_config_loads_without_errors() -> None:
    config = parse_config(config_block(), source="docs/configuration.md")
    assert config.database.url.startswith("postgresql://")
    assert config.models and config.profiles


def test_every_config_section_and_key_is_in_the_documented_example() -> None:
    data = config_block()
    missing = []
    for section, field in Config.model_fields.items():
        if section in {"source", "models", "profiles"}:
            continue
        model = field.annotation
        assert isinstance(model, type) and issubclass(model, BaseModel)
        shown = data.get(section)
        if shown is None:
            missing.append(f"[{section}]")
            continue
        missing += [f"{section}.{k}" for k in sorted(documented_keys(model) - set(shown))]
    for name, shown in data.get("models", {}).items():
        missing += [f"models.{name}.{k}" for k in sorted(documented_keys(ModelConfig) - set(shown))]
    # A profile has either `model` (a server watchkeeper starts: every other key) or `url` (a
    # running server: only the keys a request carries); the example shows one of each, whole.
    profiles = data.get("profiles", {})
    kinds = {"url" in shown for shown in profiles.values()}
    assert kinds == {True, False}, "the example shows a model profile and a url profile"
    for name, shown in profiles.items():
        keys = URL_PROFILE_KEYS if "url" in shown else documented_keys(ProfileConfig) - {"url"}
        missing += [f"profiles.{name}.{k}" for k in sorted(keys - set(shown))]
    assert not missing, f"keys the documented example does not show: {missing}"
