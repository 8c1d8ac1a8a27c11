"""The change-point pass of nightly tracking: a current level shift becomes a finding.

After a night is judged, each tested series' recent good history is searched for a level
shift (``nightly.changepoints``); a current, material one names the first bad build, either
annotating the regression the detector already tracks or opening a `change_point` finding,
and restarts the series' baseline at that run so later nights compare with the new level.
Kept apart from `nightly.findings` (the night's lifecycle) because it reads whole histories.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from datetime import datetime

from watchkeeper.findings.evidence import (
    ChangePointEvidence,
    LevelShift,
    SeriesEvidence,
    evidence_of,
)
from watchkeeper.nightly.changepoints import ChangePoint, first_bad
from watchkeeper.nightly.detector import Label, MetricKind, SeriesKey
from watchkeeper.nightly.series import SeriesPoint, describe, fingerprint
from watchkeeper.store.findings import LIVE_STATUSES, NewFinding, StoredFinding
from watchkeeper.store.history import History, RunRecord


@dataclass(frozen=True, slots=True)
class ChangePointFinding:
    key: SeriesKey
    change: ChangePoint
    first_bad_run: int
    finding_id: int


def change_point_findings(
    history: History,
    campaign_id: int,
    tested: dict[SeriesKey, tuple[list[SeriesPoint], list[SeriesPoint]]],
    *,
    window: int,
    min_size: int,
    penalty: float | None,
    now: datetime,
) -> tuple[ChangePointFinding, ...]:
    """Retrospective pass over each tested series' recent good history, the newest
    ``window`` runs (resets ignored: the question is where the level changed,
    whatever the baseline is now)."""
    found = []
    for key, (past, tonight) in tested.items():
        points = [p for p in [*past, *tonight] if p.point.good and p.point.size(key.spec.kind)]
        points = points[-window:]
        change = _current_shift(key, points, min_size=min_size, penalty=penalty)
        if change is None:
            continue
        fp = fingerprint(key)
        bad = points[change.index].run
        known = history.findings(fingerprint=fp)
        if any(_first_bad_run(f) == bad.run_id for f in known):
            continue
        shift = LevelShift(
            first_bad_build=change.label,
            first_bad_run=bad.run_id,
            first_bad_campaign=bad.campaign_id,
            before_median=change.before_median,
            after_median=change.after_median,
            relative_change=change.relative_change,
            points=len(points),
            min_segment=min_size,
            method="PELT (ruptures), l1 cost, penalty 2 log n on a robust noise scale",
        )
        named = f"first bad build {change.label} (run {bad.run_id}, campaign {bad.campaign_id})"
        open_flag = [f for f in known if f.kind == "regression" and f.status in LIVE_STATUSES]
        if open_flag:
            # The detector already tracks this regression: the change point names its cause,
            # so it annotates that finding instead of opening a second one for one shift.
            finding_id = _annotate(history, open_flag[-1], shift, named, now=now)
        else:
            finding_id = history.create_finding(
                _new_finding(campaign_id, key, change, shift, bad, named, now=now)
            )
        history.add_reset(fp, bad.run_id, reason="change point", finding_id=finding_id)
        found.append(ChangePointFinding(key, change, bad.run_id, finding_id))
    return tuple(found)


def _current_shift(
    key: SeriesKey, points: list[SeriesPoint], *, min_size: int, penalty: float | None
) -> ChangePoint | None:
    """The series' level shift worth a finding: found with two segments of `min_size` to
    compare, still the current level (not one the series came back from), and material."""
    if len(points) < 2 * min_size:
        return None
    kind = key.spec.kind
    change = first_bad(
        [(p.point.label, p.point.center(kind)) for p in points],
        key.spec.direction,
        min_size=min_size,
        penalty=penalty,
    )
    if change is None or not change.is_current:
        return None
    return _material(change, key)


def _annotate(
    history: History, target: StoredFinding, shift: LevelShift, named: str, *, now: datetime
) -> int:
    """Name the shift's first bad build on the regression already tracked; its id."""
    history.update_finding(
        target.id,
        evidence={**target.evidence, "change_point": shift.to_json()},
        title=f"{target.title.split(' — ')[0]} — {named}",
        confirmed_at=target.confirmed_at or now,
    )
    return target.id


def _new_finding(
    campaign_id: int,
    key: SeriesKey,
    change: ChangePoint,
    shift: LevelShift,
    bad: RunRecord,
    named: str,
    *,
    now: datetime,
) -> NewFinding:
    """A `change_point` finding for a shift no regression tracks: its size in the metric's
    own terms (relative for a continuous one, points for a rate)."""
    size = (
        f"{change.relative_change:+.1%}"
        if change.relative_change is not None and key.spec.kind is MetricKind.CONTINUOUS
        else f"{(change.after_median - change.before_median) * 100:+.1f} points"
    )
    return NewFinding(
        campaign_id=campaign_id,
        run_id=bad.run_id,
        fingerprint=fingerprint(key),
        kind="change_point",
        label=Label.REGRESSION.value,
        status="active",
        severity="medium",
        title=(
            f"{key.metric} in {key.category} shifted {size} (profile {bad.profile_name}) — {named}"
        ),
        evidence=ChangePointEvidence(
            series=asdict(key), series_name=describe(key), change_point=shift
        ).to_json(),
        series_key=asdict(key),
        side="worse",
        confirmed_at=now,
        last_seen_at=now,
    )


def _first_bad_run(f: StoredFinding) -> int | None:
    """The run a finding's change point names (None: the finding names none)."""
    e = evidence_of(f.kind, f.evidence)
    shift = e.change_point if isinstance(e, SeriesEvidence | ChangePointEvidence) else None
    return shift.first_bad_run if shift is not None else None


def _material(change: ChangePoint, key: SeriesKey) -> ChangePoint | None:
    """A level shift smaller than the metric's floor is real but not worth a finding."""
    spec = key.spec
    if spec.kind is MetricKind.CONTINUOUS:
        if change.relative_change is None or abs(change.relative_change) <= spec.floor:
            return None
    elif abs(change.after_median - change.before_median) <= spec.floor:
        return None
    return change
