"""latency percentiles, goodput and output tok/s per arm and load level

Revision ID: 0011_latency_stat
Revises: 0010_gpu_cost
Create Date: 2026-12-01

Additive only: one new table keyed by campaign; existing history is untouched.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0011_latency_stat"
down_revision: str | None = "0010_gpu_cost"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "latency_stat",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("arm", sa.String(length=255), nullable=False),
        sa.Column("load", sa.String(length=64), nullable=False),
        sa.Column("metric", sa.String(length=32), nullable=False),
        sa.Column("stat", sa.String(length=16), nullable=False),
        sa.Column("estimate", sa.Float(), nullable=False),
        sa.Column("low", sa.Float(), nullable=True),
        sa.Column("high", sa.Float(), nullable=True),
        sa.Column("rounds", sa.Integer(), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaign.id"],
            name=op.f("fk_latency_stat_campaign_id_campaign"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_latency_stat")),
        sa.UniqueConstraint(
            "campaign_id",
            "arm",
            "load",
            "metric",
            "stat",
            name=op.f("uq_latency_stat_campaign_id_arm_load_metric_stat"),
        ),
    )


def downgrade() -> None:
    op.drop_table("latency_stat")
