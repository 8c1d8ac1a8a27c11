"""A chain against its parts: `ngram-mod,draft-simple` beside `ngram-mod` alone, `draft-simple`
alone and the baseline (`--spec-type none`), on code edits (and prose, where n-gram lookup has
little to copy), with paired 95% CIs per category and acceptance per arm and category.

One `watchkeeper bench` campaign of the Qwen2.5-Coder pair (1.5B target, 0.5B draft, n_max 4),
measured as the sweep measures a race: one process per arm (ngram-mod's arms renewed every
round, their n-gram state outlives requests), prompts restored from the server's cache in
later rounds (decode speed unchanged, prefill skipped), answers cut at `--max-tokens`, the
exact identity probes on the first task of `--identity-category` only (prose: a short prompt;
the exact mode prefills a prompt a token at a time, and the batched mode's A/A floor prefills
it afresh at every position: a ~600-token code edit took either past 10 minutes here on
2026-12-07). `--speed-only` skips the cost calibration (the draft model alone and the
verification cost: 4.3 minutes of a smoke run here) and the identity probes: the speed-ups and
acceptance alone. The report (report.md and its plots) goes to `--out`; progress lines carry
the minutes since the start.

    flock /tmp/wk-measure.lock .venv/bin/python benchmarks/chain_vs_parts.py \
        --out reports/2026-12-07-chain-vs-parts [--rounds 3] [--per-category 2] \
        [--max-tokens 64] [--db wk.db] [--speed-only]
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from watchkeeper.analysis.acceptance import result_curves
from watchkeeper.campaign.bench_plan import plan_bench
from watchkeeper.campaign.bench_report import bench_and_report
from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.config import BenchConfig, Config, DatabaseConfig, ProfileConfig
from watchkeeper.server.profiles import QWEN_DRAFT, QWEN_TARGET

ARMS = {
    "qwen-baseline": ProfileConfig(model=QWEN_TARGET, description="Qwen2.5-Coder 1.5B alone"),
    "qwen-ngram-mod": ProfileConfig(model=QWEN_TARGET, spec_type="ngram-mod"),
    "qwen-draft4": ProfileConfig(
        model=QWEN_TARGET, draft_model=QWEN_DRAFT, spec_type="draft-simple", draft_n_max=4
    ),
    "qwen-chain": ProfileConfig(
        model=QWEN_TARGET,
        draft_model=QWEN_DRAFT,
        spec_type="ngram-mod,draft-simple",
        draft_n_max=4,
        description="ngram-mod where the context repeats, the 0.5B draft elsewhere",
    ),
}


def _taskset(path: Path, categories: list[str], per_category: int, max_tokens: int) -> Path:
    chosen: dict[str, list[dict[str, object]]] = {c: [] for c in categories}
    for line in Path("jobs/tasksets/standard.jsonl").read_text().splitlines():
        task = json.loads(line)
        picked = chosen.get(task["category"])
        if picked is not None and len(picked) < per_category:
            picked.append({**task, "max_tokens": min(int(task["max_tokens"]), max_tokens)})
    path.write_text("".join(json.dumps(t) + "\n" for c in categories for t in chosen[c]))
    return path


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--per-category", type=int, default=3)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument("--categories", default="code_edit,prose")
    parser.add_argument("--identity-category", default="prose")
    parser.add_argument(
        "--speed-only",
        action="store_true",
        help="no cost calibration and no identity probes (BenchPlan.speed_only): the rounds alone",
    )
    parser.add_argument("--db", type=Path, help="SQLite file to keep (default: a temporary one)")
    args = parser.parse_args()
    unwind_on_sigterm()
    categories = args.categories.split(",")
    start = time.monotonic()

    def progress(message: str) -> None:
        print(f"[{(time.monotonic() - start) / 60:5.1f} min] {message}", flush=True)

    with tempfile.TemporaryDirectory() as tmp:
        db = args.db.resolve() if args.db else Path(tmp) / "wk.db"
        config = Config(
            database=DatabaseConfig(url=f"sqlite:///{db}"),
            bench=BenchConfig(reports_dir=str(args.out), restart_every=0),
            profiles=ARMS,
        )
        tasks = _taskset(Path(tmp) / "tasks.jsonl", categories, args.per_category, args.max_tokens)
        plan = plan_bench(
            config,
            profiles=list(ARMS),
            rounds=args.rounds,
            taskset=tasks,
            limit=None,
            per_category=None,
            concurrency=None,
        )
        probed = tuple(t for t in plan.tasks if t.category == args.identity_category)[:1]
        plan = replace(plan, reuse_prompts=True, identity_tasks=probed, speed_only=args.speed_only)
        result = bench_and_report(config, plan, fit_context=None, progress=progress)
    print(f"\ncampaign {result.campaign_id}: {len(plan.tasks)} tasks x {args.rounds} rounds")
    for arm in ARMS:
        for category in ["all", *categories]:
            s = result.stats(arm, category)
            if s is None or s.speedup is None:
                continue
            ci = s.speedup
            acc = f"{s.acceptance_rate:.1%}" if s.acceptance_rate is not None else "n/a"
            print(
                f"{arm:15} {category:10} {ci.estimate:.3f}x ({ci.low:.3f}-{ci.high:.3f}) "
                f"{ci.verdict:16} acceptance {acc} ({s.accepted}/{s.drafted}) "
                f"median {s.median_tps or 0:.1f} tok/s"
            )
    for c in result_curves(result):
        rates = " ".join(f"{r:.2f}" for r in c.rates)
        print(f"{c.arm:15} per position: {rates} (drafts {c.drafts:.0f})")


if __name__ == "__main__":
    main()
