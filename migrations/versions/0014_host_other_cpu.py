"""the host's CPU used outside the soak's servers, per resource sample

Revision ID: 0014_host_other_cpu
Revises: 0013_request_repeat_share
Create Date: 2026-12-07

Additive only: one nullable column on resource_sample (`soak/hostcpu.py`). Rows written before
it stay NULL, and the dip rule (soak/dips.py) then judges their blocks as before: only the
other arm's block at the same time can explain a dip.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0014_host_other_cpu"
down_revision: str | None = "0013_request_repeat_share"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("resource_sample") as batch:
        batch.add_column(sa.Column("host_other_cpu", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("resource_sample") as batch:
        batch.drop_column("host_other_cpu")
