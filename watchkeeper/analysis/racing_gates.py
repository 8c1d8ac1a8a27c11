"""The racing rules that need no statistics: the ceiling before round 1 (a draft setting no
acceptance could make pay, at the calibrated costs) and the idle rule after a round (an arm
that drafted nothing). Kept apart from `analysis/racing.py`, whose rules judge CIs."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import replace

from watchkeeper.analysis.racing_types import Ceiling, Drop, RaceSettings, RaceState


def ceiling_drops(
    state: RaceState, ceilings: Sequence[Ceiling], settings: RaceSettings
) -> RaceState:
    """Before round 1: the draft settings no acceptance could bring within the threshold of
    the baseline stop before they are measured (recorded as dropped at round 0)."""
    cut = settings.ceiling_cut
    active = list(state.active)
    drops = list(state.drops)
    for c in ceilings:
        if c.arm in active and c.bound < cut:
            drops.append(
                Drop(
                    c.arm,
                    0,
                    "ceiling",
                    f"speed-up at perfect acceptance {c.bound:.2f}x, below {cut:.2f}x "
                    f"(1/(1 + {settings.min_effect:g}) less {settings.ceiling_slack:.0%} for the "
                    f"calibration): {c.how}",
                )
            )
            active.remove(c.arm)
    return replace(state, active=tuple(active), drops=tuple(drops))


def budget_drop(state: RaceState, arm: str, reason: str) -> RaceState:
    """Before round 1: an arm stops unmeasured because one round of every arm would not fit
    the budget (rule `budget`, recorded at round 0 like the ceiling's). Only arms the sweep
    named as trimmable reach here (`sweep_arms.ArmPlan.trim_order`): knob settings of a method
    that is raced at its default anyway."""
    if arm not in state.active:
        return state
    active = tuple(a for a in state.active if a != arm)
    return replace(state, active=active, drops=(*state.drops, Drop(arm, 0, "budget", reason)))


def idle_drops(
    state: RaceState,
    drafted: Mapping[str, tuple[int, int]],
    *,
    baseline: str,
    keep: Collection[str] = (),
) -> RaceState:
    """After a measured round: a speculative arm that drafted nothing in any of its requests
    stops (rule `idle`). Speculation never ran, so it measures the baseline's server again
    under another name: racing it on costs every later round its share and can only end in a
    tie (docs/measurements.md#figures-behind-the-code). `drafted` maps an
    arm to (clean requests, draft tokens) in the round; the baseline and ``keep`` (the A/A
    control, which never drafts by design) are never dropped."""
    active = list(state.active)
    drops = list(state.drops)
    for arm in list(active):
        requests, tokens = drafted.get(arm, (0, 0))
        if arm == baseline or arm in keep or requests == 0 or tokens > 0:
            continue
        drops.append(
            Drop(
                arm,
                state.rounds,
                "idle",
                f"drafted no token in {requests} request(s) of round {state.rounds}: "
                "speculation never ran, so it would measure the baseline again",
            )
        )
        active.remove(arm)
    return replace(state, active=tuple(active), drops=tuple(drops))
