"""identity noise floor per campaign and reference, keyed by backend, build and model

Revision ID: 0012_noise_floor
Revises: 0011_latency_stat
Create Date: 2026-11-26

Additive only: one new table keyed by campaign; existing history is untouched.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0012_noise_floor"
down_revision: str | None = "0011_latency_stat"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "noise_floor",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("reference", sa.String(length=255), nullable=False),
        sa.Column("backend", sa.String(length=64), nullable=False),
        sa.Column("build", sa.String(length=255), nullable=False),
        sa.Column("model", sa.String(length=128), nullable=False),
        sa.Column("mode", sa.String(length=16), nullable=False),
        sa.Column("state", sa.String(length=16), nullable=False),
        sa.Column("floor", sa.Float(), nullable=True),
        sa.Column("positions", sa.Integer(), nullable=False),
        sa.Column("flips", sa.Integer(), nullable=False),
        sa.Column("body", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaign.id"],
            name=op.f("fk_noise_floor_campaign_id_campaign"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_noise_floor")),
        sa.UniqueConstraint(
            "campaign_id", "reference", name=op.f("uq_noise_floor_campaign_id_reference")
        ),
    )


def downgrade() -> None:
    op.drop_table("noise_floor")
