"""Command line for the daemon stage (thin, like cli.py)."""

from __future__ import annotations

from typing import Any


def register(sub: Any) -> None:
    """Add this stage's subcommands to the main parser."""
