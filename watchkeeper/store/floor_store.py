"""The database side of the identity check's noise floor: one row per campaign and reference
server, keyed by backend, build and model, so a floor is read back only where it is valid.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import delete, select

from watchkeeper.checks.gap_floor import FloorKey, GapFloor
from watchkeeper.store.db import Database
from watchkeeper.store.schema import NoiseFloorRow


class FloorStore:
    def __init__(self, db: Database) -> None:
        self._db = db

    def save(self, campaign_id: int, reference: str, mode: str, floor: GapFloor) -> None:
        """Replace the campaign's floor of `reference` (a re-analysis writes it again)."""
        key = floor.key or FloorKey("unknown", "unknown", "unknown")
        with self._db.session() as s:
            s.execute(delete(NoiseFloorRow).filter_by(campaign_id=campaign_id, reference=reference))
            s.add(
                NoiseFloorRow(
                    campaign_id=campaign_id,
                    reference=reference,
                    backend=key.backend,
                    build=key.build,
                    model=key.model,
                    mode=mode,
                    state=floor.state,
                    floor=floor.floor,
                    positions=floor.positions,
                    flips=floor.flips,
                    body=floor.to_json(),
                )
            )

    def history(self, key: FloorKey) -> list[tuple[int, str, GapFloor]]:
        """Every stored floor of `key`: (campaign id, mode, floor), oldest first."""
        with self._db.session() as s:
            rows = s.scalars(
                select(NoiseFloorRow)
                .filter_by(backend=key.backend, build=key.build, model=key.model)
                .order_by(NoiseFloorRow.id)
            ).all()
            out: list[tuple[int, str, GapFloor]] = []
            for row in rows:
                body: dict[str, Any] = dict(row.body)
                out.append((row.campaign_id, row.mode, GapFloor.from_json(body)))
            return out
