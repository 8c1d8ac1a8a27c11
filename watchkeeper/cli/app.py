"""The command line: thin wiring over the stage functions.

It parses arguments, loads the config once, calls one function and prints. Errors are caught
in exactly one place: a `WatchkeeperError` becomes one red line plus a hint and exit code 2;
anything else is a bug and keeps its traceback. Each command group lives in its own module
and registers its subcommands here.
"""

from __future__ import annotations

import argparse
import signal
from collections.abc import Sequence

from rich.markup import escape

from watchkeeper import __version__
from watchkeeper.cli import (
    daemon,
    database,
    deliver,
    deliver_checks,
    deliver_set,
    measure,
    nightly,
    tracker,
    upgrades,
)
from watchkeeper.cli.common import OneLineParser, console
from watchkeeper.config import load_config
from watchkeeper.errors import WatchkeeperError

GROUPS = (
    measure,
    deliver,
    deliver_checks,
    deliver_set,
    database,
    nightly,
    tracker,
    daemon,
    upgrades,
)


def build_parser() -> argparse.ArgumentParser:
    parser = OneLineParser(
        prog="watchkeeper",
        description="Measure speculative decoding on llama-server honestly: paired benchmarks, "
        "identical-output checks, everything stored in a database.",
    )
    parser.add_argument("--version", action="version", version=f"watchkeeper {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for group in GROUPS:
        group.register(sub)
    return parser


def _terminate(signum: int, _frame: object) -> None:
    # Python's default SIGTERM ends the process without unwinding, which would orphan a
    # running llama-server; raising lets every `with serve(...)` stop what it started.
    raise KeyboardInterrupt(f"signal {signum}")


def unwind_on_sigterm() -> None:
    """SIGTERM raises KeyboardInterrupt in the main thread, so a process that starts servers
    (the CLI, a benchmark script) stops them on its way out instead of orphaning them."""
    signal.signal(signal.SIGTERM, _terminate)


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        unwind_on_sigterm()
    try:
        config = load_config(args.config)
        code: int = args.handler(args, config)
        return code
    except WatchkeeperError as exc:
        # One line each, never folded at the console's width (cron mail, CI logs, grep).
        message = " ".join(exc.message.split())
        console.print("[bold red]error:[/bold red]", escape(message), soft_wrap=True)
        if exc.hint:
            hint = " ".join(exc.hint.split())
            console.print("[yellow]hint:[/yellow]", escape(hint), soft_wrap=True)
        return 2
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        return 130
