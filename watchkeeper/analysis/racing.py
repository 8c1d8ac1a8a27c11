"""The racing rule of `watchkeeper sweep`: which arms stop being measured, and which arm wins
each category. Pure: cells (arm, task, category, round, tok/s) in, decisions out.

A sweep of every candidate over every round costs hours on a small host; most of it goes to arms
that lost clearly after the first round. Racing (Maron & Moore's Hoeffding races, Birattari's
F-Race) stops measuring those. What it must not do is stop an arm on noise, and it looks at the
data after every round, so each look needs a CI that stays valid under repeated looks:

- **Repeated looks: a Bonferroni split.** Paired CIs exist from `min_rounds` rounds on (rounds
  are the replicates; see analysis/stats.py). The sweep plans at most `max_rounds` rounds, so
  at most K = max_rounds - min_rounds + 1 looks; each look uses confidence 1 - alpha / K. The
  chance that any look drops a given arm wrongly (or decides a category wrongly) is then at
  most alpha over the whole sweep, whatever the stopping. Simpler than alpha spending and, for
  K <= 4, barely wider (z at 0.05/4 two-sided: 2.50 against 1.96).
- **Drop rule (from `min_rounds` on).** An arm stops when, in every category, the upper end
  of its CI against that category's leader lies below 1 / (1 + min_effect) (it cannot even tie
  the leader within the threshold) and its CI against the baseline does not lie above 1.
- **Ceiling rule (before round 1).** A draft setting pays for its draft model on every step;
  with the draft and verification costs the bench calibrates before round 1, its speed-up if
  *every* drafted token were accepted is (n + 1) / (n c + V(n + 1)). Where that ceiling,
  raised by `ceiling_slack` for the calibration's own error, is still below 1 / (1 +
  min_effect), no acceptance can make the setting tie the baseline: it is dropped unmeasured.
  Physical, not statistical: it is wrong only if the calibration overstates the costs by more
  than the slack. On two CPU cores the Qwen 0.5B draft costs 0.66 of a 1.5B step: n 4 and
  n 8 peak at 0.79x and 0.77x and are dropped; n 16 (0.92x) is measured (docs/sweep.md).
- **Early rule (before `min_rounds`).** No CI exists yet, but an arm slower than the baseline
  by a wide margin (below 1 / (1 + early_margin)) on every task of every round so far is
  already decided: on this host drafts decode at about half the baseline's speed. Its error
  rate is the chance that an arm truly within the threshold of the baseline in some category
  lands below the cut on all of that category's tasks at once; `early_error` computes it from
  the arm's own spread across tasks and the round-to-round drift measured here (sd 6%), and
  the report prints it beside every early drop. benchmarks/racing.py measures it on real
  tables too.
- **Winners.** In a category, the leader is the active arm with the highest paired ratio to
  the baseline. Every other active arm is compared with the leader at the look's confidence:
  `slower` (CI excludes 1, estimate beyond the threshold) is beaten; `no change` or `within
  threshold` is a tie; anything else leaves the category unresolved, with the rounds that
  would settle it. A decided category goes to the cheapest arm among the leader and its ties
  (baseline first, then n-gram, then draft lengths by size).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np
from scipy import stats as scipy_stats

from watchkeeper.analysis.racing_open import Block, unresolved
from watchkeeper.analysis.racing_types import (
    CategoryDecision,
    Cell,
    Drop,
    RaceArm,
    RaceSettings,
    RaceState,
    Table,
)
from watchkeeper.analysis.stats import RatioCI, paired_speedup

MIN_CELL_SD = 0.05
"""Floor under the cell spread the early rule's error is computed with (one round of few tasks
can look tighter than the host is)."""


def _baseline(arms: Sequence[RaceArm]) -> RaceArm:
    return next(a for a in arms if a.baseline)


def _estimate(table: Table, arm: str, base: str, category: str, s: RaceSettings) -> float:
    """The point estimate alone (no bootstrap): what ranks the arms."""
    return point_estimate(table, arm, base, category)


def point_estimate(table: Table, arm: str, base: str, category: str | None) -> float:
    """An arm's paired speed-up over the baseline without its CI (no bootstrap: cheap enough
    for every arm and category after every round), over every category where None."""
    if arm == base:
        return 1.0
    ci = paired_speedup(table.pairs(arm, base, category), min_rounds=1 << 30)
    return ci.estimate if ci is not None else 0.0


def early_error(
    cells_log: Sequence[float], n_tasks: int, settings: RaceSettings, *, grid: int = 401
) -> float:
    """P(every one of `n_tasks` log ratios falls below the early cut | the arm is truly at
    1 / (1 + min_effect) of the baseline): a drop that may cost a category winner.

    Each task's log ratio is the truth plus a drift shared by the round (sd
    `round_drift_sd`) plus the cell's own noise (sd: the arm's spread across its tasks,
    task effects included, so it errs high; at least `MIN_CELL_SD`)."""
    arr = np.asarray(cells_log, dtype=float)
    sd_cell = max(float(arr.std(ddof=1)) if arr.size > 1 else 0.0, MIN_CELL_SD)
    gap = -math.log1p(settings.early_margin) + math.log1p(settings.min_effect)
    sd_r = settings.round_drift_sd
    r = np.linspace(-8 * sd_r, 8 * sd_r, grid)
    weights = scipy_stats.norm.pdf(r, scale=sd_r)
    weights /= weights.sum()
    per_task = scipy_stats.norm.cdf((gap - r) / sd_cell)
    return float(np.sum(weights * per_task ** max(n_tasks, 1)))


def _early_drop(
    table: Table, arm: str, base: str, round_index: int, settings: RaceSettings
) -> Drop | None:
    cut = 1.0 / (1.0 + settings.early_margin)
    pairs = table.pairs(arm, base, None)
    if not pairs:
        return None
    ratios = [p.candidate / p.baseline for p in pairs]
    if max(ratios) >= cut:
        return None
    per_cat: dict[str, int] = defaultdict(int)
    for c in table.by_arm[arm].values():
        if c.round == 1:
            per_cat[c.category] += 1
    n_min = min(per_cat.values()) if per_cat else 1
    first = [math.log(p.candidate / p.baseline) for p in pairs if p.round == 1]
    err = early_error(first, n_min, settings)
    return Drop(
        arm,
        round_index,
        "early",
        f"slower than the baseline on every task of rounds 1-{round_index} "
        f"(fastest task {max(ratios):.2f}x, cut {cut:.2f}x; {len(pairs)} pairs); "
        f"chance this drop is wrong <= {err:.1e}",
        err,
    )


def _ci_drop(
    table: Table,
    arm: str,
    base: str,
    leaders: Mapping[str, str],
    round_index: int,
    settings: RaceSettings,
) -> Drop | None:
    conf = settings.look_confidence
    bar = 1.0 / (1.0 + settings.min_effect)
    worst: list[str] = []
    for category, leader in leaders.items():
        if leader == arm:
            return None
        vs_leader = table.ratio(arm, leader, category, settings, conf)
        if vs_leader is None or not vs_leader.has_ci or vs_leader.high >= bar:
            return None
        vs_base = table.ratio(arm, base, category, settings, conf)
        if vs_base is not None and vs_base.has_ci and vs_base.low > 1.0:
            return None
        worst.append(f"{category} {vs_leader.estimate:.2f}x of {leader} (<= {vs_leader.high:.2f})")
    if not worst:
        return None
    return Drop(
        arm,
        round_index,
        "ci",
        f"round {round_index}: slower than the leader beyond {settings.min_effect:.0%} in every "
        f"category at {conf:.2%} confidence: " + "; ".join(worst),
    )


def _leaders(
    table: Table, active: Sequence[str], base: str, categories: Sequence[str], s: RaceSettings
) -> dict[str, str]:
    out = {}
    for category in categories:
        ranked = sorted(active, key=lambda a: -_estimate(table, a, base, category, s))
        out[category] = ranked[0]
    return out


def decide(
    table: Table,
    arms: Sequence[RaceArm],
    active: Sequence[str],
    settings: RaceSettings,
    *,
    confidence: float | None = None,
) -> tuple[CategoryDecision, ...]:
    """Per category: the winner among `active` arms, or why it is still open.

    The winner is the cheapest arm that no other arm beats by more than the threshold: for
    every other arm j, the upper end of j's CI against it is at most 1 + min_effect. An arm
    whose CI separates it from the runner-up qualifies (upper end below 1), and so does a
    cheaper arm the leader is within the threshold of (the tie goes to the cheaper). A wrong
    pick needs one of those CIs to miss: at most alpha / looks per comparison. Baseline first:
    a candidate wins only where its CI against the baseline lies above 1, so identical arms
    leave the baseline as the pick."""
    base = _baseline(arms).name
    cost = {a.name: a.cost for a in arms}
    conf = confidence if confidence is not None else settings.look_confidence
    ceiling = 1.0 + settings.min_effect
    out = []
    for category in table.categories(base):
        est = {a: _estimate(table, a, base, category, settings) for a in active}
        ranked = sorted(active, key=lambda a: (-est[a], cost.get(a, math.inf)))
        leader = ranked[0]
        by_cost = sorted(active, key=lambda a: (cost.get(a, math.inf), a))
        # Only an arm the leader is within the threshold of (by estimate) can qualify.
        hopeful = [w for w in by_cost if est[w] > 0 and est[leader] / est[w] <= ceiling]
        winner, blocked = _first_qualifier(table, category, hopeful, ranked, base, settings, conf)
        if winner is not None:
            out.append(_decided(table, category, winner, leader, ranked, base, settings, conf))
        else:
            out.append(
                unresolved(table, category, blocked, leader, active, base, settings, conf, est)
            )
    return tuple(out)


def _first_qualifier(
    table: Table,
    category: str,
    hopeful: Sequence[str],
    ranked: Sequence[str],
    base: str,
    settings: RaceSettings,
    conf: float,
) -> tuple[str | None, list[Block]]:
    """The cheapest hopeful arm that no other arm beats by more than the threshold (None:
    none yet), and what blocked each cheaper one: the first block is what an open category
    waits for."""
    ceiling = 1.0 + settings.min_effect
    blocked: list[Block] = []
    for w in hopeful:
        block = None
        if w != base:
            # Baseline first: a candidate wins only where it beats the baseline outright.
            ci = table.ratio(w, base, category, settings, conf)
            if ci is None or not ci.has_ci or ci.low <= 1.0:
                blocked.append((w, w, base, ci))
                continue
        for j in ranked:
            if j == w:
                continue
            ci = table.ratio(j, w, category, settings, conf)
            if ci is None or not ci.has_ci or ci.high > ceiling:
                block = (w, j, w, ci)
                break
        if block is None:
            return w, blocked
        blocked.append(block)
    return None, blocked


def _decided(
    table: Table,
    category: str,
    winner: str,
    leader: str,
    ranked: Sequence[str],
    base: str,
    settings: RaceSettings,
    conf: float,
) -> CategoryDecision:
    """A decided category and why in words: the only arm left, ahead of every other, or the
    cheaper arm the leader is within the threshold of."""
    runner = next((a for a in ranked if a != winner), None)
    vs_runner = table.ratio(runner, winner, category, settings, conf) if runner else None
    if runner is None:
        reason = "the only arm left"
    elif winner == leader:
        reason = f"no arm within reach: {runner} is behind at {conf:.2%} confidence"
    else:
        reason = (
            f"{leader} leads by at most {settings.min_effect:.0%} at {conf:.2%} "
            f"confidence: the tie goes to the cheaper {winner}"
        )
    return CategoryDecision(
        category,
        "decided",
        winner,
        leader,
        runner,
        vs_runner,
        table.ratio(winner, base, category, settings, 0.95),
        reason,
    )


def race_round(
    table: Table, arms: Sequence[RaceArm], state: RaceState, settings: RaceSettings
) -> RaceState:
    """After one more round of `state.active` arms: who stops, and the decisions so far."""
    base = _baseline(arms).name
    round_index = state.rounds + 1
    controls = {a.name for a in arms if a.control}
    active = list(state.active)
    # The A/A control runs beside the race, not in it: it is never dropped, and no rule
    # ranks or picks it (it would tie the baseline and could only block or win a tie).
    racing = [a for a in active if a not in controls]
    drops = list(state.drops)
    categories = table.categories(base)
    if round_index < settings.min_rounds:
        found = [_early_drop(table, a, base, round_index, settings) for a in racing if a != base]
    else:
        leaders = _leaders(table, racing, base, categories, settings)
        found = [
            _ci_drop(table, a, base, leaders, round_index, settings) for a in racing if a != base
        ]
    for drop in found:
        if drop is not None:
            drops.append(drop)
            active.remove(drop.arm)
            racing.remove(drop.arm)
    rounds_by_arm = {a.name: table.rounds(a.name) for a in arms}
    return RaceState(
        round_index,
        tuple(active),
        tuple(drops),
        decide(table, arms, racing, settings),
        rounds_by_arm,
    )


def start(arms: Sequence[RaceArm]) -> RaceState:
    return RaceState(0, tuple(a.name for a in arms))


def keep_going(
    state: RaceState,
    settings: RaceSettings,
    *,
    elapsed_s: float,
    budget_s: float,
    next_round_s: float,
    reserve_s: float = 0.0,
) -> tuple[bool, str]:
    """Another round, or stop: decided, out of planned rounds, or the budget would run out
    (the next round's cost and `reserve_s`, the identity probes after the last round)."""
    if state.decided:
        return False, f"every category decided after round {state.rounds}"
    if len(state.active) <= 1:  # a round of the baseline alone compares nothing
        return False, f"only the baseline is left after round {state.rounds}: no arm to race"
    if state.rounds >= settings.max_rounds:
        return False, f"planned rounds ({settings.max_rounds}) done"
    if elapsed_s + next_round_s + reserve_s > budget_s:
        need = budget_for_ci(state, settings, elapsed_s, next_round_s, reserve_s)
        short = (
            f"; {settings.min_rounds - state.rounds} round(s) short of the "
            f"{settings.min_rounds} a CI needs: no arm has one (about {need / 60:.0f} min, "
            f"`--budget {budget_text(need)}`, would give them one)"
            if need is not None
            else ""
        )
        return False, (
            f"budget: {elapsed_s / 60:.1f} min spent, another round of {len(state.active)} "
            f"arm(s) (~{next_round_s / 60:.1f} min) and the probes (~{reserve_s / 60:.1f} min) "
            f"would pass {budget_s / 60:.0f} min{short}"
        )
    return True, ""


def budget_for_ci(
    state: RaceState,
    settings: RaceSettings,
    elapsed_s: float,
    next_round_s: float,
    reserve_s: float,
) -> float | None:
    """The budget (seconds) that would have reached the first CI (`min_rounds` rounds) at
    this pace, where the race has fewer; None when it has them. A sweep stopped short of
    them answers with estimates alone, and the report should say what would have bought one."""
    missing = settings.min_rounds - state.rounds
    if missing <= 0:
        return None
    return elapsed_s + missing * next_round_s + reserve_s


def budget_text(seconds: float) -> str:
    """A `--budget` value in minutes that covers `seconds`, rounded up to 5."""
    return f"{5 * math.ceil(seconds / 300.0):g}"


@dataclass(frozen=True, slots=True)
class Simulation:
    state: RaceState
    requests: int
    """Measured requests the race used."""


def simulate(
    cells: Sequence[Cell],
    arms: Sequence[RaceArm],
    round_order: Sequence[int],
    settings: RaceSettings,
) -> Simulation:
    """Replay the race on a full table: round k of the race measures the active arms' cells of
    source round `round_order[k - 1]` (relabelled k). Stops when decided or out of rounds."""
    by_round: dict[int, list[Cell]] = defaultdict(list)
    for c in cells:
        by_round[c.round].append(c)
    state = start(arms)
    seen: list[Cell] = []
    for k, source in enumerate(round_order[: settings.max_rounds], start=1):
        active = set(state.active)
        seen.extend(replace(c, round=k) for c in by_round[source] if c.arm in active)
        state = race_round(Table(seen), arms, state, settings)
        if state.decided:
            break
    return Simulation(state, len(seen))


def give_up(
    table: Table,
    base: str,
    overall: str,
    decisions: Sequence[CategoryDecision],
    settings: RaceSettings,
) -> dict[str, RatioCI | None]:
    """Per category: the one setting `overall` against the category's own pick (ratio below 1:
    what the category gives up by running the whole workload on `overall`)."""
    out: dict[str, RatioCI | None] = {}
    for d in decisions:
        out[d.category] = (
            None if d.pick == overall else table.ratio(overall, d.pick, d.category, settings, 0.95)
        )
    return out
