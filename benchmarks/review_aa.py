"""review-pr on identical code: can a review of a no-op change say "faster" or "regresses"?

Runs the review's own bench (`review_bench`: the pilot, the rounds it sizes for the CI target
within the time budget, the verdict line of the PR comment) `--runs` times with base and head
defining the same profile, at the default `[review]` settings unless told otherwise, each on
fresh servers and a throw-away SQLite store. Prints one line per review and a summary; exits 1
if any review names a winner between identical sides.

    .venv/bin/python benchmarks/review_aa.py [--runs 10] [--profile smollm2-baseline] [--json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.commands.review_pr import Side, review_bench
from watchkeeper.config import Config
from watchkeeper.server.profiles import get_profile
from watchkeeper.store.db import Database
from watchkeeper.tracker.pr_comment import ProfileReview, verdict


def one_review(config: Config, profile: str, index: int) -> dict[str, Any]:
    side = Side({"p": get_profile(config, profile)}, {})
    db = Database(config.database.resolved_url())
    started = time.monotonic()
    try:
        result = review_bench(config, db, "p", side, side, progress=lambda _: None)
    finally:
        db.close()
    stats = result.stats("head-p")
    ci = stats.speedup if stats is not None else None
    line = verdict([ProfileReview("p", result)])
    return {
        "review": index,
        "minutes": round((time.monotonic() - started) / 60, 1),
        "rounds": result.method.rounds,
        "tasks": result.method.tasks,
        "estimate": ci.estimate if ci else None,
        "ci95": [ci.low, ci.high] if ci and ci.has_ci else None,
        "half_width": ci.half_width if ci else None,
        "verdict": ci.verdict if ci else None,
        "sizing": result.extras.get("sizing", ""),
        "headline": line,
        "named_a_winner": line.startswith(("**head is faster", "**⚠️ head regresses")),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--profile", default="smollm2-baseline")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    unwind_on_sigterm()
    out: list[dict[str, Any]] = []
    with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
        for i in range(1, args.runs + 1):
            with tempfile.TemporaryDirectory(prefix="wk-review-aa-") as tmp:
                os.environ["WATCHKEEPER_DATA_DIR"] = tmp
                config = Config()
                config = config.model_copy(
                    update={"bench": config.bench.model_copy(update={"reports_dir": tmp})}
                )
                r = one_review(config, args.profile, i)
            out.append(r)
            ci = r["ci95"]
            ci_text = f"[{ci[0]:.3f}, {ci[1]:.3f}]" if ci else "(no CI)"
            print(
                f"review {i}: {r['estimate']:.3f} {ci_text} {r['verdict']}, {r['rounds']} rounds "
                f"x {r['tasks']} tasks, {r['minutes']} min; {r['sizing']}\n  {r['headline']}",
                flush=True,
            )
        winners = sum(r["named_a_winner"] for r in out)
        print(f"{winners} of {len(out)} reviews of identical code named a winner")
    if args.json:
        print(json.dumps({"reviews": out, "named_a_winner": winners}, indent=2))
    sys.exit(1 if winners else 0)


if __name__ == "__main__":
    main()
