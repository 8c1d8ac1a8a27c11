"""regression tracking: run exclusions, finding lifecycle, series baseline resets

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0002"
down_revision: str | None = "0001"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.add_column(sa.Column("excluded_reason", sa.Text(), nullable=True))
    with op.batch_alter_table("campaign") as batch:
        batch.add_column(sa.Column("analysed_at", sa.DateTime(timezone=True), nullable=True))
    with op.batch_alter_table("finding") as batch:
        batch.add_column(sa.Column("run_id", sa.Integer(), nullable=True))
        batch.add_column(sa.Column("series_key", sa.JSON(), nullable=True))
        batch.add_column(sa.Column("side", sa.String(length=16), nullable=True))
        batch.add_column(sa.Column("confirmed_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("last_seen_at", sa.DateTime(timezone=True), nullable=True))
        batch.add_column(sa.Column("occurrences", sa.Integer(), server_default="1", nullable=False))
        batch.add_column(sa.Column("status_note", sa.Text(), nullable=True))
        batch.create_foreign_key(
            op.f("fk_finding_run_id_run"), "run", ["run_id"], ["id"], ondelete="SET NULL"
        )
    op.create_table(
        "series_reset",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("series_fingerprint", sa.String(length=64), nullable=False),
        sa.Column("run_id", sa.Integer(), nullable=False),
        sa.Column("reason", sa.String(length=32), nullable=False),
        sa.Column("finding_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["finding_id"],
            ["finding.id"],
            name=op.f("fk_series_reset_finding_id_finding"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(
            ["run_id"], ["run.id"], name=op.f("fk_series_reset_run_id_run"), ondelete="CASCADE"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_series_reset")),
        sa.UniqueConstraint(
            "series_fingerprint", "run_id", name=op.f("uq_series_reset_series_fingerprint_run_id")
        ),
    )
    op.create_index(
        op.f("ix_series_reset_series_fingerprint"),
        "series_reset",
        ["series_fingerprint"],
        unique=False,
    )


def downgrade() -> None:
    op.drop_index(op.f("ix_series_reset_series_fingerprint"), table_name="series_reset")
    op.drop_table("series_reset")
    with op.batch_alter_table("finding") as batch:
        batch.drop_constraint(op.f("fk_finding_run_id_run"), type_="foreignkey")
        for column in (
            "status_note",
            "occurrences",
            "last_seen_at",
            "confirmed_at",
            "side",
            "series_key",
            "run_id",
        ):
            batch.drop_column(column)
    with op.batch_alter_table("campaign") as batch:
        batch.drop_column("analysed_at")
    with op.batch_alter_table("run") as batch:
        batch.drop_column("excluded_reason")
