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
it is the wider of the night's own and +-t x that sd (t with the A/A nights' degrees of
freedom: 2.365 from 8), from ``MIN_AA_NIGHTS`` A/A nights on; before that a prior stands in
for it whatever the restarts (`prior_night_sd`).

Two more series per profile watch what users feel at the nightly's load (`tail_records`):
``ttft_p90``, the reference's p90 time to first token over the current's (above 1: the first
token comes sooner; every series reads higher = better), and ``goodput``, the current's good
requests per second over the reference's (`[load]` SLOs), each paired by round with a t
interval over the rounds' log ratios, floored by the series' own A/A nights like the others.
They are stored, shown and judged, but never confirmed or filed, and stay out of the
false-alarm rates: a tail moves more from night to night than a median, and until a series has
its `MIN_AA_NIGHTS` A/A nights its noise is a guess (docs/load.md).

Three checks see what the ratio cannot (`nightly.night_checks`): failed requests (a
regression whatever the ratio says), and two that name a build that stalls now and then
(``suspicious: tail regression``): the winsorized cells' balance between the arms, and the
requests one arm lost big in latency (analysis/tails.py).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Any

from watchkeeper.analysis.benchmark import ALL, BenchResult, CategoryStats
from watchkeeper.analysis.latency import Estimate, LatencyStats, ratio_over_rounds, result_latency
from watchkeeper.analysis.stats import SERIES_VERDICTS, classify, wilson
from watchkeeper.config.model import NightlyConfig
from watchkeeper.nightly.night_checks import apply_checks, series_checks
from watchkeeper.store.references import RatioRecord
from watchkeeper.student import t_quantile

METRIC = "decode_tps"
TAIL_METRICS = ("ttft_p90", "goodput")
"""Watched, never filed (module docstring)."""
FLAGS = ("regression", "improvement")

PRIOR_SD_RESTARTED = 0.01
"""With ``restart_every >= 1``: the night sd assumed until a series has `MIN_AA_NIGHTS` A/A
nights. Fresh processes put their offsets into the rounds, but the host's state for the night
does not move between rounds: quiet A/A nights here moved by 0.3%, busy-host nights by 1.5%."""
CONFIRM_WINDOW = timedelta(days=3)
"""A regression is confirmed only by a night of the same series within this window."""
MIN_AA_NIGHTS = 8
"""A/A nights of a series from which their own spread replaces the configured night sd."""
Z95 = 1.959964


@dataclass(frozen=True, slots=True)
class NightNoise:
    """The sd of a night's log ratio when nothing changed, and where the figure comes from."""

    sd: float
    source: str
    df: int | None = None
    """Degrees of freedom of `sd` when it was measured (A/A nights - 1); None for a prior."""

    @property
    def quantile(self) -> float:
        """t with the nights' degrees of freedom (2.365 from 8 nights), 1.96 for a prior."""
        if self.df is None:
            return Z95
        return t_quantile(self.df)


def night_noise(aa_nights: Sequence[RatioRecord], prior_sd: float) -> NightNoise:
    """From the series' A/A nights once there are enough of them, else the prior (0: none)."""
    logs = [math.log(r.estimate) for r in aa_nights if r.aa and r.estimate > 0]
    if len(logs) >= MIN_AA_NIGHTS:
        return NightNoise(
            statistics.stdev(logs), f"{len(logs)} A/A nights of this series", len(logs) - 1
        )
    return NightNoise(
        prior_sd, f"nightly.night_sd prior ({len(logs)} of {MIN_AA_NIGHTS} A/A nights)"
    )


def prior_night_sd(config: NightlyConfig) -> float:
    """The night sd assumed before a series has `MIN_AA_NIGHTS` A/A nights: never 0.

    With one process pair all night (``restart_every = 0``) its offset is invisible to the
    night's CI: ``night_sd``. With fresh processes the rounds carry the processes' spread, but
    not the host's state for the night, so a smaller prior (`PRIOR_SD_RESTARTED`) still
    floors the CI; with 0 here the floor never applied once current and reference differed
    (no A/A night accumulates then)."""
    if config.restart_every == 0:
        return max(config.night_sd, PRIOR_SD_RESTARTED)
    return PRIOR_SD_RESTARTED


def with_night_noise(record: RatioRecord, noise: NightNoise) -> RatioRecord:
    """The record with its CI at least +-t x night sd wide (log scale; t from the A/A nights'
    degrees of freedom, 1.96 for a prior) and the verdict judged again on it. A night's own CI
    that is already wider is kept as it is."""
    if record.low is None or record.high is None or noise.sd <= 0:
        return record
    half = noise.quantile * noise.sd
    low = min(record.low, record.estimate * math.exp(-half))
    high = max(record.high, record.estimate * math.exp(half))
    if (low, high) == (record.low, record.high):
        return record
    verdict = SERIES_VERDICTS[classify(record.estimate, low, high, record.threshold)]
    return replace(record, low=low, high=high, verdict=verdict)


def judge_night(
    result: BenchResult,
    records: Sequence[RatioRecord],
    *,
    current_arm: str,
    noise: Callable[[RatioRecord], NightNoise] | None = None,
) -> list[RatioRecord]:
    """The night's records with the A/A-night floor (``noise``, per series) and then the
    checks applied: what the nightly stores and files."""
    checks = series_checks(result, current_arm=current_arm)
    out = []
    for r in records:
        judged = with_night_noise(r, noise(r)) if noise is not None else r
        out.append(apply_checks(judged, checks.get(r.category)))
    return out


def confirmed_series(
    flagged: Sequence[RatioRecord],
    previous: Callable[[RatioRecord], RatioRecord | None],
    rerun_flags: set[str] | None = None,
) -> set[str]:
    """The flagged series that count as confirmed.

    Each profile judges 7 series a night (overall + 6 categories); with an immediate rerun as
    the only check, ~3% of A/A nights would file a false alarm somewhere in the family when the
    rerun correlates 0.5 with the night it checks (it shares the host's state). So the overall
    series is confirmed by the rerun or by the previous night (``previous``: the series' last
    night within the confirmation window), but a category series on its own only by a night
    that is not tonight's: a second flag from the same evening is too much the same
    measurement. (Beside a confirmed overall series, a category the rerun flagged again is
    confirmed too: it is evidence in that finding, never a finding of its own.)"""
    out: set[str] = set()
    again = rerun_flags or set()
    by_night = set()
    for r in flagged:
        before = previous(r)
        if before is not None and before.verdict == "regression":
            by_night.add(r.series)
    overall = any(
        r.category == ALL and (r.series in by_night or r.series in again) for r in flagged
    )
    for r in flagged:
        # With the overall series confirmed, a category its rerun flagged again rides in that
        # one finding's evidence: no finding of its own, so no false alarm of its own.
        if r.series in by_night or (overall and r.series in again):
            out.add(r.series)
    return out


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
        verdict=SERIES_VERDICTS.get(ci.verdict, ci.verdict),
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


def tail_records(
    result: BenchResult,
    *,
    current_arm: str,
    reference_arm: str,
    profile: str,
    reference_id: int,
    host_fingerprint: str,
    aa: bool,
    threshold: float,
) -> list[RatioRecord]:
    """The night's p90-TTFT and goodput series (module docstring), where both arms have them."""
    stats = {s.arm: s for s in result_latency(result)}
    cur, ref = stats.get(current_arm), stats.get(reference_arm)
    if cur is None or ref is None:
        return []
    found = {"ttft_p90": _p90_speed(cur, ref), "goodput": _goodput(cur, ref)}
    out = []
    for metric, est in found.items():
        if est is None:
            continue
        has_ci = est.has_ci
        verdict = (
            SERIES_VERDICTS[classify(est.estimate, est.low, est.high, threshold)]
            if has_ci
            else "insufficient data"
        )
        out.append(
            RatioRecord(
                campaign_id=result.campaign_id,
                reference_id=reference_id,
                series=series_name(host_fingerprint, profile, ALL, metric),
                host_fingerprint=host_fingerprint,
                profile=profile,
                category=ALL,
                metric=metric,
                estimate=est.estimate,
                low=est.low if has_ci else None,
                high=est.high if has_ci else None,
                n_pairs=est.rounds,
                n_tasks=result.method.tasks,
                n_rounds=est.rounds,
                threshold=threshold,
                verdict=verdict,
                aa=aa,
            )
        )
    return out


def _p90_speed(cur: LatencyStats, ref: LatencyStats) -> Estimate | None:
    """Reference p90 TTFT over the current's, paired by round (the rounds both arms have)."""
    a, b = cur.value("ttft_ms", "p90"), ref.value("ttft_ms", "p90")
    if a is None or b is None or len(a.per_round) != len(b.per_round):
        return None
    return ratio_over_rounds(dict(enumerate(a.per_round)), dict(enumerate(b.per_round)))


def _goodput(cur: LatencyStats, ref: LatencyStats) -> Estimate | None:
    return ratio_over_rounds(ref.goodput_by_round, cur.goodput_by_round)


FAMILY_TARGET = 0.01
"""Target of the family false-alarm rate: A/A profile-nights with a confirmed flag anywhere."""


@dataclass(frozen=True, slots=True)
class FalseAlarms:
    """The detector's live false-alarm rate: flags on A/A series-nights, and per profile-night.

    A night's 95% CI excludes 1 on an A/A night now and then (about 2.5% per direction when it
    is honest); that is why a flag is only a candidate until a rerun or the next night flags
    it again. `flagged` counts single flags, `confirmed` what would have been filed.

    Per series-night hides the family: each profile judges 7 series a night (overall + 6
    categories), so the rate that matters to a maintainer is the share of A/A *nights* of a
    profile with at least one confirmed flag anywhere (`family_*`, target `FAMILY_TARGET`).
    Rerun campaigns are not nights: they are left out of both denominators."""

    series_nights: int
    flagged: int
    rate: float | None
    low: float
    high: float
    confirmed: int = 0
    confirmed_low: float = 0.0
    confirmed_high: float = 1.0
    nights: int = 0
    """A/A profile-nights (profile x night campaign), reruns left out."""
    family_flagged: int = 0
    """Of those, nights with at least one confirmed flag in any series."""
    family_low: float = 0.0
    family_high: float = 1.0

    @property
    def family_rate(self) -> float | None:
        return self.family_flagged / self.nights if self.nights else None

    @property
    def family_within_target(self) -> bool | None:
        """The Wilson upper bound within the target: None until there are A/A nights."""
        return None if not self.nights else self.family_high <= FAMILY_TARGET

    def to_json(self) -> dict[str, Any]:
        return {
            "series_nights": self.series_nights,
            "flagged": self.flagged,
            "confirmed": self.confirmed,
            "aa_nights": self.nights,
            "aa_nights_with_confirmed_flag": self.family_flagged,
            "family_rate": self.family_rate,
            "family_ci95": [self.family_low, self.family_high],
            "family_target": FAMILY_TARGET,
        }


def false_alarms(
    ratios: Sequence[RatioRecord], reruns: Collection[int] = frozenset()
) -> FalseAlarms:
    """``reruns``: campaign ids of confirmation reruns, which are not nights of their own. The
    filed series only: the tail series (`TAIL_METRICS`) are never confirmed or filed."""
    aa = [r for r in ratios if r.aa and r.campaign_id not in reruns and r.metric == METRIC]
    flagged = sum(r.verdict in FLAGS for r in aa)
    confirmed = sum(r.verdict in FLAGS and r.confirmed for r in aa)
    low, high = wilson(flagged, len(aa))
    c_low, c_high = wilson(confirmed, len(aa))
    nights: dict[tuple[str, int], bool] = {}
    for r in aa:
        key = (r.profile, r.campaign_id)
        nights[key] = nights.get(key, False) or (r.verdict in FLAGS and r.confirmed)
    family = sum(nights.values())
    f_low, f_high = wilson(family, len(nights))
    return FalseAlarms(
        len(aa),
        flagged,
        flagged / len(aa) if aa else None,
        low,
        high,
        confirmed,
        c_low,
        c_high,
        len(nights),
        family,
        f_low,
        f_high,
    )
