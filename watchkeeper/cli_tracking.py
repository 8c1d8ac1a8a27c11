"""Command line for regression tracking: `digest`, `findings`, `aa` (thin, like cli.py)."""

from __future__ import annotations

import argparse
import json
from datetime import UTC, date, datetime
from typing import Any

from watchkeeper.cli import _add_common, _progress, _split, out
from watchkeeper.config import Config
from watchkeeper.errors import ConfigError


def _date(text: str) -> date:
    try:
        return date.fromisoformat(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {text!r}") from None


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
        progress=_progress if not args.json else (lambda _m: None),
    )
    if args.json:
        out.print_json(json.dumps(outcome.to_json()))
    else:
        out.print(f"[bold]{outcome.digest.headline}[/bold]")
        out.print(f"digest: {outcome.path}")
        if outcome.published:
            out.print(outcome.published.message)
    return 0


def cmd_findings(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.store.db import Database
    from watchkeeper.store.history import OPEN_STATUSES, History
    from watchkeeper.tracking import set_status

    db = Database(config.database.resolved_url())
    try:
        history = History(db)
        if args.action != "list":
            if args.id is None:
                raise ConfigError(f"`findings {args.action}` needs a finding id")
            f = set_status(history, args.id, args.action, args.note or "")
            out.print(f"finding #{f.id} is now {f.status}: {f.title}")
            return 0
        statuses = _split(args.status) if args.status else list(OPEN_STATUSES)
        found = history.findings(statuses=None if args.status == "all" else statuses)
        rows: list[dict[str, Any]] = [
            {
                "id": f.id,
                "kind": f.kind,
                "label": f.label,
                "status": f.status,
                "confirmed": f.confirmed_at is not None,
                "occurrences": f.occurrences,
                "created_at": f.created_at.isoformat(),
                "title": f.title,
            }
            for f in found
        ]
        if args.json:
            out.print_json(json.dumps(rows))
        elif not rows:
            out.print("no findings")
        for r in rows if not args.json else []:
            state = "confirmed" if r["confirmed"] else "candidate"
            out.print(
                f"#{r['id']:<5} {r['status']:<12} {r['kind']:<18} {state:<9} x{r['occurrences']}"
                f"  {r['title']}"
            )
        return 0
    finally:
        db.close()


def cmd_aa(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.aa import aa_command

    result = aa_command(
        config,
        profile=args.profile,
        history_runs=args.history_runs,
        test_runs=args.test_runs,
        per_category=args.per_category,
        categories=_split(args.categories),
        progress=_progress if not args.json else (lambda _m: None),
    )
    data = result.to_json()
    if args.json:
        out.print_json(json.dumps(data))
        return 0
    rate = result.false_positive_rate
    low, high = data["false_positive_rate_ci95"]
    out.print(
        f"A/A on {result.profile}: {len(result.flagged)} of {result.tested} judged series "
        f"flagged ({'n/a' if rate is None else f'{rate:.1%}'}, 95% CI {low:.1%}-{high:.1%}); "
        f"{result.series - result.tested} with insufficient data"
    )
    out.print(f"labels: {result.labels}")
    for line in result.flagged:
        out.print(f"  flagged: {line}")
    if result.environment_noise:
        out.print(f"  the night read as environment noise: {result.environment_noise}")
    return 0


def register(sub: Any) -> None:
    p = sub.add_parser(
        "digest",
        help="judge new campaigns and write the morning digest (optionally commit and push)",
        description="Run the regression detector over every finished campaign not judged yet, "
        "then write reports/digests/DATE.md with plots. --commit commits it to the reports "
        "repository ([digest] repo, branch, author); --push also pushes, rebasing on a "
        "rejected push. Rerunning on the same night updates the same file and never makes an "
        "empty commit.",
    )
    _add_common(p)
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
    _add_common(p)
    p.add_argument(
        "action",
        nargs="?",
        default="list",
        choices=["list", "ack", "dismiss", "silence", "fix", "reopen"],
    )
    p.add_argument("id", nargs="?", type=int)
    p.add_argument("--note", help="why (stored with the status)")
    p.add_argument(
        "--status", help="comma-separated statuses to list, or 'all' (default: active,acknowledged)"
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
    _add_common(p)
    p.add_argument("--profile", default="smollm2-baseline")
    p.add_argument("--history-runs", type=int, default=10, metavar="N")
    p.add_argument("--test-runs", type=int, default=3, metavar="N")
    p.add_argument("--per-category", type=int, default=5, metavar="N")
    p.add_argument("--categories", metavar="A,B", help="only these task categories")
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_aa)
