"""BenchResults with per-round speed-ups per category, built by hand (no server): what the
workload-mix and per-category answer tests read. Each category's RatioCI is a t interval
over its per-round values, as a round-only table would give, and its tasks sit at fixed small
offsets from the category's mean (`TASK_WIGGLE`) unless a test gives its own."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace

import numpy as np

from watchkeeper.analysis.benchmark import BenchResult, CategoryStats
from watchkeeper.analysis.stats import (
    MIN_ROUNDS,
    RatioCI,
    classify,
    log_t_interval,
    rounds_to_settle,
)

Table = Mapping[str, Mapping[str, Mapping[int, float]]]
"""arm -> category -> round -> that round's speed-up."""

WIGGLE = (1.01, 0.99, 1.02, 0.98, 1.0)
"""A fixed round-to-round spread (about 1.6%): deterministic noise."""


TASK_WIGGLE = (0.01, -0.01, 0.0, 0.02, -0.02, 0.005, -0.005, 0.015)
"""Fixed offsets of each task's log ratio from its category's (about 1.3%): what the task term
of a mix's CI reads (analysis.workload_mix)."""


def ratio_ci(
    per_round: Mapping[int, float], *, tasks: int = 3, task_offsets: tuple[float, ...] = ()
) -> RatioCI:
    rounds = sorted(per_round)
    values = [per_round[r] for r in rounds]
    logs = np.log(np.asarray(values))
    est = float(math.exp(logs.mean()))
    offsets = task_offsets or tuple(TASK_WIGGLE[i % len(TASK_WIGGLE)] for i in range(tasks))
    base = RatioCI(
        est,
        est,
        est,
        len(values) * tasks,
        tasks,
        len(values),
        round_ratios=tuple(values),
        rounds=tuple(rounds),
        task_logs=tuple(float(logs.mean()) + o for o in offsets),
    )
    if len(values) < MIN_ROUNDS:
        return base
    lo, hi = log_t_interval(logs)
    low, high = math.exp(lo), math.exp(hi)
    verdict = classify(est, low, high, 0.03)
    needed = (
        rounds_to_settle(est, low, high, len(values), 0.03) if verdict == "inconclusive" else None
    )
    return replace(base, low=low, high=high, verdict=verdict, rounds_needed=needed)


def stats(arm: str, category: str, ci: RatioCI | None) -> CategoryStats:
    return CategoryStats(
        arm, category, requests=12, errors=0, median_tps=80.0, median_ttft_ms=None,
        median_completion_tokens=None, speedup=ci, acceptance_rate=None, drafted=0,
        accepted=0, identical_rate=None, verdicts={},
    )  # fmt: skip


def with_table(
    result: BenchResult, table: Table, *, tasks: Mapping[str, int] | None = None
) -> BenchResult:
    """The fixture's arms (baseline, draft4, ngram) with these per-category speed-ups."""
    cats = sorted({c for per_cat in table.values() for c in per_cat})
    rows = [stats("baseline", c, None) for c in cats]
    for arm, per_cat in table.items():
        for c, per_round in per_cat.items():
            rows.append(stats(arm, c, ratio_ci(per_round, tasks=(tasks or {}).get(c, 3))))
    return replace(result, categories=tuple(rows), findings=())


def steady(level: float, rounds: int = 5, shift: int = 0) -> dict[int, float]:
    """`level` in every round, wiggled by WIGGLE (rotated by `shift`)."""
    return {r + 1: level * WIGGLE[(r + shift) % len(WIGGLE)] for r in range(rounds)}
