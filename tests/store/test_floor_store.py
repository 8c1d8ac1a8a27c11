"""The identity noise floor's table (migration 0012_noise_floor): a floor round-trips under its
backend, build and model key, on SQLite and Postgres; a re-analysis replaces it."""

from __future__ import annotations

from watchkeeper.checks.gap_floor import FloorKey, ReplayedPosition, gap_floor
from watchkeeper.host.info import HostInfo
from watchkeeper.store.db import Database
from watchkeeper.store.floor_store import FloorStore
from watchkeeper.store.repository import Repository

HOST = HostInfo("a" * 64, "box", "cpu", 2, 1 << 30, None, "Linux")
KEY = FloorKey("cpu", "11434.0.0-cpu", "b" * 64)


def test_floors_round_trip_under_their_key(db_url: str) -> None:
    db = Database(db_url)
    try:
        repo = Repository(db)
        host = repo.ensure_host(HOST)
        campaign = repo.create_campaign(kind="bench", host_id=host, build_id=None, params={})
        positions = [
            ReplayedPosition(0.05 * (i % 40), 0.01, i % 100 == 0, False) for i in range(220)
        ]
        measured = gap_floor(positions, key=KEY, plan="22 probes x up to 10 positions")
        thin = gap_floor(positions[:50], key=KEY)
        store = FloorStore(db)
        store.save(campaign, "base", "batched", thin)
        store.save(campaign, "base", "batched", measured)  # a re-analysis replaces it
        store.save(campaign, "spec.twin", "exact", thin)
        rows = store.history(KEY)
        assert [(c, m, f.state) for c, m, f in rows] == [
            (campaign, "batched", "measured"),
            (campaign, "exact", "underpowered"),
        ]
        back = rows[0][2]
        assert back.floor == measured.floor and back.positions == 220 and back.key == KEY
        assert back.bands == measured.bands and back.plan == measured.plan
        assert rows[1][2].floor is None
        assert store.history(FloorKey("cuda", "11434.0.0-cuda", "b" * 64)) == []
    finally:
        db.close()
