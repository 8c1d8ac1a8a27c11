"""Per-request acceptance of a bench's arms: its distribution per arm and category, as vLLM's
per-request spec-decode metrics and SGLang's spec token details show it, for the report's
histogram beside the mean (`publish/acceptance_section.py`).

A mean hides the two failures the acceptance alarms look for (`checks/acceptance_alarm.py`):
a drafter that fits half the requests and misses the rest, and a few requests that accept
everything because they loop. Per request the server gives drafted and accepted tokens
(`timings.draft_n`, `draft_n_accepted`) and nothing per position: per-position counts exist
only in /metrics, summed over requests (the report's curve). Measured runs only; a request
that drafted nothing (no `draft_n`) has no acceptance and is left out.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from watchkeeper.analysis.bench_types import ALL, BenchResult
from watchkeeper.load.records import RunPurpose, RunResult

BINS = 10
"""Histogram bins of per-request acceptance: 0-10%, ..., 90-100% (1.0 in the last)."""


def summarize(counts: Sequence[tuple[int, int]]) -> dict[str, Any]:
    """(drafted, accepted) per request -> totals, pooled and mean acceptance, deciles, bins."""
    rates = np.array([a / d for d, a in counts], dtype=float)
    drafted = sum(d for d, _ in counts)
    accepted = sum(a for _, a in counts)
    bins = np.minimum((rates * BINS).astype(int), BINS - 1)
    return {
        "requests": len(counts),
        "drafted": drafted,
        "accepted": accepted,
        "pooled": accepted / drafted if drafted else None,
        "mean": float(rates.mean()),
        "deciles": [float(q) for q in np.quantile(rates, np.linspace(0.1, 0.9, 9))],
        "bins": [int(n) for n in np.bincount(bins, minlength=BINS)],
    }


def request_acceptance(runs: Sequence[RunResult]) -> dict[str, dict[str, dict[str, Any]]]:
    """{arm: {category (and "all"): summary}} over the measured runs' drafting requests."""
    by: dict[str, dict[str, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
    for run in runs:
        if run.purpose != RunPurpose.MEASURED:
            continue
        for s in run.samples:
            if s.ok and s.draft_n:
                pair = (s.draft_n, s.draft_n_accepted or 0)
                by[run.arm][s.category].append(pair)
                by[run.arm][ALL].append(pair)
    return {arm: {c: summarize(v) for c, v in sorted(cats.items())} for arm, cats in by.items()}


def with_request_acceptance(result: BenchResult, runs: Sequence[RunResult]) -> BenchResult:
    """`result` with `extras["request_acceptance"]` (nothing added when no arm drafted)."""
    found = request_acceptance(runs)
    if not found:
        return result
    return replace(result, extras={**result.extras, "request_acceptance": found})
