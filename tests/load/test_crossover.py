"""The crossover of a load ladder: where the speed-up's CI stops lying above 1."""

from __future__ import annotations

import pytest

from watchkeeper.analysis.crossover import LevelRatios, crossover
from watchkeeper.analysis.load_compare import paired_reading
from watchkeeper.analysis.stats import RatioCI


def _level(level: float, est: float, low: float, high: float, verdict: str) -> LevelRatios:
    ci = RatioCI(est, low, high, 9, 3, 3, verdict=verdict)
    return LevelRatios(level, f"c{level:g}", ci, None, None)


def test_pays_until_the_ci_reaches_one_then_keeps_the_baseline() -> None:
    levels = [
        _level(1, 1.30, 1.20, 1.40, "faster"),
        _level(2, 1.15, 1.05, 1.26, "faster"),
        _level(4, 0.98, 0.90, 1.07, "inconclusive"),
        _level(8, 0.80, 0.72, 0.89, "slower"),
    ]
    c = crossover("smollm2-ngram", list(reversed(levels)))
    assert c.pays_up_to == 2 and c.first_not_paying == 4
    assert c.estimate_crosses is not None and 2 < c.estimate_crosses < 4
    assert c.low_crosses is not None and c.high_crosses is not None
    assert c.low_crosses < c.estimate_crosses < c.high_crosses
    assert 2 < c.low_crosses < 4 and 4 < c.high_crosses < 8
    assert "pays up to 2 concurrent requests" in c.sentence
    assert "from 4 on no clear difference" in c.sentence


def test_an_arm_that_never_pays_and_one_that_always_does() -> None:
    never = crossover("a", [_level(1, 1.01, 0.97, 1.05, "inconclusive")])
    assert never.pays_up_to is None and "does not pay even at 1" in never.sentence
    always = crossover(
        "b", [_level(1, 1.3, 1.2, 1.4, "faster"), _level(2, 1.2, 1.1, 1.3, "faster")]
    )
    assert always.pays_up_to == 2 and always.first_not_paying is None
    assert always.estimate_crosses is None
    assert "pays at every load measured" in always.sentence


def test_a_ci_above_one_within_the_threshold_does_not_pay() -> None:
    c = crossover("a", [_level(1, 1.02, 1.01, 1.03, "within threshold")])
    assert c.pays_up_to is None


def test_levels_without_a_ci_read_no_crossover() -> None:
    ci = RatioCI(1.2, 1.2, 1.2, 2, 2, 2)
    c = crossover("a", [LevelRatios(1, "c1", ci, None, None)])
    assert c.state(c.levels[0]) == "no CI" and "no level has a CI" in c.sentence
    assert c.to_json()["levels"][0]["speedup"]["verdict"] == "insufficient replicates"  # type: ignore[index]
    assert crossover("a", [_level(1, 0.9, 0.85, 0.95, "slower")]).estimate_crosses is None


@pytest.mark.parametrize("unit", ["requests/s"])
def test_the_sentence_names_the_unit(unit: str) -> None:
    c = crossover(
        "a", [_level(0.5, 1.3, 1.2, 1.4, "faster"), _level(2, 0.9, 0.8, 0.95, "slower")], unit
    )
    assert "pays up to 0.5 requests/s" in c.sentence and "keep the baseline" in c.sentence


def test_the_replayed_127_046_098_curve_is_named_non_monotone_not_a_crossing() -> None:
    # the 2026-11-26 n-gram ladder: reported as "crosses near 2.35"
    levels = [
        LevelRatios(
            1, "c1", RatioCI(1.197, 0.178, 8.066, 9, 3, 3, verdict="inconclusive"), None, None
        ),
        LevelRatios(
            2, "c2", RatioCI(1.272, 0.312, 5.179, 9, 3, 3, verdict="inconclusive"), None, None
        ),
        LevelRatios(
            4, "c4", RatioCI(0.457, 0.204, 1.022, 9, 3, 3, verdict="inconclusive"), None, None
        ),
        LevelRatios(
            8, "c8", RatioCI(0.984, 0.106, 9.141, 9, 3, 3, verdict="inconclusive"), None, None
        ),
    ]
    c = crossover("smollm2-ngram", levels)
    assert c.non_monotone and c.estimate_crosses is None
    assert "the curve is non-monotone (1.20 at 1, 1.27 at 2, 0.46 at 4, 0.98 at 8" in c.sentence
    assert "no single crossover is read" in c.sentence
    assert "2.35" not in c.sentence and "crosses" not in c.sentence
    assert c.to_json()["non_monotone"] is True
    # a curve that only falls is read as before
    falling = crossover(
        "a",
        [
            _level(1, 1.3, 1.2, 1.4, "faster"),
            _level(2, 1.2, 1.1, 1.3, "faster"),
            _level(4, 0.9, 0.8, 0.95, "slower"),
        ],
    )
    assert not falling.non_monotone and falling.estimate_crosses is not None


def test_the_first_unresolved_level_says_how_many_rounds_would_resolve_it() -> None:
    unresolved = RatioCI(1.08, 0.97, 1.2, 9, 3, 3, verdict="inconclusive", rounds_needed=11)
    c = crossover(
        "a", [_level(1, 1.3, 1.2, 1.4, "faster"), LevelRatios(2, "c2", unresolved, None, None)]
    )
    assert c.rounds_needed == 11
    assert (
        "at 2 concurrent requests (first unresolved) about 11 rounds would resolve it" in c.sentence
    )


def test_rounds_needed_on_a_round_paired_reading() -> None:
    # a ratio 1.10 with a round-to-round spread that 3 rounds cannot resolve
    cand = {0: 1 / 1.25, 1: 1 / 0.98, 2: 1 / 1.08}
    r = paired_reading("e2e_p90", cand, {0: 1.0, 1: 1.0, 2: 1.0})
    assert r is not None and r.state == "no clear difference"
    assert r.rounds_needed is not None and 4 <= r.rounds_needed <= 20
    within = paired_reading("e2e_p90", {0: 1.0, 1: 0.99, 2: 1.01}, {0: 1.0, 1: 1.0, 2: 1.0})
    assert within is not None and within.rounds_needed is None  # inside the 3% threshold


def test_an_oversaturated_baseline_keeps_its_level_out_of_the_crossover() -> None:
    paying = _level(1, 1.3, 1.2, 1.4, "faster")
    swamped = LevelRatios(
        2,
        "c2",
        RatioCI(0.5, 0.4, 0.6, 9, 3, 3, verdict="slower"),
        None,
        None,
        oversaturated=("base",),
        baseline="base",
    )
    c = crossover("a", [paying, swamped])
    assert c.pays_up_to == 1 and c.first_not_paying is None
    assert c.state(swamped) == "oversaturated"
    assert "left out, baseline oversaturated: 2 concurrent requests" in c.sentence


def test_a_curve_that_costs_at_every_level_is_read_as_costing_not_as_non_monotone() -> None:
    """The 2026-11-28 rate ladder's self-draft cost at all six rates, its estimates dipping
    and recovering on the way (a valley): every level resolved the same way, so the answer is
    "keep the baseline", not "no single crossover is read"."""
    levels = [
        _level(1, 0.45, 0.30, 0.60, "slower"),
        _level(2, 0.23, 0.17, 0.30, "slower"),
        _level(4, 0.40, 0.28, 0.55, "slower"),
        _level(8, 0.45, 0.30, 0.66, "slower"),
    ]
    c = crossover("smollm2-selfdraft", levels)
    assert not c.non_monotone
    assert c.sentence.startswith("smollm2-selfdraft does not pay even at 1 concurrent requests")
    assert "keep the baseline" in c.sentence and "non-monotone" not in c.sentence
    # ...while the same valley with an unresolved level is still named
    mixed = [*levels[:3], _level(8, 0.95, 0.70, 1.30, "inconclusive")]
    assert crossover("smollm2-selfdraft", mixed).non_monotone
