"""The README is the user's reference: its example config must load, and name every key."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from watchkeeper.config import Config, parse_config

README = Path(__file__).resolve().parents[1] / "README.md"


def config_block() -> dict[str, Any]:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("## Configuration") :]
    block = re.search(r"```toml\n(.*?)```", section, re.S)
    assert block, "the Configuration section has a ```toml block"
    return tomllib.loads(block.group(1))


def documented_config() -> dict[str, Any]:
    """The README's example merged with the ```toml blocks of docs/*.md: a feature's own page
    may show its keys (the README is kept short)."""
    data = config_block()
    for page in sorted((README.parent / "docs").glob("*.md")):
        for block in re.findall(r"```toml\n(.*?)```", page.read_text(encoding="utf-8"), re.S):
            for section, keys in tomllib.loads(block).items():
                if isinstance(keys, dict):
                    data.setdefault(section, {}).update(keys)
    return data


def documented_keys(model: type[BaseModel]) -> set[str]:
    return {name for name in model.model_fields if name != "source"}


def test_the_readme_example_config_loads_without_errors() -> None:
    config = parse_config(config_block(), source="README.md")
    assert config.database.url.startswith("postgresql://")


def test_every_config_section_and_key_is_in_the_readme_example() -> None:
    data = documented_config()
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
    assert not missing, f"keys the README's example does not show: {missing}"
