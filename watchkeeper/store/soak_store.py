"""Database side of the soak: idempotent batch writes keyed on natural keys, and the reads
the verdicts and resume need, as the plain dataclasses of `soak/views.py`.

Every write here may be repeated (a spool replay after an outage, a resume after SIGTERM, a
commit whose acknowledgement was lost with the connection): runs are found by
(campaign, arm, round, concurrency), samples by (run, seq), resource samples by
(campaign, taken_at), incidents by (campaign, natural_key); findings (by campaign and
fingerprint) are written by `store.findings`.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

from watchkeeper.errors import StoreError
from watchkeeper.load.records import RunPurpose, TokenLogprob
from watchkeeper.server.endpoints import SPEC_PREFIX
from watchkeeper.soak.records import (
    IncidentRecord,
    Item,
    ResourcePoint,
    RunClose,
    RunKey,
    RunOpen,
    SampleRecord,
)
from watchkeeper.soak.views import (
    BlockView,
    IncidentView,
    ResourceView,
    SoakData,
    SoakSampleView,
)
from watchkeeper.store.campaigns import CampaignRows
from watchkeeper.store.db import Database, masked
from watchkeeper.store.runs import add_sample, close_run, note_run_start, open_run
from watchkeeper.store.schema import (
    Campaign,
    Incident,
    RequestSampleRow,
    ResourceSample,
    Run,
)


def _spec_counters(metrics: dict[str, Any]) -> dict[str, float]:
    return {
        k: float(v)
        for k, v in metrics.items()
        if k.startswith(SPEC_PREFIX) and isinstance(v, int | float)
    }


def _tokens(stored: list[Any] | None) -> tuple[TokenLogprob, ...] | None:
    return tuple(TokenLogprob.from_json(t) for t in stored) if stored is not None else None


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class SoakStore:
    """Writes and reads for one database; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def write(self, campaign_id: int, items: Sequence[Item]) -> None:
        """Store a batch in one transaction; repeating it changes nothing. Raises StoreError
        when the database cannot be reached (the caller keeps the batch in its spool)."""
        try:
            with self._db.session() as s:
                runs: dict[RunKey, Run] = {}
                for item in items:
                    self._write_one(s, campaign_id, item, runs)
        except DBAPIError as exc:  # a connection cut mid-transaction, not only at connect
            detail = str(getattr(exc, "orig", exc)).strip().splitlines()[:1]
            raise StoreError(
                f"database {masked(self._db.url)} failed mid-write: {' '.join(detail)}"
            ) from exc

    def _run(self, s: Session, campaign_id: int, key: RunKey, runs: dict[RunKey, Run]) -> Run:
        cached = runs.get(key)
        if cached is not None:
            return cached
        run = open_run(
            s,
            campaign_id,
            key.arm,
            key.block,
            key.concurrency,
            purpose=str(key.purpose),
            profile_id=key.profile_id,
            started_at=datetime.now(UTC),
        )
        runs[key] = run
        return run

    def _write_one(self, s: Session, campaign_id: int, item: Item, runs: dict[RunKey, Run]) -> None:
        if isinstance(item, RunOpen):
            run = self._run(s, campaign_id, item.key, runs)
            note_run_start(run, item.server_argv, item.started_at)
        elif isinstance(item, RunClose):
            close_run(
                self._run(s, campaign_id, item.key, runs),
                status=item.status,
                finished_at=item.finished_at,
                peak_rss_bytes=item.peak_rss_bytes,
                error=item.error,
            )
        elif isinstance(item, SampleRecord):
            run = self._run(s, campaign_id, item.key, runs)
            add_sample(s, int(run.id), item.sample)
        elif isinstance(item, ResourcePoint):
            run_id = self._run(s, campaign_id, item.key, runs).id if item.key else None
            exists = s.scalars(
                select(ResourceSample.id).filter_by(campaign_id=campaign_id, taken_at=item.taken_at)
            ).first()
            if exists is None:
                s.add(
                    ResourceSample(
                        campaign_id=campaign_id,
                        run_id=run_id,
                        taken_at=item.taken_at,
                        rss_bytes=item.rss_bytes,
                        cpu_percent=item.cpu_percent,
                        vram_bytes=item.vram_bytes,
                        busy_slots=item.busy_slots,
                        kv_usage=item.kv_usage,
                        metrics=item.metrics or None,
                        host_other_cpu=item.host_other_cpu,
                    )
                )
                s.flush()
        else:
            self._incident(s, campaign_id, item, runs)

    def _incident(
        self, s: Session, campaign_id: int, item: IncidentRecord, runs: dict[RunKey, Run]
    ) -> None:
        exists = s.scalars(
            select(Incident.id).filter_by(campaign_id=campaign_id, natural_key=item.natural_key)
        ).first()
        if exists is not None:
            return
        run_id = self._run(s, campaign_id, item.key, runs).id if item.key else None
        s.add(
            Incident(
                campaign_id=campaign_id,
                run_id=run_id,
                natural_key=item.natural_key[:255],
                kind=item.kind,
                profile=item.profile,
                occurred_at=item.occurred_at,
                detail=item.detail,
                evidence=item.evidence,
            )
        )
        s.flush()

    def set_status(self, campaign_id: int, status: str) -> None:
        CampaignRows(self._db).reopen(campaign_id, status)

    def interrupt_running(self, fingerprint: str, since: datetime) -> list[int]:
        """Soak campaigns of this machine still `running` since a dead job's start: they were
        cut off without a chance to say so; `interrupted` makes them resumable."""
        return CampaignRows(self._db).interrupt_running("soak", fingerprint, since)

    def find_resumable(self, signature: str) -> int | None:
        """The newest interrupted soak campaign with the same plan signature."""
        with self._db.session() as s:
            rows = s.scalars(
                select(Campaign)
                .filter_by(kind="soak", status="interrupted")
                .order_by(Campaign.id.desc())
            ).all()
            for row in rows:
                if row.params.get("signature") == signature:
                    return int(row.id)
        return None

    def load(self, campaign_id: int) -> SoakData:
        """Everything the verdicts and a resume need, for the whole campaign."""
        with self._db.session() as s:
            campaign = s.get(Campaign, campaign_id)
            if campaign is None:
                raise StoreError(f"campaign {campaign_id} does not exist")
            runs = s.scalars(select(Run).filter_by(campaign_id=campaign_id)).all()
            by_id = {r.id: r for r in runs}
            blocks = tuple(
                BlockView(
                    r.arm,
                    r.round,
                    r.concurrency,
                    _utc(r.started_at),
                    _utc(r.finished_at) if r.finished_at else None,
                    r.status,
                    r.purpose,
                )
                for r in sorted(runs, key=lambda r: (r.round, r.arm, r.purpose))
            )
            samples: list[SoakSampleView] = []
            if by_id:
                rows = s.scalars(
                    select(RequestSampleRow).where(RequestSampleRow.run_id.in_(list(by_id)))
                ).all()
                for row in rows:
                    run = by_id[row.run_id]
                    probe = run.purpose == RunPurpose.PROBE
                    samples.append(
                        SoakSampleView(
                            run.arm,
                            run.concurrency,
                            probe,
                            row.task_id,
                            _utc(row.started_at),
                            row.latency_ms / 1000 if row.latency_ms is not None else None,
                            row.completion_tokens,
                            row.decode_tps_server,
                            row.draft_n,
                            row.draft_n_accepted,
                            row.error,
                            row.output_text if probe else "",
                            run.round,
                            row.finish_reason if probe else None,
                            _tokens(row.output_tokens) if probe else None,
                        )
                    )
            samples.sort(key=lambda v: v.started_at)
            resources = tuple(
                ResourceView(
                    _utc(r.taken_at),
                    by_id[r.run_id].arm if r.run_id in by_id else None,
                    r.rss_bytes,
                    (r.metrics or {}).get("server_pid"),
                    _spec_counters(r.metrics or {}),
                    r.host_other_cpu,
                )
                for r in s.scalars(
                    select(ResourceSample)
                    .filter_by(campaign_id=campaign_id)
                    .order_by(ResourceSample.taken_at)
                )
            )
            incidents = tuple(
                IncidentView(i.kind, _utc(i.occurred_at), i.profile, i.detail, i.evidence)
                for i in s.scalars(
                    select(Incident)
                    .filter_by(campaign_id=campaign_id)
                    .order_by(Incident.occurred_at)
                )
            )
            return SoakData(
                campaign_id,
                dict(campaign.params),
                campaign.status,
                blocks,
                tuple(samples),
                resources,
                incidents,
            )
