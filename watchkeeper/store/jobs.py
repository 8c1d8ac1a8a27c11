"""The `job_run` table's owner: the daemon's claims, outcomes, stale runs and status queries.

A run is claimed by inserting its row with a unique `claim_key` (the conditional write that
decides who runs it); a fleet job's key has no host in it, so two daemons firing the same
scheduled start cannot both claim it. Rows go in as `running` and are finished with an outcome;
a daemon that died leaves `running` rows, which it marks `interrupted` when it starts again.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.exc import IntegrityError

from watchkeeper.store.db import Database
from watchkeeper.store.schema import JobRun

OUTCOMES = ("ok", "failed", "interrupted")


@dataclass(frozen=True, slots=True)
class JobRunView:
    id: int
    job: str
    kind: str
    scope: str
    host_id: str
    scheduled_for: datetime
    started_at: datetime
    finished_at: datetime | None
    outcome: str
    error: str | None
    duration_s: float | None
    details: dict[str, Any]

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "job": self.job,
            "kind": self.kind,
            "scope": self.scope,
            "host_id": self.host_id,
            "scheduled_for": self.scheduled_for.isoformat(),
            "started_at": self.started_at.isoformat(),
            "finished_at": self.finished_at.isoformat() if self.finished_at else None,
            "outcome": self.outcome,
            "error": self.error,
            "duration_s": self.duration_s,
            "details": self.details,
        }


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _view(row: JobRun) -> JobRunView:
    return JobRunView(
        id=row.id,
        job=row.job,
        kind=row.kind,
        scope=row.scope,
        host_id=row.host_id,
        scheduled_for=_utc(row.scheduled_for),
        started_at=_utc(row.started_at),
        finished_at=_utc(row.finished_at) if row.finished_at else None,
        outcome=row.outcome,
        error=row.error,
        duration_s=row.duration_s,
        details=dict(row.details or {}),
    )


def claim_key(job: str, scope: str, host_id: str, scheduled_for: datetime | None) -> str:
    if scheduled_for is None:  # run by hand: never collides with anything
        return f"{job}|{host_id}|manual|{uuid.uuid4().hex}"
    stamp = scheduled_for.astimezone(UTC).isoformat()
    return f"{job}|fleet|{stamp}" if scope == "fleet" else f"{job}|{host_id}|{stamp}"


class JobStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def claim(
        self, *, job: str, kind: str, scope: str, host_id: str, scheduled_for: datetime | None
    ) -> int | None:
        """Insert the `running` row; None when this scheduled start is already claimed."""
        now = datetime.now(UTC)
        row = JobRun(
            job=job,
            kind=kind,
            scope=scope,
            host_id=host_id,
            claim_key=claim_key(job, scope, host_id, scheduled_for),
            scheduled_for=scheduled_for or now,
            started_at=now,
            outcome="running",
        )
        try:
            with self._db.session() as s:
                s.add(row)
                s.flush()
                return int(row.id)
        except IntegrityError:
            return None

    def finish(
        self,
        run_id: int,
        *,
        outcome: str,
        error: str | None = None,
        details: dict[str, Any] | None = None,
    ) -> JobRunView:
        now = datetime.now(UTC)
        with self._db.session() as s:
            row = s.get_one(JobRun, run_id)
            row.outcome = outcome
            row.error = error[:4000] if error else None
            row.finished_at = now
            row.duration_s = (now - _utc(row.started_at)).total_seconds()
            row.details = details or {}
            return _view(row)

    def mark_stale(self, host_id: str) -> list[JobRunView]:
        """This host's `running` rows (left by a daemon that died) become `interrupted`."""
        now = datetime.now(UTC)
        with self._db.session() as s:
            rows = s.scalars(select(JobRun).filter_by(host_id=host_id, outcome="running")).all()
            for row in rows:
                row.outcome = "interrupted"
                row.finished_at = now
                row.error = "the daemon stopped before the job finished"
            return [_view(r) for r in rows]

    def last_run(self, job: str, host_id: str | None = None) -> JobRunView | None:
        with self._db.session() as s:
            query = select(JobRun).filter_by(job=job)
            if host_id is not None:
                query = query.filter_by(host_id=host_id)
            row = s.scalars(query.order_by(JobRun.id.desc()).limit(1)).first()
            return _view(row) if row else None

    def runs(self, *, job: str | None = None, limit: int = 200) -> list[JobRunView]:
        """Newest first."""
        with self._db.session() as s:
            query = select(JobRun)
            if job is not None:
                query = query.filter_by(job=job)
            rows = s.scalars(query.order_by(JobRun.id.desc()).limit(limit)).all()
            return [_view(r) for r in rows]

    def latest_per_job(self) -> list[JobRunView]:
        """The newest run of every job (any host), by job name."""
        with self._db.session() as s:
            newest = select(func.max(JobRun.id)).group_by(JobRun.job)
            rows = s.scalars(select(JobRun).where(JobRun.id.in_(newest)).order_by(JobRun.job))
            return [_view(r) for r in rows]
