"""The database side of the racing sweep: acceptance curves per arm and campaign, and how each
raced arm ended (rounds measured; dropped when, by which rule, why).

The runs of a dropped arm stay in `run` like any other: this table only says why there are
fewer of them, so a later reader of the campaign (or a report re-rendered from it) sees the
same story the sweep told.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlalchemy import delete, select

from watchkeeper.analysis.acceptance import AcceptanceCurve
from watchkeeper.store.db import Database
from watchkeeper.store.schema import (
    AcceptancePosition,
    Campaign,
    Host,
    RaceArmRow,
    RequestSampleRow,
    Run,
)


@dataclass(frozen=True, slots=True)
class RaceArmRecord:
    arm: str
    status: str
    rounds: int
    dropped_round: int | None = None
    rule: str | None = None
    reason: str | None = None
    error: float | None = None


class RacingStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def save_curves(self, campaign_id: int, curves: Sequence[AcceptanceCurve]) -> None:
        """Replace the campaign's curves (a re-analysis writes the same rows again)."""
        with self._db.session() as s:
            s.execute(delete(AcceptancePosition).filter_by(campaign_id=campaign_id))
            for c in curves:
                for position, (steps, rate) in enumerate(zip(c.per_position, c.rates, strict=True)):
                    s.add(
                        AcceptancePosition(
                            campaign_id=campaign_id,
                            arm=c.arm,
                            position=position,
                            accepted_steps=steps,
                            drafts=c.drafts,
                            rate=rate,
                        )
                    )

    def curves(self, campaign_id: int) -> dict[str, list[tuple[int, float, float]]]:
        """arm -> [(position, accepted steps, rate)] in position order."""
        out: dict[str, list[tuple[int, float, float]]] = {}
        with self._db.session() as s:
            rows = s.scalars(
                select(AcceptancePosition)
                .filter_by(campaign_id=campaign_id)
                .order_by(AcceptancePosition.arm, AcceptancePosition.position)
            )
            for r in rows:
                out.setdefault(r.arm, []).append((r.position, r.accepted_steps, r.rate))
        return out

    def save_race(self, campaign_id: int, arms: Sequence[RaceArmRecord]) -> None:
        with self._db.session() as s:
            s.execute(delete(RaceArmRow).filter_by(campaign_id=campaign_id))
            for a in arms:
                s.add(
                    RaceArmRow(
                        campaign_id=campaign_id,
                        arm=a.arm,
                        status=a.status,
                        rounds=a.rounds,
                        dropped_round=a.dropped_round,
                        rule=a.rule,
                        reason=a.reason,
                        error=a.error,
                    )
                )

    def race(self, campaign_id: int) -> list[RaceArmRecord]:
        with self._db.session() as s:
            rows = s.scalars(
                select(RaceArmRow).filter_by(campaign_id=campaign_id).order_by(RaceArmRow.id)
            )
            return [
                RaceArmRecord(r.arm, r.status, r.rounds, r.dropped_round, r.rule, r.reason, r.error)
                for r in rows
            ]

    def latest_soak(
        self, host_fingerprint: str, profile: str, *, sweep_campaign: int | None = None
    ) -> dict[str, Any] | None:
        """The newest *completed* soak campaign on this host that soaked `profile`: its id,
        status, when, and the verdict it stored (None when there is none). An interrupted or
        running soak is no evidence of stability: one stopped after a minute had stored
        "stable" over 16 requests, and the sweep's report quoted it for a 100-minute soak.
        `sweep_campaign`: only a soak of that sweep's pick (`soak --recommendation` keeps the
        record's campaign in its params): a profile's name is no lineage, and a sweep's report
        quoted the soak of the sweep before, which had picked an arm of the same name."""
        with self._db.session() as s:
            rows = s.execute(
                select(Campaign)
                .join(Host, Host.id == Campaign.host_id)
                .where(
                    Campaign.kind == "soak",
                    Campaign.status == "completed",
                    Host.fingerprint == host_fingerprint,
                )
                .order_by(Campaign.id.desc())
            ).scalars()
            for c in rows:
                params = c.params or {}
                if sweep_campaign is not None and params.get("sweep_campaign") != sweep_campaign:
                    continue
                if profile in params.get("profiles", []):
                    summary = c.summary or {}
                    return {
                        "campaign_id": c.id,
                        "status": c.status,
                        "started_at": c.started_at.isoformat(timespec="seconds"),
                        "verdict": summary.get("verdict"),
                        "headline": summary.get("headline"),
                        "duration": params.get("duration"),
                    }
        return None

    def cells(self, campaign_id: int) -> list[dict[str, Any]]:
        """The campaign's measured table: one row per clean request of a measured round
        (arm, task_id, category, round, tps: server decode tok/s), warm-ups and probes out.
        What benchmarks/racing.py replays the racing rule on."""
        with self._db.session() as s:
            rows = s.execute(
                select(
                    Run.arm,
                    Run.round,
                    RequestSampleRow.task_id,
                    RequestSampleRow.category,
                    RequestSampleRow.decode_tps_server,
                )
                .join(RequestSampleRow, RequestSampleRow.run_id == Run.id)
                .where(
                    Run.campaign_id == campaign_id,
                    Run.is_warmup.is_(False),
                    RequestSampleRow.error.is_(None),
                    RequestSampleRow.decode_tps_server.is_not(None),
                )
                .order_by(Run.round, Run.arm, RequestSampleRow.seq)
            ).all()
        return [
            {"arm": a, "task_id": t, "category": c, "round": r, "tps": tps}
            for a, r, t, c, tps in rows
        ]
