"""Upgrading a database filled by the previous schema keeps its history (SQLite and Postgres).

The database is migrated to 0005 (the schema before the nightly's tables), filled through the
current code paths that existed then (host, campaign, finding), then upgraded to head."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import create_engine, inspect, text

from watchkeeper.store.db import Database, _normalise, upgrade
from watchkeeper.store.history import History


def test_an_existing_database_upgrades_to_head_without_losing_its_history(db_url: str) -> None:
    upgrade(db_url, "0005")
    engine = create_engine(_normalise(db_url))
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO host (fingerprint, hostname, cpu_model, cpu_count, memory_bytes, os,"
                " created_at) VALUES ('f', 'box', 'cpu', 2, 1, 'Linux', CURRENT_TIMESTAMP)"
            )
        )
        host = conn.execute(text("SELECT id FROM host")).scalar_one()
        conn.execute(
            text(
                "INSERT INTO campaign (uuid, kind, status, host_id, params, summary, started_at)"
                " VALUES ('u-1', 'bench', 'completed', :h, '{}', '{}', CURRENT_TIMESTAMP)"
            ),
            {"h": host},
        )
    engine.dispose()
    upgrade(db_url, "head")
    db = Database(db_url)
    try:
        names = set(inspect(db.engine).get_table_names())
        assert {"reference", "nightly_ratio"} <= names
        campaigns = History(db).campaigns_between(
            datetime(2000, 1, 1, tzinfo=UTC), datetime(2100, 1, 1, tzinfo=UTC)
        )
        assert [c["kind"] for c in campaigns] == ["bench"]
    finally:
        db.close()
