"""tracker: tracker issues and reviewer PR comments

Revision ID: 0004
Revises: 0003
Create Date: 2026-11-22
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0004"
down_revision: str | None = "0003"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("tracker_item", schema=None) as batch_op:
        batch_op.alter_column("number", existing_type=sa.Integer(), nullable=True)
        batch_op.add_column(sa.Column("claimed_by", sa.String(length=64), nullable=True))
        batch_op.add_column(sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True))
        batch_op.add_column(
            sa.Column("occurrences_synced", sa.Integer(), server_default="0", nullable=False)
        )
        batch_op.add_column(sa.Column("status_synced", sa.String(length=32), nullable=True))
        batch_op.add_column(sa.Column("last_comment_id", sa.BigInteger(), nullable=True))
        batch_op.add_column(sa.Column("last_error", sa.Text(), nullable=True))
        batch_op.create_unique_constraint(
            batch_op.f("uq_tracker_item_tracker_repository_marker"),
            ["tracker", "repository", "marker"],
        )
    op.create_table(
        "pr_review",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tracker", sa.String(length=32), nullable=False),
        sa.Column("repository", sa.String(length=255), nullable=False),
        sa.Column("number", sa.Integer(), nullable=False),
        sa.Column("head_sha", sa.String(length=64), nullable=False),
        sa.Column("base_sha", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=32), nullable=False),
        sa.Column("comment_id", sa.BigInteger(), nullable=True),
        sa.Column("campaign_id", sa.Integer(), nullable=True),
        sa.Column("verdict", sa.Text(), nullable=True),
        sa.Column("claimed_by", sa.String(length=64), nullable=True),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(
            ["campaign_id"],
            ["campaign.id"],
            name=op.f("fk_pr_review_campaign_id_campaign"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pr_review")),
        sa.UniqueConstraint(
            "tracker", "repository", "number", name=op.f("uq_pr_review_tracker_repository_number")
        ),
    )


def downgrade() -> None:
    op.drop_table("pr_review")
    with op.batch_alter_table("tracker_item", schema=None) as batch_op:
        batch_op.drop_constraint(
            batch_op.f("uq_tracker_item_tracker_repository_marker"), type_="unique"
        )
        batch_op.drop_column("last_error")
        batch_op.drop_column("last_comment_id")
        batch_op.drop_column("status_synced")
        batch_op.drop_column("occurrences_synced")
        batch_op.drop_column("claimed_at")
        batch_op.drop_column("claimed_by")
        batch_op.alter_column("number", existing_type=sa.Integer(), nullable=False)
