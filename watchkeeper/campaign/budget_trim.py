"""Before round 1, a sweep whose one round of every arm cannot fit its budget drops arms
instead of passing it: the default Qwen sweep (15 arms, two CPU cores) planned 5.9 min over
and ran 43 min against its 40 on 7 Dec; with the A/A control it races 16. Which arms may go
is the arm plan's (`sweep_arms.ArmPlan.trim_order`: the tier-3 knob settings, last planned
first): each tunes a method raced at its default anyway, so the request's draft lengths, every
method, the chain and the A/A control always run. A dropped arm is recorded like the
ceiling's, unmeasured before round 1 (rule `budget`), so the report names it."""

from __future__ import annotations

from collections.abc import Sequence

from watchkeeper.analysis.racing_gates import budget_drop
from watchkeeper.campaign.racer import Racer
from watchkeeper.load.records import RunResult, Task


def plan_active(
    racer: Racer,
    runs: Sequence[RunResult],
    tasks: int,
    strata: Sequence[tuple[str, str]] = (),
    task_list: Sequence[Task] = (),
) -> Sequence[str]:
    """`Racer.plan_rounds`, and where not one round fits the budget (`Plan.rounds` 0, on a
    priced round), the racer's `trim` arms dropped one at a time and the plan made again,
    until one round fits or none is left to drop. Returns the arms round 1 measures. Only the
    last plan is printed, after the drops, so the console reads as one decision."""
    say = racer.progress
    racer.progress = lambda _line: None
    try:
        plan = racer.plan_rounds(runs, tasks, strata, task_list)
        for arm in racer.trim:
            if plan.rounds > 0 or racer.price is None:
                break
            why = (
                f"one round of every arm does not fit the budget ({plan.why}); a knob setting "
                "of a method raced at its default goes first"
            )
            racer.state = budget_drop(racer.state, arm, why)
            plan = racer.plan_rounds(runs, tasks, strata, task_list)
    finally:
        racer.progress = say
    for d in racer.state.drops:
        if d.rule == "budget":
            say(f"race: dropped {d.arm} before round 1 (budget)")
    if racer.price is not None:
        say(f"race price: each task from its size; {racer.price.how}")
    say(f"race plan: {racer.plan_text}")
    return racer.state.active
