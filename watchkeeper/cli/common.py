"""What every command group shares: the consoles, progress lines, common options.

It imports none of the command-group modules, so the groups can all import it without a loop.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console

from watchkeeper.config import Config

console = Console(stderr=True, highlight=False)
out = Console(highlight=False)
if not out.is_terminal:
    # Cron mail and CI logs are read in wide viewers; 80 columns would fold every table.
    out = Console(highlight=False, width=160)

Handler = Callable[[argparse.Namespace, Config], int]


def progress(message: str) -> None:
    console.print(f"[dim]·[/dim] {message}")


def quiet(_message: str) -> None:
    """Progress sink for --json runs: stdout must stay one JSON document."""


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="F",
        help="watchkeeper.toml to use (default: $WATCHKEEPER_CONFIG or ./watchkeeper.toml)",
    )


def split(text: str | None) -> list[str] | None:
    return [p.strip() for p in text.split(",") if p.strip()] if text else None
