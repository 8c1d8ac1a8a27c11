"""Insert-if-absent, written once.

Hosts, builds, models, profiles, findings, tracker claims and PR reviews are all "the row
with this natural key, created if it is not there yet", and several processes (two daemons on
one Postgres, a soak and a digest) may ask at the same instant. The natural key is a unique
constraint, so the loser of a race gets an IntegrityError on insert and then reads the
winner's row: no duplicates and no lost row, on SQLite and Postgres alike.
"""

from __future__ import annotations

from typing import Any, TypeVar

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from watchkeeper.store.db import Database

R = TypeVar("R")


def first_or_add(
    session: Session, model: type[R], lookup: dict[str, Any], **values: Any
) -> tuple[R, bool]:
    """(row, created) inside the caller's transaction; the caller owns the race (e.g. a
    spool writer that is the only one writing its campaign)."""
    row = session.scalars(select(model).filter_by(**lookup)).first()
    if row is not None:
        return row, False
    row = model(**lookup, **values)
    session.add(row)
    session.flush()
    return row, True


def insert_if_absent(
    db: Database, model: type[R], lookup: dict[str, Any], **values: Any
) -> tuple[R, bool]:
    """(row, created) in transactions of its own, safe against a concurrent inserter when
    ``lookup`` is covered by a unique constraint."""
    try:
        with db.session() as s:
            return first_or_add(s, model, lookup, **values)
    except IntegrityError:
        with db.session() as s:
            return s.scalars(select(model).filter_by(**lookup)).one(), False
