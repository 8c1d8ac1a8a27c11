"""daemon: daemon job runs

Revision ID: 0005
Revises: 0004
Create Date: 2026-11-22

APScheduler's own job-store tables (`apscheduler_jobs_<host>`) are created by APScheduler and
left out of autogenerate comparisons in migrations/env.py.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0005"
down_revision: str | None = "0004"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_table(
        "job_run",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("job", sa.String(length=128), nullable=False),
        sa.Column("kind", sa.String(length=32), nullable=False),
        sa.Column("scope", sa.String(length=16), nullable=False),
        sa.Column("host_id", sa.String(length=64), nullable=False),
        sa.Column("claim_key", sa.String(length=255), nullable=False),
        sa.Column("scheduled_for", sa.DateTime(timezone=True), nullable=False),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("outcome", sa.String(length=16), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("duration_s", sa.Float(), nullable=True),
        sa.Column("details", sa.JSON(), nullable=True),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_job_run")),
        sa.UniqueConstraint("claim_key", name=op.f("uq_job_run_claim_key")),
    )
    with op.batch_alter_table("job_run", schema=None) as batch_op:
        batch_op.create_index(batch_op.f("ix_job_run_job"), ["job"], unique=False)
        batch_op.create_index(batch_op.f("ix_job_run_host_id"), ["host_id"], unique=False)
        batch_op.create_index(batch_op.f("ix_job_run_outcome"), ["outcome"], unique=False)


def downgrade() -> None:
    with op.batch_alter_table("job_run", schema=None) as batch_op:
        batch_op.drop_index(batch_op.f("ix_job_run_outcome"))
        batch_op.drop_index(batch_op.f("ix_job_run_host_id"))
        batch_op.drop_index(batch_op.f("ix_job_run_job"))
    op.drop_table("job_run")
