"""`db upgrade` and `db downgrade`: the CLI's migrations, through the store's guards."""

from __future__ import annotations

from watchkeeper.config import Config
from watchkeeper.store.db import masked, upgrade
from watchkeeper.store.downgrade import Downgraded, guarded_downgrade


def upgrade_command(config: Config, revision: str) -> str:
    """Migrate up (one transaction); the line to print."""
    url = config.database.resolved_url()
    upgrade(url, revision)
    return f"database {masked(url)} upgraded to {revision}"


def downgrade_command(config: Config, revision: str, *, drop_everything: bool) -> Downgraded:
    """Migrate down to an explicit revision; `base` on a database holding rows only with
    `drop_everything` (`--yes-drop-everything`)."""
    return guarded_downgrade(
        config.database.resolved_url(), revision, drop_everything=drop_everything
    )
