"""An open category of the race (analysis/racing.py): no arm has qualified yet, so the
decision names what blocks the cheapest hopeful arm, the rounds that would settle it at the
current estimate, and the pick until then. Kept apart from the rule so that `racing.py`
holds the drop and win rules alone; pure, like the rule.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from watchkeeper.analysis.racing_types import CategoryDecision, RaceSettings, Table
from watchkeeper.analysis.stats import RatioCI

Block = tuple[str, str, str, RatioCI | None]
"""What keeps an arm from winning: (arm that could win, contender, comparator, the
contender / comparator CI)."""


def unresolved(
    table: Table,
    category: str,
    blocked: Sequence[Block],
    leader: str,
    active: Sequence[str],
    base: str,
    settings: RaceSettings,
    conf: float,
    est: Mapping[str, float],
) -> CategoryDecision:
    """Name what blocks the cheapest hopeful arm (the leader's own CI where nothing was even
    compared), and the rounds that would do."""
    w, contender, comparator, ci = blocked[0] if blocked else (leader, leader, leader, None)
    j = comparator if contender == w else contender
    needed = rounds_to_within(ci, settings.min_effect, table.rounds(w)) if ci else None
    if ci is None or not ci.has_ci:
        needed = settings.min_rounds
    provisional = provisional_pick(table, active, base, category, settings, conf, est)
    return CategoryDecision(
        category,
        "unresolved",
        None,
        leader,
        comparator if comparator != contender else None,
        ci,
        table.ratio(provisional, base, category, settings, 0.95),
        f"{w} not yet shown within {settings.min_effect:.0%} of {j} at {conf:.2%} "
        f"confidence (leader by estimate: {leader}); until then the pick is "
        f"{provisional}",
        needed,
        provisional,
        contender if comparator != contender else None,
    )


def rounds_to_within(ci: RatioCI, threshold: float, rounds: int) -> int | None:
    """Rounds after which `ci`'s upper end would reach 1 + threshold, if its half-width
    shrinks with the square root of the rounds and the estimate stays; None: never."""
    room = math.log1p(threshold) - math.log(ci.estimate)
    if room <= 0:
        return None
    half = math.log(ci.high / ci.estimate) if ci.has_ci else math.inf
    if math.isinf(half):
        return None
    return max(rounds + 1, math.ceil(rounds * (half / room) ** 2))


def provisional_pick(
    table: Table,
    active: Sequence[str],
    base: str,
    category: str,
    settings: RaceSettings,
    conf: float,
    est: Mapping[str, float],
) -> str:
    """An open category's pick: the best arm called faster than the baseline at the look's
    confidence, else the baseline (a sweep that cannot tell keeps what runs today)."""
    faster = [
        a
        for a in active
        if a != base
        and (ci := table.ratio(a, base, category, settings, conf)) is not None
        and ci.verdict == "faster"
    ]
    return max(faster, key=lambda a: est[a]) if faster else base
