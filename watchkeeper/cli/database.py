"""`db upgrade|downgrade`: Alembic migrations by hand (a new database migrates itself)."""

from __future__ import annotations

import argparse
from typing import Any

from watchkeeper.cli.common import add_common, out
from watchkeeper.config import Config


def cmd_db(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.database import migrate

    shown = migrate(config, direction=args.db_command, revision=args.revision)
    out.print(f"database {shown} {args.db_command}d to {args.revision}")
    return 0


def register(sub: Any) -> None:
    """Add this group's subcommands to the main parser."""
    p = sub.add_parser("db", help="database migrations")
    add_common(p)
    dbsub = p.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    up = dbsub.add_parser("upgrade", help="migrate to a revision (default: head)")
    up.add_argument("revision", nargs="?", default="head")
    down = dbsub.add_parser("downgrade", help="migrate down to a revision (default: base)")
    down.add_argument("revision", nargs="?", default="base")
    p.set_defaults(handler=cmd_db)
