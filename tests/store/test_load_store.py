"""`latency_stat`: a bench's latency figures stored per arm, load, metric and statistic."""

from __future__ import annotations

from watchkeeper.analysis.latency import Estimate, LatencyStats
from watchkeeper.host import info as hostinfo
from watchkeeper.store.db import open_database
from watchkeeper.store.load_store import LoadStore
from watchkeeper.store.repository import Repository


def test_figures_are_stored_and_replaced(sqlite_url: str) -> None:
    est = Estimate(120.0, 100.0, 140.0, 3, (100.0, 120.0, 140.0), 50)
    stats = LatencyStats(
        "base",
        "c4",
        30,
        1,
        1,
        3,
        {"ttft_ms": {"p50": est, "p99": Estimate(300.0, 300.0, 300.0, 1)}},
        Estimate(2.0, 1.5, 2.5, 3),
        None,
        0.9,
        "TTFT <= 500 ms",
    )
    with open_database(sqlite_url) as db:
        repo = Repository(db)
        host = repo.ensure_host(hostinfo.collect())
        campaign = repo.create_campaign(kind="ladder", host_id=host, build_id=None, params={})
        store = LoadStore(db)
        store.save(campaign, [stats])
        store.save(campaign, [stats])  # a re-analysis replaces, never duplicates
        assert store.figures(campaign) == [
            ("base", "c4", "goodput_rps", "mean", 2.0),
            ("base", "c4", "ttft_ms", "p50", 120.0),
            ("base", "c4", "ttft_ms", "p99", 300.0),
        ]
