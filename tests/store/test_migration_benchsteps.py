"""Migration 0009_benchsteps: a run's purpose moves from its arm name into `run.purpose`.

A database written before it (SQLite and Postgres) holds bench runs named `<arm>#identity` and
`<arm>#rewarm` and soak runs named `<profile>:probe`; after the upgrade each row has the
purpose its name or `is_warmup` said and its plain arm name, and the readers that select by
purpose (the soak's load, the bench's stored runs) see them so."""

from __future__ import annotations

from sqlalchemy import create_engine, select, text

from watchkeeper.load.records import RunPurpose
from watchkeeper.store.db import Database, _normalise, upgrade
from watchkeeper.store.repository import Repository
from watchkeeper.store.schema import Run
from watchkeeper.store.soak_store import SoakStore

OLD_RUNS = [
    # (campaign, arm, round, is_warmup)
    (1, "base", 0, True),
    (1, "base", 1, False),
    (1, "base", 2, False),
    (1, "base#rewarm", 2, True),
    (1, "base#identity", 3, True),
    (1, "spec", 1, False),
    (1, "spec#identity", 3, True),
    (2, "p", 0, False),
    (2, "p:probe", 0, False),
]


def _fill_before_0009(url: str) -> None:
    upgrade(url, "0008_racing")
    engine = create_engine(_normalise(url))
    with engine.begin() as conn:
        conn.execute(
            text(
                "INSERT INTO host (id, fingerprint, hostname, cpu_model, cpu_count, memory_bytes,"
                " os, created_at) VALUES (1, 'f', 'box', 'cpu', 2, 1, 'Linux', CURRENT_TIMESTAMP)"
            )
        )
        for campaign, kind in ((1, "bench"), (2, "soak")):
            conn.execute(
                text(
                    "INSERT INTO campaign (id, uuid, kind, status, host_id, params, summary,"
                    " started_at) VALUES (:id, :uuid, :kind, 'completed', 1, '{}', '{}',"
                    " CURRENT_TIMESTAMP)"
                ),
                {"id": campaign, "uuid": f"u-{campaign}", "kind": kind},
            )
        conn.execute(
            text(
                "INSERT INTO profile (id, name, config_hash, config, created_at)"
                " VALUES (1, 'base', 'h', '{}', CURRENT_TIMESTAMP)"
            )
        )
        for i, (campaign, arm, rnd, warm) in enumerate(OLD_RUNS, start=1):
            conn.execute(
                text(
                    "INSERT INTO run (id, campaign_id, profile_id, arm, round, is_warmup,"
                    " concurrency, status, server_argv, started_at) VALUES (:id, :c, 1, :arm,"
                    " :rnd, :warm, 1, 'completed', '[]', CURRENT_TIMESTAMP)"
                ),
                {"id": i, "c": campaign, "arm": arm, "rnd": rnd, "warm": warm},
            )
    engine.dispose()


def test_old_runs_get_the_purpose_their_suffix_named_and_their_plain_arm(db_url: str) -> None:
    _fill_before_0009(db_url)
    upgrade(db_url, "head")
    db = Database(db_url)
    try:
        with db.session() as s:
            rows = s.execute(select(Run.id, Run.arm, Run.purpose).order_by(Run.id)).all()
        assert [(arm, purpose) for _, arm, purpose in rows] == [
            ("base", RunPurpose.WARMUP),
            ("base", RunPurpose.MEASURED),
            ("base", RunPurpose.MEASURED),
            ("base", RunPurpose.REWARM),
            ("base", RunPurpose.IDENTITY),
            ("spec", RunPurpose.MEASURED),
            ("spec", RunPurpose.IDENTITY),
            ("p", RunPurpose.MEASURED),
            ("p", RunPurpose.PROBE),
        ]
        stored = Repository(db).load_runs(1)
        assert {(r.arm, r.round) for r in stored if r.purpose == RunPurpose.REWARM} == {("base", 2)}
        soak = SoakStore(db).load(2)
        assert [(b.arm, b.is_probe) for b in soak.blocks] == [("p", False), ("p", True)]
    finally:
        db.close()
