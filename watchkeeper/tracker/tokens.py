"""The tracker token, from an environment variable or a file, and the client built with it.

The token is never a config value or a command-line argument (both end up in process listings,
shell history and cron mail); it is read here and handed to the HTTP client's header only.
"""

from __future__ import annotations

import contextlib
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from watchkeeper.config.inputs import read_text
from watchkeeper.config.tracker import TrackerConfig, valid_repository
from watchkeeper.errors import ConfigError
from watchkeeper.redaction import remember
from watchkeeper.tracker import gitea, github
from watchkeeper.tracker.forge import Forge
from watchkeeper.tracker.http import ApiClient, RetryPolicy

_TOKEN = re.compile(r"[\x21-\x7e]{1,1024}")
"""One HTTP header value: printable ASCII without spaces (GitHub's and Gitea's tokens are)."""


def _one_token(value: str, where: str) -> str:
    """`value` remembered by the redactor, if it is exactly one token; else a refusal that
    never quotes it (a second line, or a space, would otherwise reach the HTTP client, whose
    "illegal header value" error echoes the whole value)."""
    remember(value)
    for line in value.splitlines():
        remember(line.strip())
    if "\n" in value or "\r" in value:
        raise ConfigError(
            f"{where}: holds more than one line",
            hint="the token file holds the token alone, on one line",
        )
    if not _TOKEN.fullmatch(value):
        raise ConfigError(
            f"{where}: not a token (printable ASCII without spaces, at most 1024 characters)",
            hint="the token file holds the token alone, on one line",
        )
    return value


def load_token(config: TrackerConfig, environ: dict[str, str] | None = None) -> str:
    """`$<token_env>`, else the file `$<token_env>_FILE`, else `token_file`."""
    env = os.environ if environ is None else environ
    value = env.get(config.token_env, "").strip()
    if value:
        return _one_token(value, f"${config.token_env}")
    file_name = env.get(f"{config.token_env}_FILE", "") or config.token_file
    if file_name:
        path = Path(file_name).expanduser()
        value = read_text(path, "tracker token file", ConfigError, limit=1 << 16).strip()
        if value:
            return _one_token(value, f"tracker token file {path}")
        raise ConfigError(f"tracker token file {path} is empty")
    raise ConfigError(
        f"no tracker token: ${config.token_env} is not set and no token file is configured",
        hint=f"export {config.token_env}=... or set tracker.token_file",
    )


def open_forge(
    config: TrackerConfig,
    *,
    repository: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Forge:
    """A client for `[tracker]` (or another repository on the same forge)."""
    if not config.kind:
        raise ConfigError(
            "no tracker configured", hint='set [tracker] kind = "github" or "gitea", api_url, ...'
        )
    repo = repository or config.repository
    if not repo:
        raise ConfigError("tracker.repository is not set", hint='e.g. repository = "ops/llm"')
    try:
        valid_repository(repo)  # the config checked its own; a caller's goes into the path too
    except ValueError as exc:
        raise ConfigError(f"tracker repository: {exc}", hint='e.g. repository = "ops/llm"') from exc
    api_url = config.resolved_api_url()
    if not api_url:
        raise ConfigError("tracker.api_url is not set", hint="e.g. https://git.example.com/api/v1")
    module = github if config.kind == "github" else gitea
    api = ApiClient(
        api_url,
        token=load_token(config),
        auth_scheme=module.AUTH_SCHEME,
        headers=module.HEADERS,
        timeout_s=config.request_timeout_s,
        policy=RetryPolicy(
            max_attempts=config.max_attempts,
            backoff_s=config.backoff_s,
            backoff_cap_s=config.backoff_cap_s,
            max_rate_limit_wait_s=config.max_rate_limit_wait_s,
        ),
        sleep=sleep,
    )
    cls = github.GitHub if config.kind == "github" else gitea.Gitea
    return cls(api, repo, page_size=config.page_size, max_pages=config.max_pages)


@contextlib.contextmanager
def forge_for(
    config: TrackerConfig,
    *,
    client: Forge | None = None,
    repository: str | None = None,
    sleep: Callable[[float], None] = time.sleep,
) -> Iterator[Forge]:
    """`client` when the caller passed one (a test's fake forge; its owner closes it), else a
    client opened for `[tracker]` and closed after the command, as `store.db.open_database`
    does for the database."""
    if client is not None:
        yield client
        return
    forge = open_forge(config, repository=repository, sleep=sleep)
    try:
        yield forge
    finally:
        forge.close_client()
