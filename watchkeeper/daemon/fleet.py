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
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from watchkeeper.config.paths import data_dir
from watchkeeper.store.db import backend_name, sqlite_file
from watchkeeper.store.locks import PostgresLock


class FleetLock(Protocol):
    def hold(self, job: str) -> contextlib.AbstractContextManager[bool]: ...

    def close(self) -> None: ...


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
    if backend_name(url) == "postgresql":
        return PostgresLock(url, namespace)
    if lock_dir:
        return FileLock(Path(lock_dir).expanduser())
    database = sqlite_file(url)
    if database is not None:
        return FileLock(database.expanduser().resolve().parent / "locks")
    return FileLock(data_dir() / "locks")
