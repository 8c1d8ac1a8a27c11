"""The morning digest: what last night's campaigns changed, how sure we are, and what is open.

Gathering is separate from rendering (``publish.digest``) so the Markdown is a pure function of
a `Digest` and the golden test can pin it. Everything here comes from the store — campaigns'
detection summaries, findings and their lifecycle, identity mismatches, soak verdicts — so a
digest for any past night can be rebuilt.
"""

from __future__ import annotations

import collections
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

from watchkeeper.findings.evidence import (
    ChangePointEvidence,
    NightlyEvidence,
    SeriesEvidence,
    evidence_of,
)
from watchkeeper.format import MISSING
from watchkeeper.nightly.detector import DetectorParams, Direction, MetricKind, SeriesKey
from watchkeeper.nightly.ratios import FLAGS, FalseAlarms, false_alarms
from watchkeeper.nightly.series import SeriesPoint, fingerprint, series_history
from watchkeeper.store.findings import OPEN_STATUSES, StoredFinding
from watchkeeper.store.history import History
from watchkeeper.store.references import RatioRecord, ReferenceRecord, ReferenceStore
from watchkeeper.upgrade.suggest import BisectSuggestion, suggestions

DIGEST_KINDS = ("regression", "improvement", "change_point", "environment_noise")


@dataclass(frozen=True, slots=True)
class SeriesPlotData:
    """One flagged series' history, for its plot."""

    finding_id: int
    title: str
    direction: Direction
    points: tuple[tuple[int, float, bool], ...]
    """(run id, run value, good) in chronological order."""
    highlight_runs: tuple[int, ...]
    """Runs of the night being reported."""
    change_run: int | None
    """First bad run of a change point, drawn as a vertical line."""


@dataclass(frozen=True, slots=True)
class NightlyRow:
    ratio: RatioRecord
    reference: ReferenceRecord | None


@dataclass(frozen=True, slots=True)
class RatioPlotData:
    """One nightly series: (campaign, ratio, low, high, A/A) per night, oldest first."""

    series: str
    threshold: float
    points: tuple[tuple[int, float, float | None, float | None, bool], ...]
    highlight: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class Digest:
    day: date
    since: datetime
    until: datetime
    campaigns: tuple[dict[str, Any], ...]
    series_judged: int
    labels: dict[str, int]
    regressions: tuple[StoredFinding, ...]
    improvements: tuple[StoredFinding, ...]
    change_points: tuple[StoredFinding, ...]
    noise: tuple[StoredFinding, ...]
    suspicious: tuple[dict[str, Any], ...]
    expired: int
    mismatches: tuple[dict[str, Any], ...]
    soaks: tuple[dict[str, Any], ...]
    open_findings: tuple[tuple[StoredFinding, int], ...]
    """(finding, age in days)."""
    false_positives: int
    """Findings maintainers dismissed, ever: the detector's measured false alarms."""
    params: DetectorParams
    change_point_min_size: int
    plots: tuple[SeriesPlotData, ...]
    nightly: tuple[NightlyRow, ...] = ()
    """Tonight's paired ratios (current / pinned reference), one per series."""
    false_alarms: tuple[tuple[str, FalseAlarms], ...] = ()
    """Per host: flags on A/A series-nights over the whole history (the detector's live
    false-alarm rate)."""
    ratio_plots: tuple[RatioPlotData, ...] = ()
    bisects: tuple[BisectSuggestion, ...] = ()
    """Confirmed nightly regressions whose reference and current system run different
    llama.cpp releases: the `watchkeeper bisect` each calls for."""
    bisect_auto: bool = False
    """`bisect.auto`: the daemon's bisect job runs them (the digest says so)."""

    @property
    def headline(self) -> str:
        if self.noise:
            return (
                f"Environment noise: {len(self.noise)} night(s) moved too many series at once "
                "to believe one by one; nothing filed per series"
            )
        confirmed = [f for f in self.regressions if f.confirmed_at is not None]
        candidates = [f for f in self.regressions if f.confirmed_at is None]
        parts = []
        if confirmed:
            worst = sorted(confirmed, key=_size)[-2:]
            named = ", ".join(_short(f) for f in reversed(worst))
            parts.append(f"{len(confirmed)} confirmed regression(s) ({named})")
        if self.change_points:
            parts.append(f"{len(self.change_points)} level shift(s) with a first bad build")
        if candidates:
            parts.append(f"{len(candidates)} unconfirmed candidate(s) (rerun or next night)")
        if self.improvements:
            parts.append(f"{len(self.improvements)} improvement(s)")
        if self.mismatches:
            parts.append(f"{len(self.mismatches)} output mismatch(es) at temperature 0")
        if not parts:
            if not self.campaigns:
                return "No campaign ran in this window"
            flagged = any(row.ratio.verdict in FLAGS for row in self.nightly)
            lead = "No finding" if flagged else "Nothing flagged"
            return f"{lead}: {self._judged()} in {len(self.campaigns)} campaign(s)"
        return "; ".join(parts)

    def _judged(self) -> str:
        """What tonight's verdicts were, by kind: "no change" only where a verdict said so
        (an A/A night at 3 rounds is mostly `inconclusive`, which is not the same claim)."""
        absolute = f"{self.series_judged} absolute series"
        if not self.nightly:
            return absolute
        counts = collections.Counter(row.ratio.verdict for row in self.nightly)
        verdicts = ", ".join(f"{n} {verdict}" for verdict, n in counts.most_common())
        return f"{len(self.nightly)} nightly ratio(s) ({verdicts}), {absolute}"


def _size(f: StoredFinding) -> float:
    """How far a finding moved its series (0 when it does not say): the headline's order."""
    e = evidence_of(f.kind, f.evidence)
    delta = e.delta if isinstance(e, SeriesEvidence | NightlyEvidence) else None
    return abs(delta) if delta is not None else 0.0


def _short(f: StoredFinding) -> str:
    """'decode_tps · code -19.1% (p 9e-06), first bad build X' for the headline."""
    e = evidence_of(f.kind, f.evidence)
    series = " · ".join(e.series_title(f.title).split(" · ")[:2])
    size = "" if e.delta_text() == MISSING else f" {e.delta_text()}"
    p = e.p_adjusted if isinstance(e, SeriesEvidence) else None
    sure = f" (p {p:.1g})" if p is not None else ""
    shift = e.change_point if isinstance(e, SeriesEvidence | ChangePointEvidence) else None
    build = shift.first_bad_build if shift is not None else None
    return f"{series}{size}{sure}" + (f", first bad build {build}" if build else "")


def day_window(day: date) -> tuple[datetime, datetime]:
    """A digest's night: from noon UTC the day before to noon UTC on the day, so an overnight
    run that starts before midnight and ends after it lands in one digest."""
    until = datetime.combine(day, time(12, 0), tzinfo=UTC)
    return until - timedelta(days=1), until


def _night_of(f: StoredFinding, since: datetime, until: datetime) -> bool:
    seen = f.last_seen_at or f.created_at
    return since <= seen < until or since <= f.updated_at < until


def gather(
    history: History,
    *,
    day: date,
    since: datetime | None = None,
    until: datetime | None = None,
    params: DetectorParams | None = None,
    change_point_min_size: int = 3,
    now: datetime | None = None,
    bisect_auto: bool = False,
) -> Digest:
    window_since, window_until = day_window(day)
    since, until = since or window_since, until or window_until
    now = now or datetime.now(UTC)
    campaigns = history.campaigns_between(since, until)
    # Judged as a night: the A/A check marks its campaigns analysed with its own summary, and
    # they are not nights (nothing is compared with history there).
    judged = [c for c in campaigns if "labels" in c["summary"].get("detection", {})]
    labels: dict[str, int] = {}
    suspicious: list[dict[str, Any]] = []
    for c in judged:
        detection = c["summary"]["detection"]
        for label, n in detection["labels"].items():
            labels[label] = labels.get(label, 0) + n
        suspicious.extend(
            {**v, "campaign_id": c["id"]}
            for v in detection["verdicts"]
            if v["label"] == "suspicious"
        )
    night = [
        f
        for f in history.findings(kinds=DIGEST_KINDS)
        if _night_of(f, since, until) and f.status != "expired"
    ]
    expired = [
        f
        for f in history.findings(statuses=("expired",), kinds=("regression", "improvement"))
        if since <= f.updated_at < until
    ]
    regressions = tuple(f for f in night if f.kind == "regression")
    improvements = tuple(f for f in night if f.kind == "improvement")
    change_points = tuple(f for f in night if f.kind == "change_point")
    noise = tuple(f for f in night if f.kind == "environment_noise")
    open_findings = tuple(
        (f, max(0, (now - f.created_at).days))
        for f in history.findings(statuses=OPEN_STATUSES)
        if f.kind in DIGEST_KINDS or f.kind == "correctness"
    )
    plotted = [*regressions, *change_points, *improvements]
    reruns = rerun_campaigns(history, until)
    references = ReferenceStore(history.db)
    nightly, false_alarm_rates, ratio_plots = _nightly(references, since, until, reruns)
    return Digest(
        day=day,
        since=since,
        until=until,
        campaigns=tuple(campaigns),
        series_judged=sum(c["summary"]["detection"]["series"] for c in judged),
        labels=labels,
        regressions=regressions,
        improvements=improvements,
        change_points=change_points,
        noise=noise,
        suspicious=tuple(suspicious),
        expired=len(expired),
        mismatches=tuple(history.mismatches([c["id"] for c in campaigns])),
        soaks=tuple(c for c in campaigns if c["kind"] == "soak"),
        open_findings=open_findings,
        false_positives=len(history.findings(statuses=("dismissed",))),
        params=params or DetectorParams(),
        change_point_min_size=change_point_min_size,
        plots=tuple(_plot_data(history, plotted, {c["id"] for c in campaigns})),
        nightly=nightly,
        false_alarms=false_alarm_rates,
        ratio_plots=ratio_plots,
        bisects=tuple(suggestions(regressions, references.get)),
        bisect_auto=bisect_auto,
    )


def rerun_campaigns(history: History, until: datetime) -> set[int]:
    """Ids of the nightly's confirmation reruns: not nights of their own in a false-alarm rate."""
    everything = history.campaigns_between(datetime(1970, 1, 1, tzinfo=UTC), until)
    return {c["id"] for c in everything if c["kind"] == "nightly-rerun"}


def _nightly(
    store: ReferenceStore, since: datetime, until: datetime, reruns: set[int] | None = None
) -> tuple[tuple[NightlyRow, ...], tuple[tuple[str, FalseAlarms], ...], tuple[RatioPlotData, ...]]:
    tonight = store.ratios(since=since, until=until)
    references: dict[int, ReferenceRecord | None] = {}
    rows = []
    for r in tonight:
        if r.reference_id not in references:
            references[r.reference_id] = store.get(r.reference_id)
        rows.append(NightlyRow(r, references[r.reference_id]))
    everything = store.ratios()
    hosts = sorted({r.host_fingerprint for r in everything})
    rates = tuple(
        (h, false_alarms([r for r in everything if r.host_fingerprint == h], reruns or set()))
        for h in hosts
    )
    plots = []
    for series in sorted({r.series for r in tonight}):
        history = [r for r in everything if r.series == series]
        plots.append(
            RatioPlotData(
                series,
                history[-1].threshold,
                tuple((r.campaign_id, r.estimate, r.low, r.high, r.aa) for r in history),
                tuple(r.campaign_id for r in tonight if r.series == series),
            )
        )
    return tuple(rows), rates, tuple(plots)


def _plot_data(
    history: History, findings: Sequence[StoredFinding], night_campaigns: set[int]
) -> list[SeriesPlotData]:
    if not findings:
        return []
    series = series_history(history.run_records())
    by_fp: dict[str, tuple[SeriesKey, list[SeriesPoint]]] = {
        fingerprint(k): (k, pts) for k, pts in series.items()
    }
    out = []
    for f in findings:
        found = by_fp.get(f.fingerprint)
        if found is None:
            continue
        key, points = found
        kind = key.spec.kind
        values = [
            (p.run.run_id, p.point.center(kind), p.point.good)
            for p in points
            if p.point.size(kind) > 0
        ]
        scale = 100.0 if kind is MetricKind.PROPORTION else 1.0
        e = evidence_of(f.kind, f.evidence)
        shift = e.change_point if isinstance(e, SeriesEvidence | ChangePointEvidence) else None
        change = shift.first_bad_run if shift is not None else None
        out.append(
            SeriesPlotData(
                finding_id=f.id,
                title=e.series_title(key.metric),
                direction=key.spec.direction,
                points=tuple((r, v * scale, g) for r, v, g in values),
                highlight_runs=tuple(
                    p.run.run_id for p in points if p.run.campaign_id in night_campaigns
                ),
                change_run=change,
            )
        )
    return out
