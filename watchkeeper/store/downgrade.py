"""`db downgrade` with its guards: an explicit target, a confirmation before dropping data,
one transaction, and a truthful answer about where the database is when a step fails.

Dropping a schema is the one thing watchkeeper does that loses measurements for good, so the
target is never implied (no default `base`), `base` on a database holding rows needs the
caller's explicit word, and a failure halfway leaves the version table and the tables in
agreement (`db.migration_engine`: DDL in the migration's transaction on SQLite as on Postgres).
"""

from __future__ import annotations

from dataclasses import dataclass

from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import Select, inspect, literal_column, select, table
from sqlalchemy.exc import SQLAlchemyError

from watchkeeper.errors import ConfigError, StoreError
from watchkeeper.store.db import (
    alembic_config,
    current_revision,
    downgrade,
    masked,
    migration_engine,
)

VERSION_TABLE = "alembic_version"


@dataclass(frozen=True, slots=True)
class Downgraded:
    url: str
    """Masked: printable."""
    before: str
    after: str


def revisions(url: str) -> list[str]:
    """Every revision id, oldest first."""
    script = ScriptDirectory.from_config(alembic_config(url))
    return [r.revision for r in reversed(list(script.walk_revisions()))]


def resolve_target(url: str, target: str) -> str:
    """The full revision id of `target` ('base', an id or its unique prefix)."""
    if target == "base":
        return target
    known = revisions(url)
    try:
        found = ScriptDirectory.from_config(alembic_config(url)).get_revision(target)
    except CommandError:
        found = None
    if found is None or found.revision not in known:
        raise StoreError(
            f"db downgrade: unknown revision {target!r}",
            hint=f"name one of: base, {', '.join(known)}",
        )
    return found.revision


def populated_tables(url: str) -> list[str]:
    """The tables (other than the version table) that hold at least one row."""
    engine = migration_engine(url)
    try:
        with engine.connect() as conn:
            names = [n for n in inspect(conn).get_table_names() if n != VERSION_TABLE]
            one: Select[tuple[int]] = select(literal_column("1"))
            return [
                n
                for n in names
                if conn.execute(one.select_from(table(n)).limit(1)).first() is not None
            ]
    finally:
        engine.dispose()


def _revision(url: str) -> str | None:
    engine = migration_engine(url)
    try:
        return current_revision(engine)
    finally:
        engine.dispose()


def guarded_downgrade(url: str, target: str, *, drop_everything: bool = False) -> Downgraded:
    """Migrate down to `target` in one transaction, or refuse, or fail leaving the database
    at the revision it was at (and say which)."""
    full = resolve_target(url, target)
    shown = masked(url)
    before = _revision(url)
    order = revisions(url)
    if before is None:
        raise StoreError(
            f"db downgrade: {shown} has no schema to downgrade",
            hint="`watchkeeper db upgrade` creates it",
        )
    if full != "base" and order.index(full) >= order.index(before):
        raise StoreError(
            f"db downgrade: {shown} is at {before}; {full} is not below it",
            hint="name an earlier revision, or use `watchkeeper db upgrade` to go up",
        )
    if full == "base" and not drop_everything:
        full_tables = populated_tables(url)
        if full_tables:
            raise StoreError(
                f"db downgrade base drops every table of {shown}, and "
                f"{len(full_tables)} of them hold rows ({', '.join(full_tables[:4])}"
                f"{', ...' if len(full_tables) > 4 else ''})",
                hint="back the database up, then add --yes-drop-everything to confirm",
            )
    try:
        downgrade(url, full)
    except (SQLAlchemyError, ConfigError) as exc:
        # The migration step's own failure arrives as the library's error, or as the store's
        # one-line ConfigError around it (`db._migrate`); an unreachable database is a
        # StoreError already and passes through.
        cause = exc if isinstance(exc, SQLAlchemyError) else exc.__cause__
        if not isinstance(cause, SQLAlchemyError):
            raise
        detail = str(getattr(cause, "orig", cause)).strip().splitlines()[0]
        raise StoreError(
            f"db downgrade to {full} failed and was rolled back: {detail}; "
            f"{shown} is at {_revision(url)}",
            hint="nothing was dropped; fix the cause and run the downgrade again",
        ) from exc
    return Downgraded(shown, before, _revision(url) or "base")
