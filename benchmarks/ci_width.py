"""How many rounds does a trustworthy speed-up need?

Runs one paired bench (SmolLM2 baseline vs self-draft) with R measured rounds, then recomputes
the speed-up and its 95% cluster-bootstrap CI using only the first k rounds, k = 1..R.

    .venv/bin/python benchmarks/ci_width.py [--rounds 6] [--per-category 2]
"""

from __future__ import annotations

import argparse
import os
import tempfile

from watchkeeper.analysis.stats import Pair, paired_speedup
from watchkeeper.commands.bench import execute_bench, plan_bench
from watchkeeper.config import Config
from watchkeeper.store.db import Database
from watchkeeper.store.repository import Repository


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-category", type=int, default=2)
    parser.add_argument("--candidate", default="smollm2-selfdraft")
    args = parser.parse_args()
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
    base = {(s.task_id, r.round): s for r in runs if r.arm == "smollm2-baseline" for s in r.samples}
    pairs = [
        Pair(s.task_id, r.round, base[(s.task_id, r.round)].decode_tps_server, s.decode_tps_server)
        for r in runs
        if r.arm == args.candidate and not r.is_warmup
        for s in r.samples
        if s.ok
        and s.decode_tps_server
        and (s.task_id, r.round) in base
        and base[(s.task_id, r.round)].decode_tps_server
    ]
    print(f"candidate {args.candidate}, {len(plan.tasks)} tasks, rounds 1..{args.rounds}")
    print(f"{'rounds':>6} {'pairs':>6} {'speedup':>8} {'95% CI':>15} {'half-width':>10}")
    for k in range(1, args.rounds + 1):
        ci = paired_speedup([p for p in pairs if p.round <= k])
        if ci is None:
            continue
        half = (ci.high - ci.low) / 2
        print(
            f"{k:>6} {ci.n_pairs:>6} {ci.estimate:>8.3f} {ci.low:>7.3f}-{ci.high:<7.3f} {half:>10.3f}"
        )


if __name__ == "__main__":
    main()
