"""Migrations run up and down on SQLite and Postgres, and match the ORM exactly."""

from __future__ import annotations

from pathlib import Path

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import inspect

from watchkeeper.errors import StoreError
from watchkeeper.store.db import (
    Database,
    current_revision,
    downgrade,
    head_revision,
    make_engine,
    upgrade,
)
from watchkeeper.store.schema import Base

TABLES = {
    "host",
    "server_build",
    "model",
    "profile",
    "campaign",
    "run",
    "request_sample",
    "resource_sample",
    "output_check",
    "finding",
    "tracker_item",
    "report",
}


def test_migration_runs_up_and_down(db_url: str) -> None:
    upgrade(db_url)
    engine = make_engine(db_url)
    assert set(inspect(engine).get_table_names()) >= TABLES
    downgrade(db_url, "base")
    assert not TABLES & set(inspect(engine).get_table_names())
    upgrade(db_url)
    assert set(inspect(engine).get_table_names()) >= TABLES
    engine.dispose()


def test_orm_models_and_migrations_do_not_drift(db_url: str) -> None:
    upgrade(db_url)
    engine = make_engine(db_url)
    with engine.connect() as conn:
        context = MigrationContext.configure(conn, opts={"compare_type": True})
        diff = compare_metadata(context, Base.metadata)
    engine.dispose()
    assert diff == []


def test_a_new_database_is_migrated_on_first_open(sqlite_url: str) -> None:
    db = Database(sqlite_url)
    assert set(inspect(db.engine).get_table_names()) >= TABLES
    db.close()


def test_an_old_schema_is_refused_with_the_upgrade_hint(sqlite_url: str) -> None:
    upgrade(sqlite_url)
    engine = make_engine(sqlite_url)
    with engine.begin() as conn:
        conn.exec_driver_sql("UPDATE alembic_version SET version_num = '0000'")
    engine.dispose()
    with pytest.raises(
        StoreError, match=f"is at schema 0000, this watchkeeper needs {head_revision(sqlite_url)}"
    ) as info:
        Database(sqlite_url)
    assert info.value.hint == "run `watchkeeper db upgrade`"


def test_unreachable_postgres_is_a_store_error_without_the_password() -> None:
    url = "postgresql://wk:s3cret@127.0.0.1:1/wk"
    with pytest.raises(StoreError, match="unreachable") as info:
        Database(url)
    assert "s3cret" not in str(info.value)


def test_processes_meeting_a_fresh_database_at_once_migrate_it_exactly_once(db_url: str) -> None:
    """Two agents (or the CLI beside the daemon) starting on an empty database together: one
    migrates, the others wait for it and find the schema at head."""
    import subprocess
    import sys

    code = "import sys; from watchkeeper.store.db import Database; Database(sys.argv[1]).close()"
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, db_url], stdout=subprocess.PIPE, stderr=subprocess.PIPE
        )
        for _ in range(4)
    ]
    results = [p.communicate(timeout=120) for p in procs]
    errors = [err.decode() for p, (_, err) in zip(procs, results, strict=True) if p.returncode]
    assert not errors, errors
    db = Database(db_url)
    try:
        assert current_revision(db.engine) == head_revision(db_url)
    finally:
        db.close()


def test_a_connection_switches_to_wal_while_another_writes_in_the_old_journal(
    tmp_path: Path,
) -> None:
    """SQLite refuses the switch to WAL at once, busy timeout or not, while another connection
    holds a write transaction on a rollback-journal file (what a process meets when another is
    migrating the fresh database it just opened): the connection waits for the writer, then
    switches, instead of failing with "database is locked"."""
    import sqlite3
    import threading

    path = tmp_path / "fresh.db"
    writer = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    writer.execute("CREATE TABLE t (x INTEGER)")
    writer.execute("BEGIN IMMEDIATE")
    writer.execute("INSERT INTO t VALUES (1)")
    done = threading.Timer(0.3, lambda: writer.execute("COMMIT"))
    done.start()
    engine = make_engine(f"sqlite:///{path}")
    try:
        with engine.connect() as conn:
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
            assert conn.exec_driver_sql("SELECT count(*) FROM t").scalar() == 1
    finally:
        done.join(timeout=10)
        engine.dispose()
        writer.close()


def _write_host(db: Database, n: int) -> None:
    from watchkeeper.store.schema import Host

    with db.session() as s:
        s.add(Host(fingerprint=f"h{n}", hostname="h", cpu_model="c", cpu_count=2,
                   memory_bytes=1, os="linux"))  # fmt: skip


def _count_hosts(db: Database) -> int:
    from sqlalchemy import func, select

    from watchkeeper.store.schema import Host

    with db.session() as s:
        return int(s.scalar(select(func.count()).select_from(Host)) or 0)


def test_a_database_opened_for_every_job_keeps_nothing_per_job(db_url: str) -> None:
    """The daemon opens a `Database` per job, hundreds a day. With an engine per `Database`, the
    ORM's per-mapper statement caches (keyed by dialect) and the engine's cache of Alembic's
    version query kept something for every one (25-50 KB a job here), and the daemon's resting
    memory crept up night after night. One engine per URL per process keeps it flat."""
    import gc
    import tracemalloc

    def job(n: int) -> None:
        db = Database(db_url)
        try:
            _write_host(db, n)
        finally:
            db.close()

    for n in range(20):  # warm: first compilations and connections, free lists filling
        job(n)

    def blocks() -> int:
        """Live allocations: what a per-job leak adds to (250 a job before the fix, about 2
        after the warm-up with it), while a one-off resize of a global table is one block."""
        gc.collect()
        return sum(stat.count for stat in tracemalloc.take_snapshot().statistics("filename"))

    tracemalloc.start()
    try:
        before = blocks()
        for n in range(20, 60):
            job(n)
        grown = blocks() - before
    finally:
        tracemalloc.stop()
    assert grown < 1000, f"{grown} allocations kept by 40 open-write-close jobs"


def test_databases_on_one_url_share_an_engine_and_closing_one_leaves_the_other_working(
    tmp_path: Path,
) -> None:
    from watchkeeper.store.db import SHARED_ENGINES

    url = f"sqlite:///{tmp_path / 'wk.db'}"
    daemon, job = Database(url), Database(url)
    assert daemon.engine is job.engine
    _write_host(job, 1)
    job.close()  # a job's close must not break the daemon's long-lived Database
    _write_host(daemon, 2)
    others = [Database(f"sqlite:///{tmp_path / f'other{i}.db'}") for i in range(SHARED_ENGINES)]
    # `url` is now the least recently used of more than SHARED_ENGINES: its engine was dropped
    # from the list (and disposed), and the Database holding it keeps working.
    _write_host(daemon, 3)
    fresh = Database(url)
    assert fresh.engine is not daemon.engine
    assert _count_hosts(fresh) == 3
    for db in (daemon, fresh, *others):
        db.close()


def test_a_forked_child_opens_its_own_engine_not_the_parents(db_url: str) -> None:
    """Sharing one engine per URL must stop at a fork: a child using the parent's pooled
    connection would interleave its queries with the parent's on one socket."""
    import os

    parent = Database(db_url)
    _write_host(parent, 1)  # a pooled connection the child inherits
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: report, never return into pytest
        try:
            child = Database(db_url)
            shared = child.engine is parent.engine
            _write_host(child, 2)
            child.close()
            os.write(write, b"shared" if shared else b"own")
        except BaseException as exc:
            os.write(write, f"error: {exc}".encode())
        finally:
            os._exit(0)
    os.close(write)
    try:
        with os.fdopen(read, "rb") as pipe:
            said = pipe.read().decode()
        os.waitpid(pid, 0)
        assert said == "own", said
        _write_host(parent, 3)  # the parent's connections still work after the child's exit
        assert _count_hosts(parent) == 3
    finally:
        parent.close()
