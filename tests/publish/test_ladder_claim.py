"""The unit's header says the pick's speed-up at 1 and at its slots once the served ladder
ran (publish/ladder_claim.py), and says plainly where it was not shown to pay; without the
ladder it keeps the sweep's own load and where to measure another."""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import pytest

from watchkeeper.config.service import ServiceConfig
from watchkeeper.publish.deliverable import read_record
from watchkeeper.publish.ladder_claim import LADDER_KEY, LevelClaim, ServedLadder, served_ladder
from watchkeeper.publish.systemd import render_unit
from watchkeeper.sets.served_ladder import served_levels

ROOT = Path(__file__).resolve().parents[2]
RECORD = ROOT / "reports" / "code-edit" / "speculative_recommendation.json"


def _claim(
    level: int, estimate: float, low: float, high: float, verdict: str, slots: int = 4
) -> LevelClaim:
    return LevelClaim(
        level, 10 + level, estimate, low, high, verdict, 24, 1.2, 1.1, 1.3, "pays", slots=slots
    )


def _ladder(*claims: LevelClaim) -> ServedLadder:
    return ServedLadder(
        "pick", "base", 4, 4096, 0, "served-ladder/load_ladder.md", 3, 64, tuple(claims), 600.0
    )


def _header(ladder: ServedLadder | None) -> str:
    record = read_record(RECORD)
    extra = {k: v for k, v in record.extra.items() if k != LADDER_KEY}
    if ladder is not None:
        extra[LADDER_KEY] = ladder.to_json()
    text = render_unit(replace(record, extra=extra), ServiceConfig())
    comments = [line[2:] for line in text.splitlines() if line.startswith("# ")]
    return " ".join(comments)


def test_the_header_states_the_speed_up_at_one_and_at_the_units_slots() -> None:
    header = _header(
        _ladder(
            _claim(1, 1.90, 1.70, 2.10, "faster"),
            _claim(2, 1.50, 1.30, 1.70, "faster"),
            _claim(4, 1.20, 1.08, 1.33, "faster"),
        )
    )
    assert "Measured as this unit serves it (4 slots, 4096 tokens a slot" in header
    assert "at one request at a time 1.90x (95% CI 1.70-2.10, faster)" in header
    assert "at 4 concurrent requests (its slots) 1.20x (95% CI 1.08-1.33, faster)" in header
    assert "shown to pay at every load this unit serves (1 to 4)" in header
    assert "Holds for the load it was measured under" not in header
    assert "1.50x" not in header  # the middle rung lives in the ladder report


def test_a_pick_that_stops_paying_before_its_slots_is_told_to_serve_fewer() -> None:
    header = _header(
        _ladder(
            _claim(1, 1.90, 1.70, 2.10, "faster"),
            _claim(2, 1.30, 1.10, 1.50, "faster"),
            _claim(4, 1.02, 0.90, 1.15, "inconclusive"),
        )
    )
    assert "shown to pay up to 2 concurrent requests, not at 4: serve 2 slot(s)" in header
    assert "1.02x (95% CI 0.90-1.15, inconclusive)" in header


def test_a_pick_that_never_pays_as_served_says_keep_the_baseline() -> None:
    header = _header(
        _ladder(_claim(1, 0.98, 0.90, 1.07, "inconclusive"), _claim(4, 0.9, 0.8, 1.0, "slower"))
    )
    assert "not shown to pay even one request at a time as served: keep the baseline" in header


def test_rungs_run_on_fewer_slots_than_the_unit_are_not_called_as_served() -> None:
    """A ladder kept before rungs recorded their slots ran each on as many slots as requests
    (the load ladder's own rule): the header says so instead of 'as this unit serves it'."""
    header = _header(
        _ladder(
            _claim(1, 1.90, 1.70, 2.10, "faster", slots=0),
            _claim(2, 1.50, 1.30, 1.70, "faster", slots=0),
            _claim(4, 1.20, 1.08, 1.33, "faster", slots=0),
        )
    )
    assert "Measured as this unit serves it" not in header
    assert "not every load on its slots (its 16384 tokens of context over 4 slots" in header
    assert "at one request at a time (on a server of 1 slot) 1.90x" in header
    assert "at 4 concurrent requests (its slots) 1.20x" in header


def test_without_a_ladder_the_sweeps_own_load_is_named() -> None:
    header = _header(None)
    assert "Holds for the load it was measured under: one request at a time" in header
    # The committed code-edit unit serves 4 slots: its header names the command for its load.
    assert (
        "This unit serves 4 requests at once, a load its speed-up was not measured at: "
        "`watchkeeper served-ladder --recommendation "
        "reports/code-edit/speculative_recommendation.json` measures it at 1, 2, ... 4" in header
    )


def test_the_ladder_round_trips_through_the_record() -> None:
    ladder = _ladder(_claim(1, 1.9, 1.7, 2.1, "faster"), _claim(4, 1.2, 1.1, 1.3, "faster"))
    again = served_ladder({LADDER_KEY: ladder.to_json()})
    assert again == ladder and again.pays_up_to == 4
    assert served_ladder({}) is None
    nan = _claim(1, math.nan, math.nan, math.nan, "not measured")
    assert not nan.pays and _ladder(nan).pays_up_to == 0


@pytest.mark.parametrize(
    ("slots", "levels"), [(1, [1]), (2, [1, 2]), (4, [1, 2, 4]), (6, [1, 2, 4, 6])]
)
def test_the_ladder_climbs_to_the_units_slots(slots: int, levels: list[int]) -> None:
    assert served_levels(slots) == levels


def test_a_ladder_run_on_another_host_than_the_sweeps_says_so() -> None:
    """The code-edit pick's ladder (Intel Xeon) ran a session after its sweep (AMD EPYC):
    the header must not let the ladder's figures pass for the sweep host's."""
    rungs = (_claim(1, 2.7, 2.4, 3.1, "faster"), _claim(4, 1.5, 1.1, 2.0, "faster"))
    sweep_host = read_record(RECORD).hardware
    other = replace(_ladder(*rungs), hardware="2 CPU cores (Intel(R) Xeon(R) Processor), no GPU")
    header = _header(other)
    assert (
        "The ladder ran on another host than the sweep (2 CPU cores (Intel(R) Xeon(R) "
        f"Processor), no GPU; the sweep: {sweep_host})" in header
    )
    same = _header(replace(_ladder(*rungs), hardware=sweep_host))
    unknown = _header(_ladder(*rungs))
    assert "another host" not in same and "another host" not in unknown
    assert served_ladder({LADDER_KEY: other.to_json()}) == other
