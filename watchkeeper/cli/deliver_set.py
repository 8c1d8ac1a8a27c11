"""`served-ladder` and `deliver-set`: a deliverable set measured at the load its unit serves,
and made end to end by one command. Its own module (listed in `cli/app.py`'s GROUPS) so
`cli/deliver.py` stays under the size limit; no group imports another."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from watchkeeper.cli.argtypes import (
    CATEGORY,
    COUNT,
    MAX_ARMS,
    MAX_TOKENS,
    MINUTES,
    PROBE_TASKS,
    ROUNDS,
    concurrency_list,
)
from watchkeeper.cli.common import add_common, out, plain, progress
from watchkeeper.config import Config


def cmd_served_ladder(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.sets.served_ladder import served_ladder_command

    result = served_ladder_command(
        config,
        recommendation=Path(args.recommendation),
        levels=[int(v) for v in args.levels.split(",")] if args.levels else None,
        rounds=args.rounds,
        taskset=Path(args.taskset) if args.taskset else None,
        per_category=args.per_category,
        max_tokens=args.max_tokens,
        level_min_requests=args.level_min_requests,
        out=Path(args.out) if args.out else None,
        progress=progress,
    )
    if args.json:
        out.print_json(json.dumps(result.ladder.to_json()))
        return 0
    for claim in result.ladder.levels:
        out.print(
            f"c{claim.level}: decode {plain(claim.decode_text())}; E2E p90 "
            f"{plain(claim.e2e_text())}"
        )
    out.print(
        f"pays up to {result.ladder.pays_up_to} of {result.ladder.slots} slot(s); report: "
        f"{plain(result.report)}; record: {plain(result.record)}"
        + (f"; unit re-rendered: {plain(result.unit)}" if result.unit else "")
    )
    return 0


def set_folder(out: str | None, config: Config) -> Path:
    """The set's folder: --out, else `bench.reports_dir`, else `reports`, relative as given
    (`BenchConfig.resolved_reports_dir`'s choice, without making it absolute: a set's paths
    are named as the repository names them), with `~` expanded as that method does.

    An empty `reports_dir` (the default) once became `Path("")`, the working directory, and
    the default set was written into the repository's root beside README.md."""
    return Path(out or config.bench.reports_dir or "reports").expanduser()


def cmd_deliver_set(args: argparse.Namespace, config: Config) -> int:
    import shlex
    import sys

    from watchkeeper.sets.deliver_set import SetPlan, deliver_set_command

    plan = SetPlan(
        out=set_folder(args.out, config),
        budget_min=args.budget,
        service_file=Path(args.service_file),
        root=Path(args.root),
        family=args.family,
        target=args.target,
        draft=args.draft,
        profile=args.profile,
        categories=tuple(args.category or ()),
        per_category=args.per_category,
        identity_per_category=args.identity_per_category or None,
        taskset=Path(args.taskset) if args.taskset else None,
        max_tokens=args.max_tokens,
        sweep_rounds=args.rounds,
        max_arms=args.max_arms,
        ladder_rounds=args.ladder_rounds,
    )
    result = deliver_set_command(
        config, plan, command="watchkeeper " + shlex.join(sys.argv[1:]), progress=progress
    )
    if args.json:
        out.print_json(json.dumps(result.state.to_json()))
    else:
        for stage in result.state.stages:
            out.print(
                f"{plain(stage.name)}: {plain(stage.status)} in {stage.wall_s / 60:.1f} min "
                f"(budget {stage.budget_s / 60:.1f}): {plain(stage.detail)}"
            )
        out.print(f"set page: {plain(result.manifest)}")
    return 0 if result.ok else 1


def register(sub: Any) -> None:
    p = sub.add_parser(
        "served-ladder",
        help="the recommended pick's speed-up at each load its unit serves, as served",
        description="Run the paired load ladder (bench --load-ladder) over the record's "
        "baseline and pick started exactly as the unit runs them ([service] slots, context per "
        "slot, --cache-ram), at 1, 2, 4, ... up to the unit's slots, on the sweep's own "
        "categories. Each level's decode speed-up and E2E p90 ratio with their CIs go on the "
        "record (extra.served_ladder) and the unit is re-rendered, so its header states the "
        "speed-up at 1 and at its slots from this measurement.",
    )
    add_common(p)
    p.add_argument(
        "--recommendation",
        required=True,
        metavar="F",
        help="the set's speculative_recommendation.json (updated in place)",
    )
    p.add_argument(
        "--levels",
        type=concurrency_list,
        metavar="L1,L2,...",
        help="concurrencies (default: 1, 2, 4, ... up to the unit's slots)",
    )
    p.add_argument("--rounds", type=ROUNDS, help="measured rounds per level (default 3)")
    p.add_argument("--taskset", metavar="F", help="task set (default: bench.taskset)")
    p.add_argument("--per-category", type=COUNT, metavar="N", help="first N tasks a category")
    p.add_argument(
        "--max-tokens",
        type=MAX_TOKENS,
        default=0,
        metavar="N",
        help="cap every answer at N tokens, both arms alike (the sweep's cut; 0: the tasks' own)",
    )
    p.add_argument(
        "--level-min-requests",
        type=COUNT,
        metavar="N",
        help="requests per arm, round and level at least (default: the ladder's 10)",
    )
    p.add_argument("--out", metavar="DIR", help="report folder (default: served-ladder/ beside F)")
    p.add_argument("--json", action="store_true", help="print the record's ladder as JSON")
    p.set_defaults(handler=cmd_served_ladder)

    p = sub.add_parser(
        "deliver-set",
        help="make a whole deliverable set in one command, within a budget, resumable",
        description="Sweep (report, record, unit), the pick's ladder at every load the unit "
        "serves, the soak of exactly that unit at depth 1 and at its slots, the nightly's first "
        "A/A pair, the set's page (deliver_set.md), then check-set; all into --out. The plan "
        "and each stage's budget are printed first; a stage that cannot fit is skipped and says "
        "so (its claims stay 'not yet'). The state is kept in --out/deliver_set.json after "
        "every stage: rerunning the same command continues from the first unfinished stage.",
    )
    add_common(p)
    p.add_argument(
        "--out", metavar="DIR", help="the set's folder (default: bench.reports_dir, else reports/)"
    )
    p.add_argument(
        "--budget", type=MINUTES, required=True, metavar="MIN", help="minutes for the whole set"
    )
    p.add_argument(
        "--service-file",
        default="systemd/llama-server-speculative.service",
        metavar="PATH",
        help="the unit the sweep renders (default: %(default)s)",
    )
    p.add_argument("--root", default=".", metavar="DIR", help="repository root for check-set")
    models = p.add_mutually_exclusive_group()
    models.add_argument("--family", help="a built-in model family (qwen, smollm2)")
    models.add_argument("--profile", help="sweep this profile's model and draft")
    models.add_argument("--target", help="the target model (catalog name or GGUF path)")
    p.add_argument("--draft", help="with --target: the draft model")
    p.add_argument("--category", type=CATEGORY, action="append", help="only this category")
    p.add_argument("--per-category", type=COUNT, metavar="N", help="first N tasks a category")
    p.add_argument(
        "--identity-per-category",
        type=PROBE_TASKS,
        default=1,
        metavar="N",
        help="identity probes a category (0: every task; default 1)",
    )
    p.add_argument("--taskset", metavar="F", help="task set (default: bench.taskset)")
    p.add_argument("--max-tokens", type=MAX_TOKENS, default=64, metavar="N")
    p.add_argument("--rounds", type=ROUNDS, help="the sweep's most rounds")
    p.add_argument("--max-arms", type=MAX_ARMS, metavar="N", help="the sweep's arm cap")
    p.add_argument("--ladder-rounds", type=ROUNDS, default=3, metavar="N")
    p.add_argument("--json", action="store_true", help="print the set's state as JSON")
    p.set_defaults(handler=cmd_deliver_set)
