"""The `finding` table's one owner: every finding row is inserted, updated and read here.

Findings come from four places (the detector's nightly judgement, the paired nightly, a bench's
identity checks, a soak's verdict) with three ways of being "the same finding again": a new row
every time, one row per (campaign, fingerprint) so a resumed soak judged twice adds none, and
one live row per (fingerprint, kind) that counts its occurrences, so thirty nights of one bug
are one finding. Those three live here as three methods over one insert path, with typed
arguments, so a column added to the table is added in one place.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any, TypedDict, Unpack

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from watchkeeper.store.db import Database
from watchkeeper.store.schema import Finding

OPEN_STATUSES = ("active", "acknowledged")
LIVE_STATUSES = (*OPEN_STATUSES, "silenced")
"""Still the same finding when seen again (a silenced one keeps counting, files nothing)."""
STATUSES = ("active", "acknowledged", "dismissed", "fixed", "silenced", "expired")


@dataclass(frozen=True, slots=True)
class NewFinding:
    """A finding to insert: the columns a writer chooses (ids, timestamps of the row itself
    and `status_note` are the table's)."""

    fingerprint: str
    kind: str
    label: str
    severity: str
    title: str
    evidence: dict[str, Any]
    campaign_id: int | None = None
    run_id: int | None = None
    series_key: dict[str, Any] | None = None
    side: str | None = None
    status: str = "active"
    confirmed_at: datetime | None = None
    last_seen_at: datetime | None = None
    occurrences: int = 1
    created_at: datetime | None = None
    """The row's own timestamps, normally the table's default (now); set by an importer or
    a test that must place a finding in time without reading the clock."""
    updated_at: datetime | None = None


class FindingChanges(TypedDict, total=False):
    """The columns a finding's lifecycle changes after it was inserted."""

    campaign_id: int | None
    run_id: int | None
    status: str
    status_note: str | None
    title: str
    evidence: dict[str, Any]
    confirmed_at: datetime | None
    last_seen_at: datetime | None
    occurrences: int


@dataclass(frozen=True, slots=True)
class StoredFinding:
    id: int
    campaign_id: int | None
    run_id: int | None
    fingerprint: str
    kind: str
    label: str
    status: str
    severity: str
    title: str
    evidence: dict[str, Any]
    series_key: dict[str, Any] | None
    side: str | None
    confirmed_at: datetime | None
    last_seen_at: datetime | None
    occurrences: int
    status_note: str | None
    created_at: datetime
    updated_at: datetime


def _aware(value: datetime) -> datetime:
    """SQLite hands back naive datetimes for timezone-aware columns; they were stored as UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _stored(row: Finding) -> StoredFinding:
    return StoredFinding(
        id=int(row.id),
        campaign_id=row.campaign_id,
        run_id=row.run_id,
        fingerprint=row.fingerprint,
        kind=row.kind,
        label=row.label,
        status=row.status,
        severity=row.severity,
        title=row.title,
        evidence=dict(row.evidence),
        series_key=dict(row.series_key) if row.series_key else None,
        side=row.side,
        confirmed_at=_aware(row.confirmed_at) if row.confirmed_at else None,
        last_seen_at=_aware(row.last_seen_at) if row.last_seen_at else None,
        occurrences=row.occurrences,
        status_note=row.status_note,
        created_at=_aware(row.created_at),
        updated_at=_aware(row.updated_at),
    )


def _insert(s: Session, new: NewFinding) -> int:
    """The one place a `Finding` row is made."""
    row = Finding(
        campaign_id=new.campaign_id,
        run_id=new.run_id,
        fingerprint=new.fingerprint,
        kind=new.kind,
        label=new.label,
        status=new.status,
        severity=new.severity,
        title=new.title,
        evidence=new.evidence,
        series_key=new.series_key,
        side=new.side,
        confirmed_at=new.confirmed_at,
        last_seen_at=new.last_seen_at,
        occurrences=new.occurrences,
    )
    if new.created_at is not None:
        row.created_at = new.created_at
    if new.updated_at is not None:
        row.updated_at = new.updated_at
    s.add(row)
    s.flush()
    return int(row.id)


class FindingStore:
    """Writes and reads of findings; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def add(self, new: NewFinding) -> int:
        """A new row, whatever is stored already (the detector decides sameness itself)."""
        with self._db.session() as s:
            return _insert(s, new)

    def add_once(self, new: NewFinding) -> int:
        """One finding per (campaign, fingerprint): judging a resumed soak twice adds none."""
        with self._db.session() as s:
            found = s.scalars(
                select(Finding.id).filter_by(
                    campaign_id=new.campaign_id, fingerprint=new.fingerprint
                )
            ).first()
            return int(found) if found is not None else _insert(s, new)

    def record_recurring(self, new: NewFinding, *, now: datetime | None = None) -> int:
        """A finding that is a fact, not a statistic (an output mismatch at temperature 0):
        confirmed when seen. Seen again while still open, it is the same finding with one more
        occurrence, so thirty nights of one bug are one finding (and one tracker issue with
        recurrence comments), not thirty."""
        now = now or datetime.now(UTC)
        with self._db.session() as s:
            row = s.scalars(
                select(Finding)
                .where(
                    Finding.fingerprint == new.fingerprint,
                    Finding.kind == new.kind,
                    Finding.status.in_(LIVE_STATUSES),
                )
                .order_by(Finding.id.desc())
            ).first()
            if row is None:
                return _insert(s, replace(new, confirmed_at=now, last_seen_at=now, occurrences=1))
            row.campaign_id = new.campaign_id
            row.title = new.title
            row.evidence = new.evidence
            row.last_seen_at = now
            row.occurrences = row.occurrences + 1
            s.flush()
            return int(row.id)

    def update(self, finding_id: int, **changes: Unpack[FindingChanges]) -> None:
        with self._db.session() as s:
            row = s.get_one(Finding, finding_id)
            for name, value in changes.items():
                setattr(row, name, value)

    def get(self, finding_id: int) -> StoredFinding | None:
        with self._db.session() as s:
            row = s.get(Finding, finding_id)
            return _stored(row) if row is not None else None

    def find(
        self,
        *,
        statuses: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        fingerprint: str | None = None,
    ) -> list[StoredFinding]:
        with self._db.session() as s:
            query = select(Finding).order_by(Finding.id)
            if statuses is not None:
                query = query.where(Finding.status.in_(list(statuses)))
            if kinds is not None:
                query = query.where(Finding.kind.in_(list(kinds)))
            if fingerprint is not None:
                query = query.where(Finding.fingerprint == fingerprint)
            return [_stored(r) for r in s.scalars(query)]

    def open_by_label(self) -> dict[str, int]:
        """Open findings counted per label (the daemon's metrics and status page)."""
        with self._db.session() as s:
            rows = s.execute(
                select(Finding.label, func.count())
                .where(Finding.status.in_(OPEN_STATUSES))
                .group_by(Finding.label)
            ).all()
            return {str(label): int(n) for label, n in rows}
