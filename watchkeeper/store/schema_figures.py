"""ORM tables of per-campaign figures: an arm's acceptance curve, how each arm of a race
ended, latency percentiles per load, the identity check's noise floor. Each has its own store
module (`racing_store`, `load_store`, `floor_store`); `store.schema` gathers them into the one
metadata Alembic compares the migrations with, so import them from there.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import JSON, Float, ForeignKey, Integer, String, Text, UniqueConstraint
from sqlalchemy.orm import Mapped, mapped_column

from watchkeeper.store.schema_base import Base, utcnow


class AcceptancePosition(Base):
    """One point of a speculative arm's acceptance curve in one campaign (store/racing_store.py):
    steps with at least position + 1 tokens accepted over the arm's measured requests, from
    the /metrics deltas, and the drafts they are divided by."""

    __tablename__ = "acceptance_position"
    __table_args__ = (UniqueConstraint("campaign_id", "arm", "position"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaign.id", ondelete="CASCADE"))
    arm: Mapped[str] = mapped_column(String(255))
    position: Mapped[int] = mapped_column(Integer)
    accepted_steps: Mapped[float] = mapped_column(Float)
    drafts: Mapped[float] = mapped_column(Float)
    rate: Mapped[float] = mapped_column(Float)


class RaceArmRow(Base):
    """How one arm of a racing sweep ended (store/racing_store.py): the rounds it was measured,
    and for a dropped arm the round, the rule and the reason. Its runs stay in `run`."""

    __tablename__ = "race_arm"
    __table_args__ = (UniqueConstraint("campaign_id", "arm"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaign.id", ondelete="CASCADE"))
    arm: Mapped[str] = mapped_column(String(255))
    status: Mapped[str] = mapped_column(String(32))
    """'survived' or 'dropped'."""
    rounds: Mapped[int] = mapped_column(Integer)
    dropped_round: Mapped[int | None] = mapped_column(Integer)
    rule: Mapped[str | None] = mapped_column(String(32))
    reason: Mapped[str | None] = mapped_column(Text)
    error: Mapped[float | None] = mapped_column(Float)


class LatencyStat(Base):
    """One latency figure of one arm at one load in one campaign (store/load_store.py): a
    percentile of TTFT, ITL, TPOT or end-to-end latency, goodput or output tok/s, as the mean
    over rounds with its t interval (analysis/latency.py)."""

    __tablename__ = "latency_stat"
    __table_args__ = (UniqueConstraint("campaign_id", "arm", "load", "metric", "stat"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaign.id", ondelete="CASCADE"))
    arm: Mapped[str] = mapped_column(String(255))
    load: Mapped[str] = mapped_column(String(64))
    """'c4' (closed loop, 4 in flight) or the open loop's arrival label ('2 req/s poisson')."""
    metric: Mapped[str] = mapped_column(String(32))
    """ttft_ms, itl_ms, tpot_ms, e2e_ms, goodput_rps or output_tps."""
    stat: Mapped[str] = mapped_column(String(16))
    """p50, p90, p99, or mean (goodput and output tok/s)."""
    estimate: Mapped[float] = mapped_column(Float)
    low: Mapped[float | None] = mapped_column(Float)
    high: Mapped[float | None] = mapped_column(Float)
    """None when fewer than 2 rounds gave no CI."""
    rounds: Mapped[int] = mapped_column(Integer)


class NoiseFloorRow(Base):
    """The identity check's A/A noise floor of one campaign and reference server
    (store/floor_store.py), keyed by what it is valid for: backend, build and model. `floor`
    is NULL where the state is `underpowered` (too few replayed positions for a number)."""

    __tablename__ = "noise_floor"
    __table_args__ = (UniqueConstraint("campaign_id", "reference"),)
    id: Mapped[int] = mapped_column(primary_key=True)
    campaign_id: Mapped[int] = mapped_column(ForeignKey("campaign.id", ondelete="CASCADE"))
    reference: Mapped[str] = mapped_column(String(255))
    backend: Mapped[str] = mapped_column(String(64))
    build: Mapped[str] = mapped_column(String(255))
    model: Mapped[str] = mapped_column(String(128))
    mode: Mapped[str] = mapped_column(String(16))
    state: Mapped[str] = mapped_column(String(16))
    floor: Mapped[float | None] = mapped_column(Float)
    positions: Mapped[int] = mapped_column(Integer)
    flips: Mapped[int] = mapped_column(Integer)
    body: Mapped[dict[str, Any]] = mapped_column(JSON)
    """`GapFloor.to_json()`: the flip rate by margin, the plan, every position's margin."""
    created_at: Mapped[datetime] = mapped_column(default=utcnow)
