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
    """Progress goes to stderr, so it runs under --json too: stdout stays one JSON document,
    and a 40-minute sweep with --json still says what it is doing."""
    console.print(f"[dim]·[/dim] {message}")


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="F",
        help="watchkeeper.toml to use (default: $WATCHKEEPER_CONFIG or ./watchkeeper.toml)",
    )


def add_sampling(parser: argparse.ArgumentParser, *, seed: bool = True) -> None:
    """--temperature and friends: the sampler every timed request sends (load/sampling.py),
    over the config's [bench] keys. `seed` False where the command has a --seed of its own."""
    group = parser.add_argument_group("sampling (default: the config's [bench] keys)")
    group.add_argument("--temperature", type=float, metavar="T", help="0: greedy")
    group.add_argument("--top-k", type=int, metavar="K", help="unset: the server's default")
    group.add_argument("--top-p", type=float, metavar="P", help="unset: the server's default")
    group.add_argument("--min-p", type=float, metavar="P", help="unset: the server's default")
    if seed:
        group.add_argument("--seed", type=int, help="sampling seed (default: bench.seed)")
    parser.set_defaults(sampling_seed_flag=seed)


def apply_sampling(args: argparse.Namespace, config: Config) -> Config:
    """The command line's sampler into the config, before the command sees it."""
    if not hasattr(args, "top_k"):
        return config
    from watchkeeper.load.sampling import apply_overrides

    return apply_overrides(
        config,
        temperature=args.temperature,
        top_k=args.top_k,
        top_p=args.top_p,
        min_p=args.min_p,
        seed=args.seed if args.sampling_seed_flag else None,
    )


def split(text: str | None) -> list[str] | None:
    return [p.strip() for p in text.split(",") if p.strip()] if text else None
