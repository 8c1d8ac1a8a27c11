"""run.purpose: why a run was made, instead of a suffix on its arm name

Revision ID: 0009_benchsteps
Revises: 0008_racing
Create Date: 2026-11-25

A run's purpose (measured, warmup, rewarm, identity probe, soak probe) was encoded in the arm
name (`<arm>#identity`, `<arm>#rewarm`, the soak's `<profile>:probe`), so every reader parsed
names. Existing rows get the purpose their suffix (or is_warmup) said, and the suffix is
stripped; the natural key gains the purpose, since a rewarm and a measured run of one arm can
share a round once the names are equal.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0009_benchsteps"
down_revision: str | None = "0008_racing"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

OLD_KEY = "uq_run_campaign_id_arm_round_concurrency"
NEW_KEY = "uq_run_campaign_id_arm_purpose_round_concurrency"
SUFFIXES = (("#identity", "identity"), ("#rewarm", "rewarm"), (":probe", "probe"))

run = sa.table(
    "run",
    sa.column("arm", sa.String),
    sa.column("purpose", sa.String),
    sa.column("is_warmup", sa.Boolean),
)


def upgrade() -> None:
    with op.batch_alter_table("run") as batch:
        batch.add_column(
            sa.Column("purpose", sa.String(length=16), nullable=False, server_default="measured")
        )
        batch.drop_constraint(OLD_KEY, type_="unique")
    op.execute(run.update().where(run.c.is_warmup.is_(True)).values(purpose="warmup"))
    for suffix, purpose in SUFFIXES:
        stripped = sa.func.substr(run.c.arm, 1, sa.func.length(run.c.arm) - len(suffix))
        op.execute(
            run.update().where(run.c.arm.like(f"%{suffix}")).values(purpose=purpose, arm=stripped)
        )
    with op.batch_alter_table("run") as batch:
        batch.create_unique_constraint(
            NEW_KEY, ["campaign_id", "arm", "purpose", "round", "concurrency"]
        )


def downgrade() -> None:
    suffix_of = {purpose: suffix for suffix, purpose in SUFFIXES}
    with op.batch_alter_table("run") as batch:
        batch.drop_constraint(NEW_KEY, type_="unique")
    for purpose, suffix in suffix_of.items():
        op.execute(run.update().where(run.c.purpose == purpose).values(arm=run.c.arm + suffix))
    with op.batch_alter_table("run") as batch:
        batch.create_unique_constraint(OLD_KEY, ["campaign_id", "arm", "round", "concurrency"])
        batch.drop_column("purpose")
