"""Regression tracking: judge each finished campaign against history and keep findings' state.

One campaign is one "night". Its runs are pooled per series and tested by the detector against
the series' recent good runs (``nightly.detector``); flags become *candidate* findings, and a
candidate is confirmed only when the series flags the same way again — on a rerun of just that
series or on the next night. A candidate that is not seen again expires: a single spike never
reaches a tracker. A night where too much flags at once yields one "environment noise" finding
instead. Then a retrospective change-point pass (``nightly.levelshifts``) over each series'
whole history names the first bad build of a level shift and restarts the series' baseline
there, so the new level is what later nights are compared with.

Both CLI and daemon call these functions; they hold the lifecycle rules, the store holds rows.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from watchkeeper.errors import ConfigError
from watchkeeper.findings.evidence import (
    SeriesEvidence,
    evidence_of,
)
from watchkeeper.nightly.detector import (
    AbsoluteNight,
    DetectorParams,
    EnvironmentNoise,
    Finding,
    Label,
    MetricKind,
    SeriesKey,
    detect_night,
)
from watchkeeper.nightly.levelshifts import ChangePointFinding, change_point_findings
from watchkeeper.nightly.series import (
    SeriesPoint,
    describe,
    exclusion_reason,
    fingerprint,
    pool,
    series_history,
)
from watchkeeper.store.findings import LIVE_STATUSES, STATUSES, NewFinding, StoredFinding
from watchkeeper.store.history import History, RunRecord
from watchkeeper.store.references import ReferenceStore

DETECTOR_KINDS = ("regression", "improvement")
SETTABLE = {
    "ack": "acknowledged",
    "dismiss": "dismissed",
    "silence": "silenced",
    "fix": "fixed",
    "reopen": "active",
}


@dataclass(frozen=True, slots=True)
class TrackingParams:
    detector: DetectorParams = field(default_factory=DetectorParams)
    change_point_min_size: int = 3
    change_point_penalty: float | None = None
    """On the noise-standardised scale; None is ``2 * log(n)`` (see analysis.changepoints)."""
    change_point_window: int = 120
    """The newest good runs of a series that the nightly change-point pass reads. PELT with an
    l1 cost is quadratic in the points: over a year of nights x 100 series one pass took 77 s
    (benchmarks/detector.py), and only a *current* shift is acted on; older ones were acted on
    the nights they were current."""


@dataclass(frozen=True, slots=True)
class Judgement:
    """What one campaign's analysis did, for the console and the digest."""

    campaign_id: int
    night: AbsoluteNight
    candidates: tuple[int, ...]
    confirmed: tuple[int, ...]
    expired: tuple[int, ...]
    silenced: tuple[int, ...]
    change_points: tuple[ChangePointFinding, ...]
    noise_finding: int | None
    excluded_runs: dict[int, str]

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for f in self.night.findings:
            out[f.label.value] = out.get(f.label.value, 0) + 1
        return out


def series_evidence(f: Finding) -> SeriesEvidence:
    """The evidence a finding carries: delta with CI, test and p, baseline size and CV, and
    the parameters, as the issue of record needs them."""
    return SeriesEvidence(
        series=asdict(f.key),
        series_name=describe(f.key),
        label=f.label.value,
        note=f.note,
        run=f.run,
        side=f.side.value if f.side else None,
        delta=f.delta,
        delta_ci=[f.delta_low, f.delta_high],
        delta_unit="absolute" if f.key.spec.kind is MetricKind.PROPORTION else "relative",
        test=f.test,
        p_value=f.p_value,
        p_adjusted=f.p_adjusted,
        current=f.current_value,
        baseline=f.baseline_value,
        baseline_runs=f.baseline_runs,
        baseline_trials=f.baseline_trials,
        baseline_cv=f.baseline_cv,
        fence=f.fence,
        floor=f.floor,
        params=asdict(f.params),
    )


def finding_json(f: Finding) -> dict[str, Any]:
    return series_evidence(f).to_json()


def title_for(f: Finding, profile: str) -> str:
    k = f.key
    change = series_evidence(f).change_text() if f.delta is not None else ""
    return (
        f"{k.metric} {f.label.value} in {k.category} (profile {profile}, concurrency "
        f"{k.concurrency}): {change}"
    )


def _severity(f: Finding) -> str:
    if f.label is Label.IMPROVEMENT:
        return "info"
    return "high" if f.key.metric in ("error_rate", "identical_rate") else "medium"


def _split(
    points: Sequence[SeriesPoint], campaign_id: int, reset_run: int | None
) -> tuple[list[SeriesPoint], list[SeriesPoint]]:
    tonight = [p for p in points if p.run.campaign_id == campaign_id]
    past = [
        p
        for p in points
        if p.run.campaign_id != campaign_id and (reset_run is None or p.run.run_id >= reset_run)
    ]
    return past, tonight


def judge_campaign(
    history: History,
    campaign_id: int,
    params: TrackingParams | None = None,
    *,
    history_campaigns: Sequence[int] | None = None,
    record: bool = True,
) -> Judgement:
    """Judge one campaign against everything before it (or only against
    ``history_campaigns``, as the A/A check does). With ``record`` False nothing is written:
    findings, resets and the analysed mark are left alone."""
    params = params or TrackingParams()
    if history_campaigns is None:
        runs = history.run_records(up_to_campaign=campaign_id)
    else:
        runs = history.run_records(campaigns=[*history_campaigns, campaign_id])
    excluded = {r.run_id: exclusion_reason(r) for r in runs if r.campaign_id == campaign_id}
    if record:
        history.record_exclusions(excluded)
    resets = history.resets() if history_campaigns is None else {}
    tested = _tested_series(runs, campaign_id, resets)
    night = _detect(tested, params.detector)
    judgement = Judgement(
        campaign_id,
        night,
        (),
        (),
        (),
        (),
        (),
        None,
        {k: v for k, v in excluded.items() if v},
    )
    if not record:
        return judgement
    now = datetime.now(UTC)
    latest_run = {key: tonight[-1].run for key, (_, tonight) in tested.items()}
    if night.environment_noise is not None:
        noise_id = history.create_finding(
            _noise_finding(campaign_id, night, night.environment_noise, now)
        )
        judgement = _with(judgement, noise_finding=noise_id)
    else:
        judgement = _file(history, judgement, latest_run, now)
    judgement = _change_points(history, judgement, tested, params, now)
    history.mark_analysed(campaign_id, _detection_summary(judgement))
    return judgement


_Tested = dict[SeriesKey, tuple[list[SeriesPoint], list[SeriesPoint]]]
"""Series the campaign measured: (past since the series' reset, tonight's points)."""


def _tested_series(
    runs: Sequence[RunRecord], campaign_id: int, resets: Mapping[str, int]
) -> _Tested:
    """Every series with a point from this campaign, its past cut at its baseline reset."""
    tested: _Tested = {}
    for key, points in series_history(runs).items():
        past, tonight = _split(points, campaign_id, resets.get(fingerprint(key)))
        if tonight:
            tested[key] = (past, tonight)
    return tested


def _detect(tested: _Tested, params: DetectorParams) -> AbsoluteNight:
    """The detector over every tested series, tonight's runs pooled per series. Environment
    noise is the explanation only where the engine did not change: every baseline run of
    the series measured the build that ran tonight."""
    same_build = {
        key: _baseline_labels(past, params.window) <= {tonight[-1].point.label}
        for key, (past, tonight) in tested.items()
    }
    return detect_night(
        {
            key: (
                [p.point for p in past],
                pool(tonight[-1].point.label, [p.point for p in tonight]),
            )
            for key, (past, tonight) in tested.items()
        },
        params,
        storm_eligible=lambda key: same_build[key],
    )


def _noise_finding(
    campaign_id: int, night: AbsoluteNight, noise: EnvironmentNoise, now: datetime
) -> NewFinding:
    """One finding for a night where everything moved one way: the flagged series are its
    evidence, not findings of their own."""
    flagged = [describe(f.key) for f in night.findings if f.flagged]
    return NewFinding(
        campaign_id=campaign_id,
        fingerprint=f"environment-noise-c{campaign_id}",
        kind="environment_noise",
        label=Label.ENVIRONMENT_NOISE.value,
        status="active",
        severity="medium",
        title=f"environment noise in campaign {campaign_id}: {noise.reason}",
        evidence={**asdict(noise), "series": flagged[:50]},
        confirmed_at=now,
        last_seen_at=now,
    )


def _baseline_labels(points: Sequence[SeriesPoint], window: int) -> set[str]:
    good = [p for p in points if p.point.good]
    return {p.point.label for p in good[-window:]}


def _with(j: Judgement, **changes: Any) -> Judgement:
    return replace(j, **changes)


def _file(
    history: History, j: Judgement, latest_run: dict[SeriesKey, Any], now: datetime
) -> Judgement:
    candidates, confirmed, expired, silenced = [], [], [], []
    flagged = {fingerprint(f.key): f for f in j.night.findings if f.flagged}
    tested = {fingerprint(f.key) for f in j.night.findings if f.label is not Label.INSUFFICIENT}
    for fp, f in flagged.items():
        run = latest_run[f.key]
        side = f.side.value if f.side else None
        previous = [
            p
            for p in history.findings(fingerprint=fp, kinds=DETECTOR_KINDS)
            if p.side == side and p.status in LIVE_STATUSES
        ]
        evidence = finding_json(f)
        if previous:
            p = previous[-1]
            history.update_finding(
                p.id,
                occurrences=p.occurrences + 1,
                last_seen_at=now,
                run_id=run.run_id,
                evidence={**evidence, "first": p.evidence.get("first", p.evidence)},  # raw JSON
                confirmed_at=p.confirmed_at or now,
                title=title_for(f, run.profile_name),
            )
            if p.status == "silenced":
                silenced.append(p.id)
            elif p.confirmed_at is None:
                confirmed.append(p.id)
            continue
        new_id = history.create_finding(
            NewFinding(
                campaign_id=j.campaign_id,
                run_id=run.run_id,
                fingerprint=fp,
                kind=f.label.value,
                label=f.label.value,
                status="active",
                severity=_severity(f),
                title=title_for(f, run.profile_name),
                evidence=evidence,
                series_key=asdict(f.key),
                side=side,
                last_seen_at=now,
            )
        )
        candidates.append(new_id)
    for p in history.findings(statuses=("active",), kinds=DETECTOR_KINDS):
        spike = p.confirmed_at is None and p.campaign_id != j.campaign_id
        if spike and p.fingerprint in tested and p.fingerprint not in flagged:
            history.update_finding(
                p.id,
                status="expired",
                status_note=f"not seen again in campaign {j.campaign_id}: a one-night spike",
            )
            expired.append(p.id)
    return _with(
        j,
        candidates=tuple(candidates),
        confirmed=tuple(confirmed),
        expired=tuple(expired),
        silenced=tuple(silenced),
    )


def _change_points(
    history: History,
    j: Judgement,
    tested: dict[SeriesKey, tuple[list[SeriesPoint], list[SeriesPoint]]],
    params: TrackingParams,
    now: datetime,
) -> Judgement:
    """The change-point pass (`nightly.levelshifts`) with this tracking's parameters."""
    found = change_point_findings(
        history,
        j.campaign_id,
        tested,
        window=params.change_point_window,
        min_size=params.change_point_min_size,
        penalty=params.change_point_penalty,
        now=now,
    )
    return _with(j, change_points=found)


def _detection_summary(j: Judgement) -> dict[str, Any]:
    shown = [f for f in j.night.findings if f.flagged or f.label is Label.SUSPICIOUS]
    return {
        "series": len(j.night.findings),
        "labels": j.counts(),
        "environment_noise": asdict(j.night.environment_noise)
        if j.night.environment_noise
        else None,
        "verdicts": [finding_json(f) for f in shown][:100],
        "candidates": list(j.candidates),
        "confirmed": list(j.confirmed),
        "expired": list(j.expired),
        "change_points": [c.finding_id for c in j.change_points],
        "excluded_runs": {str(k): v for k, v in j.excluded_runs.items()},
    }


def judge_pending(history: History, params: TrackingParams | None = None) -> list[Judgement]:
    """Judge every finished campaign not judged yet, oldest first (a missed night is caught up,
    and judging is idempotent: a judged campaign is never judged twice)."""
    return [judge_campaign(history, cid, params) for cid in history.pending_campaigns()]


def set_status(history: History, finding_id: int, action: str, note: str = "") -> StoredFinding:
    """A maintainer's decision. Acknowledging accepts the new level: the series' baseline
    restarts at the finding's run. Dismissing records a false positive (the digest counts them)."""
    if action not in SETTABLE:
        raise ConfigError(f"unknown action {action!r}; use one of {', '.join(SETTABLE)}")
    finding = history.finding(finding_id)
    if finding is None:
        raise ConfigError(f"no finding with id {finding_id}", hint="see `watchkeeper findings`")
    status = SETTABLE[action]
    assert status in STATUSES
    history.update_finding(finding_id, status=status, status_note=note or None)
    if status == "acknowledged" and finding.run_id is not None and finding.series_key:
        history.add_reset(
            finding.fingerprint, finding.run_id, reason="acknowledged", finding_id=finding_id
        )
    evidence = evidence_of(finding.kind, finding.evidence)
    reference = evidence.reference_id if finding.kind == "regression" else None
    if status in ("acknowledged", "fixed") and reference is not None:
        # A nightly regression accepted (ack) or fixed: the reference it was measured against
        # retires, and the next nightly pins that night's system, so the same step is not
        # reported every night (after a fix the new pin is the fixed system).
        ReferenceStore(history.db).retire(
            reference, reason=f"finding #{finding_id} {status}: {note or 'no note'}"
        )
    updated = history.finding(finding_id)
    assert updated is not None
    return updated
