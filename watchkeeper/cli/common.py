"""What every command group shares: the consoles, progress lines, common options.

It imports none of the command-group modules, so the groups can all import it without a loop.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable

from rich.console import Console

from watchkeeper.config import Config
from watchkeeper.redaction import redact

console = Console(stderr=True, highlight=False)
out = Console(highlight=False)
if not out.is_terminal:
    # Cron mail and CI logs are read in wide viewers; 80 columns would fold every table.
    out = Console(highlight=False, width=160)

Handler = Callable[[argparse.Namespace, Config], int]


def progress(message: str) -> None:
    """Progress goes to stderr, so it runs under --json too: stdout stays one JSON document,
    and a 40-minute sweep with --json still says what it is doing. A progress line may name a
    URL (an external server, a remote): it goes through the one redactor."""
    console.print(f"[dim]·[/dim] {redact(message)}")


def add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="F",
        help="watchkeeper.toml to use (default: $WATCHKEEPER_CONFIG or ./watchkeeper.toml)",
    )


def add_sampling(
    parser: argparse.ArgumentParser, *, seed: bool = True, section: str = "bench"
) -> None:
    """--temperature and friends: the sampler every timed request sends (load/sampling.py),
    over the config's [`section`] keys (the soak's are [soak]: load/sampling.soak_sampling).
    `seed` False where the command has a --seed of its own."""
    group = parser.add_argument_group(f"sampling (default: the config's [{section}] keys)")
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


def _rate_options(g: argparse._ArgumentGroup, rate_help: str) -> None:
    """--rate and its arrivals: the open loop's options every measuring command shares."""
    g.add_argument("--rate", type=float, metavar="R", help=rate_help)
    g.add_argument(
        "--arrival",
        choices=["poisson", "constant"],
        help="how --rate requests arrive (default: load.arrival)",
    )
    g.add_argument(
        "--burstiness",
        type=float,
        metavar="G",
        help="gamma shape of Poisson gaps: 1 Poisson, < 1 bursty (default: load.burstiness)",
    )
    g.add_argument(
        "--queue-deadline",
        type=float,
        metavar="S",
        help="open loop: a request unsent S seconds after its arrival is recorded as expired "
        "(default: load.queue_deadline_s)",
    )


def _max_concurrency(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--max-concurrency",
        type=int,
        metavar="N",
        help="open loop: requests in flight at most (default: load.max_concurrency, 0 none)",
    )


_RATE = "open loop: R requests per second on a schedule the answers never delay"


def add_open_loop_options(p: argparse.ArgumentParser, command: str) -> None:
    """The load a sweep or a soak measures under (docs/load.md): its recommendation, unit or
    verdict holds for that load. A smaller set than the bench's (no ladder, trace or caps)."""
    g = p.add_argument_group("load (see docs/load.md)")
    if command == "sweep":
        g.add_argument(
            "--concurrency",
            type=int,
            metavar="N",
            help="closed loop: N requests in flight, the servers get N slots (default: "
            "bench.concurrency); the recommendation and the unit name the load",
        )
        _rate_options(g, _RATE + " (default: the closed loop at --concurrency)")
        _max_concurrency(g)
    else:
        _rate_options(
            g,
            _RATE + ", in every block; --concurrency then caps the requests in flight "
            "(default: the closed loop)",
        )


def add_load_options(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("load (see docs/load.md)")
    _rate_options(g, _RATE + " (default: the closed loop at --concurrency)")
    _max_concurrency(g)
    g.add_argument(
        "--max-tokens",
        type=int,
        default=0,
        metavar="N",
        help="cap every task's max_tokens at N, both arms alike (default: the tasks' own)",
    )
    g.add_argument(
        "--requests",
        type=int,
        metavar="N",
        help="requests per arm and round, the tasks repeated up to N",
    )
    g.add_argument(
        "--load-ladder",
        metavar="L1,L2,...",
        help="run the paired bench at each load level (concurrencies, or rates with "
        "--ladder-rates; 'auto' with --ladder-rates: 25-100%% of the baseline's saturation "
        "rate) and report where the speed-up's CI crosses 1",
    )
    g.add_argument(
        "--ladder-rates",
        action="store_true",
        help="the --load-ladder levels are requests per second (open loop)",
    )
    g.add_argument(
        "--trace",
        metavar="F",
        help="replay a JSONL trace at its own arrival times (--rate: speed factor, default 1); "
        "its prompts are the task set",
    )
