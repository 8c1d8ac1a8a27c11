"""The `campaign` table's one writer: a campaign is opened, finished, re-opened, interrupted
and marked analysed here and nowhere else.

Bench, soak and the detector each used to write the row their own way (`finished_at` set by
one, cleared by another); one owner keeps the status transitions in one place, where the
import-graph test can hold them. Readers may still select from the table where they join it.
"""

from __future__ import annotations

import uuid as uuidlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select, update

from watchkeeper.store.db import Database
from watchkeeper.store.schema import Campaign, Host


@dataclass(frozen=True, slots=True)
class StoredCampaign:
    """What `watchkeeper report --campaign N` needs to know of a campaign before rebuilding."""

    id: int
    kind: str
    status: str
    params: dict[str, Any]
    summary: dict[str, Any] | None


class CampaignRows:
    def __init__(self, db: Database) -> None:
        self._db = db

    def read(self, campaign_id: int) -> StoredCampaign | None:
        """The campaign's row as plain values (None: no such campaign)."""
        with self._db.session() as s:
            row = s.get(Campaign, campaign_id)
            if row is None:
                return None
            return StoredCampaign(
                int(row.id), row.kind, row.status, dict(row.params or {}), row.summary
            )

    def create(
        self, *, kind: str, host_id: int, build_id: int | None, params: dict[str, Any]
    ) -> int:
        """A new campaign, `running` from now."""
        with self._db.session() as s:
            row = Campaign(
                uuid=str(uuidlib.uuid4()),
                kind=kind,
                status="running",
                host_id=host_id,
                server_build_id=build_id,
                params=params,
            )
            s.add(row)
            s.flush()
            return int(row.id)

    def finish(
        self, campaign_id: int, *, status: str, summary: dict[str, Any] | None = None
    ) -> None:
        """The campaign's end: its final status, the command's summary, the time."""
        with self._db.session() as s:
            row = s.get_one(Campaign, campaign_id)
            row.status = status
            row.summary = summary
            row.finished_at = datetime.now(UTC)

    def reopen(self, campaign_id: int, status: str) -> None:
        """A resumed campaign runs again: the status given, no end time."""
        with self._db.session() as s:
            row = s.get_one(Campaign, campaign_id)
            row.status = status
            row.finished_at = None

    def mark_analysed(self, campaign_id: int, detection: dict[str, Any]) -> None:
        """The detector's summary, kept beside the command's own, and when it judged."""
        with self._db.session() as s:
            row = s.get_one(Campaign, campaign_id)
            row.summary = {**(row.summary or {}), "detection": detection}
            row.analysed_at = datetime.now(UTC)

    def interrupt_running(self, kind: str, fingerprint: str, since: datetime) -> list[int]:
        """Campaigns of `kind` on this machine still `running` since a dead job's start: they
        were cut off without a chance to say so; `interrupted` makes them resumable."""
        with self._db.session() as s:
            ids = list(
                s.scalars(
                    select(Campaign.id)
                    .join(Host, Host.id == Campaign.host_id)
                    .where(
                        Campaign.kind == kind,
                        Campaign.status == "running",
                        Host.fingerprint == fingerprint,
                        Campaign.started_at >= since,
                    )
                )
            )
            if ids:
                s.execute(update(Campaign).where(Campaign.id.in_(ids)).values(status="interrupted"))
            return [int(i) for i in ids]
