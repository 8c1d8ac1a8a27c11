"""The triage tests' shared pieces: a synthetic finding, its evidence, and a config and
history on SQLite pointed at the fake forge."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from support.fakeforge import FakeForge
from support.trackerkit import Sleeps, tracker_config
from watchkeeper.commands.triage import triage_command
from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.store.db import Database
from watchkeeper.store.findings import NewFinding
from watchkeeper.store.history import History

NOW = datetime(2026, 11, 3, 7, 30, tzinfo=UTC)


def evidence(**extra: Any) -> dict[str, Any]:
    return {
        "series_name": "decode_tps · code · c1 · 3f2a9c1e",
        "label": "regression",
        "delta": -0.182,
        "delta_ci": [-0.214, -0.151],
        "delta_unit": "relative",
        "test": "one-sided t prediction test on run medians (one value per run)",
        "p_value": 0.00018,
        "p_adjusted": 0.00036,
        "current": 81.9,
        "baseline": 100.1,
        "baseline_runs": 10,
        "baseline_trials": 80,
        "baseline_cv": 0.012,
        "fence": 0.031,
        "floor": 0.03,
        "params": {"alpha": 0.01, "window": 10, "fence_multiplier": 3.0},
        **extra,
    }


def add_finding(history: History, n: int = 0, **values: Any) -> int:
    row: dict[str, Any] = {
        "fingerprint": f"{n:016x}",
        "kind": "regression",
        "label": "regression",
        "status": "active",
        "severity": "medium",
        "title": f"decode_tps regression in code{n} (profile smollm2-baseline, concurrency 1): -18.2%",
        "evidence": evidence(),
        "series_key": {"metric": "decode_tps", "category": f"code{n}"},
        "side": "worse",
        "confirmed_at": NOW,
        "last_seen_at": NOW,
        "occurrences": 2,
    }
    row.update(values)
    return history.create_finding(NewFinding(**row))


@pytest.fixture
def config(forge: FakeForge, sqlite_url: str) -> Config:
    return Config(database=DatabaseConfig(url=sqlite_url), tracker=tracker_config(forge))


@pytest.fixture
def history(config: Config) -> Any:
    db = Database(config.database.url)
    yield History(db)
    db.close()


def triage(config: Config, sleeps: Sleeps, **kw: Any) -> Any:
    return triage_command(config, sleep=sleeps, **kw)
