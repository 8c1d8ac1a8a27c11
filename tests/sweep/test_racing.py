"""The racing rule on seeded synthetic tables: who is dropped when, who wins each category, and
what stays open."""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np
import pytest
from support import racekit

from watchkeeper.analysis.racing import decide, early_error, keep_going, race_round, simulate, start
from watchkeeper.analysis.racing_types import (
    Cell,
    RaceArm,
    RaceSettings,
    RaceState,
    Table,
    arm_cost,
)

CATEGORIES = ("prose", "tool_call", "code_edit")
ARMS = (
    RaceArm("base", 0.0, baseline=True),
    RaceArm("ngram", 1.0),
    RaceArm("draft4", 6.0),
    RaceArm("draft16", 18.0),
)
SETTINGS = RaceSettings(resamples=300, max_rounds=6)


def synthetic(
    truth: dict[str, dict[str, float]],
    *,
    rounds: int,
    tasks: int = 4,
    seed: int = 1,
    cell_sd: float = 0.02,
    round_sd: float = 0.02,
) -> list[Cell]:
    """tok/s cells: baseline 20 tok/s x task effect; each arm its true ratio per category,
    a drift shared by its half of each round and its own cell noise."""
    rng = np.random.default_rng(seed)
    cells = []
    for r in range(1, rounds + 1):
        drift = {arm: rng.normal(0, round_sd) for arm in truth}
        for cat in CATEGORIES:
            for t in range(tasks):
                task_effect = math.exp(rng.normal(0, 0.2))
                for arm, by_cat in truth.items():
                    log_tps = math.log(20 * task_effect * by_cat.get(cat, 1.0))
                    log_tps += drift[arm] + rng.normal(0, cell_sd)
                    cells.append(Cell(arm, f"{cat}-{t}", cat, r, math.exp(log_tps)))
    return cells


TRUTH = {
    "base": {},
    "ngram": {"code_edit": 1.4, "prose": 0.98, "tool_call": 0.99},
    "draft4": {"prose": 0.85, "tool_call": 0.8, "code_edit": 0.9},
    "draft16": {"prose": 0.4, "tool_call": 0.35, "code_edit": 0.45},
}


def run_race(cells: list[Cell], settings: RaceSettings = SETTINGS) -> RaceState:
    """The sweep's race loop (support.racekit) over these tests' four arms."""
    return racekit.run_race(cells, ARMS, settings)


def test_an_arm_far_slower_on_every_task_is_dropped_after_the_first_round() -> None:
    state = race_round(Table(synthetic(TRUTH, rounds=1)), ARMS, start(ARMS), SETTINGS)
    dropped = {d.arm: d for d in state.drops}
    assert set(dropped) == {"draft16"}
    assert dropped["draft16"].round == 1 and dropped["draft16"].rule == "early"
    assert dropped["draft16"].error is not None and dropped["draft16"].error < 1e-3
    assert "every task" in dropped["draft16"].reason
    assert state.active == ("base", "ngram", "draft4")


def test_a_moderately_slower_arm_waits_for_a_ci_that_accounts_for_every_look() -> None:
    cells = synthetic(TRUTH, rounds=6)
    state = run_race(cells)
    by_arm = {d.arm: d for d in state.drops}
    assert by_arm["draft4"].rule == "ci"
    assert by_arm["draft4"].round >= SETTINGS.min_rounds
    assert f"{SETTINGS.look_confidence:.2%}" in by_arm["draft4"].reason
    assert "ngram" not in by_arm  # it leads code_edit: never dropped


def test_each_category_gets_its_own_winner_and_ties_go_to_the_cheaper_arm() -> None:
    truth = {
        "base": {},
        "ngram": {"code_edit": 1.4, "prose": 1.01, "tool_call": 0.99},
        "draft4": {"code_edit": 1.41, "prose": 0.8, "tool_call": 0.8},
    }
    cells = synthetic(truth, rounds=6, cell_sd=0.01, round_sd=0.005)
    decisions = decide(Table(cells), ARMS[:3], ["base", "ngram", "draft4"], SETTINGS)
    picks = {d.category: d for d in decisions}
    assert all(d.status == "decided" for d in decisions), [d.reason for d in decisions]
    # code_edit: draft4 leads by a hair; the cheaper n-gram arm is within the threshold.
    assert picks["code_edit"].leader == "draft4" and picks["code_edit"].winner == "ngram"
    assert "the tie goes to the cheaper ngram" in picks["code_edit"].reason
    assert picks["code_edit"].versus_baseline is not None
    assert picks["code_edit"].versus_baseline.low > 1.3
    # prose: the n-gram arm leads by 1%: the baseline, cheapest, keeps it.
    assert picks["prose"].leader == "ngram" and picks["prose"].winner == "base"
    assert picks["tool_call"].winner == "base"


def test_identical_arms_leave_the_baseline_as_every_pick() -> None:
    twins: dict[str, dict[str, float]] = {"base": {}, "ngram": {}, "draft4": {}, "draft16": {}}
    for seed in range(4):
        state = run_race(synthetic(twins, rounds=6, seed=seed))
        assert {d.pick for d in state.decisions if d.status == "decided"} <= {"base"}
        assert not [d for d in state.drops if d.rule == "early"]


def test_an_unresolved_category_says_which_arms_and_how_many_rounds() -> None:
    truth = {"base": {}, "ngram": {"code_edit": 1.05}}
    arms = ARMS[:2]
    cells = synthetic(truth, rounds=3, cell_sd=0.08, round_sd=0.06, seed=3)
    decisions = decide(Table(cells), arms, ["base", "ngram"], SETTINGS)
    open_ = [d for d in decisions if d.status == "unresolved"]
    assert open_
    for d in open_:
        assert d.winner is None and d.rounds_needed is not None and d.rounds_needed > 3
        assert "not yet shown within 3%" in d.reason and d.provisional == "base"


def test_no_ci_before_the_third_round_so_nothing_is_decided_by_it() -> None:
    state = race_round(Table(synthetic(TRUTH, rounds=1)), ARMS, start(ARMS), SETTINGS)
    assert not state.decided
    assert all(d.rounds_needed == SETTINGS.min_rounds for d in state.unresolved())


def test_the_early_rule_error_grows_with_the_spread_and_shrinks_with_tasks() -> None:
    tight = early_error([-0.7, -0.72, -0.69], 3, SETTINGS)
    loose = early_error([-0.2, -0.9, -1.4], 3, SETTINGS)
    assert tight < loose < 1.0
    assert early_error([-0.2, -0.9, -1.4], 8, SETTINGS) < loose


def test_the_sweep_stops_when_decided_out_of_rounds_or_budget() -> None:
    alone = race_round(
        Table(synthetic({"base": {}, "draft16": TRUTH["draft16"]}, rounds=1)),
        (ARMS[0], ARMS[3]),
        start((ARMS[0], ARMS[3])),
        SETTINGS,
    )
    assert alone.active == ("base",) and alone.decided
    go, why = keep_going(alone, SETTINGS, elapsed_s=0, budget_s=60, next_round_s=1)
    assert not go and "decided after round 1" in why
    state = run_race(synthetic(TRUTH, rounds=6))
    assert keep_going(state, SETTINGS, elapsed_s=0, budget_s=1e9, next_round_s=1) == (
        False,
        "planned rounds (6) done",
    )
    fresh = start(ARMS)
    go, why = keep_going(
        fresh, SETTINGS, elapsed_s=2000, budget_s=2400, next_round_s=300, reserve_s=200
    )
    assert not go and why.startswith("budget")
    assert keep_going(fresh, SETTINGS, elapsed_s=0, budget_s=2400, next_round_s=300)[0]


def test_a_budget_stop_before_the_first_ci_says_what_budget_would_reach_it() -> None:
    """The default Qwen sweep of 2026-11-27 stopped after round 2 of the 3 a CI needs: 22.3
    min spent, a round ~7.8 min, the probes ~10.8 min, 40 min budget. Its reason says that no
    arm has a CI and that about 41 min (`--budget 45`) would have given them one."""
    two = run_race(synthetic(TRUTH, rounds=2), replace(SETTINGS, max_rounds=2))
    assert two.rounds == 2 and not two.decided
    go, why = keep_going(
        two, SETTINGS, elapsed_s=22.3 * 60, budget_s=2400, next_round_s=7.8 * 60,
        reserve_s=10.8 * 60,
    )  # fmt: skip
    assert not go and "1 round(s) short of the 3 a CI needs: no arm has one" in why, why
    assert "about 41 min, `--budget 45`" in why, why
    three = run_race(synthetic(TRUTH, rounds=3), replace(SETTINGS, max_rounds=3))
    assert three.rounds == 3
    go, why = keep_going(
        three, SETTINGS, elapsed_s=2300, budget_s=2400, next_round_s=300, reserve_s=200
    )
    assert not go and "a CI needs" not in why, why


def test_a_replay_uses_fewer_requests_than_the_full_table() -> None:
    cells = synthetic(TRUTH, rounds=6)
    sim = simulate(cells, ARMS, [1, 2, 3, 4, 5, 6], SETTINGS)
    assert sim.requests < len(cells)
    assert {d.category: d.pick for d in sim.state.decisions}["code_edit"] == "ngram"


@pytest.mark.parametrize(
    ("spec", "n", "speculative", "cost"),
    [(None, None, False, 0.0), ("ngram-mod", None, True, 1.0), ("draft-simple", 8, True, 10.0)],
)
def test_costs_order_baseline_then_ngram_then_drafts_by_length(
    spec: str | None, n: int | None, speculative: bool, cost: float
) -> None:
    assert arm_cost(spec, n, speculative) == cost


def test_an_open_comparison_names_its_two_arms_in_the_direction_of_its_ci() -> None:
    """One round: ngram leads code edits by 1.4x but has no CI yet. The pick stays the
    baseline; the open comparison is ngram / base (not base / base, as the report once read)."""
    truth = {"base": {}, "ngram": {"code_edit": 1.4}}
    cells = synthetic(truth, rounds=1)
    (edit,) = [
        d for d in decide(Table(cells), ARMS[:2], ["base", "ngram"], SETTINGS)
        if d.category == "code_edit"
    ]  # fmt: skip
    assert edit.status == "unresolved" and edit.pick == "base"
    assert (edit.contender, edit.runner_up) == ("ngram", "base")
    assert edit.versus_runner_up is not None and edit.versus_runner_up.estimate > 1.3
