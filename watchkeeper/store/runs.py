"""The `run` and `request_sample` tables' owner: a measured run and its requests, in and out.

A run is found by its natural key (campaign, arm, purpose, round, concurrency) and a sample by
(run, seq), so a save, a spool replay or a resume can be repeated without duplicates. The bench
saves whole runs (`RunRows.save`); the soak writes a block's samples one batch at a time inside
its own transaction, through the session-level helpers here (`find_run`, `add_sample`), so that
the conversion between a `RequestSample` and its row is written once.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from sqlalchemy import func, select, update
from sqlalchemy.orm import Session

from watchkeeper.load.records import RequestSample, RunGpuCost, RunResult, TokenLogprob
from watchkeeper.load.repetition import repeat_share
from watchkeeper.store.db import Database
from watchkeeper.store.schema import Profile, RequestSampleRow, Run
from watchkeeper.store.upsert import first_or_add


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


def add_sample(s: Session, run_id: int, sample: RequestSample) -> bool:
    """Insert one request of a run unless its (run, seq) is stored; True when inserted."""
    exists = s.scalars(select(RequestSampleRow.id).filter_by(run_id=run_id, seq=sample.seq)).first()
    if exists is not None:
        return False
    s.add(_sample_row(run_id, sample))
    s.flush()
    return True


def open_run(
    s: Session,
    campaign_id: int,
    arm: str,
    round_: int,
    concurrency: int,
    *,
    purpose: str,
    profile_id: int,
    started_at: datetime,
) -> Run:
    """The run with this key inside the caller's transaction, made `running` when absent (a
    soak opens its blocks this way, batch by batch)."""
    run, _ = first_or_add(
        s,
        Run,
        {
            "campaign_id": campaign_id,
            "arm": arm,
            "purpose": purpose,
            "round": round_,
            "concurrency": concurrency,
        },
        profile_id=profile_id,
        is_warmup=False,
        status="running",
        server_argv=[],
        started_at=started_at,
    )
    return run


def note_run_start(run: Run, server_argv: Sequence[str], started_at: datetime) -> None:
    """A (re)opened soak block: the first command line it ran, the earliest start seen."""
    if not run.server_argv:
        run.server_argv = list(server_argv)
    started = run.started_at if run.started_at.tzinfo else run.started_at.replace(tzinfo=UTC)
    run.started_at = min(started, started_at)


def close_run(
    run: Run,
    *,
    status: str,
    finished_at: datetime | None,
    peak_rss_bytes: int | None,
    error: str | None,
) -> None:
    """A soak block's end; a block with errors is kept out of the baseline (`excluded_reason`)."""
    run.status = status
    run.finished_at = finished_at
    run.peak_rss_bytes = peak_rss_bytes
    run.error = error
    if error:
        run.excluded_reason = "soak block with errors"


def save_gpu_cost(run: Run, cost: RunGpuCost | None) -> None:
    """The run's GPU columns; all NULL without a measurement (no NVML), never 0."""
    run.gpu_peak_vram_bytes = cost.peak_vram_bytes if cost else None
    run.gpu_steady_vram_bytes = cost.steady_vram_bytes if cost else None
    run.gpu_utilization_percent = cost.utilization_percent if cost else None
    run.gpu_power_watts = cost.power_watts if cost else None
    run.gpu_energy_joules = cost.energy_joules if cost else None


class RunRows:
    """Whole runs in and out; every method is one transaction."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def save(self, campaign_id: int, profile_id: int, result: RunResult) -> int:
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
            save_gpu_cost(run, result.gpu)
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

    def load(self, campaign_id: int) -> list[StoredRun]:
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

    def samples_for_campaign(self, campaign_id: int) -> int:
        """How many requests a campaign stored (the daemon's after-job check)."""
        with self._db.session() as s:
            n = s.scalar(
                select(func.count(RequestSampleRow.id))
                .join(Run, Run.id == RequestSampleRow.run_id)
                .where(Run.campaign_id == campaign_id)
            )
            return int(n or 0)

    def record_exclusions(self, reasons: dict[int, str | None]) -> None:
        """Store why each run may (None) or may not be a baseline; idempotent."""
        with self._db.session() as s:
            for run_id, reason in reasons.items():
                s.execute(update(Run).where(Run.id == run_id).values(excluded_reason=reason))


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
        repeat_share=repeat_share(s.output_text),
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
