"""Command group for the tracker stage: `triage` and `review-pr`."""

from __future__ import annotations

import argparse
import json
from typing import Any

from watchkeeper.cli.common import POSITIVE_ID, add_common, add_sampling, out, plain, progress
from watchkeeper.config import Config
from watchkeeper.errors import ConfigError


def cmd_triage(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.triage import triage_command

    outcome = triage_command(config, progress=progress)
    if args.json:
        out.print_json(json.dumps(outcome.to_json()))
        return 0
    out.print(
        f"triage: {len(outcome.filed)} issue(s) opened, {len(outcome.adopted)} found by marker, "
        f"{len(outcome.commented)} recurrence comment(s), {len(outcome.reopened)} reopened, "
        f"{len(outcome.closed)} closed, {len(outcome.decisions)} maintainer decision(s)"
    )
    if outcome.capped:
        out.print(f"  {plain(len(outcome.capped))} finding(s) wait for tomorrow (per-night cap)")
    for line in outcome.decisions:
        out.print(f"  decision: {plain(line)}")
    for line in outcome.errors:
        out.print(f"  [yellow]will retry next run:[/yellow] {plain(line)}")
    return 0


def cmd_review_pr(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.review_pr import review_pr_command
    from watchkeeper.config.requests import ReviewPrRequest

    request = ReviewPrRequest.from_cli(vars(args))
    if not request.one_of():
        raise ConfigError("review-pr needs exactly one of --pr N or --all-open")
    outcome = review_pr_command(config, request, progress=progress)
    if args.json:
        out.print_json(json.dumps(outcome.to_json()))
        return 0
    for r in outcome.reviews:
        out.print(plain(f"PR #{r.number} @ {r.head_sha[:10]}: {r.status} — {r.detail}"))
    if not outcome.reviews:
        out.print("no pull request to review")
    return 0


def register(sub: Any) -> None:
    """Add this stage's subcommands to the main parser."""
    p = sub.add_parser(
        "triage",
        help="file confirmed findings as tracker issues; sync ack/dismiss/silence; close recovered",
        description="One issue per confirmed finding, deduplicated by the database and a hidden "
        "marker; a recurrence adds a comment; a series back at its baseline for "
        "tracker.recovery_nights nights closes its issue. Maintainers decide with a label "
        "(watchkeeper/ack, /dismiss, /silence) or a `/watchkeeper ack|dismiss|silence` comment. "
        "The token comes from $WATCHKEEPER_TRACKER_TOKEN (tracker.token_env) or a file.",
    )
    add_common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_triage)

    p = sub.add_parser(
        "review-pr",
        help="paired A/B bench of a PR's head against its base, as one sticky PR comment",
        description="For open PRs whose changed files match review.paths: check out base and "
        "head, load review.profiles_file from each, bench head against base and post (or edit) "
        "one comment per PR. A PR already reviewed at its head SHA is skipped.",
    )
    add_common(p)
    p.add_argument("--pr", type=POSITIVE_ID, metavar="N", help="review this pull request")
    p.add_argument("--all-open", action="store_true", help="review every matching open PR")
    p.add_argument("--json", action="store_true")
    add_sampling(p)
    p.set_defaults(handler=cmd_review_pr)
