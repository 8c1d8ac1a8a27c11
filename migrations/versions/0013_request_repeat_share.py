"""per-request repetition of the output, for the acceptance loop alarm

Revision ID: 0013_request_repeat_share
Revises: 0012_noise_floor
Create Date: 2026-12-06

Additive only: one nullable column on request_sample. Rows written before it stay NULL (the
alarm then reads their stored output text); per-request drafted and accepted counts were
already columns (`draft_n`, `draft_n_accepted`, migration 0001): the server gives nothing
finer per request (per-position counts exist only in /metrics, summed over requests).
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0013_request_repeat_share"
down_revision: str | None = "0012_noise_floor"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    with op.batch_alter_table("request_sample") as batch:
        batch.add_column(sa.Column("repeat_share", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("request_sample") as batch:
        batch.drop_column("repeat_share")
