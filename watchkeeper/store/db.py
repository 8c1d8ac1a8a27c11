"""Database engine, sessions and migrations (SQLite embedded, Postgres in production).

This is the only module that builds engines. Connection failures become `StoreError` with the
URL's password masked, so a cron mail never leaks credentials and never shows a traceback.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config as AlembicConfig
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Engine, create_engine, event, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError, DatabaseError, OperationalError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from watchkeeper.config.paths import project_root
from watchkeeper.errors import ConfigError, StoreError, WatchkeeperError
from watchkeeper.host.private import private_file
from watchkeeper.redaction import redact_url, remember_url


def masked(url: str) -> str:
    """The URL as it may be printed: through the one redactor, which also masks a URL too
    mistyped to parse (`postgresql:/u:secret@host`) and libpq's `password=` parameter."""
    return redact_url(url)


def _normalise(url: str) -> str:
    """`postgresql://` means psycopg 3 here (SQLAlchemy's default driver is psycopg2)."""
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        return "postgresql+psycopg://" + url.split("://", 1)[1]
    return url


BACKENDS = ("sqlite", "postgresql")
"""The databases watchkeeper speaks (its migrations and locks are written for these two)."""


def _supported(url: str, backend: str) -> str:
    """`backend` when watchkeeper speaks it; else a one-line refusal, not SQLAlchemy's plugin
    traceback (`mysql://` needs a driver that is not installed, `foo://` no dialect at all)."""
    if backend not in BACKENDS:
        raise ConfigError(
            f"database URL {masked(url)}: unsupported database {backend!r}",
            hint="use sqlite:///PATH (embedded) or postgresql://USER@HOST/DB (production); "
            "set database.url or WATCHKEEPER_DATABASE_URL",
        )
    return backend


def backend_name(url: str) -> str:
    """'sqlite' or 'postgresql': for callers that choose a mechanism by database (fleet locks)."""
    try:
        return _supported(url, make_url(_normalise(url)).get_backend_name())
    except (ArgumentError, ValueError) as exc:
        raise StoreError(f"invalid database URL {masked(url)}: {exc}") from exc


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL (None for Postgres and for an in-memory database)."""
    try:
        parsed = make_url(_normalise(url))
    except (ArgumentError, ValueError):  # not a SQLite file; make_engine says what is wrong
        return None
    if parsed.get_backend_name() != "sqlite" or not parsed.database:
        return None
    return None if parsed.database == ":memory:" else Path(parsed.database)


def make_engine(url: str) -> Engine:
    remember_url(url)  # the database edge: its password is masked wherever it turns up
    url = _normalise(url)
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError) as exc:  # ValueError: a port that is not a number
        detail = exc if isinstance(exc, ArgumentError) else "its port is not a number"
        raise StoreError(
            f"invalid database URL {masked(url)}: {detail}",
            hint="e.g. postgresql://USER@HOST:5432/DB (the port a number)",
        ) from exc
    _supported(url, parsed.get_backend_name())
    kwargs: dict[str, Any] = {"future": True}
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            # Prompts and outputs live in it: 0600 in a 0700 folder when we create them
            # (SQLite gives its -wal and -shm files the database file's mode).
            private_file(Path(parsed.database).expanduser())
        kwargs["connect_args"] = {"timeout": 30}
    else:
        kwargs["pool_pre_ping"] = True
        kwargs["connect_args"] = {"connect_timeout": 10}
    engine = create_engine(url, **kwargs)
    if parsed.get_backend_name() == "sqlite":

        @event.listens_for(engine, "connect")
        def _sqlite_pragmas(dbapi_conn: Any, _: Any) -> None:
            cursor = dbapi_conn.cursor()
            try:
                cursor.execute("PRAGMA foreign_keys=ON")
                _enable_wal(cursor)
            finally:
                cursor.close()

    return engine


SHARED_ENGINES = 8
"""Database URLs whose engine a process keeps for the next `Database` (the most recent)."""
_engines: OrderedDict[str, Engine] = OrderedDict()
_engines_lock = threading.Lock()


def shared_engine(url: str) -> Engine:
    """The process's one engine for `url`, made on first use.

    SQLAlchemy means an engine to live as long as the process, and the ORM relies on it: each
    mapper caches the INSERT and UPDATE statements it compiles, keyed by the engine's dialect
    (100 per mapper, pruned least-recently-used). The daemon used to open a fresh engine for
    every job, so those caches filled with statements for dialects never used again, each
    entry keeping its dead dialect alive: 2 mappers written by 120 short-lived engines held
    7.8 MB against 1.5 MB for one shared engine, and the daemon's resting memory crept up night
    after night until the caches would fill. So every `Database` of a process on the same URL
    shares one engine. Closing a `Database` still closes the engine's idle connections (an
    exiting CLI or a dropped test database holds none); the engine and its caches stay for the
    next job. A process meeting many URLs (the test suite) keeps the latest `SHARED_ENGINES`;
    an engine dropped from the list is disposed, and a `Database` still holding it keeps
    working on its own.
    """
    key = _normalise(url)
    with _engines_lock:
        engine = _engines.get(key)
        if engine is None:
            engine = _engines[key] = make_engine(url)
            while len(_engines) > SHARED_ENGINES:
                _engines.popitem(last=False)[1].dispose()
        _engines.move_to_end(key)
        return engine


def _start_afresh_in_a_forked_child() -> None:
    """A forked child must not use its parent's pooled connections (one socket, two users) or
    a lock another parent thread held at the fork: it makes its own engines, and leaves the
    parent's connections open for the parent (SQLAlchemy's `dispose(close=False)` recipe)."""
    global _engines_lock  # noqa: PLW0603
    _engines_lock = threading.Lock()
    for engine in _engines.values():
        engine.dispose(close=False)
    _engines.clear()


os.register_at_fork(after_in_child=_start_afresh_in_a_forked_child)


WAL_SWITCH_PATIENCE_S = 30.0
"""As long as the connection's busy timeout: how long a connection may wait to switch a file
that another connection is writing in the old journal mode."""


def _enable_wal(cursor: Any, patience_s: float = WAL_SWITCH_PATIENCE_S) -> None:
    """Switch the file to WAL (readers and a writer at once: the daemon beside a CLI).

    The switch needs the write lock, and SQLite answers "database is locked" at once, without
    its busy timeout, when another connection holds a write transaction on a file still in the
    rollback journal: waiting could deadlock (both hold a shared lock and want to write), so it
    leaves the retry to the caller. Processes meeting a fresh database together (one migrating
    while another connects) hit exactly that, so retry with backoff for as long as the busy
    timeout would have waited; once the file is in WAL the pragma changes nothing.
    """
    deadline = time.monotonic() + patience_s
    delay = 0.01
    while True:
        try:
            cursor.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() + delay > deadline:
                raise
            time.sleep(delay)
            delay = min(delay * 2, 0.5)


def alembic_config(url: str) -> AlembicConfig:
    cfg = AlembicConfig()
    cfg.set_main_option("script_location", str(project_root() / "migrations"))
    cfg.set_main_option("sqlalchemy.url", _normalise(url).replace("%", "%%"))
    return cfg


def head_revision(url: str) -> str:
    head = ScriptDirectory.from_config(alembic_config(url)).get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """The schema revision the database is at (None: not migrated yet).

    Alembic builds a new version table object for each context, so its SELECT is a new
    statement to SQLAlchemy's cache every time: asked by every `Database` (the daemon's health
    check every 5 minutes), it would fill the shared engine's cache with copies. Not cached."""
    try:
        with engine.connect() as conn:
            conn.execution_options(compiled_cache=None)
            return MigrationContext.configure(conn).get_current_revision()
    except DatabaseError as exc:
        raise _unreachable(str(engine.url), exc) from exc


def _unreachable(url: str, exc: Exception) -> WatchkeeperError:
    detail = str(getattr(exc, "orig", exc)).strip().splitlines()[0]
    if isinstance(exc, DatabaseError) and not isinstance(exc, OperationalError):
        # "file is not a database": the URL names a file of something else. Retrying cannot
        # help, and nothing was written to it.
        return ConfigError(
            f"database {masked(url)} cannot be used: {detail}",
            hint="database.url names a file that is not a watchkeeper SQLite database: "
            "point it at a new path (nothing was written to this one)",
        )
    return StoreError(
        f"database {masked(url)} is unreachable: {detail}",
        hint="check database.url / WATCHKEEPER_DATABASE_URL and that the server is running",
    )


MIGRATION_LOCK_KEY = 0x77617463  # "watc": one key for every watchkeeper on a Postgres


@contextlib.contextmanager
def _sqlite_file_lock(engine: Engine) -> Iterator[None]:
    """SQLite has no advisory locks; a lock file beside the database serialises migrators."""
    database = engine.url.database
    if not database or database == ":memory:":
        yield
        return
    lock_path = Path(database).expanduser().with_name(Path(database).name + ".migrate.lock")
    with private_file(lock_path).open("a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def migration_engine(url: str) -> Engine:
    """An engine whose transactions hold DDL on SQLite too. Python's sqlite3 driver opens a
    transaction only before INSERT/UPDATE/DELETE, so each CREATE, DROP or ALTER of a migration
    committed on its own: a downgrade failing halfway left a table dropped and the version at
    the old head. SQLite's DDL is transactional; with the driver told to keep out of it and a
    BEGIN of our own (SQLAlchemy's pysqlite recipe), a failed migration rolls back whole.
    Postgres has transactional DDL already."""
    engine = make_engine(url)
    if engine.dialect.name == "sqlite":

        @event.listens_for(engine, "connect")
        def _driver_keeps_out(dbapi_conn: Any, _: Any) -> None:
            dbapi_conn.isolation_level = None

        @event.listens_for(engine, "begin")
        def _begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

    return engine


def _migrate(url: str, step: Callable[[AlembicConfig], None]) -> None:
    """Run one Alembic step under a lock, so that two processes meeting a fresh database at
    the same moment (two agents, a CLI next to the daemon) migrate it once, not twice: the
    second waits, then finds the schema at head and does nothing. The whole step is one
    transaction (see `migration_engine`): it moves the database from one revision to another
    or, failing, leaves it where it was."""
    engine = migration_engine(url)
    sqlite = engine.dialect.name == "sqlite"
    try:
        with (
            _sqlite_file_lock(engine) if sqlite else contextlib.nullcontext(),
            engine.begin() as conn,
        ):
            if not sqlite:
                conn.execute(
                    text("SELECT pg_advisory_xact_lock(:key)"), {"key": MIGRATION_LOCK_KEY}
                )
            cfg = alembic_config(url)
            cfg.attributes["connection"] = conn
            step(cfg)
    except DatabaseError as exc:
        raise _unreachable(url, exc) from exc
    except CommandError as exc:  # an unknown revision: Alembic's words, on one line
        raise ConfigError(
            f"database {masked(url)}: {' '.join(str(exc).split())}",
            hint="name a revision from migrations/versions, or `head`",
        ) from None
    finally:
        engine.dispose()


def known_revision(url: str, revision: str) -> str:
    """`revision` when the migrations know it (a plain id, `head`, `base`), checked before the
    database is opened, so a typo creates and changes nothing; relative forms (`+1`, `head-1`)
    are Alembic's to resolve."""
    if revision.isidentifier() or revision.isalnum():
        try:
            ScriptDirectory.from_config(alembic_config(url)).get_revisions(revision)
        except CommandError as exc:
            raise ConfigError(
                f"unknown database revision {revision!r}: {' '.join(str(exc).split())}",
                hint="name a revision from migrations/versions, or `head`",
            ) from None
    return revision


def upgrade(url: str, revision: str = "head") -> None:
    known_revision(url, revision)
    _migrate(url, lambda cfg: command.upgrade(cfg, revision))


def downgrade(url: str, revision: str) -> None:
    _migrate(url, lambda cfg: command.downgrade(cfg, revision))


class Database:
    """An engine plus a session factory, at the schema this code expects."""

    def __init__(self, url: str, *, auto_migrate: bool = True) -> None:
        self.url = url
        self.engine = shared_engine(url)
        current = current_revision(self.engine)
        head = head_revision(url)
        if current != head:
            if current is None and auto_migrate:
                upgrade(url)
            else:
                self.engine.dispose()
                raise StoreError(
                    f"database {masked(url)} is at schema {current}, this watchkeeper needs {head}",
                    hint="run `watchkeeper db upgrade`",
                )
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @contextlib.contextmanager
    def session(self) -> Iterator[Session]:
        """A transaction: committed on success, rolled back on error."""
        session = self._sessions()
        try:
            yield session
            session.commit()
        except OperationalError as exc:
            session.rollback()
            raise _unreachable(self.url, exc) from exc
        except SQLAlchemyError:
            session.rollback()
            raise
        finally:
            session.close()

    def close(self) -> None:
        """Close the idle connections; the process's engine for this URL stays for the next
        `Database` (see `shared_engine`)."""
        self.engine.dispose()


@contextlib.contextmanager
def open_database(url: str, *, given: Database | None = None) -> Iterator[Database]:
    """The database a command works in: `given` when its caller holds one (the daemon keeps one
    for all its jobs, a CLI command may pass its own), else one opened on `url` for this command
    and closed after it. Either way the command's body is one `with`, not its own try/finally,
    and a command never closes a database it did not open."""
    if given is not None:
        yield given
        return
    db = Database(url)
    try:
        yield db
    finally:
        db.close()
