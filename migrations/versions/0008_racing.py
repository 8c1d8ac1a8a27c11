"""racing sweep: per-position acceptance curves and how each raced arm ended

Revision ID: 0008_racing
Revises: 0006
Create Date: 2026-11-25

Additive only: two new tables keyed by campaign; existing history is untouched.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0008_racing"
down_revision: str | None = "0006"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "acceptance_position",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("arm", sa.String(length=255), nullable=False),
        sa.Column("position", sa.Integer(), nullable=False),
        sa.Column("accepted_steps", sa.Float(), nullable=False),
        sa.Column("drafts", sa.Float(), nullable=False),
        sa.Column("rate", sa.Float(), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaign.id"],
            name=op.f("fk_acceptance_position_campaign_id_campaign"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_acceptance_position")),
        sa.UniqueConstraint(
            "campaign_id",
            "arm",
            "position",
            name=op.f("uq_acceptance_position_campaign_id_arm_position"),
        ),
    )
    op.create_table(
        "race_arm",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("arm", sa.String(length=255), nullable=False),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("rounds", sa.Integer(), nullable=False),
        sa.Column("dropped_round", sa.Integer(), nullable=True),
        sa.Column("rule", sa.String(length=32), nullable=True),
        sa.Column("reason", sa.Text(), nullable=True),
        sa.Column("error", sa.Float(), nullable=True),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaign.id"],
            name=op.f("fk_race_arm_campaign_id_campaign"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_race_arm")),
        sa.UniqueConstraint("campaign_id", "arm", name=op.f("uq_race_arm_campaign_id_arm")),
    )


def downgrade() -> None:
    op.drop_table("race_arm")
    op.drop_table("acceptance_position")
