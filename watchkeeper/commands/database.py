"""`watchkeeper db upgrade|downgrade`: Alembic migrations by hand (a new database migrates
itself when it is first opened)."""

from __future__ import annotations

from watchkeeper.config import Config
from watchkeeper.store.db import downgrade, masked, upgrade


def migrate(config: Config, *, direction: str, revision: str) -> str:
    """Migrate the configured database up or down to `revision`; returns its URL as it may be
    printed (password masked)."""
    url = config.database.resolved_url()
    if direction == "upgrade":
        upgrade(url, revision)
    else:
        downgrade(url, revision)
    return masked(url)
