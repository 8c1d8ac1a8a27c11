"""The acceptance alarms (checks/acceptance_alarm.py): the rates the simulation measured
(benchmarks/acceptance_alarm.py, 1000 replicates a cell: A/A 0-0.2% collapses, a drafter at a
quarter of its acceptance caught 97.7-100% on series at 0.75 and 0.95, copy tasks never read
as loops) held on fewer seeds, and the store and the findings on SQLite and Postgres."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from support.nights import HOST, MODEL, PROFILE, START, build

from watchkeeper.campaign.acceptance_findings import judge_campaign, record_acceptance_alarms
from watchkeeper.checks.acceptance_alarm import (
    RequestAcceptance,
    judge_collapse,
    judge_loop,
    run_acceptance,
)
from watchkeeper.checks.acceptance_sim import SeriesShape, simulate_run
from watchkeeper.load.records import RequestSample, RunResult
from watchkeeper.load.repetition import repeat_share
from watchkeeper.store.db import open_database
from watchkeeper.store.findings import FindingStore
from watchkeeper.store.repository import Repository

SEEDS = 200
NOW = datetime(2026, 12, 6, 6, 0, tzinfo=UTC)

PROSE = (
    "The river bends twice before it reaches the town, and the old mill stands where the "
    "second bend slows the water. Children used to fish from its wheel in summer; now the "
    "wheel is fenced off and the town council argues every spring about whether to restore "
    "it or take it down before it falls into the current."
)
LOOP = "I am sorry, but I cannot help with that request. " * 12


def _collapses(shape: SeriesShape, scale: float, history: int = 5, seed: int = 1) -> int:
    rng = np.random.default_rng(seed)
    fired = 0
    for _ in range(SEEDS):
        past = [run_acceptance("h", simulate_run(rng, shape)) for _ in range(history)]
        fired += judge_collapse(
            past, run_acceptance("r", simulate_run(rng, shape, scale=scale))
        ).fired
    return fired


def _loops(shape: SeriesShape, seed: int = 1, **kw: float | bool) -> int:
    rng = np.random.default_rng(seed)
    return sum(
        judge_loop(run_acceptance("r", simulate_run(rng, shape, **kw))).fired  # type: ignore[arg-type]
        for _ in range(SEEDS)
    )


def test_the_repetition_share_reads_a_loop_high_and_prose_low() -> None:
    loop, prose = repeat_share(LOOP), repeat_share(PROSE)
    assert loop is not None and loop > 0.8
    assert prose is not None and prose < 0.05
    assert repeat_share("too short to say") is None


def test_an_aa_series_never_reads_as_a_collapse() -> None:
    for shape in (SeriesShape(0.75, 0.06, requests=12), SeriesShape(0.3, 0.06, requests=12)):
        assert _collapses(shape, 1.0) <= 2, shape


def test_a_drafter_that_stopped_fitting_reads_as_a_collapse() -> None:
    assert _collapses(SeriesShape(0.75, 0.03, requests=12), 0.25) == SEEDS
    assert _collapses(SeriesShape(0.95, 0.06, requests=12), 0.25) == SEEDS
    assert _collapses(SeriesShape(0.75, 0.06, requests=12), 0.25) >= 0.93 * SEEDS


def test_a_thirty_percent_fall_is_left_to_the_acceptance_series() -> None:
    assert _collapses(SeriesShape(0.75, 0.06, requests=12), 0.7) <= 0.03 * SEEDS


def test_too_short_a_history_is_not_judged() -> None:
    rng = np.random.default_rng(0)
    past = [run_acceptance("h", simulate_run(rng, SeriesShape())) for _ in range(2)]
    now = run_acceptance("r", simulate_run(rng, SeriesShape(), scale=0.1))
    verdict = judge_collapse(past, now)
    assert verdict.verdict == "not judged" and not verdict.fired


def test_a_copy_task_near_one_is_not_a_loop_and_looping_requests_are() -> None:
    shape = SeriesShape(0.95, requests=12)
    assert _loops(shape) == 0
    assert _loops(shape, copy_task=True) == 0
    assert _loops(shape, loop_share=1.0) == SEEDS
    assert _loops(shape, loop_share=0.3) >= 0.6 * SEEDS


def test_acceptance_near_one_alone_or_repetition_alone_does_not_loop() -> None:
    high_plain = [RequestAcceptance(100, 99, 0.02)] * 10
    low_repeating = [RequestAcceptance(100, 40, 0.9)] * 10
    assert not judge_loop(run_acceptance("a", high_plain)).fired
    assert not judge_loop(run_acceptance("b", low_repeating)).fired
    assert judge_loop(run_acceptance("c", [RequestAcceptance(100, 99, 0.9)] * 10)).fired


def _campaign(repo: Repository, night: int, rate: float, text: str, kind: str = "nightly") -> int:
    when = START + timedelta(days=night)
    host = repo.ensure_host(HOST)
    model = repo.ensure_model(MODEL)
    profile = repo.ensure_profile("self-draft", PROFILE, target_model_id=model, draft_model_id=None)
    campaign = repo.create_campaign(
        kind=kind, host_id=host, build_id=repo.ensure_build(build("b1")), params={}
    )
    samples = tuple(
        RequestSample(
            task_id=f"t{i}",
            category="prose" if i % 2 else "code",
            seq=i,
            started_at=when + timedelta(seconds=i),
            completion_tokens=100,
            draft_n=80,
            draft_n_accepted=round(80 * rate) - (i % 3),
            output_text=text,
        )
        for i in range(12)
    )
    run = RunResult(
        "self-draft",
        "self-draft",
        1,
        False,
        1,
        when,
        when + timedelta(minutes=1),
        samples,
        ("llama-server",),
    )
    repo.save_run(campaign, profile, run)
    repo.finish_campaign(campaign, status="completed")
    return campaign


def test_the_store_keeps_each_requests_counts_and_repetition_and_files_both_alarms(
    db_url: str,
) -> None:
    with open_database(db_url) as db:
        repo = Repository(db)
        for night in range(5):
            aa = _campaign(repo, night, 0.8, PROSE)
        assert not any(
            a.collapse.fired or a.loop.fired for a in judge_campaign(db, aa, kinds=("nightly",))
        )
        assert record_acceptance_alarms(db, aa, kinds=("nightly",), source="nightly", now=NOW) == []
        collapsed = _campaign(repo, 5, 0.1, PROSE)
        looping = _campaign(repo, 6, 1.0, LOOP)
        (arm,) = judge_campaign(db, collapsed, kinds=("nightly",))
        assert arm.requests == 12 and arm.drafted == 960
        assert arm.collapse.verdict == "collapse" and not arm.loop.fired
        ids = record_acceptance_alarms(db, collapsed, kinds=("nightly",), source="nightly", now=NOW)
        ids += record_acceptance_alarms(db, looping, kinds=("nightly",), source="nightly", now=NOW)
        kinds = [FindingStore(db).get(i).kind for i in ids]  # type: ignore[union-attr]
        assert kinds == ["acceptance_collapse", "acceptance_loop"]
        # A soak's history is soaks only: the nightly's runs never judge it.
        soak = _campaign(repo, 7, 0.1, PROSE, kind="soak")
        (arm,) = judge_campaign(db, soak, kinds=("soak",))
        assert arm.collapse.verdict == "not judged"
