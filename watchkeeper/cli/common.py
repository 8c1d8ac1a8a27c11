"""What every command group shares: the consoles, progress lines, common options.

It imports none of the command-group modules, so the groups can all import it without a loop.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from rich.console import Console
from rich.markup import escape

from watchkeeper.cli.argtypes import (
    BURSTINESS,
    CAP,
    CATEGORY,
    CONCURRENCY,
    COUNT,
    FIT_CONTEXT,
    JOBS,
    MAX_ARMS,
    MAX_RANGES,
    MAX_TOKENS,
    MINUTES,
    PORT,
    POSITIVE_ID,
    PROBABILITY,
    PROBE_TASKS,
    RATE,
    ROUNDS,
    SECONDS,
    SEED,
    TEMPERATURE,
    TOP_K,
    concurrency_list,
    duration,
    float_in,
    int_in,
    ladder_levels,
    names,
    new_file,
    output_file,
    release,
    release_or_latest,
    workload_mix,
)
from watchkeeper.config import Config
from watchkeeper.config.requests import ID_MAX, SEED_MAX
from watchkeeper.errors import ConfigError
from watchkeeper.redaction import redact, redacted

if TYPE_CHECKING:
    from watchkeeper.load.records import Task
    from watchkeeper.load.shape import LoadShape


# The argument types live in cli/argtypes.py; handlers import them from here.
SWEEP_MAX_ARMS = 16
"""The sweep's default arm cap, campaign/sweep_arms.DEFAULT_MAX_ARMS written here because
building the parser imports no stage (tests/sweep/test_sweep_arms.py holds them equal)."""

__all__ = [
    "BURSTINESS",
    "CAP",
    "CATEGORY",
    "CONCURRENCY",
    "COUNT",
    "FIT_CONTEXT",
    "ID_MAX",
    "JOBS",
    "MAX_ARMS",
    "MAX_RANGES",
    "MAX_TOKENS",
    "MINUTES",
    "PORT",
    "POSITIVE_ID",
    "PROBABILITY",
    "PROBE_TASKS",
    "RATE",
    "ROUNDS",
    "SECONDS",
    "SEED",
    "SEED_MAX",
    "TEMPERATURE",
    "TOP_K",
    "concurrency_list",
    "duration",
    "float_in",
    "int_in",
    "ladder_levels",
    "names",
    "new_file",
    "output_file",
    "release",
    "release_or_latest",
    "workload_mix",
]

console = Console(file=redacted(lambda: sys.stderr), stderr=True, highlight=False)
out = Console(file=redacted(lambda: sys.stdout), highlight=False)
if not out.is_terminal:
    # Cron mail and CI logs are read in wide viewers; 80 columns would fold every table.
    out = Console(file=redacted(lambda: sys.stdout), highlight=False, width=160)

Handler = Callable[[argparse.Namespace, Config], int]


class OneLineParser(argparse.ArgumentParser):
    """argparse, with a usage error in the house format: one `error:` line and one `hint:`
    line, exit 2 (argparse's own prints the whole usage first: a dozen folded lines in a cron
    mail for one mistyped number). Subparsers inherit the class."""

    def error(self, message: str) -> NoReturn:
        console.print(
            "[bold red]error:[/bold red]", escape(f"{self.prog}: {message}"), soft_wrap=True
        )
        console.print("[yellow]hint:[/yellow]", f"see `{escape(self.prog)} --help`", soft_wrap=True)
        raise SystemExit(2)


def plain(value: object) -> str:
    """`value` as text rich prints as written: stored text (a finding's title holding
    `[/INST]`, a note, a path with `[x]` in it) is never read as markup."""
    return escape(str(value))


def progress(message: str) -> None:
    """Progress goes to stderr, so it runs under --json too: stdout stays one JSON document,
    and a 40-minute sweep with --json still says what it is doing. A progress line may name a
    URL (an external server, a remote): it goes through the one redactor."""
    console.print(f"[dim]·[/dim] {plain(redact(message))}")


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
    group.add_argument("--temperature", type=TEMPERATURE, metavar="T", help="0: greedy")
    group.add_argument("--top-k", type=TOP_K, metavar="K", help="unset: the server's default")
    group.add_argument("--top-p", type=PROBABILITY, metavar="P", help="unset: the server's default")
    group.add_argument("--min-p", type=PROBABILITY, metavar="P", help="unset: the server's default")
    if seed:
        group.add_argument("--seed", type=SEED, help="sampling seed (default: bench.seed)")


def sampler_of(args: argparse.Namespace) -> dict[str, float | int | None]:
    """`bench`'s `--temperature` and friends as given (None: not given), for the command to
    resolve over [bench]'s (load/sampling.command_sampling); the commands with a request
    (config/requests.py) carry theirs on it."""
    return {
        "temperature": args.temperature,
        "top_k": args.top_k,
        "top_p": args.top_p,
        "min_p": args.min_p,
        "seed": args.seed,
    }


def split(text: str | None) -> list[str] | None:
    return [p.strip() for p in text.split(",") if p.strip()] if text else None


def _rate_options(g: argparse._ArgumentGroup, rate_help: str) -> None:
    """--rate and its arrivals: the open loop's options every measuring command shares."""
    g.add_argument("--rate", type=RATE, metavar="R", help=rate_help)
    g.add_argument(
        "--arrival",
        choices=["poisson", "constant"],
        help="how --rate requests arrive (default: load.arrival)",
    )
    g.add_argument(
        "--burstiness",
        type=BURSTINESS,
        metavar="G",
        help="gamma shape of Poisson gaps: 1 Poisson, < 1 bursty (default: load.burstiness)",
    )
    g.add_argument(
        "--queue-deadline",
        type=SECONDS,
        metavar="S",
        help="open loop: a request unsent S seconds after its arrival is recorded as expired "
        "(default: load.queue_deadline_s)",
    )


def _max_concurrency(g: argparse._ArgumentGroup) -> None:
    g.add_argument(
        "--max-concurrency",
        type=CAP,
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
            type=CONCURRENCY,
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
        type=MAX_TOKENS,
        default=0,
        metavar="N",
        help="cap every task's max_tokens at N, both arms alike (default: the tasks' own)",
    )
    g.add_argument(
        "--requests",
        type=COUNT,
        metavar="N",
        help="requests per arm and round, the tasks repeated up to N",
    )
    g.add_argument(
        "--load-ladder",
        type=ladder_levels,
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
        "--crossover-metric",
        choices=("goodput", "e2e_p90", "ttft_p90", "decode"),
        help="what decides the ladder's crossover: paired SLO attainment (default for rate "
        "ladders), E2E or TTFT p90 (E2E: default for concurrency ladders) or per-request "
        "decode tok/s; the report shows all four",
    )
    g.add_argument(
        "--level-min-s",
        type=SECONDS,
        metavar="S",
        help="a rate ladder's level sends at least rate x S requests per arm and round "
        "(default 10)",
    )
    g.add_argument(
        "--level-min-requests",
        type=COUNT,
        metavar="N",
        help="every ladder level sends at least N requests per arm and round (default 10)",
    )
    g.add_argument(
        "--trace",
        metavar="F",
        help="replay a JSONL trace at its own arrival times (--rate: speed factor, default 1); "
        "its prompts are the task set",
    )


def load_shape_from_args(args: argparse.Namespace) -> LoadShape:
    """The CLI's load options (`add_load_options`) as a `LoadShape`; a trace's arrival
    offsets come with it (its tasks replace the task set: campaign/bench.py)."""
    from watchkeeper.load.shape import LEVEL_MIN_REQUESTS, LEVEL_MIN_S, LoadShape
    from watchkeeper.load.traffic import check_replay, load_trace

    trace: list[float] | None = None
    trace_tasks: tuple[Task, ...] | None = None
    if getattr(args, "trace", None):
        tasks, trace = load_trace(Path(args.trace))
        if trace is None:
            raise ConfigError(
                f"{args.trace}: not every request has an arrival time: nothing to replay",
                hint="add arrival_s to every line, or import it as a task set (import-tasks)",
            )
        trace_tasks = tuple(tasks)
        check_replay(args.trace, trace[-1], args.rate or 1.0)
    return LoadShape(
        rate=args.rate,
        arrival=args.arrival,
        burstiness=args.burstiness,
        queue_deadline_s=args.queue_deadline,
        max_concurrency=args.max_concurrency,
        max_tokens=args.max_tokens or 0,
        requests=args.requests,
        trace=trace,
        trace_tasks=trace_tasks,
        level_min_s=getattr(args, "level_min_s", None) or LEVEL_MIN_S,
        level_min_requests=getattr(args, "level_min_requests", None) or LEVEL_MIN_REQUESTS,
    )


def add_sweep_plan_options(p: Any) -> None:
    """The sweep's arm plan: `--max-arms` and `--dry-run` (campaign/sweep_arms.py)."""
    p.add_argument(
        "--max-arms",
        type=MAX_ARMS,  # the baseline and at least one arm to race
        default=SWEEP_MAX_ARMS,
        metavar="N",
        help="race at most N arms, baseline included, by tier: the methods at the requests' "
        "lengths, chains, then knob variants (default %(default)s; each arm costs its share "
        "of the first rounds before the race drops it)",
    )
    p.add_argument(
        "--dry-run",
        action="store_true",
        help="print every method of the build for this pair, in or out with the reason, and "
        "the arms with why each is raced; measure nothing (models are read, not fetched)",
    )
