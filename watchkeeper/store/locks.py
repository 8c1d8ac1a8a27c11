"""Postgres advisory locks: the database side of "one host at a time" for fleet jobs.

`pg_try_advisory_lock` tries once and never waits; the lock belongs to the session that took it,
so a daemon that dies, or loses its connection, releases it. The file-lock twin for SQLite is
`daemon.fleet.FileLock`; both meet in `daemon.fleet.make_fleet_lock`.
"""

from __future__ import annotations

import contextlib
import zlib
from collections.abc import Iterator

from sqlalchemy import text
from sqlalchemy.exc import SQLAlchemyError

from watchkeeper.errors import StoreError
from watchkeeper.store.db import make_engine, masked


def lock_key(job: str) -> int:
    """Second int4 of the advisory lock: a stable hash of the job name."""
    return zlib.crc32(job.encode()) & 0x7FFF_FFFF


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
