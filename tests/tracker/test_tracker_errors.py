"""Errors that say what to fix: which repository, which URL, which config line; one line each."""

from __future__ import annotations

import io
import socket
from pathlib import Path

import httpx
import pytest
from pydantic import ValidationError
from support.fakeforge import FakeForge
from support.fakeforge_api import SEARCH_UNSEARCHABLE
from support.trackerkit import TOKEN_ENV, Sleeps, tracker_config
from support.triagekit import add_finding, triage

from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.config.loader import load_config
from watchkeeper.config.tracker import TrackerConfig
from watchkeeper.errors import ConfigError, TrackerPermanentError, TrackerTransientError
from watchkeeper.store.db import Database
from watchkeeper.store.history import History
from watchkeeper.tracker.forge import Forge
from watchkeeper.tracker.tokens import open_forge


def test_a_422_or_404_from_a_missing_repository_names_it_and_hints_the_setting(
    forge: FakeForge, sleeps: Sleeps
) -> None:
    ghost = open_forge(tracker_config(forge, repository="ops/ghost"), sleep=sleeps)
    try:
        with pytest.raises(TrackerPermanentError) as info:
            ghost.create_issue("t", "b", [])
    finally:
        ghost.close_client()
    assert info.value.status in (404, 422) and "repository ops/ghost" in str(info.value)
    assert info.value.hint is not None and "check tracker.repository" in info.value.hint


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize("dialect", ["github", "gitea"])
def test_a_forge_that_is_down_is_named_with_its_url(
    dialect: str, sleeps: Sleeps, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(TOKEN_ENV, "fake-token-0123456789abcdef")
    url = f"http://127.0.0.1:{_free_port()}/api/{'v3' if dialect == 'github' else 'v1'}"
    config = TrackerConfig.model_validate(
        {
            "kind": dialect,
            "api_url": url,
            "allow_http": True,
            "repository": "ops/llm",
            "token_env": TOKEN_ENV,
        }
    )
    down = open_forge(config, sleep=sleeps)
    try:
        with pytest.raises(TrackerTransientError) as info:
            down.get_issue(1)
    finally:
        down.close_client()
    assert info.value.hint is not None and f"is the forge up at {url}?" in info.value.hint


@pytest.mark.parametrize("url", ["api.github.com", "localhost:3000/api/v1", "https://", "ftp://x"])
def test_an_api_url_without_scheme_or_host_fails_at_config_load(url: str) -> None:
    with pytest.raises(ValidationError, match="http\\(s\\) URL with a host"):
        TrackerConfig.model_validate({"kind": "gitea", "api_url": url, "repository": "o/n"})
    assert TrackerConfig.model_validate({"kind": "gitea", "api_url": "https://h:3000/api/v1"})


@pytest.mark.parametrize(
    ("values", "match"),
    [
        ({"api_url": "http://git.example.com/api/v1"}, "in clear"),
        ({"api_url": "http://git.example.com/api/v1", "allow_http": True}, "on this host"),
        ({"api_url": "https://h/api/v1", "repository": "../evil"}, "owner/name"),
        ({"api_url": "https://h/api/v1", "repository": "a/b/c"}, "owner/name"),
        ({"api_url": "https://h/api/v1", "repository": "%2e%2e/x"}, "owner/name"),
        ({"api_url": "https://h/api/v1", "repository": "ops/.."}, "owner/name"),
        ({"api_url": "https://h/api/v1", "repository": "ops/ll m"}, "owner/name"),
    ],
)
def test_the_token_goes_only_over_https_and_only_to_a_repository_path(
    values: dict[str, object], match: str
) -> None:
    with pytest.raises(ValidationError, match=match):
        TrackerConfig.model_validate({"kind": "gitea", **values})


def test_a_local_http_forge_needs_the_opt_in() -> None:
    local = {"kind": "gitea", "api_url": "http://127.0.0.1:3000/api/v1", "repository": "o/n"}
    with pytest.raises(ValidationError, match="allow_http"):
        TrackerConfig.model_validate(local)
    assert TrackerConfig.model_validate({**local, "allow_http": True}).allow_http
    assert (
        TrackerConfig.model_validate(
            {"kind": "github", "repository": "my-org/repo_name.v2"}
        ).repository
        == "my-org/repo_name.v2"
    )


def test_a_toml_syntax_error_carries_a_hint(tmp_path: Path) -> None:
    path = tmp_path / "wk.toml"
    path.write_text('[tracker]\nrepository = ops/llm"\n', encoding="utf-8")
    with pytest.raises(ConfigError, match="invalid TOML") as info:
        load_config(path)
    assert info.value.hint is not None and "line" in info.value.hint


def test_cli_errors_are_one_line_on_a_non_tty_even_when_long(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from rich.console import Console

    from watchkeeper.cli import app

    stream = io.StringIO()
    monkeypatch.setattr(app, "console", Console(file=stream, width=80, highlight=False))
    path = tmp_path / ("a-rather-long-directory-name-" * 4)
    path.mkdir()
    config = path / "wk.toml"
    config.write_text("[tracker\n", encoding="utf-8")
    assert app.main(["triage", "--config", str(config)]) == 2
    lines = stream.getvalue().splitlines()
    assert len(lines) == 2, lines
    assert lines[0].startswith("error:") and str(config) in lines[0]
    assert lines[1].startswith("hint:")


def test_permanent_errors_from_a_known_repository_keep_the_api_message(
    forge: FakeForge, client: Forge
) -> None:
    with pytest.raises(TrackerPermanentError) as info:
        client.get_issue(999)
    assert info.value.status == 404 and f"repository {forge.repository}" in str(info.value)


def test_the_fake_answers_a_search_in_a_missing_repository_as_github_does(
    forge: FakeForge,
) -> None:
    """GitHub: 422 with the Search/q validation body. Gitea searches through the repository's
    own issues path, so a missing repository is its 404."""
    path = "/search/issues" if forge.github else "/repos/ops/ghost/issues"
    answer = httpx.get(
        forge.api_url + path,
        params={"q": '"x" repo:ops/ghost is:issue in:body'},
        headers={"Authorization": f"token {forge.token}"},
    )
    if forge.github:
        assert answer.status_code == 422 and answer.json() == SEARCH_UNSEARCHABLE
        (error,) = answer.json()["errors"]
        assert error["resource"] == "Search" and error["field"] == "q"
        assert error["code"] == "invalid" and "cannot be searched" in error["message"]
    else:
        assert answer.status_code == 404


def test_triage_in_a_missing_repository_names_it_with_the_hint(
    forge: FakeForge, sqlite_url: str, sleeps: Sleeps
) -> None:
    """The first call that touches the repository in a triage run is the marker search."""
    config = Config(
        database=DatabaseConfig(url=sqlite_url),
        tracker=tracker_config(forge, repository="ops/ghost"),
    )
    db = Database(sqlite_url)
    try:
        add_finding(History(db))
        with pytest.raises(TrackerPermanentError) as info:
            triage(config, sleeps)
    finally:
        db.close()
    assert info.value.status == (422 if forge.github else 404)
    assert "repository ops/ghost" in str(info.value)
    assert info.value.hint is not None and "check tracker.repository" in info.value.hint
    assert "ops/ghost" in info.value.hint and "token" in info.value.hint
    assert forge.requests("POST", "/issues") == 0  # nothing was filed blind
    if forge.github:
        assert ("GET", "/api/v3/search/issues", 422) in forge.log
