"""How sensitive is the nightly detector on this host, how often does it cry wolf, how fast is it?

Three figures, each from the real code paths:

1. False-positive rate from a real A/A check (`watchkeeper aa` on SmolLM2: a history campaign
   of --aa-history runs, one server start each, and a test campaign judged against it).
2. The noise of this host, measured from that history (run-to-run CV of per-run medians and
   the within-run spread of per-request decode speeds), then the detection rate of a step of
   2, 3, 5, 10, 20, 30 and 50% at exactly that noise, over --seeds synthetic histories
   (--skip-aa with --run-cv/--trial-sd/--trials reuses a noise measured before).
3. Analysis time for --nights nights x about --series series on Postgres: the nightly
   judgement of the newest night (history read, detector, change-point pass, findings written)
   and the digest's gather step.

    .venv/bin/python benchmarks/detector.py [--seeds 200] [--nights 365] [--series 100]
        [--aa-history 10] [--aa-test 3] [--per-category 4] [--database-url URL]
        [--skip-aa --run-cv 0.089 --trial-sd 0.044 --trials 4] [--skip-scale]

Without --database-url a throw-away Postgres database is created on
postgresql://postgres@127.0.0.1:5432 and dropped afterwards.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Synthetic nights written through the real store (shared with the tests).
from tests.nights import Nights
from watchkeeper.analysis.detector import DetectorParams, Label, RunPoint, SeriesKey, detect_series
from watchkeeper.commands.aa import aa_command, wilson
from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.digest import gather
from watchkeeper.store.db import Database
from watchkeeper.store.history import History
from watchkeeper.tracking import judge_pending

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
EFFECTS = (0.02, 0.03, 0.05, 0.10, 0.20, 0.30, 0.50)


def say(message: str) -> None:
    print(message, flush=True)


def run_aa(args: argparse.Namespace, workdir: Path) -> tuple[Database, int]:
    url = f"sqlite:///{workdir / 'aa.db'}"
    config = Config(database=DatabaseConfig(url=url))
    started = time.monotonic()
    result = aa_command(
        config,
        profile="smollm2-baseline",
        history_runs=args.aa_history,
        test_runs=args.aa_test,
        per_category=args.per_category,
        progress=lambda _m: None,
    )
    low, high = wilson(len(result.flagged), result.tested)
    say(f"A/A on SmolLM2 ({time.monotonic() - started:.0f} s)")
    say(f"  series tested: {result.tested} of {result.series}; labels: {result.labels}")
    rate = result.false_positive_rate or 0.0
    say(
        f"  false-positive rate: {len(result.flagged)}/{result.tested} = {rate:.1%} "
        f"(Wilson 95% CI {low:.1%}-{high:.1%})"
    )
    for flag in result.flagged:
        say(f"    flagged: {flag}")
    return Database(url), result.history_campaign


def measure_noise(db: Database, campaign: int) -> tuple[float, float, int]:
    """Run-to-run CV of per-run medians and within-run log spread of decode tok/s."""
    runs = History(db).run_records(campaigns=[campaign])
    by_category: dict[str, list[list[float]]] = {}
    for run in runs:
        per: dict[str, list[float]] = {}
        for s in run.samples:
            if s.ok and s.decode_tps:
                per.setdefault(s.category, []).append(s.decode_tps)
        for category, values in per.items():
            by_category.setdefault(category, []).append(values)
    run_cvs, trial_sds, trials = [], [], []
    for runs_values in by_category.values():
        medians = [statistics.median(v) for v in runs_values]
        run_cvs.append(statistics.stdev(medians) / statistics.mean(medians))
        trial_sds.extend(
            statistics.stdev(np.log(v)) for v in runs_values if len(v) > 1 and min(v) > 0
        )
        trials.extend(len(v) for v in runs_values)
    return statistics.median(run_cvs), statistics.median(trial_sds), int(np.median(trials))


def power(run_cv: float, trial_sd: float, trials: int, seeds: int) -> None:
    key = SeriesKey("host", "cpu", "smollm2", "cfg", "code_gen", 1, "decode_tps")
    params = DetectorParams(resamples=200)

    def run(rng: np.random.Generator, label: str, level: float) -> RunPoint:
        night = level * (1 + rng.normal(0, run_cv))
        return RunPoint.of(label, night * rng.lognormal(0, trial_sd, trials))

    say(
        f"detection rate of a one-night drop in decode tok/s (15 good runs of history, "
        f"{trials} trials a run, run-to-run CV {run_cv:.1%}, trial spread {trial_sd:.1%}, "
        f"{seeds} seeds)"
    )
    say("  effect  regression  suspicious  no change")
    for effect in (0.0, *EFFECTS):
        labels = []
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            past = [run(rng, f"b{i}", 100.0) for i in range(15)]
            labels.append(detect_series(key, past, run(rng, "new", 100.0 * (1 - effect)), params))
        counts = {lab: sum(f.label is lab for f in labels) / seeds for lab in Label}
        say(
            f"  {effect:>5.0%}  {counts[Label.REGRESSION]:>10.1%}  "
            f"{counts[Label.SUSPICIOUS]:>10.1%}  {counts[Label.NO_CHANGE]:>9.1%}"
        )


def scale(url: str, nights: int, series: int) -> None:
    # A baseline profile gives 3 series per category (decode tok/s, TTFT, error rate) plus
    # peak RSS for the whole run.
    categories = tuple(f"cat{i:02d}" for i in range(max(1, (series - 1) // 3)))
    db = Database(url)
    history = History(db)
    maker = Nights(db, seed=7, categories=categories, tasks_per_category=8)
    started = time.monotonic()
    ids = []
    for i in range(nights):
        build = "b1" if i < nights - 30 else "b2"  # a slower build for the last 30 nights
        ids.append(maker.add(build, tps=100.0 if build == "b1" else 93.0))
        if (i + 1) % 50 == 0:
            say(f"  wrote {i + 1} nights ({time.monotonic() - started:.0f} s)")
    say(f"  wrote {nights} nights in {time.monotonic() - started:.0f} s")
    for cid in ids[:-1]:
        history.mark_analysed(cid, {"series": 0, "labels": {}, "verdicts": []})
    started = time.monotonic()
    judged = judge_pending(history)
    judge_s = time.monotonic() - started
    verdicts = judged[0].night.findings
    started = time.monotonic()
    gather(history, day=datetime.now(UTC).date())  # campaigns are stamped when written
    gather_s = time.monotonic() - started
    say(
        f"  judging the newest night: {len(verdicts)} series x {nights} nights of history "
        f"in {judge_s:.1f} s ({judged[0].counts()})"
    )
    say(f"  digest gather over the history: {gather_s:.1f} s")
    db.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument("--nights", type=int, default=365)
    parser.add_argument("--series", type=int, default=100)
    parser.add_argument("--aa-history", type=int, default=10)
    parser.add_argument("--aa-test", type=int, default=3)
    parser.add_argument("--per-category", type=int, default=4)
    parser.add_argument("--database-url")
    parser.add_argument("--skip-aa", action="store_true", help="use --run-cv/--trial-sd/--trials")
    parser.add_argument("--run-cv", type=float, default=0.01, help="with --skip-aa")
    parser.add_argument("--trial-sd", type=float, default=0.03, help="with --skip-aa")
    parser.add_argument("--trials", type=int, default=16, help="with --skip-aa")
    parser.add_argument("--skip-scale", action="store_true")
    args = parser.parse_args()

    with tempfile.TemporaryDirectory() as tmp:
        if args.skip_aa:
            run_cv, trial_sd, trials = args.run_cv, args.trial_sd, args.trials
        else:
            db, history_campaign = run_aa(args, Path(tmp))
            run_cv, trial_sd, trials = measure_noise(db, history_campaign)
            db.close()
        power(run_cv, trial_sd, trials, args.seeds)

    if args.skip_scale:
        return
    say(f"analysis time on Postgres: {args.nights} nights x ~{args.series} series")
    if args.database_url:
        scale(args.database_url, args.nights, args.series)
        return
    name = f"wk_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        scale(f"postgresql://postgres@127.0.0.1:5432/{name}", args.nights, args.series)
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )


if __name__ == "__main__":
    main()
