"""How many rounds does a trustworthy speed-up need?

Runs one paired bench (SmolLM2 baseline vs self-draft) with R measured rounds, then recomputes
the speed-up, its 95% CI (two-way bootstrap over tasks and rounds, as the bench) and the
verdict from the first k rounds only, k = 1..R. Fewer than 3 rounds give no CI.

    .venv/bin/python benchmarks/ci_width.py [--rounds 6] [--per-category 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile

from watchkeeper.analysis.benchmark import ALL, throughput_pairs
from watchkeeper.analysis.stats import paired_speedup
from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_plan import plan_bench
from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.config import Config
from watchkeeper.store.db import Database
from watchkeeper.store.repository import Repository


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-category", type=int, default=2)
    parser.add_argument("--candidate", default="smollm2-selfdraft")
    args = parser.parse_args()
    unwind_on_sigterm()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["WATCHKEEPER_DATA_DIR"] = tmp
        config = Config()
        plan = plan_bench(
            config,
            profiles=["smollm2-baseline", args.candidate],
            rounds=args.rounds,
            taskset=None,
            limit=None,
            per_category=args.per_category,
            concurrency=None,
        )
        result = execute_bench(config, plan, progress=lambda m: None)
        db = Database(config.database.resolved_url())
        runs = Repository(db).load_runs(result.campaign_id)
        db.close()
    # Exactly the pairs the bench's verdicts use: measured rounds, clean requests (no logprobs;
    # the identity probes are separate runs), same task and round.
    pairs = throughput_pairs(runs, "smollm2-baseline", args.candidate).get(ALL, [])
    print(f"candidate {args.candidate}, {len(plan.tasks)} tasks, rounds 1..{args.rounds}")
    print(f"{'rounds':>6} {'pairs':>6} {'speedup':>8} {'95% CI':>15} {'half-width':>10} verdict")
    for k in range(1, args.rounds + 1):
        ci = paired_speedup([p for p in pairs if p.round <= k])
        if ci is None:
            continue
        if not ci.has_ci:
            print(
                f"{k:>6} {ci.n_pairs:>6} {ci.estimate:>8.3f} {'(no CI)':>15} {'':>10} {ci.verdict}"
            )
            continue
        half = ci.half_width or 0.0
        print(
            f"{k:>6} {ci.n_pairs:>6} {ci.estimate:>8.3f} {ci.low:>7.3f}-{ci.high:<7.3f} "
            f"{half:>10.3f} {ci.verdict}"
        )


if __name__ == "__main__":
    main()
