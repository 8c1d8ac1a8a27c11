"""Command group for regression tracking: `nightly`, `reference`, `digest`, `findings`, `aa`."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, date, datetime
from typing import Any

from rich.markup import escape

from watchkeeper.cli.common import (
    CATEGORY,
    COUNT,
    POSITIVE_ID,
    add_common,
    add_sampling,
    names,
    out,
    plain,
    progress,
    split,
)
from watchkeeper.config import Config
from watchkeeper.errors import ConfigError
from watchkeeper.format import ci, share

_FIRST, _LAST = date(1970, 1, 2), date(9999, 12, 30)
"""The digest's window reaches a day either side of its dates: 0001-01-01 overflowed."""


def _date(text: str) -> date:
    try:
        day = date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None
    if not _FIRST <= day <= _LAST:
        raise argparse.ArgumentTypeError(f"{text}: a date from {_FIRST} to {_LAST}")
    return day


def cmd_digest(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.digest import digest_command

    since = datetime.combine(args.since, datetime.min.time(), tzinfo=UTC) if args.since else None
    outcome = digest_command(
        config,
        day=args.date,
        since=since,
        commit=args.commit or args.push,
        push=args.push,
        rerun=args.rerun,
        progress=progress,
    )
    if args.json:
        out.print_json(json.dumps(outcome.to_json()))
    else:
        out.print(f"[bold]{plain(outcome.digest.headline)}[/bold]")
        out.print(f"digest: {plain(outcome.path)}")
        if outcome.published:
            out.print(plain(outcome.published.message))
    return 0


def cmd_findings(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.findings import findings_decide, findings_list

    if args.action != "list":
        if args.id is None:
            raise ConfigError(f"`findings {args.action}` needs a finding id")
        f = findings_decide(config, action=args.action, finding_id=args.id, note=args.note or "")
        out.print(f"finding #{plain(f.id)} is now {plain(f.status)}: {plain(f.title)}")
        return 0
    rows = findings_list(config, statuses=split(args.status))
    if args.json:
        out.print_json(json.dumps(rows))
    elif not rows:
        out.print("no findings")
    for r in rows if not args.json else []:
        state = "confirmed" if r["confirmed"] else "candidate"
        out.print(
            plain(
                f"#{r['id']:<5} {r['status']:<12} {r['kind']:<18} {state:<9} x{r['occurrences']}"
                f"  {r['title']}"
            )
        )
    return 0


def cmd_aa(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.aa import aa_command

    result = aa_command(
        config,
        profile=args.profile,
        history_runs=args.history_runs,
        test_runs=args.test_runs,
        per_category=args.per_category,
        categories=split(args.categories),
        progress=progress,
    )
    data = result.to_json()
    if args.json:
        out.print_json(json.dumps(data))
        return 0
    rate = result.false_positive_rate
    low, high = data["false_positive_rate_ci95"]
    out.print(
        plain(
            f"A/A on {result.profile}: {len(result.flagged)} of {result.tested} judged series "
            f"flagged ({share(rate)}, {ci(low, high, share)}); "
            f"{result.series - result.tested} with insufficient data"
        )
    )
    out.print(f"labels: {plain(result.labels)}")
    for line in result.flagged:
        out.print(f"  flagged: {plain(line)}")
    if result.environment_noise:
        out.print(f"  the night read as environment noise: {plain(result.environment_noise)}")
    return 0


def cmd_nightly(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.nightly import nightly_command
    from watchkeeper.config.requests import NightlyRequest

    outcome = nightly_command(config, NightlyRequest.from_cli(vars(args)), progress=progress)
    if args.json:
        out.print_json(json.dumps(outcome.to_json()))
        return 0
    for night in outcome.nights:
        kind = "A/A night" if night.aa else "current vs reference"
        pinned = " (reference pinned tonight)" if night.pinned_now else ""
        out.print(
            f"[bold]{plain(night.profile)}[/bold]: campaign {night.campaign_id}, {kind} "
            f"#{night.reference_id}{pinned}"
        )
        for r in night.ratios:
            ci = (
                f"[{r.low:.3f}, {r.high:.3f}]"
                if r.low is not None and r.high is not None
                else "no CI"
            )
            mark = " confirmed" if r.confirmed else ""
            out.print(
                plain(
                    f"  {r.category:<12} {r.estimate:.3f} {ci} {r.verdict}{mark} "
                    f"(n={r.n_pairs} pairs, {r.n_tasks} tasks x {r.n_rounds} rounds, "
                    f"threshold {r.threshold:.0%})"
                )
            )
            check = next((c for c in night.checks if c.category == r.category), None)
            if check is not None and check.describe():
                out.print(f"    {escape(check.describe())}")
        for r in night.tails:
            ci = f"[{r.low:.3f}, {r.high:.3f}]" if r.low is not None and r.high is not None else ""
            what = "reference p90 TTFT / current" if r.metric == "ttft_p90" else "current / ref"
            out.print(
                plain(
                    f"  {r.metric:<12} {r.estimate:.3f} {ci} {r.verdict} "
                    f"({what}; watched, not filed)"
                )
            )
        if night.report_path:
            out.print(f"  report: {plain(night.report_path)}")
    for profile, fa in outcome.false_alarms:
        if fa.family_rate is not None:
            out.print(
                plain(
                    f"{profile}: {fa.family_flagged} of {fa.nights} A/A nights with a "
                    f"confirmed flag in any series ({fa.family_rate:.1%}, "
                    f"Wilson CI {fa.family_low:.1%}-"
                    f"{fa.family_high:.1%}; target <= 1% per profile-night)"
                )
            )
    return 0


def cmd_reference(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.nightly import reference_history, reference_pin

    if args.action == "pin":
        if not args.profile:
            raise ConfigError("`reference pin` needs --profile")
        ref = reference_pin(
            config, profile=args.profile, by=args.by, reason=args.reason or "", progress=progress
        )
        out.print(
            f"reference #{plain(ref.id)} of {plain(ref.profile)} pinned by {plain(ref.pinned_by)}"
        )
        return 0
    rows = reference_history(config, profile=args.profile, active_only=args.action == "show")
    if args.json:
        out.print_json(json.dumps(rows))
    elif not rows:
        out.print("no reference pinned yet (the first nightly run pins one)")
    for row in rows if not args.json else []:
        state = "active" if row["active"] else "retired"
        out.print(
            plain(
                f"#{row['id']} {row['profile']} {state}: pinned {row['pinned_at']} by "
                f"{row['pinned_by']} ({row['reason'] or 'no reason given'}); {row['binary']}; "
                f"model {str(row['model_sha256'])[:12]}; flags {row['config_hash']}"
            )
        )
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "nightly",
        help="paired run of tonight's system against its pinned reference; one ratio per series",
        description="Runs the current system and the pinned reference (binary and models by "
        "sha256, flags) back to back per task in the same run, and stores one ratio "
        "current/reference per series with a CI over rounds and tasks. The first run pins the "
        "reference. A regression (CI excludes 1, estimate beyond nightly.min_effect) is "
        "confirmed by an immediate rerun or the next night before it becomes a finding.",
    )
    add_common(p)
    p.add_argument("--profile", action="append", metavar="P", help="default: nightly.profiles")
    p.add_argument(
        "--recommendation",
        metavar="F",
        help="a sweep's speculative_recommendation.json: guard the setting its unit runs "
        "against its pinned reference (its profile comes from the record)",
    )
    p.add_argument(
        "--category",
        action="append",
        type=CATEGORY,
        metavar="NAME",
        help="only this category's tasks (repeatable; default: nightly.categories, else all)",
    )
    p.add_argument("--json", action="store_true")
    add_sampling(p)
    p.set_defaults(handler=cmd_nightly)

    p = sub.add_parser(
        "reference",
        help="show, pin or list the nightly's pinned references",
        description="show: the active reference per profile; history: every pin; pin: make "
        "the current system of --profile the reference (after accepting a regression or a "
        "planned upgrade).",
    )
    add_common(p)
    p.add_argument("action", choices=["show", "pin", "history"])
    p.add_argument("--profile", metavar="P")
    p.add_argument("--by", help="who pins (default: the login name)")
    p.add_argument("--reason", help="why (stored with the pin)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_reference)

    p = sub.add_parser(
        "digest",
        help="judge new campaigns and write the morning digest (optionally commit and push)",
        description="Run the regression detector over every finished campaign not judged yet, "
        "then write reports/digests/DATE.md with plots. --commit commits it to the reports "
        "repository ([digest] repo, branch, author); --push also pushes, rebasing on a "
        "rejected push. Rerunning on the same night updates the same file and never makes an "
        "empty commit.",
    )
    add_common(p)
    p.add_argument("--date", type=_date, help="digest day (default: today, UTC)")
    p.add_argument(
        "--since", type=_date, metavar="DATE", help="window start (default: noon the day before)"
    )
    p.add_argument("--commit", action="store_true", help="commit to the reports repository")
    p.add_argument("--push", action="store_true", help="commit and push (implies --commit)")
    p.add_argument(
        "--rerun",
        action="store_true",
        help="confirm new candidates now by rerunning only their series (starts servers)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_digest)

    p = sub.add_parser(
        "findings",
        help="list findings or change their status (ack, dismiss, silence, fix, reopen)",
        description="ack accepts the new level as the series' baseline; dismiss records a "
        "false positive; silence keeps counting but files nothing; fix closes it.",
    )
    add_common(p)
    p.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=["list", "ack", "dismiss", "silence", "fix", "reopen"],
    )
    p.add_argument("id", nargs="?", type=POSITIVE_ID)
    p.add_argument("--note", help="why (stored with the status)")
    p.add_argument(
        "--status",
        type=names,
        help="comma-separated statuses to list, or 'all' (default: active,acknowledged)",
    )
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_findings)

    p = sub.add_parser(
        "aa",
        help="A/A check: measure the detector's false-positive rate on this host",
        description="Run one profile as two campaigns (a history, then a test night) and "
        "judge the second against the first. Nothing changed, so every flag is a false "
        "positive.",
    )
    add_common(p)
    p.add_argument("--profile", default="smollm2-baseline")
    p.add_argument("--history-runs", type=COUNT, default=10, metavar="N")
    p.add_argument("--test-runs", type=COUNT, default=3, metavar="N")
    p.add_argument("--per-category", type=COUNT, default=5, metavar="N")
    p.add_argument("--categories", type=names, metavar="A,B", help="only these task categories")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_aa)
