"""Runs → series: which numbers of a run belong to which comparable series.

A series is everything the detector may compare night to night (``SeriesKey``). Per-request
metrics are kept per task category, as raw trials, because the statistics want raw trials
(Mann-Whitney on per-request speeds) and because a regression usually hits one kind of work.
Per-run metrics (peak RSS) have one value per run and live in the category "all".

Two per-run series read the tail and the service level rather than the typical request (issue
44): `ttft_p90_ms`, the run's 90th-percentile time to first token (type-8 quantile, as the
bench's latency table; one value per run, at least `MIN_P90` requests), and `good_fraction`,
the share of the run's requests that meet its campaign's `[load]` SLOs (TTFT, TPOT, E2E), the
per-request form of goodput: at the nightly's fixed load a drop in it is a drop in goodput.

Acceptance length here is tokens per target step, ``n / (n - accepted)`` per request: the
mean number of tokens one verification yields (1.0 without speculation). It is the per-request
form of the "mean acceptance length" that the bench report derives from /metrics counters,
which exist per run only.
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import asdict, dataclass

import numpy as np

from watchkeeper.analysis.latency import meets_slo
from watchkeeper.nightly.detector import RunPoint, SeriesKey
from watchkeeper.store.history import RunRecord

ALL_CATEGORIES = "all"
MIN_P90 = 10
"""Fewest successful requests a run needs for a p90 TTFT point: below it the "p90" is the
largest value or close to it, a different statistic from night to night."""


@dataclass(frozen=True, slots=True)
class SeriesPoint:
    """One run's contribution to one series, with the run it came from."""

    run: RunRecord
    point: RunPoint


def fingerprint(key: SeriesKey) -> str:
    blob = json.dumps(asdict(key), sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def describe(key: SeriesKey) -> str:
    """Short human name: what a reader needs to tell series apart in one digest."""
    return f"{key.metric} · {key.category} · c{key.concurrency} · {key.profile_hash[:8]}"


def exclusion_reason(run: RunRecord) -> str | None:
    """Why a run may never be a baseline; None when it may."""
    failed = sum(not s.ok for s in run.samples)
    if run.error:
        return f"run failed: {run.error[:200]}"
    if failed:
        return f"{failed} of {len(run.samples)} requests failed"
    if not run.samples:
        return "no requests"
    mismatches = sum(verdict == "mismatch" for _, verdict in run.checks)
    if mismatches:
        return f"{mismatches} output(s) mismatch the baseline at temperature 0"
    return None


def _key(run: RunRecord, category: str, metric: str) -> SeriesKey:
    return SeriesKey(
        host=run.host,
        engine_build=run.build_flavour,
        model=run.model_key,
        profile_hash=run.profile_hash,
        category=category,
        concurrency=run.concurrency,
        metric=metric,
    )


def run_points(run: RunRecord) -> dict[SeriesKey, RunPoint]:
    """Every series point one run contributes."""
    excluded = exclusion_reason(run)
    label = run.build_label
    out: dict[SeriesKey, RunPoint] = {}
    by_category: dict[str, list[int]] = defaultdict(list)
    for i, s in enumerate(run.samples):
        by_category[s.category].append(i)
    speculative = any((s.draft_n or 0) > 0 for s in run.samples)
    checks: dict[str, list[str]] = defaultdict(list)
    for category, verdict in run.checks:
        checks[category].append(verdict)
    for category, indices in sorted(by_category.items()):
        samples = [run.samples[i] for i in indices]
        ok = [s for s in samples if s.ok]
        tps = [s.decode_tps for s in ok if s.decode_tps and s.decode_tps > 0]
        ttft = [s.ttft_ms for s in ok if s.ttft_ms and s.ttft_ms > 0]
        errors = len(samples) - len(ok)

        def add(metric: str, point: RunPoint, category: str = category) -> None:
            out[_key(run, category, metric)] = point

        add("decode_tps", RunPoint.of(label, tps, excluded=excluded))
        add("ttft_ms", RunPoint.of(label, ttft, excluded=excluded))
        add("error_rate", RunPoint.counts(label, errors, len(samples), excluded=excluded))
        if speculative:
            drafted = sum(s.draft_n or 0 for s in ok)
            accepted = sum(s.draft_n_accepted or 0 for s in ok)
            add("acceptance_rate", RunPoint.counts(label, accepted, drafted, excluded=excluded))
            lengths = [
                s.completion_tokens / (s.completion_tokens - (s.draft_n_accepted or 0))
                for s in ok
                if s.completion_tokens and s.completion_tokens > (s.draft_n_accepted or 0)
            ]
            add("acceptance_length", RunPoint.of(label, lengths, excluded=excluded))
        verdicts = checks.get(category, [])
        if verdicts:
            identical = sum(v == "identical" for v in verdicts)
            add(
                "identical_rate",
                RunPoint.counts(label, identical, len(verdicts), excluded=excluded),
            )
    if run.peak_rss_bytes:
        out[_key(run, ALL_CATEGORIES, "peak_rss_bytes")] = RunPoint.of(
            label, [float(run.peak_rss_bytes)], excluded=excluded
        )
    out.update(_tail_points(run, label, excluded))
    return out


def _tail_points(run: RunRecord, label: str, excluded: str | None) -> dict[SeriesKey, RunPoint]:
    """The run's p90 TTFT and its good fraction (series of category "all")."""
    out: dict[SeriesKey, RunPoint] = {}
    ttft = [s.ttft_ms for s in run.samples if s.ok and s.ttft_ms and s.ttft_ms > 0]
    if len(ttft) >= MIN_P90:
        p90 = float(np.quantile(ttft, 0.9, method="median_unbiased"))
        out[_key(run, ALL_CATEGORIES, "ttft_p90_ms")] = RunPoint.of(label, [p90], excluded=excluded)
    if run.slo is not None and run.samples:
        good = sum(
            meets_slo(s.ok, s.ttft_ms, s.latency_ms, s.completion_tokens, run.slo)
            for s in run.samples
        )
        out[_key(run, ALL_CATEGORIES, "good_fraction")] = RunPoint.counts(
            label, good, len(run.samples), excluded=excluded
        )
    return out


def pool(label: str, points: Sequence[RunPoint]) -> RunPoint:
    """Several runs of one night as one: trials concatenated, counts summed; excluded when
    any of them is (tonight is judged whatever its flag, but never becomes a baseline)."""
    reasons = [p.excluded_reason for p in points if p.excluded_reason]
    trials = tuple(t for p in points for t in p.trials)
    reason = "; ".join(dict.fromkeys(reasons)) if reasons else None
    return RunPoint(
        label,
        trials,
        sum(p.successes for p in points),
        sum(p.attempts for p in points),
        reason is None,
        reason,
    )


def series_history(runs: Sequence[RunRecord]) -> dict[SeriesKey, list[SeriesPoint]]:
    """All series with their points in the order of ``runs`` (chronological)."""
    out: dict[SeriesKey, list[SeriesPoint]] = defaultdict(list)
    for run in runs:
        for key, point in run_points(run).items():
            out[key].append(SeriesPoint(run, point))
    return dict(out)
