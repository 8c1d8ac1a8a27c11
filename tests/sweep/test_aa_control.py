"""The race's A/A control (analysis/aa_control.py): a second baseline server raced in every
round, never dropped and never picked, whose reading withholds every pick where it is biased.

The racing tables are the seeded synthetic ones of test_racing.py; the bias is the shape the
7 Dec Qwen sweeps showed: the baseline's own server slower than an identical one, every arm's
ratio inflated by the same factor."""

from __future__ import annotations

import math

import numpy as np
from support.racekit import run_race

from watchkeeper.analysis import aa_control
from watchkeeper.analysis.racing import race_round, start
from watchkeeper.analysis.racing_gates import idle_drops
from watchkeeper.analysis.racing_types import Cell, RaceArm, RaceSettings, RaceState, Table
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.campaign.racer import race_arms
from watchkeeper.campaign.sweep_arms import plan_arms
from watchkeeper.config import ProfileConfig
from watchkeeper.server.spec_discovery import Method
from watchkeeper.simulation.aa_control import Shape, alarm_rate

CATEGORIES = ("prose", "code_edit")
CONTROL = "q-aa-control"
ARMS = (
    RaceArm("q-baseline", 0.0, baseline=True),
    RaceArm(CONTROL, 0.0, control=True),
    RaceArm("ngram", 1.0),
    RaceArm("draft16", 18.0),
)
SETTINGS = RaceSettings(resamples=300, max_rounds=5)


def cells(truth: dict[str, float], *, rounds: int, seed: int = 3, tasks: int = 4) -> list[Cell]:
    """tok/s per arm: the baseline 20 x a task effect, each arm its true ratio, a drift shared
    by the arm's half of a round and cell noise (test_racing.synthetic's shape)."""
    rng = np.random.default_rng(seed)
    out = []
    for r in range(1, rounds + 1):
        drift = {arm: rng.normal(0, 0.02) for arm in truth}
        for cat in CATEGORIES:
            for t in range(tasks):
                effect = math.exp(rng.normal(0, 0.2))
                for arm, ratio in truth.items():
                    log_tps = math.log(20 * effect * ratio) + drift[arm] + rng.normal(0, 0.02)
                    out.append(Cell(arm, f"{cat}-{t}", cat, r, math.exp(log_tps)))
    return out


def race(truth: dict[str, float]) -> RaceState:
    """The sweep's race loop (support.racekit) over every planned round of ``truth``."""
    return run_race(cells(truth, rounds=SETTINGS.max_rounds), ARMS, SETTINGS)


def test_the_control_is_never_dropped_by_the_early_rule_even_far_behind() -> None:
    # A control 40% slower (a broken twin) stays measured: the rule that drops a slow arm
    # would otherwise remove the evidence that the race is biased.
    truth = {"q-baseline": 1.0, CONTROL: 0.6, "ngram": 1.3, "draft16": 0.4}
    state = race_round(Table(cells(truth, rounds=1)), ARMS, start(ARMS), SETTINGS)
    dropped = {d.arm for d in state.drops}
    assert "draft16" in dropped  # the rule still works on real candidates
    assert CONTROL not in dropped and CONTROL in state.active


def test_the_control_never_wins_a_category_and_does_not_change_the_winner() -> None:
    truth = {"q-baseline": 1.0, CONTROL: 1.0, "ngram": 1.3, "draft16": 0.4}
    with_control = race(truth)
    assert all(d.winner != CONTROL for d in with_control.decisions)
    winners = {d.category: d.winner for d in with_control.decisions}
    assert winners == dict.fromkeys(CATEGORIES, "ngram")
    assert CONTROL in with_control.active


def test_the_idle_rule_keeps_the_control_that_never_drafts() -> None:
    state = start(ARMS)
    drafted = {CONTROL: (8, 0), "ngram": (8, 0), "draft16": (8, 40)}
    after = idle_drops(state, drafted, baseline="q-baseline", keep=[CONTROL])
    assert [d.arm for d in after.drops] == ["ngram"]
    assert CONTROL in after.active


def test_race_arms_marks_only_the_named_control() -> None:
    profiles = {
        "q-baseline": ProfileConfig(model="m"),
        CONTROL: ProfileConfig(model="m"),
        "q-sweep-ngram-mod": ProfileConfig(model="m", spec_type="ngram-mod"),
    }
    arms = race_arms(profiles)
    assert [(a.name, a.baseline, a.control) for a in arms] == [
        ("q-baseline", True, False),
        (CONTROL, False, True),
        ("q-sweep-ngram-mod", False, False),
    ]


def test_the_sweep_plan_races_the_control_right_after_the_baseline() -> None:
    methods = [Method("ngram-mod", True, "needs no model")]
    plan = plan_arms("q", ProfileConfig(model="m"), None, methods, {}, control=True)
    names = list(plan.profiles)
    assert names[:2] == ["q-baseline", "q-aa-control"]
    assert plan.profiles["q-aa-control"] == plan.profiles["q-baseline"]
    control = next(a for a in plan.arms if a.name == "q-aa-control")
    assert control.tier == 0 and "A/A control" in control.why
    # One arm under the cap still keeps it (tier 0 goes first), and a plan without a race
    # (the nightly's candidate list) has none.
    capped = plan_arms("q", ProfileConfig(model="m"), None, methods, {}, control=True, max_arms=2)
    assert list(capped.profiles) == ["q-baseline", "q-aa-control"]
    assert (
        "q-aa-control" not in plan_arms("q", ProfileConfig(model="m"), None, methods, {}).profiles
    )


def reading(estimate: float, low: float, high: float, verdict: str) -> aa_control.ControlReading:
    ci = RatioCI(estimate, low, high, 24, 12, 2, verdict=verdict)
    return aa_control.ControlReading(CONTROL, ci)


def test_a_control_beyond_the_threshold_reads_biased_either_way() -> None:
    fast = reading(1.12, 1.05, 1.19, "faster")
    slow = reading(0.9, 0.85, 0.96, "slower")
    quiet = reading(1.01, 0.97, 1.05, "no change")
    small = reading(1.02, 1.01, 1.03, "within threshold")
    thin = reading(1.2, 1.2, 1.2, "insufficient replicates")
    assert fast.biased and slow.biased
    assert not quiet.biased and not small.biased and not thin.biased
    assert "inside the 3% threshold" in small.line()
    assert "reads faster than the baseline" in fast.line()
    assert "reads slower than the baseline" in slow.line()
    assert "no bias detected" in quiet.line()
    assert "too few replicates" in thin.line()
    assert (
        fast.withheld_reason() == "a biased race (the A/A control reads 1.12x (95% CI 1.05-1.19))"
    )


def test_the_control_name_follows_the_baseline() -> None:
    assert aa_control.control_name("qwen-baseline") == "qwen-aa-control"
    assert aa_control.control_name("qwen-code-baseline") == "qwen-code-aa-control"
    assert aa_control.is_control("qwen-aa-control")
    assert not aa_control.is_control("qwen-baseline")


def test_the_rule_simulated_stays_quiet_on_twins_and_catches_a_ten_percent_handicap() -> None:
    # One round over 18 tasks, the default sweep's design, seeded (benchmarks/aa_control.py
    # has the full table): identical twins seldom read biased, a baseline server 10% slow
    # mostly does, with recurring stalls of the baseline too.
    plain, stalls = Shape(), Shape(stall_share=0.05)
    false, n = alarm_rate(sweeps=120, tasks=18, rounds=1, handicap=0.0, shape=plain, seed=5)
    assert n == 120 and false / n <= 0.10, false
    caught, n = alarm_rate(sweeps=120, tasks=18, rounds=1, handicap=0.10, shape=plain, seed=6)
    assert caught / n >= 0.75, caught
    caught, n = alarm_rate(sweeps=120, tasks=18, rounds=1, handicap=0.10, shape=stalls, seed=7)
    assert caught / n >= 0.6, caught
