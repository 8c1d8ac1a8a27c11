"""What a night files (commands/nightly.py): one finding per regression, its title and
evidence, and each profile's live false-alarm rates. Pure apart from the store reads of
`family_false_alarms`; kept apart so the night's run reads on its own.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from watchkeeper.analysis.benchmark import ALL, BenchResult
from watchkeeper.config import Config
from watchkeeper.findings.evidence import NightlyEvidence
from watchkeeper.format import change_of_ratio, ci
from watchkeeper.nightly.detector import DetectorParams
from watchkeeper.nightly.digest import rerun_campaigns
from watchkeeper.nightly.findings import TrackingParams
from watchkeeper.nightly.night_checks import SeriesCheck
from watchkeeper.nightly.ratios import FalseAlarms, false_alarms
from watchkeeper.store.db import Database
from watchkeeper.store.history import History
from watchkeeper.store.references import RatioRecord, ReferenceRecord, ReferenceStore


def finding_series(
    stored: list[RatioRecord],
) -> list[tuple[RatioRecord, list[RatioRecord]]]:
    """One finding per regression, not one per series that shows it.

    A slower build slows every category, and the overall series is made of them: filing each
    would give a maintainer five issues for one cause. When the overall series is confirmed it
    is the finding and the confirmed categories ride in its evidence; only when it is not (one
    category regressed, diluted overall) does each confirmed category become its own finding.
    """
    confirmed = [r for r in stored if r.confirmed]
    overall = [r for r in confirmed if r.category == ALL]
    if overall:
        others = [r for r in confirmed if r.category != ALL]
        return [(overall[0], others)]
    return [(r, []) for r in confirmed]


def finding_title(profile: str, r: RatioRecord, check: SeriesCheck | None) -> str:
    """A finding's title: the ratio, or the failed requests where they made the verdict."""
    failures = check.failures if check is not None else None
    if failures is not None and failures.regression:
        return (
            f"{profile} · {r.category}: {failures.current_failed} of "
            f"{failures.current_requests} requests failed against the reference's "
            f"{failures.reference_failed} (decode tok/s of the rest {change_of_ratio(r.estimate)})"
        )
    return (
        f"{profile} · {r.category}: decode tok/s {change_of_ratio(r.estimate)} against "
        f"the reference ({ci(r.low, r.high, change_of_ratio, ' to ')})"
    )


def with_confirmed(r: RatioRecord, confirmed: bool) -> RatioRecord:
    """The ratio as stored: flagged and confirmed (by the rerun or the series) or not."""
    return replace(r, confirmed=confirmed)


def finding_evidence(
    r: RatioRecord,
    ref: ReferenceRecord,
    result: BenchResult,
    rerun_id: int | None,
    also: Sequence[RatioRecord],
    current_build: str | None = None,
) -> NightlyEvidence:
    """The finding's evidence: the ratio and its CI, the pinned reference it is against, the
    campaigns that measured and confirmed it, the categories that rode along, and both arms'
    builds (the reference's `binary_version`, `current_build`): a bisect's range."""
    return NightlyEvidence(
        series_name=r.series,
        metric=r.metric,
        ratio=r.estimate,
        ci95=[r.low, r.high],
        delta=r.estimate - 1.0,
        delta_ci=[r.low - 1.0, r.high - 1.0] if r.low is not None and r.high is not None else None,
        n_pairs=r.n_pairs,
        n_tasks=r.n_tasks,
        n_rounds=r.n_rounds,
        threshold=r.threshold,
        method="paired current/reference ratio inside one run; two-way bootstrap CI",
        reference={
            "id": ref.id,
            "pinned_at": ref.pinned_at.isoformat(),
            "pinned_by": ref.pinned_by,
            "binary_sha256": ref.binary_sha256,
            "binary_version": ref.binary_version,
            "model_sha256": ref.model_sha256,
            "draft_sha256": ref.draft_sha256,
            "config_hash": ref.config_hash,
        },
        campaign_id=result.campaign_id,
        rerun_campaign_id=rerun_id,
        report=result.report_path,
        also_confirmed=[
            {"category": c.category, "ratio": c.estimate, "ci95": [c.low, c.high]} for c in also
        ],
        current_build=current_build,
    )


def family_false_alarms(
    db: Database, profiles: Sequence[str], now: datetime | None = None
) -> tuple[tuple[str, FalseAlarms], ...]:
    """Each profile's live false-alarm rates, reruns left out of the nights."""
    ratios = ReferenceStore(db).ratios()
    reruns = rerun_campaigns(History(db), now or datetime.now(UTC))
    return tuple((p, false_alarms([r for r in ratios if r.profile == p], reruns)) for p in profiles)


def tracking_params(config: Config) -> TrackingParams:
    """The detector's and the findings' settings from the config (digest and aa)."""
    c = config.detector
    return TrackingParams(
        DetectorParams(
            window=c.window,
            min_good_runs=c.min_good_runs,
            alpha=c.alpha,
            fence_multiplier=c.fence_multiplier,
            storm_fraction=c.storm_fraction,
            storm_one_way=c.storm_one_way,
        ),
        change_point_min_size=c.change_point_min_size,
        change_point_window=c.change_point_window,
    )
