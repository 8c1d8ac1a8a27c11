"""gpu build identity: what a server build is and the GPU driver of a host

Revision ID: 0006
Revises: 0007
Create Date: 2026-11-23

Numbered 0006 as planned, but it revises 0007 (the nightly tables, which already revise 0005):
revising 0005 as well would give the history two heads. All columns are nullable: rows written
before this revision simply have no identity recorded.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0006"
down_revision: str | None = "0007"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("server_build") as batch:
        batch.add_column(sa.Column("identity", sa.String(length=255), nullable=True))
        batch.add_column(sa.Column("build_info", sa.Text(), nullable=True))
    with op.batch_alter_table("host") as batch:
        batch.add_column(sa.Column("gpu_driver", sa.String(length=64), nullable=True))
        batch.add_column(sa.Column("gpu_cuda", sa.String(length=32), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("host") as batch:
        batch.drop_column("gpu_cuda")
        batch.drop_column("gpu_driver")
    with op.batch_alter_table("server_build") as batch:
        batch.drop_column("build_info")
        batch.drop_column("identity")
