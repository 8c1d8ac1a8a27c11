"""`db upgrade|downgrade`: Alembic migrations by hand (a new database migrates itself)."""

from __future__ import annotations

import argparse
from typing import Any

from watchkeeper.cli.common import add_common, out, plain
from watchkeeper.config import Config


def cmd_db(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.database import downgrade_command, upgrade_command

    if args.db_command == "upgrade":
        out.print(plain(upgrade_command(config, args.revision)))
    else:
        done = downgrade_command(config, args.revision, drop_everything=args.yes_drop_everything)
        out.print(plain(f"database {done.url} downgraded from {done.before} to {done.after}"))
    return 0


def register(sub: Any) -> None:
    """Add this group's subcommands to the main parser."""
    p = sub.add_parser("db", help="database migrations")
    add_common(p)
    dbsub = p.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    up = dbsub.add_parser("upgrade", help="migrate to a revision (default: head)")
    up.add_argument("revision", nargs="?", default="head")
    down = dbsub.add_parser(
        "downgrade",
        help="migrate down to REVISION (required; one transaction)",
        description="Migrate down to an explicit revision, in one transaction: a failing step "
        "leaves the database at the revision it was at. `base` drops every table; on a "
        "database holding rows it needs --yes-drop-everything.",
    )
    down.add_argument("revision", help="the revision to go down to (an id, or base)")
    down.add_argument(
        "--yes-drop-everything",
        action="store_true",
        help="confirm that `base` drops every table and the rows in them",
    )
    p.set_defaults(handler=cmd_db)
