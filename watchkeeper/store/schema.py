"""ORM tables. The Alembic migrations in `migrations/` must match these exactly (a test
compares them with autogenerate).

Natural unique keys are on purpose: a replayed or resumed write hits the key instead of
creating a duplicate row. Timestamps are timezone-aware UTC. JSON columns hold evidence that
is read whole and never queried into (argv, metrics snapshots, token logprobs).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import Mapped, mapped_column

from watchkeeper.store.schema_base import Base, utcnow
from watchkeeper.store.schema_figures import (
    AcceptancePosition,
    LatencyStat,
    NoiseFloorRow,
    RaceArmRow,
)

__all__ = [
    "AcceptancePosition",
    "Base",
    "Campaign",
    "Finding",
    "Host",
    "Incident",
    "JobRun",
    "LatencyStat",
    "Model",
    "NightlyRatio",
    "NoiseFloorRow",
    "OutputCheck",
    "PrReview",
    "Profile",
    "RaceArmRow",
    "Reference",
    "Report",
    "RequestSampleRow",
    "ResourceSample",
    "Run",
    "SeriesReset",
    "ServerBuild",
    "TrackerItem",
]
"""Every table, with the ones `store.schema_figures` holds: importing this module puts them all
on `Base.metadata` (what Alembic's env.py and `create_all` read), so import tables from here."""


class Host(Base):
    __tablename__ = "host"
    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    hostname: Mapped[str] = mapped_column(String(255))
    cpu_model: Mapped[str] = mapped_column(String(255))
    cpu_count: Mapped[int] = mapped_column(Integer)
    memory_bytes: Mapped[int] = mapped_column(BigInteger)
    gpu: Mapped[str | None] = mapped_column(String(255))
    os: Mapped[str] = mapped_column(String(255))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    gpu_driver: Mapped[str | None] = mapped_column(String(64))
    gpu_cuda: Mapped[str | None] = mapped_column(String(32))


class ServerBuild(Base):
    __tablename__ = "server_build"
    id: Mapped[int] = mapped_column(primary_key=True)
    fingerprint: Mapped[str] = mapped_column(String(64), unique=True)
    version: Mapped[str] = mapped_column(String(255))
    variant: Mapped[str] = mapped_column(String(32))
    binary_path: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    identity: Mapped[str | None] = mapped_column(String(255))
    """'llama.cpp 11434.0.0 (cpu, gcc 12.2.0)': the line reports print (see install.py)."""
    build_info: Mapped[str | None] = mapped_column(Text)
    """JSON: sdist release and commit, CUDA toolkit and architectures, compiler, --version."""


class Model(Base):
    __tablename__ = "model"
    id: Mapped[int] = mapped_column(primary_key=True)
    sha256: Mapped[str] = mapped_column(String(64), unique=True)
    name: Mapped[str] = mapped_column(String(255))
    path: Mapped[str] = mapped_column(Text)
    size_bytes: Mapped[int] = mapped_column(BigInteger)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Profile(Base):
    __tablename__ = "profile"
    __table_args__ = (UniqueConstraint("name", "config_hash"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    name: Mapped[str] = mapped_column(String(255))
    config_hash: Mapped[str] = mapped_column(String(64))
    config: Mapped[dict[str, Any]]
    target_model_id: Mapped[int | None] = mapped_column(ForeignKey("model.id"))
    draft_model_id: Mapped[int | None] = mapped_column(ForeignKey("model.id"))
    spec_type: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Campaign(Base):
    __tablename__ = "campaign"
    id: Mapped[int] = mapped_column(primary_key=True)
    uuid: Mapped[str] = mapped_column(String(36), unique=True)
    kind: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(32), index=True)
    host_id: Mapped[int] = mapped_column(ForeignKey("host.id"))
    server_build_id: Mapped[int | None] = mapped_column(ForeignKey("server_build.id"))
    params: Mapped[dict[str, Any]]
    summary: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]
    analysed_at: Mapped[datetime | None]
    """When the regression detector judged this campaign; None means not yet."""


class Run(Base):
    __tablename__ = "run"
    __table_args__ = (UniqueConstraint("campaign_id", "arm", "purpose", "round", "concurrency"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaign.id", ondelete="CASCADE"))
    profile_id: Mapped[int] = mapped_column(ForeignKey("profile.id"))
    arm: Mapped[str] = mapped_column(String(255))
    purpose: Mapped[str] = mapped_column(String(16), default="measured")
    """`load.records.RunPurpose`: measured, warmup, rewarm, identity (probe) or probe (soak)."""
    round: Mapped[int] = mapped_column(Integer)
    is_warmup: Mapped[bool] = mapped_column(Boolean, default=False)
    concurrency: Mapped[int] = mapped_column(Integer, default=1)
    status: Mapped[str] = mapped_column(String(32))
    server_argv: Mapped[list[Any]]
    peak_rss_bytes: Mapped[int | None] = mapped_column(BigInteger)
    # The run's GPU cost (analysis/gpu_cost.py); NULL where NVML measured nothing, never 0.
    gpu_peak_vram_bytes: Mapped[int | None] = mapped_column(BigInteger)
    gpu_steady_vram_bytes: Mapped[int | None] = mapped_column(BigInteger)
    gpu_utilization_percent: Mapped[float | None] = mapped_column(Float)
    gpu_power_watts: Mapped[float | None] = mapped_column(Float)
    gpu_energy_joules: Mapped[float | None] = mapped_column(Float)
    metrics_before: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    metrics_after: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    error: Mapped[str | None] = mapped_column(Text)
    excluded_reason: Mapped[str | None] = mapped_column(Text)
    """Why this run may never be a regression baseline (errors, identity mismatches)."""
    started_at: Mapped[datetime]
    finished_at: Mapped[datetime | None]


class RequestSampleRow(Base):
    __tablename__ = "request_sample"
    __table_args__ = (UniqueConstraint("run_id", "seq"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"), index=True)
    seq: Mapped[int] = mapped_column(Integer)
    task_id: Mapped[str] = mapped_column(String(255))
    category: Mapped[str] = mapped_column(String(64))
    started_at: Mapped[datetime]
    ttft_ms: Mapped[float | None] = mapped_column(Float)
    latency_ms: Mapped[float | None] = mapped_column(Float)
    prompt_tokens: Mapped[int | None] = mapped_column(Integer)
    completion_tokens: Mapped[int | None] = mapped_column(Integer)
    prompt_ms: Mapped[float | None] = mapped_column(Float)
    predicted_ms: Mapped[float | None] = mapped_column(Float)
    decode_tps_server: Mapped[float | None] = mapped_column(Float)
    decode_tps_client: Mapped[float | None] = mapped_column(Float)
    draft_n: Mapped[int | None] = mapped_column(Integer)
    draft_n_accepted: Mapped[int | None] = mapped_column(Integer)
    repeat_share: Mapped[float | None] = mapped_column(Float)
    """The share of the output's word 6-grams seen earlier in it (`load/repetition.py`),
    computed when the row is written so the loop alarm reads a number, not every text; NULL
    for outputs too short to judge and for rows written before migration 0013."""
    finish_reason: Mapped[str | None] = mapped_column(String(32))
    output_text: Mapped[str] = mapped_column(Text, default="")
    output_tokens: Mapped[list[Any] | None] = mapped_column(JSON)
    http_status: Mapped[int | None] = mapped_column(Integer)
    error: Mapped[str | None] = mapped_column(Text)


class ResourceSample(Base):
    __tablename__ = "resource_sample"
    __table_args__ = (UniqueConstraint("campaign_id", "taken_at"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaign.id", ondelete="CASCADE"))
    run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    taken_at: Mapped[datetime]
    rss_bytes: Mapped[int | None] = mapped_column(BigInteger)
    cpu_percent: Mapped[float | None] = mapped_column(Float)
    vram_bytes: Mapped[int | None] = mapped_column(BigInteger)
    busy_slots: Mapped[int | None] = mapped_column(Integer)
    kv_usage: Mapped[float | None] = mapped_column(Float)
    metrics: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    host_other_cpu: Mapped[float | None] = mapped_column(Float)
    """The share of the host's cores used outside the soak's servers since the previous sample
    (`soak/hostcpu.py`); NULL for rows written before migration 0014."""


class OutputCheck(Base):
    __tablename__ = "output_check"
    __table_args__ = (UniqueConstraint("candidate_run_id", "baseline_run_id", "task_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaign.id", ondelete="CASCADE"))
    baseline_run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    candidate_run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    arm: Mapped[str] = mapped_column(String(255))
    task_id: Mapped[str] = mapped_column(String(255))
    category: Mapped[str] = mapped_column(String(64))
    verdict: Mapped[str] = mapped_column(String(32))
    first_divergence: Mapped[int | None] = mapped_column(Integer)
    margin: Mapped[float | None] = mapped_column(Float)
    baseline_excerpt: Mapped[str] = mapped_column(Text, default="")
    candidate_excerpt: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Finding(Base):
    __tablename__ = "finding"
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaign.id", ondelete="SET NULL"))
    fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    kind: Mapped[str] = mapped_column(String(64))
    label: Mapped[str] = mapped_column(String(32))
    status: Mapped[str] = mapped_column(String(32), default="active")
    severity: Mapped[str] = mapped_column(String(16))
    title: Mapped[str] = mapped_column(Text)
    evidence: Mapped[dict[str, Any]]
    run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id", ondelete="SET NULL"))
    """The run the finding is about (the latest run of the flagged series)."""
    series_key: Mapped[dict[str, Any] | None] = mapped_column(JSON)
    side: Mapped[str | None] = mapped_column(String(16))
    """"worse" or "better" for detector findings."""
    confirmed_at: Mapped[datetime | None]
    """None while a detector finding is only a candidate (one night, not yet rerun)."""
    last_seen_at: Mapped[datetime | None]
    occurrences: Mapped[int] = mapped_column(Integer, default=1, server_default="1")
    status_note: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class SeriesReset(Base):
    """Where a series' baseline restarts: at a change point, or where a finding was
    acknowledged (the new level is accepted). Runs before it no longer count as baseline."""

    __tablename__ = "series_reset"
    __table_args__ = (UniqueConstraint("series_fingerprint", "run_id"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    series_fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    run_id: Mapped[int] = mapped_column(ForeignKey("run.id", ondelete="CASCADE"))
    reason: Mapped[str] = mapped_column(String(32))
    finding_id: Mapped[int | None] = mapped_column(ForeignKey("finding.id", ondelete="SET NULL"))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class TrackerItem(Base):
    """One tracker issue per dedupe key (the key is also the issue's hidden marker). The row
    is inserted *before* the issue is created, as a claim: the unique key lets exactly one of
    two concurrent triage runs file it; `number` is filled in once the issue exists."""

    __tablename__ = "tracker_item"
    __table_args__ = (
        UniqueConstraint("tracker", "repository", "number"),
        UniqueConstraint("tracker", "repository", "marker"),
    )
    id: Mapped[int] = mapped_column(primary_key=True)
    finding_id: Mapped[int | None] = mapped_column(ForeignKey("finding.id", ondelete="SET NULL"))
    tracker: Mapped[str] = mapped_column(String(32))
    repository: Mapped[str] = mapped_column(String(255))
    number: Mapped[int | None] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(32))
    url: Mapped[str] = mapped_column(Text, default="")
    state: Mapped[str] = mapped_column(String(32))
    marker: Mapped[str] = mapped_column(String(255))
    claimed_by: Mapped[str | None] = mapped_column(String(64))
    claimed_at: Mapped[datetime | None]
    occurrences_synced: Mapped[int] = mapped_column(Integer, default=0, server_default="0")
    """The finding's occurrence count the issue has been told about (recurrence comments)."""
    status_synced: Mapped[str | None] = mapped_column(String(32))
    last_comment_id: Mapped[int | None] = mapped_column(BigInteger)
    """Newest issue comment already read for `/watchkeeper` commands."""
    last_error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class Report(Base):
    __tablename__ = "report"
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaign.id", ondelete="SET NULL"))
    kind: Mapped[str] = mapped_column(String(32))
    path: Mapped[str] = mapped_column(Text)
    commit_sha: Mapped[str | None] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(default=utcnow)


class Incident(Base):
    """Something that went wrong during a soak (server crash, restart, timeout, stuck slot,
    database outage), with the evidence an operator needs the next morning. `natural_key`
    is chosen by whoever records it (e.g. `crash:qwen-draft4:3`), so a spool replay or a
    resumed campaign writes each incident once."""

    __tablename__ = "incident"
    __table_args__ = (UniqueConstraint("campaign_id", "natural_key"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaign.id", ondelete="CASCADE"))
    run_id: Mapped[int | None] = mapped_column(ForeignKey("run.id", ondelete="SET NULL"))
    natural_key: Mapped[str] = mapped_column(String(255))
    kind: Mapped[str] = mapped_column(String(64))
    profile: Mapped[str | None] = mapped_column(String(255))
    occurred_at: Mapped[datetime]
    detail: Mapped[str] = mapped_column(Text, default="")
    evidence: Mapped[dict[str, Any]]


class PrReview(Base):
    """The sticky review comment of one pull request and the head it was measured at."""

    __tablename__ = "pr_review"
    __table_args__ = (UniqueConstraint("tracker", "repository", "number"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    tracker: Mapped[str] = mapped_column(String(32))
    repository: Mapped[str] = mapped_column(String(255))
    number: Mapped[int] = mapped_column(Integer)
    head_sha: Mapped[str] = mapped_column(String(64))
    base_sha: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(32))
    """running, posted, skipped or failed (at `head_sha`)."""
    comment_id: Mapped[int | None] = mapped_column(BigInteger)
    campaign_id: Mapped[int | None] = mapped_column(ForeignKey("campaign.id", ondelete="SET NULL"))
    verdict: Mapped[str | None] = mapped_column(Text)
    claimed_by: Mapped[str | None] = mapped_column(String(64))
    claimed_at: Mapped[datetime | None]
    error: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(default=utcnow, onupdate=utcnow)


class JobRun(Base):
    """One execution of a daemon job. `claim_key` is unique: a fleet job's key is
    (job, scheduled time), so of two hosts firing the same start only one inserts the row and
    runs; a host job's key includes the host. `outcome` is running until the job ends."""

    __tablename__ = "job_run"
    id: Mapped[int] = mapped_column(primary_key=True)
    job: Mapped[str] = mapped_column(String(128), index=True)
    kind: Mapped[str] = mapped_column(String(32))
    scope: Mapped[str] = mapped_column(String(16))
    host_id: Mapped[str] = mapped_column(String(64), index=True)
    claim_key: Mapped[str] = mapped_column(String(255), unique=True)
    scheduled_for: Mapped[datetime]
    started_at: Mapped[datetime] = mapped_column(default=utcnow)
    finished_at: Mapped[datetime | None]
    outcome: Mapped[str] = mapped_column(String(16), index=True)
    """running, ok, failed, interrupted."""
    error: Mapped[str | None] = mapped_column(Text)
    duration_s: Mapped[float | None] = mapped_column(Float)
    details: Mapped[dict[str, Any] | None] = mapped_column(JSON)


class Reference(Base):
    """A pinned system under test: what tonight's current system is measured against.

    Identified by what can change its speed (binary, model and draft files by sha256, the
    profile's flags, the host). Its binary and models are snapshots in the cache kept by
    content hash, so a rebuild or an upgrade cannot destroy what the reference runs. One
    active row per (host, profile); a re-pin deactivates the previous one."""

    __tablename__ = "reference"
    id: Mapped[int] = mapped_column(primary_key=True)
    host_fingerprint: Mapped[str] = mapped_column(String(64), index=True)
    profile: Mapped[str] = mapped_column(String(128))
    identity: Mapped[str] = mapped_column(String(64))
    """sha256 over the fields below: equal identities make an A/A night."""
    binary_sha256: Mapped[str] = mapped_column(String(64))
    binary_version: Mapped[str] = mapped_column(Text, default="")
    model_sha256: Mapped[str] = mapped_column(String(64))
    draft_sha256: Mapped[str | None] = mapped_column(String(64))
    config_hash: Mapped[str] = mapped_column(String(16))
    config: Mapped[dict[str, Any]] = mapped_column(JSON)
    binary_path: Mapped[str] = mapped_column(Text)
    model_path: Mapped[str] = mapped_column(Text)
    draft_path: Mapped[str | None] = mapped_column(Text)
    pinned_at: Mapped[datetime] = mapped_column(default=utcnow)
    pinned_by: Mapped[str] = mapped_column(String(128))
    reason: Mapped[str] = mapped_column(Text, default="")
    active: Mapped[bool] = mapped_column(Boolean, default=True, index=True)


class NightlyRatio(Base):
    """One series' value for one night: current / reference, paired inside the run.

    The run is the unit: one row per (night campaign, series), never pooled requests."""

    __tablename__ = "nightly_ratio"
    __table_args__ = (UniqueConstraint("campaign_id", "series"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaign.id", ondelete="CASCADE"))
    reference_id: Mapped[int] = mapped_column(ForeignKey("reference.id", ondelete="CASCADE"))
    series: Mapped[str] = mapped_column(String(255), index=True)
    host_fingerprint: Mapped[str] = mapped_column(String(64))
    profile: Mapped[str] = mapped_column(String(128))
    category: Mapped[str] = mapped_column(String(64))
    metric: Mapped[str] = mapped_column(String(64))
    estimate: Mapped[float] = mapped_column(Float)
    low: Mapped[float | None] = mapped_column(Float)
    high: Mapped[float | None] = mapped_column(Float)
    n_pairs: Mapped[int] = mapped_column(Integer)
    n_tasks: Mapped[int] = mapped_column(Integer)
    n_rounds: Mapped[int] = mapped_column(Integer)
    threshold: Mapped[float] = mapped_column(Float)
    verdict: Mapped[str] = mapped_column(String(32))
    aa: Mapped[bool] = mapped_column(Boolean, default=False)
    """Current identical to the reference: any flag on this night is a false alarm."""
    confirmed: Mapped[bool] = mapped_column(Boolean, default=False)
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
