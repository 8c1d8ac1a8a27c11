"""Rows of the tracker stage: one `tracker_item` per issue (claimed before it is created) and
one `pr_review` per pull request.

Claims are how two agents (or a retry after a crash) never file the same issue twice: the
insert of a row with the issue's marker either succeeds (we own it) or hits the unique key
(someone else does). A claim whose owner died mid-way — row without an issue number, older
than the lease — is taken over with a conditional UPDATE, so exactly one taker wins; the
taker then looks for the marker on the tracker before creating anything.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from sqlalchemy import func, select, update

from watchkeeper.store.db import Database
from watchkeeper.store.schema import PrReview, TrackerItem
from watchkeeper.store.upsert import insert_if_absent


def _aware(value: datetime | None) -> datetime | None:
    if value is None:
        return None
    return value if value.tzinfo else value.replace(tzinfo=UTC)


@dataclass(frozen=True, slots=True)
class TrackedIssue:
    id: int
    finding_id: int | None
    marker: str
    kind: str
    number: int | None
    url: str
    state: str
    claimed_by: str | None
    occurrences_synced: int
    status_synced: str | None
    last_comment_id: int | None
    last_error: str | None


@dataclass(frozen=True, slots=True)
class ReviewState:
    number: int
    head_sha: str
    base_sha: str | None
    status: str
    comment_id: int | None
    campaign_id: int | None
    verdict: str | None
    claimed_by: str | None
    error: str | None


def _item(row: TrackerItem) -> TrackedIssue:
    return TrackedIssue(
        id=int(row.id),
        finding_id=row.finding_id,
        marker=row.marker,
        kind=row.kind,
        number=row.number,
        url=row.url,
        state=row.state,
        claimed_by=row.claimed_by,
        occurrences_synced=row.occurrences_synced,
        status_synced=row.status_synced,
        last_comment_id=row.last_comment_id,
        last_error=row.last_error,
    )


def _review(row: PrReview) -> ReviewState:
    return ReviewState(
        number=row.number,
        head_sha=row.head_sha,
        base_sha=row.base_sha,
        status=row.status,
        comment_id=row.comment_id,
        campaign_id=row.campaign_id,
        verdict=row.verdict,
        claimed_by=row.claimed_by,
        error=row.error,
    )


class TrackerStore:
    def __init__(self, db: Database, *, tracker: str, repository: str) -> None:
        self._db = db
        self.tracker = tracker
        self.repository = repository

    def _scope(self) -> tuple[Any, ...]:
        return (TrackerItem.tracker == self.tracker, TrackerItem.repository == self.repository)

    # -- issues ------------------------------------------------------------------------------

    def items(self) -> list[TrackedIssue]:
        with self._db.session() as s:
            rows = s.scalars(select(TrackerItem).where(*self._scope()).order_by(TrackerItem.id))
            return [_item(r) for r in rows]

    def by_marker(self, marker: str) -> TrackedIssue | None:
        with self._db.session() as s:
            row = s.scalars(
                select(TrackerItem).where(*self._scope(), TrackerItem.marker == marker)
            ).first()
            return _item(row) if row is not None else None

    def claim(
        self, marker: str, *, finding_id: int, kind: str, owner: str, lease_s: float
    ) -> TrackedIssue | None:
        """Own the filing of `marker`, or None when another run owns it (or filed it)."""
        now = datetime.now(UTC)
        row, created = insert_if_absent(
            self._db,
            TrackerItem,
            {"tracker": self.tracker, "repository": self.repository, "marker": marker},
            finding_id=finding_id,
            number=None,
            kind=kind[:32],
            url="",
            state="claimed",
            claimed_by=owner,
            claimed_at=now,
        )
        if created:
            return _item(row)
        with self._db.session() as s:
            row = s.scalars(
                select(TrackerItem).where(*self._scope(), TrackerItem.marker == marker)
            ).one()
            if row.number is not None:
                return None
            stale = row.claimed_at is None or _aware(row.claimed_at) < now - timedelta(  # type: ignore[operator]
                seconds=lease_s
            )
            if not stale and row.claimed_by is not None:
                return None
            taken = s.execute(
                update(TrackerItem)
                .where(
                    TrackerItem.id == row.id,
                    TrackerItem.number.is_(None),
                    TrackerItem.claimed_at == row.claimed_at
                    if row.claimed_at is not None
                    else TrackerItem.claimed_at.is_(None),
                )
                .values(claimed_by=owner, claimed_at=now, finding_id=finding_id)
                .execution_options(synchronize_session=False)
            )
            if taken.rowcount != 1:  # type: ignore[attr-defined]
                return None
        return self.by_marker(marker)

    def filed(self, item_id: int, *, number: int, url: str, state: str, **values: Any) -> None:
        self.update(item_id, number=number, url=url, state=state, claimed_by=None, **values)

    def release(self, item_id: int, error: str) -> None:
        """Give a claim up (the issue was not created); the next run may try again."""
        self.update(item_id, claimed_by=None, claimed_at=None, last_error=error[:2000])

    def update(self, item_id: int, **values: Any) -> None:
        with self._db.session() as s:
            row = s.get_one(TrackerItem, item_id)
            for name, value in values.items():
                setattr(row, name, value)

    def claimed_since(self, since: datetime) -> int:
        """Issues filed (or being filed) since a moment: the per-night cap counts these."""
        with self._db.session() as s:
            return int(
                s.scalar(
                    select(func.count(TrackerItem.id)).where(
                        *self._scope(), TrackerItem.created_at >= since
                    )
                )
                or 0
            )

    # -- pull requests -----------------------------------------------------------------------

    def review(self, number: int) -> ReviewState | None:
        with self._db.session() as s:
            row = s.scalars(
                select(PrReview).filter_by(
                    tracker=self.tracker, repository=self.repository, number=number
                )
            ).first()
            return _review(row) if row is not None else None

    def claim_review(
        self, number: int, *, head_sha: str, base_sha: str, owner: str, lease_s: float
    ) -> bool:
        """Own the review of `number` at `head_sha`; False when it is done or in hand."""
        now = datetime.now(UTC)
        _, created = insert_if_absent(
            self._db,
            PrReview,
            {"tracker": self.tracker, "repository": self.repository, "number": number},
            head_sha=head_sha,
            base_sha=base_sha,
            status="running",
            claimed_by=owner,
            claimed_at=now,
        )
        if created:
            return True
        with self._db.session() as s:
            row = s.scalars(
                select(PrReview).filter_by(
                    tracker=self.tracker, repository=self.repository, number=number
                )
            ).one()
            if row.head_sha == head_sha and row.status in ("posted", "skipped"):
                return False
            fresh = row.claimed_at is not None and _aware(row.claimed_at) >= now - timedelta(  # type: ignore[operator]
                seconds=lease_s
            )
            if row.status == "running" and fresh and row.head_sha == head_sha:
                return False
            taken = s.execute(
                update(PrReview)
                .where(PrReview.id == row.id, PrReview.updated_at == row.updated_at)
                .values(
                    head_sha=head_sha,
                    base_sha=base_sha,
                    status="running",
                    claimed_by=owner,
                    claimed_at=now,
                    error=None,
                    updated_at=now,
                )
                .execution_options(synchronize_session=False)
            )
            return bool(taken.rowcount == 1)  # type: ignore[attr-defined]

    def finish_review(self, number: int, **values: Any) -> None:
        with self._db.session() as s:
            row = s.scalars(
                select(PrReview).filter_by(
                    tracker=self.tracker, repository=self.repository, number=number
                )
            ).one()
            row.claimed_by = None
            for name, value in values.items():
                setattr(row, name, value)
