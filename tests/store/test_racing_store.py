"""The racing sweep's tables: acceptance curves and raced arms round-trip (SQLite and Postgres),
and the latest soak of a profile on a host is found."""

from __future__ import annotations

from watchkeeper.analysis.acceptance import AcceptanceCurve
from watchkeeper.host.info import HostInfo
from watchkeeper.store.db import Database
from watchkeeper.store.racing_store import RaceArmRecord, RacingStore
from watchkeeper.store.repository import Repository

HOST = HostInfo("a" * 64, "box", "cpu", 2, 1 << 30, None, "Linux")


def test_curves_and_raced_arms_round_trip_and_the_latest_soak_is_found(db_url: str) -> None:
    db = Database(db_url)
    try:
        repo = Repository(db)
        host = repo.ensure_host(HOST)
        sweep = repo.create_campaign(kind="sweep", host_id=host, build_id=None, params={})
        store = RacingStore(db)
        curve = AcceptanceCurve("draft4", 10, 40, 18, (9, 5, 3, 1), (0.9, 0.5, 0.3, 0.1), 4)
        store.save_curves(sweep, [curve])
        store.save_curves(sweep, [curve])  # a re-analysis replaces, never duplicates
        assert store.curves(sweep) == {
            "draft4": [(0, 9.0, 0.9), (1, 5.0, 0.5), (2, 3.0, 0.3), (3, 1.0, 0.1)]
        }
        arms = [
            RaceArmRecord("base", "survived", 3),
            RaceArmRecord("draft16", "dropped", 1, 1, "early", "slower on every task", 1e-7),
        ]
        store.save_race(sweep, arms)
        assert store.race(sweep) == arms
        assert store.latest_soak(HOST.fingerprint, "qwen-ngram") is None
        for profiles, verdict in ((["qwen-ngram"], "unstable"), (["qwen-ngram"], "stable")):
            soak = repo.create_campaign(
                kind="soak", host_id=host, build_id=None, params={"profiles": profiles}
            )
            repo.finish_campaign(
                soak, status="completed", summary={"verdict": verdict, "headline": verdict}
            )
        other = repo.create_campaign(
            kind="soak", host_id=host, build_id=None, params={"profiles": ["qwen-baseline"]}
        )
        # A newer soak of the profile that was interrupted (or still runs) is not evidence.
        cut = repo.create_campaign(
            kind="soak", host_id=host, build_id=None, params={"profiles": ["qwen-ngram"]}
        )
        repo.finish_campaign(
            cut, status="interrupted", summary={"verdict": "stable", "headline": "16 requests"}
        )
        repo.create_campaign(
            kind="soak", host_id=host, build_id=None, params={"profiles": ["qwen-ngram"]}
        )
        latest = store.latest_soak(HOST.fingerprint, "qwen-ngram")
        assert latest is not None and latest["verdict"] == "stable"
        assert latest["campaign_id"] == other - 1
        assert store.latest_soak("b" * 64, "qwen-ngram") is None
    finally:
        db.close()
