"""The race loop as the sweep runs it, over a seeded table built in advance (no server): what
the racing and A/A-control tests replay. One loop, so both read the same rule of which cells
a round sees."""

from __future__ import annotations

from collections.abc import Sequence

from watchkeeper.analysis.racing import race_round, start
from watchkeeper.analysis.racing_types import Cell, RaceArm, RaceSettings, RaceState, Table


def run_race(cells: Sequence[Cell], arms: Sequence[RaceArm], settings: RaceSettings) -> RaceState:
    """Race ``arms`` over ``cells`` round by round, up to ``settings.max_rounds``: round k sees
    every earlier round's cells and round k's of the arms still active (a dropped arm is not
    measured again), and the race stops once every category is decided."""
    state = start(arms)
    for k in range(1, settings.max_rounds + 1):
        seen = [c for c in cells if c.round < k or (c.round == k and c.arm in state.active)]
        state = race_round(Table(seen), arms, state, settings)
        if state.decided:
            break
    return state
