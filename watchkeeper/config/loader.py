"""Loading the configuration: find the file, parse TOML, validate, and say exactly what is wrong.

Every error names the file, the dotted key and what was expected, because the person reading
it is usually looking at a cron mail at 3 a.m. and should not have to guess which line is wrong.
"""

from __future__ import annotations

import os
import tomllib
from pathlib import Path
from typing import Any

from pydantic import ValidationError
from pydantic_core import ErrorDetails

from watchkeeper.config.inputs import parse_toml_text
from watchkeeper.config.model import Config
from watchkeeper.errors import ConfigError
from watchkeeper.redaction import remember_url, remember_urls_in

CONFIG_ENV = "WATCHKEEPER_CONFIG"


def _describe(error: ErrorDetails) -> str:
    loc = ".".join(str(part) for part in error["loc"])
    kind = error["type"]
    if kind == "extra_forbidden":
        return f"{loc}: unknown key"
    if kind == "missing":
        return f"{loc}: required key is missing"
    got = error.get("input")
    got_text = f" (got {got!r})" if not isinstance(got, dict | list) else ""
    return f"{loc}: {error['msg']}{got_text}"


def parse_config(data: dict[str, Any], *, source: str) -> Config:
    # Every URL's password is remembered before anything can echo it (a validation error
    # quotes its input), so the redactor masks it however it is spelled.
    remember_urls_in(data)
    try:
        return Config.model_validate({**data, "source": source})
    except ValidationError as exc:
        problems = "; ".join(_describe(e) for e in exc.errors())
        raise ConfigError(
            f"{source}: {problems}",
            hint="see docs/configuration.md for every key",
        ) from exc


def find_config_file(explicit: str | Path | None) -> Path | None:
    if explicit:
        return Path(explicit)
    env = os.environ.get(CONFIG_ENV)
    if env:
        return Path(env)
    local = Path.cwd() / "watchkeeper.toml"
    return local if local.is_file() else None


def load_config(explicit: str | Path | None = None) -> Config:
    """Load `--config`, `$WATCHKEEPER_CONFIG`, `./watchkeeper.toml`, or the built-in defaults."""
    remember_url(os.environ.get("WATCHKEEPER_DATABASE_URL"))
    path = find_config_file(explicit)
    if path is None:
        return Config()
    if path.exists() and not path.is_file() and not path.is_dir():
        # A FIFO or a device (`--config /dev/stdin` by mistake) would block the read forever.
        raise ConfigError(f"{path}: not a regular file", hint="--config names a TOML file")
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigError(f"{path}: config file not found") from exc
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read config file: {exc.strerror}") from exc
    except UnicodeDecodeError as exc:
        raise ConfigError(
            f"{path}: not UTF-8 text (byte {exc.start}: {exc.reason})",
            hint="TOML files are UTF-8; is this the config file, or a binary?",
        ) from None
    return parse_config(parse_toml(text, source=str(path)), source=str(path))


def parse_toml(text: str, *, source: str) -> dict[str, Any]:
    """`text` as TOML, every failure a `ConfigError` naming `source` (the config, a job file)."""
    try:
        return parse_toml_text(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(
            f"{source}: invalid TOML: {exc}",
            hint="fix the line and column named above: strings need quotes, each [table] "
            "header appears once, and a key is set only once per table",
        ) from None
    except RecursionError:
        raise ConfigError(
            f"{source}: invalid TOML: arrays or tables nested too deeply to read",
            hint="a configuration nests a few levels; this file is not one",
        ) from None
