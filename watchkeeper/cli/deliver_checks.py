"""`check-set`, the `deliver` group's second half: the deliverables checked against each
other. Its own module (listed after `deliver` in `cli/app.py`'s GROUPS) to keep
`cli/deliver.py` under the size limit; no group imports another."""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from watchkeeper.cli.common import add_common, out
from watchkeeper.config import Config


def cmd_check_set(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.commands.check_set import check_set_command

    del config  # the set's files say everything; [service] defaults are the committed units'
    result = check_set_command(Path(args.root), [Path(p) for p in args.sets])
    if args.json:
        out.print_json(json.dumps(result.to_json()))
    else:
        for line in result.lines():
            print(line)
    return 0 if result.ok else 1


def register(sub: Any) -> None:
    p = sub.add_parser(
        "check-set",
        help="check a deliverable set's report, JSON, unit, soak, jobs, README and docs agree",
        description="Compare every file of a committed deliverable set (a folder with "
        "speculative_recommendation.json) with that JSON: the unit re-rendered from it (argv, "
        "slots, context, cache, port, paths, digests), the report (campaign, headline, build, "
        "figures, model digests), latest.md, the soak of the unit, the jobs that guard it, and "
        "the README and docs paragraphs that quote it. One line per disagreement naming the "
        "file and field; exit 1 when there is any.",
    )
    add_common(p)
    p.add_argument(
        "sets", nargs="*", metavar="PATH", help="set folders (default: every set under reports/)"
    )
    p.add_argument("--root", default=".", metavar="DIR", help="repository root (default: .)")
    p.add_argument("--json", action="store_true", help="print the disagreements as JSON")
    p.set_defaults(handler=cmd_check_set)
