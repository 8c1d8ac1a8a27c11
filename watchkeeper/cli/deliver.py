"""The long campaigns and what they deliver: `sweep` (the race and its recommendation), `unit`
(the recommended llama-server unit for this host), `soak` (the overnight load, and the soak of
a recommendation). Split from `cli/measure.py`, which keeps the short measuring commands."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from rich.markup import escape

from watchkeeper.cli.common import (
    CATEGORY,
    CONCURRENCY,
    COUNT,
    MAX_TOKENS,
    MINUTES,
    PORT,
    POSITIVE_ID,
    PROBE_TASKS,
    ROUNDS,
    SEED,
    add_common,
    add_open_loop_options,
    add_sampling,
    add_sweep_plan_options,
    concurrency_list,
    console,
    duration,
    int_in,
    names,
    new_file,
    out,
    plain,
    progress,
    workload_mix,
)
from watchkeeper.config import Config
from watchkeeper.errors import ConfigError
from watchkeeper.publish.sweep_report import drop_status


def cmd_sweep(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.sweep import DEFAULT_SERVICE_FILE, sweep_command, sweep_plan_lines
    from watchkeeper.config.requests import SweepRequest
    from watchkeeper.publish.console import print_bench

    request = SweepRequest.from_cli(vars(args))
    if request.dry_run:  # the plan
        for line in sweep_plan_lines(config, request, progress=progress):
            out.print(escape(line))
        return 0
    service_file = str(request.service_file or DEFAULT_SERVICE_FILE)
    try:  # the default too is checked before anything is measured, as --service-file is
        new_file(service_file)
    except argparse.ArgumentTypeError as exc:
        raise ConfigError(f"--service-file: {exc}", hint="pass --service-file PATH") from None
    result = sweep_command(config, request, progress=progress)
    if args.json:
        out.print_json(json.dumps(result.to_json(), default=str))
    else:
        print_bench(out, result.bench)
        out.print(f"\n[bold]Recommendation:[/bold] {escape(result.recommendation.headline)}")
        rec = result.recommendation
        if rec.mix is not None and rec.workload is not None:
            out.print(f"for the mix {escape(rec.mix.text)}: {escape(rec.workload.text)}")
        if result.race is not None:
            for d in result.race.drops:
                out.print(f"{plain(d.arm)}: {plain(drop_status(d))}")
            for c in result.race.decisions:
                out.print(f"{plain(c.category)}: {plain(c.pick)} ({plain(c.status)})")
        out.print(f"service file: {plain(result.service_path)}")
    return 0


def cmd_unit(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.unit import unit_command

    result = unit_command(
        config,
        recommendation=Path(args.recommendation) if args.recommendation else None,
        output=Path(args.output) if args.output else None,
        overrides={
            "binary": args.binary,
            "model_dir": args.model_dir,
            "user": args.user,
            "group": args.group,
            "host": args.host,
            "port": args.port,
            "reports_url": args.reports_url,
            "docs_dir": args.docs_dir,
            "gpu": args.gpu,
            "slots": args.slots,
            "cache_ram_mib": args.cache_ram,
        },
        category=args.category,
    )
    if result.note:
        console.print(escape(result.note))
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    elif result.path is None:
        print(result.text, end="")  # the unit itself, byte for byte, for a redirect
    else:
        what = "speculates" if result.speculates else "keeps the baseline"
        out.print(f"wrote {plain(result.path)}: profile {plain(result.profile)} ({plain(what)})")
    return 0


def cmd_report(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.report import report_command

    result = report_command(
        config,
        campaign_id=args.campaign,
        out=Path(args.out) if args.out else None,
        recommendation=Path(args.recommendation) if args.recommendation else None,
        progress=(lambda _m: None) if args.json else progress,
    )
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    else:
        out.print(
            plain(f"{result.kind} campaign {result.campaign_id} ({result.verdict}): {result.path}")
        )
    return 0


def cmd_soak(args: argparse.Namespace, config: Config) -> int:
    import shlex
    import sys
    import threading

    from watchkeeper.commands.soak import soak_command
    from watchkeeper.config.requests import SoakRequest
    from watchkeeper.soak.signals import stop_on_signals

    stop = threading.Event()
    with stop_on_signals(stop):
        result = soak_command(
            config,
            SoakRequest.from_cli(vars(args)),
            stop=stop,
            progress=progress,
            committed_default=True,
            command_line="watchkeeper " + shlex.join(sys.argv[1:]),
        )
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    else:
        out.print(
            plain(f"soak campaign {result.campaign_id} {result.status}: {result.verdict.headline}")
        )
        out.print(f"  sampling (load requests): {plain(result.sampling.label())}")
        for line in (*result.verdict.reasons, *result.verdict.notes):
            out.print(f"  - {escape(line)}")
    if result.status == "interrupted":
        return 130
    return 0 if result.verdict.stable else 1


def register(sub: Any) -> None:
    p = sub.add_parser(
        "sweep",
        help="race spec types and draft lengths, recommend per category, write a service file",
        description="Candidates: every speculation method the installed build and the pair's "
        "models can run (--dry-run lists them, in or out, and the arms). Arms are measured "
        "paired, round by round; after each round the racing rule stops measuring arms that "
        "lost (see docs/sweep.md), until every category is decided, --rounds are done or "
        "--budget is spent. Writes reports/speculative_benchmark.md and a systemd unit for the "
        "chosen setting.",
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
        type=MINUTES,
        default=40.0,
        metavar="MIN",
        help="minutes the sweep may take; no round starts that would not fit (default 40)",
    )
    p.add_argument(
        "--rounds",
        type=ROUNDS,
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
        type=COUNT,
        default=3,
        metavar="N",
        help="tasks per category (default 3: fewer gives a category no CI worth the name)",
    )
    p.add_argument(
        "--identity-as-served",
        action="store_true",
        help="also probe the rounds' own servers as served (batched verification), beside the "
        "exact pass; the acceptance line then gives both modes (its A/A floor prefills every "
        "probe position afresh: costly with long prompts on a CPU)",
    )
    p.add_argument(
        "--category",
        action="append",
        type=CATEGORY,
        metavar="NAME",
        help="only this category's tasks (repeatable): one workload's own answer, e.g. "
        "--category code_edit --per-category 8, with a config whose [bench] reports_dir and a "
        "--service-file of its own keep the default deliverables",
    )
    p.add_argument(
        "--identity-per-category",
        type=PROBE_TASKS,
        default=1,
        metavar="N",
        help="tasks per category the identity probes run on (default 1; 0: every measured "
        "task). In the exact identity mode a probe prefills its prompt one token at a time, "
        "several times a round's cost on a CPU",
    )
    p.add_argument(
        "--max-tokens",
        type=MAX_TOKENS,
        default=64,
        metavar="N",
        help="cut every answer at N tokens (default 64, the nightly's cap; 0 keeps the task "
        "set's own lengths, 96-192 tokens)",
    )
    p.add_argument(
        "--mix",
        type=workload_mix,
        metavar="C=W,...",
        help="the workload the one setting (and the unit) is for, as shares of decoded tokens "
        "per category, e.g. code_edit=0.7,prose=0.3 (default: the task set's own proportions)",
    )
    add_open_loop_options(p, "sweep")
    add_sweep_plan_options(p)
    p.add_argument(
        "--service-file",
        type=new_file,  # not a folder, no file in the way: checked before any server starts
        metavar="PATH",
        help="where to write the systemd unit (default: systemd/llama-server-speculative.service)",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    add_sampling(p)
    p.set_defaults(handler=cmd_sweep)

    p = sub.add_parser(
        "unit",
        help="render the recommended llama-server systemd unit for this host's paths",
        description="Render the sweep's committed recommendation "
        "(reports/speculative_recommendation.json) as a systemd unit with this host's "
        "binary, model directory, user, group, host and port: [service] in the config, "
        "each overridable here. Prints the unit, or writes it with --output.",
    )
    add_common(p)
    p.add_argument(
        "--recommendation",
        metavar="F",
        help="the sweep's recommendation (default: reports/speculative_recommendation.json)",
    )
    p.add_argument("--binary", metavar="PATH", help="llama-server here (default: service.binary)")
    p.add_argument(
        "--model-dir", metavar="DIR", help="where the GGUF files are (default: service.model_dir)"
    )
    p.add_argument("--user", help="User= (default: service.user)")
    p.add_argument("--group", help="Group= (default: service.group, else the user)")
    p.add_argument("--host", help="address to listen on (default: service.host)")
    p.add_argument("--port", type=PORT, help="port to listen on (default: service.port)")
    p.add_argument(
        "--reports-url",
        metavar="URL",
        help="reports repository as a browser sees it; Documentation= is URL/report "
        "(default: service.reports_url)",
    )
    p.add_argument(
        "--docs-dir", metavar="DIR", help="where the report is copied when there is no URL"
    )
    p.add_argument(
        "--gpu", choices=("auto", "yes", "no"), help="the server needs GPU devices (default: auto)"
    )
    p.add_argument(
        "--slots",
        type=CONCURRENCY,
        help="requests served at once, --parallel (default: service.slots, else the sweep's); "
        "`soak --recommendation` reads the same key",
    )
    p.add_argument(
        "--cache-ram",
        type=int_in(-1, 1 << 20),
        metavar="MIB",
        help="--cache-ram bound of the host prompt cache in MiB, 0 off, -1 unbounded (default: "
        "service.cache_ram_mib)",
    )
    p.add_argument(
        "--category",
        metavar="C",
        help="the unit for one workload category: the sweep's pick for it (the baseline where "
        "it keeps the baseline)",
    )
    p.add_argument(
        "--output", type=new_file, metavar="PATH", help="write the unit here, not to stdout"
    )
    p.add_argument("--json", action="store_true", help="print the unit and its source as JSON")
    p.set_defaults(handler=cmd_unit)

    p = sub.add_parser(
        "soak",
        help="load for hours (closed loop or --rate): incidents, resources, a verdict",
        description="Loop the task set against each profile (blocks, reshuffled per pass) "
        "for --duration; crashes are restarted, an unreachable database is spooled, "
        "SIGTERM marks the campaign interrupted and a later run of the same command resumes it.",
    )
    add_common(p)
    p.add_argument("--duration", type=duration, help="e.g. 8h, 30m, 1h30m (default: soak.duration)")
    p.add_argument(
        "--profiles",
        type=names,
        metavar="A,B,...",
        help="default: soak.profiles; empty: the sweep's committed recommendation, else refused",
    )
    p.add_argument(
        "--recommendation",
        metavar="F",
        help="soak the sweep's recommendation (reports/speculative_recommendation.json): its "
        "arm, or the closest speculative arm when it keeps the baseline, beside the baseline; "
        "writes reports/speculative_soak.md and fills in the sweep report's stability line",
    )
    p.add_argument(
        "--concurrency",
        type=concurrency_list,
        metavar="N,M,...",
        help="e.g. 1,4 (default: soak.concurrency)",
    )
    p.add_argument(
        "--block", type=duration, help="time per (profile, concurrency) block (default: soak.block)"
    )
    p.add_argument("--taskset", metavar="F")
    p.add_argument("--limit", type=COUNT, metavar="N", help="only the first N tasks")
    p.add_argument("--per-category", type=COUNT, metavar="N", help="first N tasks of each category")
    p.add_argument(
        "--category",
        action="append",
        type=CATEGORY,
        metavar="NAME",
        help="only this category's tasks (repeatable; default with --recommendation: the "
        "categories its sweep measured, so a workload's unit is soaked on its own requests)",
    )
    p.add_argument("--seed", type=SEED, help="shuffle seed (default: random, recorded)")
    p.add_argument("--fresh", action="store_true", help="never resume an interrupted soak")
    p.add_argument("--resume", type=POSITIVE_ID, metavar="ID", help="resume this soak campaign")
    p.add_argument(
        "--reference",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="soak each profile beside its pinned nightly reference (blocks alternate, "
        "throughput judged as the current/reference ratio; default: soak.against_reference)",
    )
    p.add_argument("--json", action="store_true", help="print the verdict and figures as JSON")
    add_open_loop_options(p, "soak")
    add_sampling(p, seed=False, section="soak")
    p.set_defaults(handler=cmd_soak)

    p = sub.add_parser(
        "report",
        help="re-render a stored campaign's report with the current renderer",
        description="Rebuild campaign N's report from the database (soak campaigns: judged and "
        "rendered as `soak --recommendation` does at its end) and write it where the soak "
        "wrote it, or under --out DIR. Bench and sweep campaigns are refused: their reports "
        "read the live identity replay, which the store does not keep.",
    )
    add_common(p)
    p.add_argument(
        "--campaign", type=POSITIVE_ID, required=True, metavar="N", help="the campaign's id"
    )
    p.add_argument("--out", metavar="DIR", help="write here (default: bench.reports_dir)")
    p.add_argument(
        "--recommendation",
        metavar="F",
        help="the recommendation it soaked (default: reports/speculative_recommendation.json)",
    )
    p.add_argument("--json", action="store_true", help="print what was written as JSON")
    p.set_defaults(handler=cmd_report)
