"""Fleet jobs run on one host at a time: a Postgres advisory lock, or a file lock on SQLite.

`hold(job)` tries once and never waits: the host that gets the lock runs the job, the others
skip this start (the job_run claim then makes sure a late host does not run it again). A
Postgres advisory lock belongs to the session that took it, so a daemon that dies, or loses its
connection, releases it; so does a process holding an fcntl lock.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from sqlalchemy import text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError

from watchkeeper.config.paths import data_dir
from watchkeeper.errors import StoreError
from watchkeeper.store.db import make_engine, masked


def lock_key(job: str) -> int:
    """Second int4 of the advisory lock: a stable hash of the job name."""
    return zlib.crc32(job.encode()) & 0x7FFF_FFFF


class FleetLock(Protocol):
    def hold(self, job: str) -> contextlib.AbstractContextManager[bool]: ...

    def close(self) -> None: ...


class PostgresLock:
    """`pg_try_advisory_lock(namespace, crc32(job))` on a connection kept for the job."""

    def __init__(self, url: str, namespace: int) -> None:
        self._url, self._namespace = url, namespace
        self._engine = make_engine(url)

    @contextlib.contextmanager
    def hold(self, job: str) -> Iterator[bool]:
        params = {"ns": self._namespace, "key": lock_key(job)}
        try:
            conn = self._engine.connect()
            got = bool(
                conn.execute(text("SELECT pg_try_advisory_lock(:ns, :key)"), params).scalar()
            )
            conn.commit()
        except SQLAlchemyError as exc:
            raise StoreError(
                f"fleet lock for {job}: database {masked(self._url)} is unreachable: "
                f"{str(getattr(exc, 'orig', exc)).strip().splitlines()[0]}"
            ) from exc
        try:
            yield got
        finally:
            try:
                if got:
                    conn.execute(text("SELECT pg_advisory_unlock(:ns, :key)"), params)
                    conn.commit()
            except SQLAlchemyError:
                conn.invalidate()  # a lost session has released the lock already
            finally:
                conn.close()

    def close(self) -> None:
        self._engine.dispose()


class FileLock:
    """`flock` on `<dir>/fleet-<job>.lock`: one holder across processes on this machine."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def path(self, job: str) -> Path:
        safe = re.sub(r"[^A-Za-z0-9._-]+", "_", job)
        return self.directory / f"fleet-{safe}.lock"

    @contextlib.contextmanager
    def hold(self, job: str) -> Iterator[bool]:
        self.directory.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path(job), os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                yield False
                return
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
                yield True
            finally:
                fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def close(self) -> None:
        pass


def make_fleet_lock(url: str, *, namespace: int, lock_dir: str = "") -> FleetLock:
    parsed = make_url(url)
    if parsed.get_backend_name() == "postgresql":
        return PostgresLock(url, namespace)
    if lock_dir:
        return FileLock(Path(lock_dir).expanduser())
    database = parsed.database
    if parsed.get_backend_name() == "sqlite" and database and database != ":memory:":
        return FileLock(Path(database).expanduser().resolve().parent / "locks")
    return FileLock(data_dir() / "locks")
