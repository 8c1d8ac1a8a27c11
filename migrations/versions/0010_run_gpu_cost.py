"""run: the arm's GPU cost per run (VRAM, utilisation, power, energy)

Revision ID: 0010_gpu_cost
Revises: 0009_benchsteps
Create Date: 2026-11-26

What a run cost on the GPU, from NVML (analysis/gpu_cost.py): peak and steady VRAM of the
server's process tree, mean device utilisation and power over the run's requests, and the
energy those requests took. NULL where nothing was measured (no NVML: a CPU host), never 0.
"""

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

revision: str = "0010_gpu_cost"
down_revision: str | None = "0009_benchsteps"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

COLUMNS = (
    ("gpu_peak_vram_bytes", sa.BigInteger()),
    ("gpu_steady_vram_bytes", sa.BigInteger()),
    ("gpu_utilization_percent", sa.Float()),
    ("gpu_power_watts", sa.Float()),
    ("gpu_energy_joules", sa.Float()),
)


def upgrade() -> None:
    with op.batch_alter_table("run") as batch:
        for name, kind in COLUMNS:
            batch.add_column(sa.Column(name, kind, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("run") as batch:
        for name, _ in reversed(COLUMNS):
            batch.drop_column(name)
