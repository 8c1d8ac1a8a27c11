"""The database side of the nightly: pinned references and run-level ratios."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import select, update

from watchkeeper.store.db import Database
from watchkeeper.store.schema import NightlyRatio, Reference


@dataclass(frozen=True, slots=True)
class ReferenceRecord:
    id: int
    host_fingerprint: str
    profile: str
    identity: str
    binary_sha256: str
    binary_version: str
    model_sha256: str
    draft_sha256: str | None
    config_hash: str
    config: dict[str, Any]
    binary_path: str
    model_path: str
    draft_path: str | None
    pinned_at: datetime
    pinned_by: str
    reason: str
    active: bool


@dataclass(frozen=True, slots=True)
class RatioRecord:
    campaign_id: int
    reference_id: int
    series: str
    host_fingerprint: str
    profile: str
    category: str
    metric: str
    estimate: float
    low: float | None
    high: float | None
    n_pairs: int
    n_tasks: int
    n_rounds: int
    threshold: float
    verdict: str
    aa: bool
    confirmed: bool = False
    created_at: datetime | None = None


def _reference(row: Reference) -> ReferenceRecord:
    return ReferenceRecord(
        row.id,
        row.host_fingerprint,
        row.profile,
        row.identity,
        row.binary_sha256,
        row.binary_version,
        row.model_sha256,
        row.draft_sha256,
        row.config_hash,
        dict(row.config),
        row.binary_path,
        row.model_path,
        row.draft_path,
        row.pinned_at,
        row.pinned_by,
        row.reason,
        row.active,
    )


def _ratio(row: NightlyRatio) -> RatioRecord:
    return RatioRecord(
        row.campaign_id,
        row.reference_id,
        row.series,
        row.host_fingerprint,
        row.profile,
        row.category,
        row.metric,
        row.estimate,
        row.low,
        row.high,
        row.n_pairs,
        row.n_tasks,
        row.n_rounds,
        row.threshold,
        row.verdict,
        row.aa,
        row.confirmed,
        row.created_at,
    )


class ReferenceStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def active(self, host_fingerprint: str, profile: str) -> ReferenceRecord | None:
        with self._db.session() as s:
            row = s.scalars(
                select(Reference)
                .filter_by(host_fingerprint=host_fingerprint, profile=profile, active=True)
                .order_by(Reference.id.desc())
            ).first()
            return _reference(row) if row is not None else None

    def get(self, reference_id: int) -> ReferenceRecord | None:
        with self._db.session() as s:
            row = s.get(Reference, reference_id)
            return _reference(row) if row is not None else None

    def pin(self, **values: Any) -> ReferenceRecord:
        """Make this the active reference of its (host, profile); the previous one stays in
        the history, inactive."""
        with self._db.session() as s:
            s.execute(
                update(Reference)
                .where(
                    Reference.host_fingerprint == values["host_fingerprint"],
                    Reference.profile == values["profile"],
                    Reference.active.is_(True),
                )
                .values(active=False)
            )
            row = Reference(**values, active=True)
            s.add(row)
            s.flush()
            return _reference(row)

    def retire(self, reference_id: int, *, reason: str) -> None:
        """The next nightly of its (host, profile) pins a new reference."""
        with self._db.session() as s:
            row = s.get(Reference, reference_id)
            if row is not None and row.active:
                row.active = False
                row.reason = f"{row.reason}; retired: {reason}".lstrip("; ")

    def history(self, profile: str | None = None) -> list[ReferenceRecord]:
        with self._db.session() as s:
            query = select(Reference).order_by(Reference.id)
            if profile:
                query = query.filter_by(profile=profile)
            return [_reference(r) for r in s.scalars(query)]

    def add_ratios(self, rows: Sequence[RatioRecord]) -> None:
        with self._db.session() as s:
            for r in rows:
                s.add(
                    NightlyRatio(
                        campaign_id=r.campaign_id,
                        reference_id=r.reference_id,
                        series=r.series,
                        host_fingerprint=r.host_fingerprint,
                        profile=r.profile,
                        category=r.category,
                        metric=r.metric,
                        estimate=r.estimate,
                        low=r.low,
                        high=r.high,
                        n_pairs=r.n_pairs,
                        n_tasks=r.n_tasks,
                        n_rounds=r.n_rounds,
                        threshold=r.threshold,
                        verdict=r.verdict,
                        aa=r.aa,
                        confirmed=r.confirmed,
                        **({"created_at": r.created_at} if r.created_at else {}),
                    )
                )

    def previous(
        self,
        series: str,
        reference_id: int,
        before_campaign: int,
        *,
        since: datetime | None = None,
    ) -> RatioRecord | None:
        """The series' last night against the same reference, before this campaign, and (with
        ``since``) no older than that: a flag from weeks ago must not confirm tonight's."""
        with self._db.session() as s:
            query = select(NightlyRatio).where(
                NightlyRatio.series == series,
                NightlyRatio.reference_id == reference_id,
                NightlyRatio.campaign_id < before_campaign,
            )
            if since is not None:
                query = query.where(NightlyRatio.created_at >= since)
            row = s.scalars(query.order_by(NightlyRatio.campaign_id.desc())).first()
            return _ratio(row) if row is not None else None

    def ratios(
        self, *, since: datetime | None = None, until: datetime | None = None
    ) -> list[RatioRecord]:
        with self._db.session() as s:
            query = select(NightlyRatio).order_by(NightlyRatio.campaign_id, NightlyRatio.series)
            if since is not None:
                query = query.where(NightlyRatio.created_at >= since)
            if until is not None:
                query = query.where(NightlyRatio.created_at < until)
            return [_ratio(r) for r in s.scalars(query)]

    def ratios_of(self, campaign_id: int) -> list[RatioRecord]:
        with self._db.session() as s:
            rows = s.scalars(select(NightlyRatio).filter_by(campaign_id=campaign_id))
            return [_ratio(r) for r in rows]

    def series_history(self, series: str) -> list[RatioRecord]:
        with self._db.session() as s:
            rows = s.scalars(
                select(NightlyRatio).filter_by(series=series).order_by(NightlyRatio.campaign_id)
            )
            return [_ratio(r) for r in rows]
