"""Reads and writes in the vocabulary of the pipeline (dataclasses in, dataclasses out).

Callers never see ORM rows: a campaign is an id, a run result is a `RunResult`. Upserts on
natural keys make every write safe to repeat.
"""

from __future__ import annotations

import json
import uuid as uuidlib
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from watchkeeper.config import ProfileConfig
from watchkeeper.host.info import HostInfo
from watchkeeper.load.records import RequestSample, RunResult, TokenLogprob
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import Database
from watchkeeper.store.history import LIVE_STATUSES
from watchkeeper.store.schema import (
    Campaign,
    Finding,
    Host,
    Model,
    OutputCheck,
    Profile,
    Report,
    RequestSampleRow,
    Run,
    ServerBuild,
)
from watchkeeper.store.upsert import insert_if_absent


def find_run(
    s: Session, campaign_id: int, arm: str, round_: int, concurrency: int, purpose: str
) -> Run | None:
    """A run by its natural key: what makes a save, a spool replay or a resume idempotent."""
    return s.scalars(
        select(Run).filter_by(
            campaign_id=campaign_id,
            arm=arm,
            purpose=purpose,
            round=round_,
            concurrency=concurrency,
        )
    ).first()


@dataclass(frozen=True, slots=True)
class StoredRun:
    run_id: int
    arm: str
    profile_name: str
    round: int
    is_warmup: bool
    samples: tuple[RequestSample, ...]
    purpose: str = "measured"


class Repository:
    def __init__(self, db: Database) -> None:
        self._db = db

    def ensure_host(self, info: HostInfo) -> int:
        row, _ = insert_if_absent(
            self._db,
            Host,
            {"fingerprint": info.fingerprint},
            hostname=info.hostname,
            cpu_model=info.cpu_model,
            cpu_count=info.cpu_count,
            memory_bytes=info.memory_bytes,
            gpu=info.gpu,
            os=info.os,
            gpu_driver=info.gpu_driver,
            gpu_cuda=info.gpu_cuda,
        )
        return int(row.id)

    def ensure_build(self, binary: ServerBinary | None, *, external_url: str = "") -> int:
        identity: str | None = None
        build_info: str | None = None
        if binary is None:
            fingerprint = f"external:{external_url}"[:64]
            version, variant, path = "external", "external", None
        else:
            fingerprint, version, variant = binary.sha256, binary.version, binary.variant
            path = str(binary.path)
            identity = binary.identity[:255]
            build_info = json.dumps(binary.build_info(), sort_keys=True)
        row, _ = insert_if_absent(
            self._db,
            ServerBuild,
            {"fingerprint": fingerprint},
            version=version,
            variant=variant,
            binary_path=path,
            identity=identity,
            build_info=build_info,
        )
        return int(row.id)

    def ensure_model(self, model: ModelFile) -> int:
        row, _ = insert_if_absent(
            self._db,
            Model,
            {"sha256": model.sha256},
            name=model.name,
            path=str(model.path),
            size_bytes=model.size,
        )
        return int(row.id)

    def ensure_profile(
        self,
        name: str,
        profile: ProfileConfig,
        *,
        target_model_id: int | None,
        draft_model_id: int | None,
    ) -> int:
        row, _ = insert_if_absent(
            self._db,
            Profile,
            {"name": name, "config_hash": profile.config_hash()},
            config=profile.model_dump(mode="json"),
            target_model_id=target_model_id,
            draft_model_id=draft_model_id,
            spec_type=profile.spec_type,
        )
        return int(row.id)

    def create_campaign(
        self, *, kind: str, host_id: int, build_id: int | None, params: dict[str, Any]
    ) -> int:
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

    def finish_campaign(
        self, campaign_id: int, *, status: str, summary: dict[str, Any] | None = None
    ) -> None:
        with self._db.session() as s:
            row = s.get_one(Campaign, campaign_id)
            row.status = status
            row.summary = summary
            row.finished_at = datetime.now(UTC)

    def save_run(self, campaign_id: int, profile_id: int, result: RunResult) -> int:
        """Store one run and all its samples in one transaction (idempotent on the run key)."""
        with self._db.session() as s:
            purpose = str(result.purpose)
            run = find_run(s, campaign_id, result.arm, result.round, result.concurrency, purpose)
            if run is None:
                run = Run(
                    campaign_id=campaign_id,
                    arm=result.arm,
                    purpose=purpose,
                    round=result.round,
                    concurrency=result.concurrency,
                    started_at=result.started_at,
                )
                s.add(run)
            run.profile_id = profile_id
            run.is_warmup = result.is_warmup
            run.status = "failed" if result.error else "completed"
            run.server_argv = list(result.server_argv)
            run.peak_rss_bytes = result.peak_rss_bytes
            run.metrics_before = result.metrics_before or None
            run.metrics_after = result.metrics_after or None
            run.error = result.error
            run.finished_at = result.finished_at
            s.flush()
            existing = set(s.scalars(select(RequestSampleRow.seq).filter_by(run_id=run.id)))
            for sample in result.samples:
                if sample.seq not in existing:
                    s.add(_sample_row(int(run.id), sample))
            return int(run.id)

    def add_output_checks(self, rows: list[dict[str, Any]]) -> None:
        with self._db.session() as s:
            for values in rows:
                key = {k: values[k] for k in ("candidate_run_id", "baseline_run_id", "task_id")}
                if s.scalars(select(OutputCheck.id).filter_by(**key)).first() is None:
                    s.add(OutputCheck(**values))

    def add_finding(
        self,
        *,
        campaign_id: int | None,
        fingerprint: str,
        kind: str,
        label: str,
        severity: str,
        title: str,
        evidence: dict[str, Any],
    ) -> int:
        with self._db.session() as s:
            row = Finding(
                campaign_id=campaign_id,
                fingerprint=fingerprint,
                kind=kind,
                label=label,
                severity=severity,
                title=title,
                evidence=evidence,
                status="active",
            )
            s.add(row)
            s.flush()
            return int(row.id)

    def record_recurring_finding(
        self,
        *,
        campaign_id: int,
        fingerprint: str,
        kind: str,
        severity: str,
        title: str,
        evidence: dict[str, Any],
    ) -> int:
        """A finding that is a fact, not a statistic (an output mismatch at temperature 0):
        confirmed when seen. Seen again while still open, it is the same finding with one more
        occurrence, so thirty nights of one bug are one finding (and one tracker issue with
        recurrence comments), not thirty."""
        now = datetime.now(UTC)
        with self._db.session() as s:
            row = s.scalars(
                select(Finding)
                .where(
                    Finding.fingerprint == fingerprint,
                    Finding.kind == kind,
                    Finding.status.in_(LIVE_STATUSES),
                )
                .order_by(Finding.id.desc())
            ).first()
            if row is None:
                row = Finding(
                    campaign_id=campaign_id,
                    fingerprint=fingerprint,
                    kind=kind,
                    label=kind,
                    severity=severity,
                    title=title,
                    evidence=evidence,
                    status="active",
                    confirmed_at=now,
                    last_seen_at=now,
                    occurrences=1,
                )
                s.add(row)
            else:
                row.campaign_id = campaign_id
                row.title = title
                row.evidence = evidence
                row.last_seen_at = now
                row.occurrences = row.occurrences + 1
            s.flush()
            return int(row.id)

    def add_report(self, campaign_id: int, *, kind: str, path: str) -> None:
        with self._db.session() as s:
            s.add(Report(campaign_id=campaign_id, kind=kind, path=path))

    def load_runs(self, campaign_id: int) -> list[StoredRun]:
        with self._db.session() as s:
            runs = s.scalars(select(Run).filter_by(campaign_id=campaign_id).order_by(Run.id)).all()
            out = []
            for run in runs:
                profile = s.get_one(Profile, run.profile_id)
                rows = s.scalars(
                    select(RequestSampleRow).filter_by(run_id=run.id).order_by(RequestSampleRow.seq)
                ).all()
                out.append(
                    StoredRun(
                        int(run.id),
                        run.arm,
                        profile.name,
                        run.round,
                        run.is_warmup,
                        tuple(_sample_from_row(r) for r in rows),
                        run.purpose,
                    )
                )
            return out


def _sample_row(run_id: int, s: RequestSample) -> RequestSampleRow:
    return RequestSampleRow(
        run_id=run_id,
        seq=s.seq,
        task_id=s.task_id,
        category=s.category,
        started_at=s.started_at,
        ttft_ms=s.ttft_s * 1000 if s.ttft_s is not None else None,
        latency_ms=s.latency_s * 1000 if s.latency_s is not None else None,
        prompt_tokens=s.prompt_tokens,
        completion_tokens=s.completion_tokens,
        prompt_ms=s.prompt_ms,
        predicted_ms=s.predicted_ms,
        decode_tps_server=s.decode_tps_server,
        decode_tps_client=s.decode_tps_client,
        draft_n=s.draft_n,
        draft_n_accepted=s.draft_n_accepted,
        finish_reason=s.finish_reason,
        output_text=s.output_text,
        output_tokens=[t.to_json() for t in s.tokens] if s.tokens is not None else None,
        http_status=s.http_status,
        error=s.error,
    )


def _sample_from_row(r: RequestSampleRow) -> RequestSample:
    started = r.started_at if r.started_at.tzinfo else r.started_at.replace(tzinfo=UTC)
    return RequestSample(
        task_id=r.task_id,
        category=r.category,
        seq=r.seq,
        started_at=started,
        ttft_s=r.ttft_ms / 1000 if r.ttft_ms is not None else None,
        latency_s=r.latency_ms / 1000 if r.latency_ms is not None else None,
        prompt_tokens=r.prompt_tokens,
        completion_tokens=r.completion_tokens,
        prompt_ms=r.prompt_ms,
        predicted_ms=r.predicted_ms,
        decode_tps_server=r.decode_tps_server,
        decode_tps_client=r.decode_tps_client,
        draft_n=r.draft_n,
        draft_n_accepted=r.draft_n_accepted,
        finish_reason=r.finish_reason,
        output_text=r.output_text,
        tokens=tuple(TokenLogprob.from_json(t) for t in r.output_tokens)
        if r.output_tokens is not None
        else None,
        http_status=r.http_status,
        error=r.error,
    )
