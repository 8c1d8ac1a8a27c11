"""Fresh server processes between rounds (`BenchPlan.restart_every`), on the real llama-server.

A process keeps whatever made it a little fast or slow for its whole life; restarting both arms
between rounds makes the process pair a replicate. These tests check the mechanics: every arm
gets a new process before the rounds the plan names, the new processes are warmed up and those
requests are stored but never measured, and a plan that sizes more rounds keeps the pilot's.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

import pytest

from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.campaign.bench_rounds import restarts_before
from watchkeeper.config import Config, parse_config
from watchkeeper.load.records import RunPurpose, RunResult, Task
from watchkeeper.load.tasks import load_taskset
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import Database
from watchkeeper.store.repository import Repository, StoredRun

ARMS = ("smollm2-baseline", "twin")


def test_restarts_fall_before_every_nth_measured_round_and_never_before_the_first() -> None:
    assert [r for r in range(1, 8) if restarts_before(r, 1)] == [2, 3, 4, 5, 6, 7]
    assert [r for r in range(1, 8) if restarts_before(r, 3)] == [4, 7]
    assert not any(restarts_before(r, 0) for r in range(1, 8))


@pytest.fixture
def config(real_server: tuple[ServerBinary, ModelFile], tmp_path: Path) -> Config:
    from watchkeeper.server.profiles import BUILTIN_PROFILES

    return parse_config(
        {
            "database": {"url": f"sqlite:///{tmp_path / 'wk.db'}"},
            "bench": {"reports_dir": str(tmp_path / "reports")},
            "profiles": {"twin": BUILTIN_PROFILES["smollm2-baseline"].model_dump()},
        },
        source="test",
    )


def batched(config: Config) -> Config:
    """The identity probes on the rounds' own servers (`identity_mode = "batched"`): these
    tests assert nothing of identity, and the exact pass would start every arm once more with
    `--ubatch-size 1` and prefill each probe a token at a time. The pilot's test keeps the
    default exact pass: it asserts where its probes fall (measured 2026-11-28 quietly: 7-15 s
    per test here, 12.7 s the pilot's)."""
    bench = config.bench.model_copy(update={"identity_mode": "batched"})
    return config.model_copy(update={"bench": bench})


def tasks(n: int) -> tuple[Task, ...]:
    chosen = load_taskset(Path("jobs/tasksets/standard.jsonl"))[:n]
    return tuple(replace(t, max_tokens=16) for t in chosen)


def stored_runs(config: Config, campaign_id: int) -> list[StoredRun]:
    db = Database(config.database.resolved_url())
    try:
        return list(Repository(db).load_runs(campaign_id))
    finally:
        db.close()


def test_every_arm_gets_fresh_processes_between_rounds_and_their_warm_up_is_not_measured(
    config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHKEEPER_DATA_DIR", str(tmp_path / "data"))
    plan = BenchPlan(ARMS, tasks(3), rounds=3, warmup_rounds=1, warmup_tasks=1, concurrency=1)
    result = execute_bench(
        batched(config), replace(plan, restart_every=1), progress=lambda _: None, drift_only=True
    )
    runs = stored_runs(config, result.campaign_id)
    measured = {(r.arm, r.round) for r in runs if not r.is_warmup}
    assert measured == {(a, r) for a in ARMS for r in (1, 2, 3)}
    assert {r.purpose for r in runs if not r.is_warmup} == {RunPurpose.MEASURED}
    rewarm = sorted((r.arm, r.round) for r in runs if r.purpose == RunPurpose.REWARM)
    assert rewarm == sorted((a, r) for a in ARMS for r in (2, 3))
    assert all(r.is_warmup for r in runs if r.purpose == RunPurpose.REWARM)
    # Each process wrote its own log: the first and one per restart, for every arm.
    logs = {p.name for p in (tmp_path / "data").rglob("*.log")}
    for arm in ARMS:
        assert {f"{arm}.log", f"{arm}-p1.log", f"{arm}-p2.log"} <= logs, sorted(logs)
    # Speed-ups pair only measured rounds: 3 tasks x 3 rounds.
    twin = result.stats("twin")
    assert twin is not None and twin.speedup is not None and twin.speedup.n_pairs == 9
    assert result.method.rounds == 3


def test_a_plan_that_asks_for_more_rounds_runs_them_after_its_pilot_on_the_same_servers(
    config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("WATCHKEEPER_DATA_DIR", str(tmp_path / "data"))
    asked: list[tuple[int, float]] = []

    def more(runs: Sequence[RunResult], seconds: float) -> int:
        asked.append((len({r.round for r in runs}), seconds))
        assert not any(r.is_warmup for r in runs)
        return 2

    plan = BenchPlan(ARMS, tasks(2), rounds=3, warmup_rounds=1, warmup_tasks=1, concurrency=1)
    result = execute_bench(
        config, replace(plan, more_rounds=more), progress=lambda _: None, drift_only=True
    )
    assert len(asked) == 1 and asked[0][0] == 3 and asked[0][1] > 0
    runs = stored_runs(config, result.campaign_id)
    assert sorted({r.round for r in runs if not r.is_warmup}) == [1, 2, 3, 4, 5]
    assert result.method.rounds == 5
    twin = result.stats("twin")
    assert twin is not None and twin.speedup is not None and twin.speedup.n_pairs == 10
    # No restarts were asked for: one process per arm, one log each.
    logs = sorted(p.name for p in (tmp_path / "data").rglob("*.log"))
    assert not [name for name in logs if "-p1" in name], logs
    # The identity probes follow the last measured round.
    probes = {r.round for r in runs if r.purpose == RunPurpose.IDENTITY}
    assert probes == {6}, json.dumps(sorted(probes))


def test_an_arm_a_race_dropped_is_not_started_again_at_the_next_restart(
    config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A sweep drops its clear losers; their processes would only cost loads and memory."""
    monkeypatch.setenv("WATCHKEEPER_DATA_DIR", str(tmp_path / "data"))

    def drop_twin(runs: Sequence[RunResult]) -> tuple[Sequence[str], bool]:
        return (ARMS[0],), True

    plan = BenchPlan(ARMS, tasks(2), rounds=3, warmup_rounds=1, warmup_tasks=1, concurrency=1)
    result = execute_bench(
        batched(config),
        replace(plan, restart_every=1, race=drop_twin),
        progress=lambda _: None,
        drift_only=True,
    )
    runs = stored_runs(config, result.campaign_id)
    assert {(r.arm, r.round) for r in runs if not r.is_warmup} == {
        ("smollm2-baseline", 1),
        ("smollm2-baseline", 2),
        ("smollm2-baseline", 3),
        ("twin", 1),
    }
    logs = {p.name for p in (tmp_path / "data").rglob("*.log")}
    assert {"smollm2-baseline-p1.log", "smollm2-baseline-p2.log", "twin.log"} <= logs
    assert not {"twin-p1.log", "twin-p2.log"} & logs, sorted(logs)
    # The retired arm keeps the command line it ran with, for the report.
    (twin,) = [a for a in result.arms if a.name == "twin"]
    assert "--model" in twin.argv or "-m" in twin.argv


def test_an_arm_renewed_each_round_gets_a_fresh_process_while_the_others_keep_theirs(
    config: Config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The sweep keeps processes (and their prompt cache) but renews the spec types that
    learn across requests: only that arm restarts, and only its rewarm is stored."""
    monkeypatch.setenv("WATCHKEEPER_DATA_DIR", str(tmp_path / "data"))
    plan = BenchPlan(ARMS, tasks(2), rounds=3, warmup_rounds=1, warmup_tasks=1, concurrency=1)
    result = execute_bench(
        batched(config),
        replace(plan, restart_every=0, renew_each_round=frozenset({"twin"}), reuse_prompts=True),
        progress=lambda _: None,
        drift_only=True,
    )
    runs = stored_runs(config, result.campaign_id)
    assert {(r.arm, r.round) for r in runs if not r.is_warmup} == {
        (a, n) for a in ARMS for n in (1, 2, 3)
    }
    rewarm = sorted((r.arm, r.round) for r in runs if r.purpose == RunPurpose.REWARM)
    assert rewarm == [("twin", 2), ("twin", 3)]
    logs = {p.name for p in (tmp_path / "data").rglob("*.log")}
    assert {"twin.log", "twin-p1.log", "twin-p2.log", "smollm2-baseline.log"} <= logs
    assert "smollm2-baseline-p1.log" not in logs, sorted(logs)
