"""One number per series per night: the paired ratio current / reference, and its verdict.

Comparing tonight's absolute tok/s with earlier nights cannot see 10% on a host whose nights
wobble by 9% (run-to-run CV measured here). Inside one run, with the pinned reference running
back to back with the current system, host drift hits both sides of every pair and cancels in
the ratio. The run is the unit of replication for the history; inside the run the rounds are
the replicates the CI resamples (analysis.stats).

Verdicts: ``regression`` when the CI excludes 1 and the estimate is below 1 - threshold;
``improvement`` mirrored; ``suspicious`` when the CI excludes 1 within the threshold;
``no change`` when the CI lies inside the threshold band; ``inconclusive`` otherwise (the CI
is too wide: more rounds would settle it); ``insufficient data`` below three rounds. A
regression is a *candidate* until a second night (against the same reference) or an
immediate rerun flags it again: only then is it confirmed and filed.

The night's own CI (rounds and tasks resampled) cannot see what stays fixed for the whole
night: with one pair of server *processes* all night (`nightly.restart_every = 0`), that pair's
offset (two processes of the same binary differ by a little for their whole lives: sd 0.8%
between process pairs here, benchmarks/instance_effect.py) is in every round alike. The nightly
therefore restarts both servers every round by default, which makes the pair a replicate the
rounds carry. As a check on everything the night's CI cannot see, the spread of the series'
own A/A nights (the noise of a night's ratio when nothing changed) floors the verdict's CI:
it is the wider of the night's own and +-1.96 x that sd, from ``MIN_AA_NIGHTS`` A/A nights
on; before that, with one process pair all night, ``nightly.night_sd`` stands in for it.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, replace

from watchkeeper.analysis.benchmark import ALL, BenchResult, CategoryStats
from watchkeeper.analysis.stats import classify, wilson
from watchkeeper.store.references import RatioRecord

METRIC = "decode_tps"
FLAGS = ("regression", "improvement")
VERDICTS = {
    "slower": "regression",
    "faster": "improvement",
    "within threshold": "suspicious",
    "no change": "no change",
    "inconclusive": "inconclusive",
    "insufficient replicates": "insufficient data",
}


MIN_AA_NIGHTS = 8
"""A/A nights of a series from which their own spread replaces the configured night sd."""
Z95 = 1.959964


@dataclass(frozen=True, slots=True)
class NightNoise:
    """The sd of a night's log ratio when nothing changed, and where the figure comes from."""

    sd: float
    source: str


def night_noise(aa_nights: Sequence[RatioRecord], prior_sd: float) -> NightNoise:
    """From the series' A/A nights once there are enough of them, else the prior (0: none)."""
    logs = [math.log(r.estimate) for r in aa_nights if r.aa and r.estimate > 0]
    if len(logs) >= MIN_AA_NIGHTS:
        return NightNoise(statistics.stdev(logs), f"{len(logs)} A/A nights of this series")
    return NightNoise(prior_sd, f"nightly.night_sd ({len(logs)} of {MIN_AA_NIGHTS} A/A nights)")


def with_night_noise(record: RatioRecord, noise: NightNoise) -> RatioRecord:
    """The record with its CI at least +-1.96 night sds wide (log scale) and the verdict
    judged again on it. A night's own CI that is already wider is kept as it is."""
    if record.low is None or record.high is None or noise.sd <= 0:
        return record
    half = Z95 * noise.sd
    low = min(record.low, record.estimate * math.exp(-half))
    high = max(record.high, record.estimate * math.exp(half))
    if (low, high) == (record.low, record.high):
        return record
    verdict = VERDICTS[classify(record.estimate, low, high, record.threshold)]
    return replace(record, low=low, high=high, verdict=verdict)


def series_name(host_fingerprint: str, profile: str, category: str, metric: str = METRIC) -> str:
    return f"{host_fingerprint[:12]}|{profile}|{category}|{metric}"


def _record(
    stats: CategoryStats,
    *,
    campaign_id: int,
    reference_id: int,
    host_fingerprint: str,
    profile: str,
    aa: bool,
    threshold: float,
) -> RatioRecord | None:
    ci = stats.speedup
    if ci is None:
        return None
    return RatioRecord(
        campaign_id=campaign_id,
        reference_id=reference_id,
        series=series_name(host_fingerprint, profile, stats.category),
        host_fingerprint=host_fingerprint,
        profile=profile,
        category=stats.category,
        metric=METRIC,
        estimate=ci.estimate,
        low=ci.low if ci.has_ci else None,
        high=ci.high if ci.has_ci else None,
        n_pairs=ci.n_pairs,
        n_tasks=ci.n_clusters,
        n_rounds=ci.n_rounds,
        threshold=threshold,
        verdict=VERDICTS.get(ci.verdict, ci.verdict),
        aa=aa,
    )


def night_ratios(
    result: BenchResult,
    *,
    current_arm: str,
    profile: str,
    reference_id: int,
    host_fingerprint: str,
    aa: bool,
    threshold: float,
) -> list[RatioRecord]:
    """The overall series and one per task category, from a current-vs-reference bench."""
    rows: list[CategoryStats] = []
    overall = result.stats(current_arm, ALL)
    if overall is not None:
        rows.append(overall)
    rows.extend(c for c in result.categories if c.arm == current_arm)
    out = []
    for stats in rows:
        record = _record(
            stats,
            campaign_id=result.campaign_id,
            reference_id=reference_id,
            host_fingerprint=host_fingerprint,
            profile=profile,
            aa=aa,
            threshold=threshold,
        )
        if record is not None:
            out.append(record)
    return out


@dataclass(frozen=True, slots=True)
class FalseAlarms:
    """The detector's live false-alarm rate: flags on A/A series-nights.

    A night's 95% CI excludes 1 on an A/A night now and then (about 2.5% per direction when it
    is honest); that is why a flag is only a candidate until a rerun or the next night flags
    it again. `flagged` counts single flags, `confirmed` what would have been filed."""

    series_nights: int
    flagged: int
    rate: float | None
    low: float
    high: float
    confirmed: int = 0
    confirmed_low: float = 0.0
    confirmed_high: float = 1.0


def false_alarms(ratios: Sequence[RatioRecord]) -> FalseAlarms:
    aa = [r for r in ratios if r.aa]
    flagged = sum(r.verdict in FLAGS for r in aa)
    confirmed = sum(r.verdict in FLAGS and r.confirmed for r in aa)
    low, high = wilson(flagged, len(aa))
    c_low, c_high = wilson(confirmed, len(aa))
    return FalseAlarms(
        len(aa), flagged, flagged / len(aa) if aa else None, low, high, confirmed, c_low, c_high
    )
