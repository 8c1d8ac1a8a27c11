"""nightly: pinned references and run-level current/reference ratios

Revision ID: 0007
Revises: 0005
Create Date: 2026-11-23

Additive only: existing history (campaigns, runs, findings) is untouched, so an existing
database upgrades without losing anything.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0007"
down_revision: str | None = "0005"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "reference",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("host_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("profile", sa.String(length=128), nullable=False),
        sa.Column("identity", sa.String(length=64), nullable=False),
        sa.Column("binary_sha256", sa.String(length=64), nullable=False),
        sa.Column("binary_version", sa.Text(), nullable=False),
        sa.Column("model_sha256", sa.String(length=64), nullable=False),
        sa.Column("draft_sha256", sa.String(length=64), nullable=True),
        sa.Column("config_hash", sa.String(length=16), nullable=False),
        sa.Column("config", sa.JSON(), nullable=False),
        sa.Column("binary_path", sa.Text(), nullable=False),
        sa.Column("model_path", sa.Text(), nullable=False),
        sa.Column("draft_path", sa.Text(), nullable=True),
        sa.Column("pinned_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("pinned_by", sa.String(length=128), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("active", sa.Boolean(), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_reference")),
    )
    op.create_index(op.f("ix_reference_host_fingerprint"), "reference", ["host_fingerprint"])
    op.create_index(op.f("ix_reference_active"), "reference", ["active"])
    op.create_table(
        "nightly_ratio",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("campaign_id", sa.Integer(), nullable=False),
        sa.Column("reference_id", sa.Integer(), nullable=False),
        sa.Column("series", sa.String(length=255), nullable=False),
        sa.Column("host_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("profile", sa.String(length=128), nullable=False),
        sa.Column("category", sa.String(length=64), nullable=False),
        sa.Column("metric", sa.String(length=64), nullable=False),
        sa.Column("estimate", sa.Float(), nullable=False),
        sa.Column("low", sa.Float(), nullable=True),
        sa.Column("high", sa.Float(), nullable=True),
        sa.Column("n_pairs", sa.Integer(), nullable=False),
        sa.Column("n_tasks", sa.Integer(), nullable=False),
        sa.Column("n_rounds", sa.Integer(), nullable=False),
        sa.Column("threshold", sa.Float(), nullable=False),
        sa.Column("verdict", sa.String(length=32), nullable=False),
        sa.Column("aa", sa.Boolean(), nullable=False),
        sa.Column("confirmed", sa.Boolean(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaign.id"],
            name=op.f("fk_nightly_ratio_campaign_id_campaign"),
            ondelete="CASCADE",
        ),
        sa.ForeignKeyConstraint(
            ["reference_id"],
            ["reference.id"],
            name=op.f("fk_nightly_ratio_reference_id_reference"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_nightly_ratio")),
        sa.UniqueConstraint(
            "campaign_id", "series", name=op.f("uq_nightly_ratio_campaign_id_series")
        ),
    )
    op.create_index(op.f("ix_nightly_ratio_series"), "nightly_ratio", ["series"])


def downgrade() -> None:
    op.drop_index(op.f("ix_nightly_ratio_series"), table_name="nightly_ratio")
    op.drop_table("nightly_ratio")
    op.drop_index(op.f("ix_reference_active"), table_name="reference")
    op.drop_index(op.f("ix_reference_host_fingerprint"), table_name="reference")
    op.drop_table("reference")
