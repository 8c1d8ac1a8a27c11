"""How sensitive is the nightly detector on this host, how often does it cry wolf, how fast is it?

Two designs. ``--design absolute`` (the default, the old detector: tonight's absolute tok/s
judged against earlier nights) gives three figures, each from the real code paths:

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

``--design paired`` (the nightly: current vs pinned reference in one run, one ratio per series
judged by `paired_speedup` at a 3% threshold, a flag confirmed by an immediate rerun or the
next night):

1. --nights real A/A nights: a paired bench (`execute_bench`, throw-away SQLite store) of
   smollm2-baseline against smollm2-twin, the same profile under another name, --rounds rounds
   over --per-category tasks of each category of the standard task set, max_tokens capped at
   64. Each night gives a table of log(twin/baseline) decode tok/s (server timings) per task
   and round; per night the ratio, its CI half-width and the round-to-round sd, and across
   nights the night-to-night sd of the ratio, and what a night cost.
2. Power and false alarms by simulation on that real noise: a simulated night is one of the
   real tables resampled (tasks and rounds independently, with replacement) with a drop d
   applied to every candidate value; flag = verdict "slower". Detection within n nights =
   confirmed (two flags: a night and its rerun, or two consecutive nights) by night n. The
   false-alarm rate is a confirmed regression within one night (rerun included) on A/A data;
   the single-flag rate is a night's flag alone. For the overall series and each category's
   (its rows of the tables).

    .venv/bin/python benchmarks/detector.py --design paired [--nights 4] [--rounds 10]
        [--per-category 2] [--sims 200] [--aa-sims 1000]
        [--resamples 500] [--reuse FILE] [--json]

--reuse FILE loads the A/A tables from FILE when it exists (no server started), else measures
them and saves them there; --sims 0 measures only.

A uniform drop is the best case for the detector. Each simulated series is also run with the
same mean drop spread unevenly (`PATTERNS`, at 5% and 10%): per-task drops with sd `TAU`
("uneven tasks"), the whole drop on a quarter of the tasks ("one task in four"), on one
category only (the overall series), on a `STALL_SHARE` of the cells ("stalls": what
winsorizing would hide; the column "night 1 tail" is the share of first nights that said
`suspicious: tail regression`), and on the rounds run under the load that triggers it ("under
load"). The family false-alarm rate simulates whole A/A profile-nights: every series judged on
one resampled night, confirmed as the nightly confirms (the overall series by its rerun or the
previous night, a category only by the previous night). --synthetic N replaces the real
nights with synthetic ones (cell sd --cell-sd, round drift --round-sd) to try the simulation
without a server.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import statistics
import sys
import tempfile
import threading
import time
import uuid
import warnings
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import numpy as np
import psycopg
from psycopg import sql

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

# Synthetic nights written through the real store (shared with the tests).
from tests.support.nights import Nights
from watchkeeper.analysis.stats import Pair, RatioCI, classify, paired_speedup
from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.commands.aa import aa_command, wilson
from watchkeeper.config import Config, DatabaseConfig, parse_config
from watchkeeper.config.model import NightlyConfig
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.nightly.detector import DetectorParams, Label, RunPoint, SeriesKey, detect_series
from watchkeeper.nightly.digest import gather
from watchkeeper.nightly.findings import judge_pending
from watchkeeper.nightly.ratios import MIN_AA_NIGHTS, NightNoise, prior_night_sd
from watchkeeper.server.profiles import BUILTIN_PROFILES
from watchkeeper.store.db import Database
from watchkeeper.store.history import History
from watchkeeper.store.repository import Repository

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"
EFFECTS = (0.02, 0.03, 0.05, 0.10, 0.20, 0.30, 0.50)
THRESHOLD = 0.03


def say(message: str) -> None:
    print(message, flush=True)


def run_aa(args: argparse.Namespace, workdir: Path) -> tuple[Database, int, float, float]:
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
    return Database(url), result.history_campaign, rate, (time.monotonic() - started) / 60


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


def power(
    run_cv: float, trial_sd: float, trials: int, seeds: int
) -> dict[float, dict[Label, float]]:
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
    rates: dict[float, dict[Label, float]] = {}
    for effect in sorted({0.0, *EFFECTS, *DROPS}):
        labels = []
        for seed in range(seeds):
            rng = np.random.default_rng(seed)
            past = [run(rng, f"b{i}", 100.0) for i in range(15)]
            labels.append(detect_series(key, past, run(rng, "new", 100.0 * (1 - effect)), params))
        counts = {lab: sum(f.label is lab for f in labels) / seeds for lab in Label}
        rates[effect] = counts
        say(
            f"  {effect:>5.0%}  {counts[Label.REGRESSION]:>10.1%}  "
            f"{counts[Label.SUSPICIOUS]:>10.1%}  {counts[Label.NO_CHANGE]:>9.1%}"
        )
    return rates


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


# --- the paired design: current vs reference in one run, judged by its ratio ---------------

BASELINE = "smollm2-baseline"
TWIN = "smollm2-twin"
DROPS = (0.02, 0.03, 0.05, 0.10, 0.20)
MAX_TOKENS = 64
Table = dict[str, Any]
"""One A/A night: {"minutes": m, "rounds": [r...], "tasks": {id: {"category", "log_ratios"}}}."""


def measure_aa_night(args: argparse.Namespace, index: int) -> Table:
    """One real A/A night: smollm2-baseline against its twin, paired, on a throw-away store."""
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["WATCHKEEPER_DATA_DIR"] = tmp  # run logs; models stay in the cache
        url = f"sqlite:///{Path(tmp) / 'wk.db'}"
        config = parse_config(
            {
                "database": {"url": url},
                "bench": {"reports_dir": str(Path(tmp) / "reports")},
                "profiles": {TWIN: BUILTIN_PROFILES[BASELINE].model_dump()},
            },
            source="benchmarks/detector.py",
        )
        tasks = select(
            load_taskset(config.bench.resolved_taskset()),
            limit=None,
            per_category=args.per_category,
        )
        tasks = [replace(t, max_tokens=min(t.max_tokens, MAX_TOKENS)) for t in tasks]
        plan = BenchPlan(
            profiles=(BASELINE, TWIN),
            tasks=tuple(tasks),
            rounds=args.rounds,
            warmup_rounds=config.bench.warmup_rounds,
            warmup_tasks=len(tasks) if args.warmup_all else min(2, len(tasks)),
            concurrency=1,
            restart_every=args.restart_every,
        )
        started = time.monotonic()
        with LoadSampler() as load:
            result = execute_bench(config, plan, progress=lambda _m: None, drift_only=True)
        minutes = (time.monotonic() - started) / 60
        db = Database(url)
        runs = Repository(db).load_runs(result.campaign_id)
        db.close()
    speeds: dict[tuple[str, str, int], float] = {}
    for run in runs:
        if run.is_warmup:
            continue
        for s in run.samples:
            if s.ok and s.decode_tps_server:
                speeds[(run.arm, s.task_id, run.round)] = s.decode_tps_server
    rounds = list(range(1, args.rounds + 1))
    table: Table = {
        "night": index,
        "minutes": minutes,
        "load": load.mean,
        "rounds": rounds,
        "warmup_tasks": plan.warmup_tasks,
        "restart_every": plan.restart_every,
        "tasks": {},
    }
    for t in tasks:
        row = []
        for r in rounds:
            b, c = speeds.get((BASELINE, t.id, r)), speeds.get((TWIN, t.id, r))
            row.append(math.log(c / b) if b and c else None)
        table["tasks"][t.id] = {"category": t.category, "log_ratios": row}
    return table


class LoadSampler:
    """The host's 1-minute load average, sampled every 30 s while a night runs.

    A night is labelled quiet or busy by this figure, not by what the person running it
    remembers. The night itself keeps the load near 2 (a llama-server's two threads and the
    client: 2.1 measured on the quiet night of 2026-11-25); a neighbour adds to it."""

    def __init__(self, every_s: float = 30.0) -> None:
        self._every = every_s
        self._samples: list[float] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.wait(self._every):
            self._samples.append(os.getloadavg()[0])

    def __enter__(self) -> LoadSampler:
        self._thread.start()
        return self

    def __exit__(self, *_exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._samples.append(os.getloadavg()[0])

    @property
    def mean(self) -> float:
        return statistics.mean(self._samples) if self._samples else math.nan


QUIET_LOAD = 2.6
"""Mean 1-minute load below which a night counts as quiet (the night alone: about 2.1)."""


def host_state(load: float | None) -> str:
    """quiet / busy from a night's mean load (`QUIET_LOAD`: the night alone reads about 2)."""
    if load is None or math.isnan(load):
        return "?"
    return "quiet" if load < QUIET_LOAD else "busy"


def night_noise_of(logs: list[float]) -> NightNoise:
    """The A/A nights' spread as the nightly reads it (t with n - 1 degrees of freedom)."""
    return NightNoise(statistics.stdev(logs), f"{len(logs)} A/A nights", len(logs) - 1)


def as_array(table: Table, category: str | None = None) -> np.ndarray:
    rows = [
        [np.nan if v is None else v for v in task["log_ratios"]]
        for task in table["tasks"].values()
        if category is None or task["category"] == category
    ]
    return np.array(rows, dtype=float)


def judge(
    array: np.ndarray, drop: float, resamples: int, seed: int, night_sd: float = 0.0
) -> RatioCI | None:
    """The nightly's verdict on one table: `paired_speedup`, then the CI widened to at least
    +-1.96 night sds as `nightly.ratios.with_night_noise` does."""
    shift = math.log1p(-drop)
    pairs = [
        Pair(f"t{i}", j, 1.0, math.exp(v + shift))
        for (i, j), v in np.ndenumerate(array)
        if not np.isnan(v)
    ]
    ci = paired_speedup(pairs, resamples=resamples, seed=seed, threshold=THRESHOLD)
    if ci is None or not ci.has_ci or night_sd <= 0:
        return ci
    half = 1.959964 * night_sd
    low = min(ci.low, ci.estimate * math.exp(-half))
    high = max(ci.high, ci.estimate * math.exp(half))
    return replace(ci, low=low, high=high, verdict=classify(ci.estimate, low, high, THRESHOLD))


def noise(tables: list[Table], resamples: int) -> dict[str, Any]:
    nights = []
    for table in tables:
        array = as_array(table)
        ci = judge(array, 0.0, resamples, 0)
        with np.errstate(all="ignore"):
            per_round = np.nanmean(array, axis=0)
        nights.append(
            {
                "night": table["night"],
                "minutes": table["minutes"],
                "load": table.get("load"),
                "host": host_state(table.get("load")),
                "tasks": int(array.shape[0]),
                "rounds": int(array.shape[1]),
                "ratio": ci.estimate if ci else None,
                "ci95": [ci.low, ci.high] if ci else None,
                "half_width": ci.half_width if ci else None,
                "verdict": ci.verdict if ci else None,
                "round_sd": float(np.nanstd(per_round, ddof=1)),
            }
        )
    logs = [math.log(n["ratio"]) for n in nights if n["ratio"]]
    return {
        "nights": nights,
        "night_to_night_sd": statistics.stdev(logs) if len(logs) > 1 else None,
        "mean_half_width": statistics.mean(n["half_width"] or 0 for n in nights),
    }


PATTERNS = ("uniform", "uneven tasks", "one task in four", "one category", "stalls", "under load")
"""How a mean drop d is spread over a night's cells (`apply_pattern`). The uniform drop is the
old model; the others are slowdowns measured or seen on this host that it cannot represent."""
PATTERN_DROPS = (0.05, 0.10)
"""Mean drops simulated for the patterns other than uniform (uniform: `DROPS`)."""
TAU = 0.05
"""uneven tasks: the per-task drops' sd around their mean d."""
STALL_SHARE = 0.10
"""stalls: share of cells (requests) that stall; each is d / share slower (5%: 50% slower)."""
LOAD_SHARE = 0.5
"""under load: share of rounds run while the host is in the state that slows the build (the
pinned-core build was slower only while the second core was free); those rounds lose d /
share, the others nothing."""


def apply_pattern(
    array: np.ndarray,
    categories: Sequence[str],
    pattern: str,
    drop: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """The night's log ratios with a slowdown of mean `drop` spread as `pattern` says."""
    if drop <= 0:
        return array
    n_tasks, n_rounds = array.shape
    shift = np.zeros(array.shape)
    if pattern == "uniform":
        shift[:] = math.log1p(-drop)
    elif pattern == "uneven tasks":
        per_task = np.clip(rng.normal(drop, TAU, size=n_tasks), -0.5, 0.9)
        shift[:] = np.log1p(-per_task)[:, None]
    elif pattern == "one task in four":
        hit = rng.permutation(n_tasks)[: max(1, n_tasks // 4)]
        shift[hit, :] = math.log1p(-min(drop * n_tasks / hit.size, 0.9))
    elif pattern == "one category":
        names = sorted(set(categories))
        chosen = names[int(rng.integers(len(names)))]
        rows = [i for i, c in enumerate(categories) if c == chosen]
        shift[rows, :] = math.log1p(-drop)
    elif pattern == "stalls":
        hit = rng.random(array.shape) < STALL_SHARE
        shift[hit] = math.log1p(-min(drop / STALL_SHARE, 0.9))
    elif pattern == "under load":
        loaded = rng.random(n_rounds) < LOAD_SHARE
        shift[:, loaded] = math.log1p(-min(drop / LOAD_SHARE, 0.9))
    else:
        raise ValueError(f"unknown pattern {pattern!r}")
    return array + shift


def verdict_of(ci: RatioCI | None) -> str:
    """The nightly's verdict on a judged table: `slower` stays a flag, a tail regression that
    is not `slower` is `tail` (the nightly's `suspicious: tail regression`)."""
    if ci is None:
        return "none"
    if ci.verdict == "slower":
        return "slower"
    return "tail" if ci.tail_regression else ci.verdict


class Simulator:
    """Simulated nights: a real A/A table resampled (tasks and rounds with replacement)."""

    def __init__(
        self,
        arrays: list[np.ndarray],
        resamples: int,
        seed: int,
        size: tuple[int | None, int | None] = (None, None),
        night_sd: float = 0.0,
        categories: list[list[str]] | None = None,
    ) -> None:
        keep = [i for i, a in enumerate(arrays) if a.size]
        self.arrays = [arrays[i] for i in keep]
        self.categories = (
            [categories[i] for i in keep] if categories else [["?"] * a.shape[0] for a in arrays]
        )
        self.night_sd = night_sd
        self.resamples = resamples
        self.rng = np.random.default_rng(seed)
        self.tasks, self.rounds = size
        """A simulated night's tasks and rounds (None: as measured). Larger than measured
        draws the extra rows and columns from the same real night, so the night's own
        offset (the server instances' effect) is kept, not averaged away."""

    def night(self, drop: float, pattern: str = "uniform", source: int | None = None) -> str:
        """One simulated night's verdict (`verdict_of`); ``source``: which real night."""
        k = int(self.rng.integers(len(self.arrays))) if source is None else source
        array = self.arrays[k]
        n_rows, n_cols = self.tasks or array.shape[0], self.rounds or array.shape[1]
        rows = self.rng.integers(0, array.shape[0], size=n_rows)
        cols = self.rng.integers(0, array.shape[1], size=n_cols)
        seed = int(self.rng.integers(2**31))
        table = apply_pattern(
            array[np.ix_(rows, cols)],
            [self.categories[k][i] for i in rows],
            pattern,
            drop,
            self.rng,
        )
        return verdict_of(judge(table, 0.0, self.resamples, seed, self.night_sd))

    def flag(self, drop: float, pattern: str = "uniform") -> bool:
        return self.night(drop, pattern) == "slower"

    def series(
        self, drop: float, nights: int = 3, pattern: str = "uniform"
    ) -> tuple[list[bool], bool, bool]:
        """Confirmed by night 1..nights (a flag, then its immediate rerun or the next night's
        flag), whether night 1 flagged at all, and whether night 1 said `tail`."""
        confirmed, previous, first, tail = [], False, False, False
        done = False
        for night in range(nights):
            if not done:
                said = self.night(drop, pattern)
                flagged = said == "slower"
                if night == 0:
                    first, tail = flagged, said == "tail"
                if flagged and (previous or self.flag(drop, pattern)):
                    done = True
                previous = flagged
            confirmed.append(done)
        return confirmed, first, tail


def simulate(
    arrays: list[np.ndarray],
    drops: Sequence[float],
    sims: int,
    aa_sims: int,
    resamples: int,
    seed: int,
    size: tuple[int | None, int | None] = (None, None),
    night_sd: float = 0.0,
    categories: list[list[str]] | None = None,
    patterns: Sequence[str] = PATTERNS,
) -> tuple[dict[str, dict[str, dict[str, float]]], float, float]:
    """Power per pattern and mean drop: {pattern: {drop%: {"1", "2", "3", "tail"}}}."""
    sim = Simulator(arrays, resamples, seed, size, night_sd, categories)
    power: dict[str, dict[str, dict[str, float]]] = {}
    for pattern in patterns:
        power[pattern] = {}
        for drop in drops if pattern == "uniform" else PATTERN_DROPS:
            runs = [sim.series(drop, pattern=pattern) for _ in range(sims)]
            figures = {str(n + 1): sum(r[0][n] for r in runs) / sims for n in range(3)}
            figures["tail"] = sum(r[2] for r in runs) / sims
            power[pattern][f"{drop * 100:g}"] = figures
    aa = [sim.series(0.0, nights=1) for _ in range(aa_sims)]
    false_alarm = sum(c[0] for c, _, _ in aa) / aa_sims
    single = sum(f for _, f, _ in aa) / aa_sims
    return power, false_alarm, single


def simulate_series(
    job: tuple[
        list[np.ndarray],
        int,
        int,
        int,
        int,
        tuple[int | None, int | None],
        float,
        list[list[str]],
        tuple[str, ...],
    ],
) -> tuple[int, dict[str, dict[str, dict[str, float]]], float, float, float]:
    """One series' simulation (a process of its own under --jobs)."""
    arrays, sims, aa_sims, resamples, seed, size, night_sd, categories, patterns = job
    started = time.monotonic()
    with warnings.catch_warnings():  # a resample of a category can miss every task of a round
        warnings.simplefilter("ignore", RuntimeWarning)
        power, false_alarm, single = simulate(
            arrays, DROPS, sims, aa_sims, resamples, seed, size, night_sd, categories, patterns
        )
    tasks = size[0] or int(arrays[0].shape[0])
    return tasks, power, false_alarm, single, time.monotonic() - started


def family_night(
    job: tuple[list[Table], int, int, int, dict[str, float], int | None, int | None],
) -> tuple[int, int, int]:
    """Simulated A/A profile-nights judged as the nightly judges its family of series.

    Tonight is one real night resampled (each category's tasks within the category, rounds
    once for all series); the overall series and each category are judged on it. A flag is
    confirmed as the nightly confirms it now: the overall series by the immediate rerun (the
    same real night resampled again: it shares the host's state) or the previous night (another
    real night), a category only by the previous night. Returns (nights, nights with a
    confirmed flag anywhere, nights with a single flag anywhere)."""
    tables, sims, resamples, seed, night_sd, per_cat, rounds = job
    rng = np.random.default_rng(seed)
    categories = sorted({t["category"] for t in tables[0]["tasks"].values()})

    def night(k: int) -> dict[str, str]:
        table = tables[k]
        n_rounds = len(table["rounds"])
        cols = rng.integers(0, n_rounds, size=rounds or n_rounds)
        parts = {}
        for c in categories:
            array = as_array(table, c)
            rows = rng.integers(0, array.shape[0], size=per_cat or array.shape[0])
            parts[c] = array[np.ix_(rows, cols)]
        out = {}
        for name in ("overall", *categories):
            array = np.vstack(list(parts.values())) if name == "overall" else parts[name]
            ci = judge(array, 0.0, resamples, int(rng.integers(2**31)), night_sd[name])
            out[name] = verdict_of(ci)
        return out

    confirmed = single = 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        for _ in range(sims):
            k = int(rng.integers(len(tables)))
            tonight = night(k)
            flags = [n for n, v in tonight.items() if v == "slower"]
            single += bool(flags)
            if not flags:
                continue
            before = night(int(rng.integers(len(tables))))
            rerun = night(k) if "overall" in flags else {}
            confirmed += any(
                before[n] == "slower" or (n == "overall" and rerun.get(n) == "slower")
                for n in flags
            )
    return sims, confirmed, single


def synthetic_tables(
    nights: int, per_category: int, rounds: int, seed: int, cell_sd: float, round_sd: float
) -> list[Table]:
    """A/A tables of the standard task set's shape without a server: log ratios with a round
    drift (`round_sd`, all tasks of a round alike) and cell noise (`cell_sd`). For trying the
    simulation; real nights (--reuse) are what the figures in benchmarks/README.md come from."""
    rng = np.random.default_rng(seed)
    categories = ("code_edit", "code_gen", "multi_turn", "prose", "summarize", "tool_call")
    out = []
    for night in range(nights):
        drift = rng.normal(0, round_sd, size=rounds)
        tasks = {
            f"{c}-{i:02d}": {
                "category": c,
                "log_ratios": [float(drift[r] + rng.normal(0, cell_sd)) for r in range(rounds)],
            }
            for c in categories
            for i in range(per_category)
        }
        out.append(
            {
                "night": night + 1,
                "minutes": 0.0,
                "rounds": list(range(1, rounds + 1)),
                "tasks": tasks,
                "synthetic": {"cell_sd": cell_sd, "round_sd": round_sd},
            }
        )
    return out


def paired(args: argparse.Namespace) -> dict[str, Any]:
    nights = args.nights if args.nights is not None else 4
    if args.per_category is None:
        args.per_category = 2
    reuse = Path(args.reuse) if args.reuse else None
    tables = json.loads(reuse.read_text())["tables"] if reuse and reuse.is_file() else []
    if tables:
        say(f"A/A tables from {reuse}: {len(tables)} nights")
    if args.synthetic:
        tables = synthetic_tables(
            args.synthetic, args.per_category, args.rounds, 0, args.cell_sd, args.round_sd
        )
        say(
            f"SYNTHETIC A/A tables (no server): {len(tables)} nights, cell sd {args.cell_sd:.1%},"
            f" round sd {args.round_sd:.1%}"
        )
    elif len(tables) < nights and (not tables or args.more):
        for k in range(len(tables), nights):
            say(f"A/A night {k + 1}/{nights}: {BASELINE} vs {TWIN}, {args.rounds} rounds ...")
            tables.append(measure_aa_night(args, k + 1))
            say(f"  done in {tables[-1]['minutes']:.1f} min")
            if reuse is not None:  # saved after every night: an interrupted run keeps them
                reuse.write_text(json.dumps({"tables": tables}, indent=1))
        if reuse is not None:
            say(f"A/A tables saved to {reuse}")
    measured = noise(tables, args.resamples)
    minutes = statistics.mean(t["minutes"] for t in tables)
    first = measured["nights"][0]
    where = "(SYNTHETIC)" if args.synthetic else "on SmolLM2"
    say(
        f"A/A nights {where} ({first['tasks']} tasks x {first['rounds']} rounds, "
        f"max_tokens {MAX_TOKENS}; a night costs {minutes:.1f} min)"
    )
    say("  night  ratio   95% CI          half-width  round sd  load  host   min  verdict")
    for n in measured["nights"]:
        low, high = n["ci95"] or (math.nan, math.nan)
        load = n["load"] if n["load"] is not None else math.nan
        say(
            f"  {n['night']:>5}  {n['ratio']:.3f}  [{low:.3f}, {high:.3f}]  "
            f"{(n['half_width'] or math.nan):>10.1%}  {n['round_sd']:>8.1%}  {load:4.1f}  "
            f"{n['host']:<5} {n['minutes']:4.1f}  {n['verdict']}"
        )
    n2n = measured["night_to_night_sd"]
    say(f"  night-to-night sd of the ratio: {'n/a' if n2n is None else f'{n2n:.1%}'}")

    out: dict[str, Any] = {
        "design": "paired",
        "night_minutes": minutes,
        "noise": measured,
    }
    if args.sims <= 0:  # measure (and save with --reuse) only
        return out
    series: dict[str, Any] = {}
    categories = sorted({t["category"] for t in tables[0]["tasks"].values()})
    names = ("overall", *categories)

    def series_sd(name: str) -> float:
        """The night sd the nightly floors this series' CI with, scaled so that 1.96 x it is
        the nightly's half-width: the A/A nights' own spread with t(n - 1) from
        `MIN_AA_NIGHTS` nights on, before that the prior for restarted processes."""
        if args.night_sd is not None:
            return float(args.night_sd)
        category = None if name == "overall" else name
        logs = []
        for t in tables:
            ci = judge(as_array(t, category), 0.0, args.resamples, 0)
            if ci is not None:
                logs.append(math.log(ci.estimate))
        if len(logs) >= MIN_AA_NIGHTS:
            noise = night_noise_of(logs)
            return noise.sd * noise.quantile / 1.959964
        return prior_night_sd(NightlyConfig(restart_every=args.restart_every))

    per_cat = args.sim_per_category
    rounds = args.sim_rounds

    def size(name: str) -> tuple[int | None, int | None]:
        tasks = None if per_cat is None else per_cat * (len(categories) if name == "overall" else 1)
        return tasks, rounds

    jobs = [
        (
            [as_array(t, None if name == "overall" else name) for t in tables],
            args.sims,
            args.aa_sims,
            args.resamples,
            seed,
            size(name),
            series_sd(name),
            [
                [task["category"] for task in t["tasks"].values()]
                for t in tables
                if name == "overall"
            ]
            or [
                [task["category"] for task in t["tasks"].values() if task["category"] == name]
                for t in tables
            ],
            PATTERNS if name == "overall" else tuple(p for p in PATTERNS if p != "one category"),
        )
        for seed, name in enumerate(names)
    ]
    measured_cells = first["tasks"] * first["rounds"]
    sim_tasks, sim_rounds = size("overall")
    sim_cells = (sim_tasks or first["tasks"]) * (sim_rounds or first["rounds"])
    sim_minutes = minutes * sim_cells / measured_cells
    say(
        f"simulated night: {sim_tasks or first['tasks']} tasks x {sim_rounds or first['rounds']} "
        f"rounds (about {sim_minutes:.1f} min at the measured cost per request pair)"
    )
    out["night_minutes"] = sim_minutes
    out["simulated_night"] = {
        "tasks": sim_tasks or first["tasks"],
        "rounds": sim_rounds or first["rounds"],
        "minutes": sim_minutes,
    }
    job_sd = {name: job[6] for name, job in zip(names, jobs, strict=True)}
    family_jobs = [
        (
            tables,
            max(1, args.aa_sims // max(1, args.jobs)),
            args.resamples,
            1000 + k,
            job_sd,
            per_cat,
            rounds,
        )
        for k in range(max(1, args.jobs))
    ]
    with ProcessPoolExecutor(max_workers=max(1, args.jobs)) as pool:
        results = list(pool.map(simulate_series, jobs))
        family = list(pool.map(family_night, family_jobs))
    for name, (tasks, power, false_alarm, single, seconds) in zip(names, results, strict=True):
        series[name] = {
            "tasks": tasks,
            "night_sd": job_sd[name],
            "power": power,
            "false_alarm_rate": false_alarm,
            "single_flag_rate": single,
        }
        say(
            f"series {name} ({tasks} tasks; verdict CI at least +-1.96 x night sd "
            f"{job_sd[name]:.2%}; {args.sims} simulated series per drop, {seconds:.0f} s)"
        )
        say("  pattern           drop   1 night  2 nights  3 nights  night 1 tail")
        for pattern, drops in power.items():
            for drop, p in drops.items():
                say(
                    f"  {pattern:<16} {drop:>4}%  {p['1']:>7.1%}  {p['2']:>8.1%}  {p['3']:>8.1%}"
                    f"  {p['tail']:>12.1%}"
                )
        fa_low, fa_high = wilson(round(false_alarm * args.aa_sims), args.aa_sims)
        say(
            f"  false alarms per series-night (confirmed incl. rerun, {args.aa_sims} A/A "
            f"series-nights): {false_alarm:.1%} (95% CI {fa_low:.1%}-{fa_high:.1%}); "
            f"single flags: {single:.1%}"
        )
    overall = series["overall"]
    cats = [series[c] for c in categories]
    nights_judged = sum(f[0] for f in family)
    family_confirmed = sum(f[1] for f in family)
    family_single = sum(f[2] for f in family)
    fam_low, fam_high = wilson(family_confirmed, nights_judged)
    say(
        f"family of {len(names)} series per A/A profile-night ({nights_judged} simulated): "
        f"confirmed flag anywhere {family_confirmed / nights_judged:.1%} (95% CI "
        f"{fam_low:.1%}-{fam_high:.1%}); single flag anywhere "
        f"{family_single / nights_judged:.1%}"
    )
    by_host: dict[str, Any] = {}
    for state in ("quiet", "busy"):
        subset = [t for t in tables if host_state(t.get("load")) == state]
        if len(subset) < 2 or len(subset) == len(tables):
            continue
        judged, confirmed, single = family_night(
            (subset, args.aa_sims, args.resamples, 2000, job_sd, per_cat, rounds)
        )
        low, high = wilson(confirmed, judged)
        by_host[state] = {"nights": len(subset), "rate": confirmed / judged, "ci95": [low, high]}
        say(
            f"  {state} nights only ({len(subset)}): confirmed flag anywhere "
            f"{confirmed / judged:.1%} (95% CI {low:.1%}-{high:.1%}); single flag anywhere "
            f"{single / judged:.1%}"
        )
    say("goals:")
    say(f"  3% overall within 2 nights >= 90%: {overall['power']['uniform']['3']['2']:.1%}")
    say(
        "  5% per category within 2 nights >= 90%: "
        + ", ".join(f"{c} {series[c]['power']['uniform']['5']['2']:.0%}" for c in categories)
    )
    worst = max(s["false_alarm_rate"] for s in [overall, *cats])
    say(f"  false alarms <= 1% per series-night: worst series {worst:.1%}")
    say(f"  false alarms <= 1% per profile-night (family): {family_confirmed / nights_judged:.1%}")
    return {
        **out,
        "family_false_alarm_rate": family_confirmed / nights_judged,
        "family_false_alarm_ci95": [fam_low, fam_high],
        "family_single_flag_rate": family_single / nights_judged,
        "family_false_alarm_by_host": by_host,
        "power": overall["power"],
        "false_alarm_rate": overall["false_alarm_rate"],
        "single_flag_rate": overall["single_flag_rate"],
        "series": series,
    }


def absolute(args: argparse.Namespace) -> dict[str, Any]:
    """The old absolute detector (tonight's tok/s against earlier nights): its old figures."""
    nights = args.nights if args.nights is not None else 365
    if args.per_category is None:
        args.per_category = 4
    false_alarm: float | None = None
    minutes: float | None = None
    with tempfile.TemporaryDirectory() as tmp:
        if args.skip_aa:
            run_cv, trial_sd, trials = args.run_cv, args.trial_sd, args.trials
        else:
            db, history_campaign, false_alarm, minutes = run_aa(args, Path(tmp))
            run_cv, trial_sd, trials = measure_noise(db, history_campaign)
            db.close()
        rates = power(run_cv, trial_sd, trials, args.seeds)
    out: dict[str, Any] = {
        "design": "absolute",
        # One night is all the absolute detector looks at: a drop it misses tonight is
        # history tomorrow, so only the 1-night figure exists.
        "power": {f"{d * 100:g}": {"1": rates[d][Label.REGRESSION]} for d in DROPS},
        # The real A/A check's rate when it ran, else the simulated 0% effect's.
        "false_alarm_rate": rates[0.0][Label.REGRESSION] if false_alarm is None else false_alarm,
        "false_alarm_source": "simulated" if false_alarm is None else "real A/A",
        "single_flag_rate": rates[0.0][Label.REGRESSION],
        "night_minutes": minutes,
        "noise": {"run_cv": run_cv, "trial_sd": trial_sd, "trials": trials},
    }
    if args.skip_scale:
        return out
    say(f"analysis time on Postgres: {nights} nights x ~{args.series} series")
    if args.database_url:
        scale(args.database_url, nights, args.series)
        return out
    name = f"wk_bench_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
        admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        scale(f"postgresql://postgres@127.0.0.1:5432/{name}", nights, args.series)
    finally:
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--design", choices=("absolute", "paired"), default="absolute")
    parser.add_argument("--json", action="store_true", help="figures as JSON on stdout")
    parser.add_argument("--seeds", type=int, default=200)
    parser.add_argument(
        "--nights", type=int, help="absolute: nights of the scale run (365); paired: A/A nights (4)"
    )
    parser.add_argument("--series", type=int, default=100)
    parser.add_argument("--aa-history", type=int, default=10)
    parser.add_argument("--aa-test", type=int, default=3)
    parser.add_argument(
        "--per-category", type=int, help="tasks per category (absolute 4, paired 2)"
    )
    parser.add_argument("--database-url")
    parser.add_argument("--skip-aa", action="store_true", help="use --run-cv/--trial-sd/--trials")
    parser.add_argument("--run-cv", type=float, default=0.01, help="with --skip-aa")
    parser.add_argument("--trial-sd", type=float, default=0.03, help="with --skip-aa")
    parser.add_argument("--trials", type=int, default=16, help="with --skip-aa")
    parser.add_argument("--skip-scale", action="store_true")
    parser.add_argument("--rounds", type=int, default=10, help="paired: rounds per A/A night")
    parser.add_argument("--sims", type=int, default=200, help="paired: simulated series per drop")
    parser.add_argument(
        "--aa-sims", type=int, default=1000, help="paired: simulated A/A series-nights"
    )
    parser.add_argument(
        "--resamples", type=int, default=500, help="paired: bootstrap resamples per verdict"
    )
    parser.add_argument("--jobs", type=int, default=2, help="paired: simulation processes")
    parser.add_argument(
        "--sim-per-category",
        type=int,
        help="paired: tasks per category of a simulated night (default: as measured)",
    )
    parser.add_argument(
        "--night-sd",
        type=float,
        help="paired: night sd the verdict's CI carries (default: measured night-to-night sd)",
    )
    parser.add_argument(
        "--sim-rounds", type=int, help="paired: rounds of a simulated night (default: as measured)"
    )
    parser.add_argument(
        "--reuse", help="paired: A/A tables JSON; loaded when it exists, else measured and saved"
    )
    parser.add_argument(
        "--more",
        action="store_true",
        help="paired: with --reuse, measure nights until --nights are in the file",
    )
    parser.add_argument(
        "--restart-every",
        type=int,
        default=1,
        help="paired: fresh processes for both arms every N rounds (0: one pair all night; "
        "the nightly's default is 1)",
    )
    parser.add_argument(
        "--synthetic",
        type=int,
        default=0,
        help="paired: N synthetic A/A nights (no server; --cell-sd, --round-sd) instead of real",
    )
    parser.add_argument("--cell-sd", type=float, default=0.02, help="with --synthetic")
    parser.add_argument("--round-sd", type=float, default=0.01, help="with --synthetic")
    parser.add_argument(
        "--warmup-all",
        action="store_true",
        help="paired: the warm-up round sends every task (the nightly's way), not only two",
    )
    args = parser.parse_args()
    # As the CLI does: SIGTERM unwinds, so every `with serve(...)` stops its llama-server
    # (the default handler ends the process at once and orphans the A/A night's two servers).
    unwind_on_sigterm()
    # Under --json the human-readable figures go to stderr, so stdout is the JSON alone.
    with contextlib.redirect_stdout(sys.stderr if args.json else sys.stdout):
        out = paired(args) if args.design == "paired" else absolute(args)
    if args.json:
        print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
