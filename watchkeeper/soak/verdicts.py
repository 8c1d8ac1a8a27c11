"""Judge a soak from what the database holds: a pure function of the stored campaign.

Because it reads the stored rows (not the counters of the process that ran the load), a soak
that was interrupted and resumed is judged as one night. `judge` runs small rules, each of
which looks at one thing and returns its reason or note (as checks/guards.py does for a
bench). Trends (soak/trends.py) use Theil-Sen and a first-third/last-third shift; a trend
counts only when it is both large (beyond the configured threshold) and significant (its 95%
CI excludes zero), so short or noisy soaks do not cry wolf. Throughput drift of paired arms is
judged on their ratio, the drift both share being the host's (soak/drift.py).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from watchkeeper.analysis.acceptance import AcceptanceCurve, curve, explain
from watchkeeper.config import SoakConfig
from watchkeeper.config.durations import parse_duration
from watchkeeper.format import ci
from watchkeeper.soak import probes
from watchkeeper.soak.drift import Lines, paired_arms, series_trends
from watchkeeper.soak.figures import RssEntry, SoakFigures
from watchkeeper.soak.judgement import OutputRates
from watchkeeper.soak.pair_drift import PairDrift, pair_drift, pair_lines
from watchkeeper.soak.paired import (
    MAX_SIZED_PAIRS,
    MIN_CYCLES,
    MIN_SIZING_PAIRS,
    SIGMA_CONFIDENCE,
    SIZING_POWER,
    cold_blocks,
    reference_ratios,
)
from watchkeeper.soak.paired_figures import RatioInterval, ReferenceRatio
from watchkeeper.soak.trends import MIN_BLOCKS, Trend, block_medians, level_shift, theil_sen
from watchkeeper.soak.views import SoakData, SoakSampleView

__all__ = [
    "MIN_BLOCKS",
    "SoakVerdict",
    "Trend",
    "acceptance_curves",
    "block_medians",
    "consistent_rate",
    "judge",
    "level_shift",
    "theil_sen",
]
"""The trend helpers moved to soak/trends.py; benchmarks and tests still import them here."""


@dataclass(frozen=True, slots=True)
class SoakVerdict:
    campaign_id: int
    stable: bool
    reasons: tuple[str, ...]
    notes: tuple[str, ...]
    figures: SoakFigures | None
    """None where no request was stored (nothing to measure)."""
    leaks: tuple[RssEntry, ...] = field(default=())

    @property
    def verdict(self) -> str:
        return "stable" if self.stable else "unstable"

    @property
    def headline(self) -> str:
        if self.stable:
            return "stable: " + "; ".join(self.notes[:1] or ("no problem found",))
        return "unstable: " + "; ".join(self.reasons)

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign_id": self.campaign_id,
            "verdict": self.verdict,
            "headline": self.headline,
            "reasons": list(self.reasons),
            "notes": list(self.notes),
            "figures": {} if self.figures is None else self.figures.to_json(),
        }


def _hours(t: datetime, origin: datetime) -> float:
    return (t - origin).total_seconds() / 3600.0


def _rss_trends(
    data: SoakData, origin: datetime, cfg: SoakConfig
) -> tuple[list[RssEntry], list[RssEntry], list[str]]:
    segments: dict[str, dict[Any, list[tuple[float, float]]]] = defaultdict(
        lambda: defaultdict(list)
    )
    first_seen: dict[tuple[str, Any], datetime] = {}
    for r in data.resources:
        if r.profile is None or not r.rss_bytes:
            continue
        seg = (r.profile, r.server_pid)
        start = first_seen.setdefault(seg, r.taken_at)
        if (r.taken_at - start).total_seconds() < cfg.rss_warmup_s:
            continue
        segments[r.profile][r.server_pid].append((_hours(r.taken_at, origin), r.rss_bytes / 2**20))
    out: list[RssEntry] = []
    leaks: list[RssEntry] = []
    notes: list[str] = []
    for profile, by_pid in sorted(segments.items()):
        parts = [tuple(zip(*sorted(pts), strict=True)) for pts in by_pid.values() if len(pts) >= 2]
        span_s = sum((max(p[0]) - min(p[0])) * 3600 for p in parts)
        trend = theil_sen(parts)  # type: ignore[arg-type]
        if trend is None:
            notes.append(f"{profile}: not enough RSS samples for a memory trend")
            out.append(RssEntry(profile, round(span_s, 1), len(by_pid)))
            continue
        judged = span_s >= cfg.leak_min_span_s
        entry = RssEntry(profile, round(span_s, 1), len(by_pid), trend, judged)
        if not judged:
            notes.append(
                f"{profile}: {span_s:.0f}s of RSS history (< {cfg.leak_min_span_s:.0f}s), "
                "leak not judged"
            )
        elif trend.slope > cfg.leak_threshold_mb_per_hour and trend.low > 0:
            leaks.append(entry)
        out.append(entry)
    return out, leaks, notes


def acceptance_curves(data: SoakData) -> list[AcceptanceCurve]:
    """Per arm, the acceptance curve over everything its servers verified while sampled.

    The counters are cumulative per process, so each process contributes the delta between
    its first and last resource sample, and a restart starts a new process rather than a
    negative delta. That span holds the arm's load and its temperature-0 probes alike (one
    server serves both); the soak's question is whether acceptance holds over hours, which
    `acceptance_drift` answers from the per-request counts, and this curve says at which
    draft positions the accepted tokens come from.
    """
    spans: dict[str, dict[Any, list[dict[str, float]]]] = defaultdict(lambda: defaultdict(list))
    for r in data.resources:
        if r.profile is not None and r.counters:
            spans[r.profile][r.server_pid].append(r.counters)
    out = []
    for profile, by_pid in sorted(spans.items()):
        scrapes = [(points[0], points[-1]) for points in by_pid.values()]
        c = curve(profile, scrapes)
        if c is not None:
            out.append(c)
    return out


# -- the rules: each looks at one thing and returns its reason (or None), as checks/guards.py


def _crashes(kinds: Counter[str]) -> str | None:
    if not kinds["server_crash"] + kinds["server_unresponsive"]:
        return None
    return (
        f"server crashed {kinds['server_crash']}x, unresponsive {kinds['server_unresponsive']}x"
        f" ({kinds['server_restart']} restarts)"
    )


def _stopped_profiles(stopped: Sequence[str]) -> str | None:
    return f"stopped after repeated crashes: {', '.join(stopped)}" if stopped else None


def _unreachable(kinds: Counter[str]) -> str | None:
    n = kinds["server_unreachable"]
    return f"external server unreachable {n}x" if n else None


def _stuck_slots(kinds: Counter[str]) -> str | None:
    return f"{kinds['stuck_slot']} stuck slot(s)" if kinds["stuck_slot"] else None


def _error_rate(
    samples: Sequence[SoakSampleView],
    errors: Sequence[SoakSampleView],
    timeouts: int,
    cfg: SoakConfig,
) -> str | None:
    rate = len(errors) / len(samples)
    if rate <= cfg.max_error_rate:
        return None
    return (
        f"error rate {rate:.1%} > {cfg.max_error_rate:.1%} "
        f"({len(errors)} of {len(samples)}, {timeouts} timeouts)"
    )


def _reference_lines(paired: Sequence[ReferenceRatio]) -> Lines:
    """The ratio against the pinned reference: a confirmed regression of a different system
    is a reason; an A/A soak's verdict is a false alarm (a note the digest counts)."""
    reasons: list[str] = []
    notes: list[str] = []
    for entry in paired:
        label = f"{entry.label} vs reference #{entry.reference_id}"
        interval = entry.interval
        if interval is None:
            notes.append(
                f"{label}: {entry.n_pairs} process pair(s) with {entry.n_cycles} judged "
                f"cycle(s), fewer than {MIN_CYCLES}: ratio not judged"
            )
            continue
        text = (
            f"{label}: {entry.estimate:.3f}x ({ci(interval.low, interval.high, '.3f', '..')}, "
            f"{entry.n_cycles} cycles, {entry.n_pairs} process pairs, effective n "
            f"{interval.n_eff:.1f}, threshold {entry.threshold:.0%}), {entry.verdict}"
        )
        if entry.verdict == "inconclusive":
            text += _sizing(entry, interval)
        if entry.verdict == "regression" and not entry.aa and entry.confirmed:
            reasons.append(text + ", in both halves of the soak")
        elif entry.aa and entry.verdict in ("regression", "improvement"):
            notes.append(text + " on an A/A soak: a false alarm, counted in the digest")
        else:
            notes.append(text)
    return reasons, notes


def _sizing(entry: ReferenceRatio, interval: RatioInterval) -> str:
    """What would decide an inconclusive ratio (soak.paired.pairs_needed), as a range of pairs
    (the point spread to its upper confidence bound) and of this soak's length: the one figure
    an operator needs to plan the next soak."""
    n = entry.n_pairs
    low, high = interval.pairs_needed or (None, None)
    if low is None:
        if n < MIN_SIZING_PAIRS:
            return (
                f"; {n} pairs cannot size a longer soak (at their point spread it would take "
                f"more than {MAX_SIZED_PAIRS}): soak {MIN_SIZING_PAIRS} or more and read the "
                "hint again"
            )
        return (
            f"; at this noise not even {MAX_SIZED_PAIRS} process pairs would decide it "
            f"{_power_text()}"
        )
    if high == low:
        pairs, times = f"{low}", f"{low / n:.1f}"
    elif high is None:
        pairs, times = f"{low}-{MAX_SIZED_PAIRS}+", f"{low / n:.1f}+"
    else:
        pairs, times = f"{low}-{high}", f"{low / n:.1f}-{high / n:.1f}"
    return (
        f"; at this noise about {pairs} process pairs ({times}x this soak; the upper end if "
        f"its spread is at its {SIGMA_CONFIDENCE:.0%} upper bound) would decide it "
        f"{_power_text()} if its {entry.estimate:.3f}x holds"
    )


def _power_text() -> str:
    return f"{SIZING_POWER * 10:.0f} times in 10"


def _pair_drift_lines(drifts: Sequence[PairDrift], cfg: SoakConfig) -> Lines:
    reasons: list[str] = []
    notes: list[str] = []
    for drift in drifts:
        more_reasons, more_notes = pair_lines(drift, cfg.drift_threshold)
        reasons += more_reasons
        notes += more_notes
    return reasons, notes


def _leak_reasons(leaks: Sequence[RssEntry], cfg: SoakConfig) -> list[str]:
    return [
        f"{leak.profile}: RSS grows {leak.trend.slope:.0f} MB/h "
        f"({ci(leak.trend.low, leak.trend.high, '.0f', '..')}) > "
        f"{cfg.leak_threshold_mb_per_hour:.0f} MB/h"
        for leak in leaks
        if leak.trend is not None
    ]


def _identity_rule(identical: Sequence[probes.ProbeGroup], cfg: SoakConfig) -> Lines:
    t = probes.totals(identical)
    if not t.compared:
        return [], ["fewer than 2 probes per series: identical-output rate not judged"]
    notes = [
        f"temperature-0 probes: {t.compared} compared with their reference, "
        f"{t.identical} identical, {t.near_tie} near ties, {t.length_only} cut by "
        f"length, {t.unverified} unverified, {t.mismatch} mismatches"
    ]
    if t.unverified:
        notes.append(
            f"{t.unverified} probe(s) differ in text with no token data to weigh the "
            "difference: shown, not judged"
        )
    rate = probes.consistent_rate(identical)
    if rate is not None and rate < cfg.min_identical_rate:
        judged = t.compared - t.unverified
        where = ", ".join(
            f"{g.profile} at concurrency {g.concurrency}: {g.counts.mismatch}"
            for g in identical
            if g.counts.mismatch
        )
        return [
            f"temperature-0 probes answered differently {1 - rate:.0%} of the time "
            f"({t.mismatch}/{judged} beyond a near tie; {where})"
        ], notes
    return [], notes


def consistent_rate(identical: Sequence[probes.ProbeGroup]) -> float | None:
    """Share of the probes whose answer is consistent with their reference (identical, a near
    tie or a length cut), of those that could be judged."""
    return probes.consistent_rate(identical)


def _block_s(params: dict[str, Any]) -> float | None:
    value = params.get("block_s")
    return float(value) if isinstance(value, int | float) and value > 0 else None


def judge(data: SoakData, cfg: SoakConfig, *, near_tie_threshold: float = 0.1) -> SoakVerdict:
    """The verdict and its figures for a whole campaign (every block, every resume): the
    rules above, in the order their reasons read. `near_tie_threshold`: the bench's
    (`bench.near_tie_threshold`), for the probes' divergences (soak/probes.py)."""
    samples = data.samples
    if not samples:
        return SoakVerdict(data.campaign_id, False, ("no request was stored",), (), None)
    origin = samples[0].started_at
    slice_s = parse_duration(str(data.params.get("slice") or cfg.slice))
    errors = [s for s in samples if s.error is not None]
    timeouts = sum(1 for s in errors if (s.error or "").startswith("timeout"))
    kinds = Counter(incident.kind for incident in data.incidents)
    stopped = sorted({i.profile or "" for i in data.incidents if i.kind == "profile_stopped"})
    paired = reference_ratios(
        samples,
        data.params,
        threshold=cfg.min_effect,
        cold=cold_blocks(data.incidents),
        autocorrelation_floor=cfg.autocorrelation_floor,
    )
    drifts = [pair_drift(entry) for entry in paired]
    series, drift_reasons, drift_notes = series_trends(
        samples,
        origin,
        slice_s,
        cfg,
        paired=paired_arms(data.params),
        block_s=_block_s(data.params),
        host_cpu=[
            (r.taken_at, r.host_other_cpu) for r in data.resources if r.host_other_cpu is not None
        ],
    )
    rss, leaks, rss_notes = _rss_trends(data, origin, cfg)
    curves = acceptance_curves(data)
    identical = probes.judge_probes(samples, near_tie_threshold=near_tie_threshold)
    reference_reasons, reference_notes = _reference_lines(paired)
    pair_reasons, pair_notes = _pair_drift_lines(drifts, cfg)
    identity_reasons, identity_notes = _identity_rule(identical, cfg)
    single = (
        _crashes(kinds),
        _stopped_profiles(stopped),
        _unreachable(kinds),
        _stuck_slots(kinds),
        _error_rate(samples, errors, timeouts, cfg),
    )
    reasons = [r for r in single if r is not None]
    reasons += drift_reasons + pair_reasons + reference_reasons
    reasons += _leak_reasons(leaks, cfg) + identity_reasons
    span_s = (samples[-1].started_at - origin).total_seconds()
    notes = [f"{len(samples)} requests over {span_s / 3600:.2f}h, {len(errors)} errors"]
    notes += reference_notes + identity_notes + drift_notes + pair_notes + rss_notes
    notes += [explain(c) for c in curves]
    figures = SoakFigures(
        requests=len(samples),
        load_requests=sum(1 for s in samples if not s.is_probe),
        probes=sum(1 for s in samples if s.is_probe),
        errors=len(errors),
        timeouts=timeouts,
        span_s=span_s,
        slice_s=slice_s,
        restarts=kinds["server_restart"],
        crashes=kinds["server_crash"],
        unresponsive=kinds["server_unresponsive"],
        stuck_slots=kinds["stuck_slot"],
        profiles_stopped=tuple(stopped),
        db_outages=kinds["db_outage"],
        incidents=dict(kinds),
        rates=OutputRates(probes.identical_rate(identical), consistent_rate(identical)),
        probe_totals=probes.totals(identical),
        identical_output=tuple(identical),
        series=tuple(series),
        reference=tuple(paired),
        paired_drift=tuple(drifts),
        rss=tuple(rss),
        acceptance_curves=tuple(curves),
        leak_threshold_mb_per_hour=cfg.leak_threshold_mb_per_hour,
    )
    return SoakVerdict(
        data.campaign_id, not reasons, tuple(reasons), tuple(notes), figures, tuple(leaks)
    )
