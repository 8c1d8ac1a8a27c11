"""The sweep report's answer per workload: a winner per category (the race's decisions) and
the one setting that serves the whole workload (for the stated mix), with what each category
gives up under it and the tool-calls-vs-prose answer. Pure functions of a `SweepView`."""

from __future__ import annotations

from collections.abc import Sequence

from watchkeeper.analysis.benchmark import ALL, BenchResult
from watchkeeper.analysis.racing_types import CategoryDecision
from watchkeeper.analysis.workload_mix import TASK_SET
from watchkeeper.publish import markdown as md
from watchkeeper.publish.sweep_view import SweepView
from watchkeeper.publish.sweep_view import ratio_text as _ci
from watchkeeper.publish.workload_record import tool_vs_prose


def winner_section(v: SweepView) -> list[str]:
    out = ["## Winner per category", ""]
    if v.race is None or not v.race.decisions:
        out.append("No race decisions (not raced); see the recommendation table above.")
        out.append("")
        return out
    rows = []
    for d in v.race.decisions:
        if d.status == "decided":
            status = "decided"
            settle = md.NONE
        else:
            status = "unresolved"
            settle = (
                f"~{rounds} rounds"
                if (rounds := settle_rounds(v, d))
                else "more rounds alone would not: the tasks differ too much"
            )
        # Decided: how far the runner-up is behind the winner. Unresolved: the comparison that
        # is still open, which need not involve the provisional pick at all.
        pair = (d.runner_up, d.pick) if d.status == "decided" else (d.contender, d.runner_up)
        named = pair[0] is not None and pair[1] is not None
        rows.append(
            [
                d.category,
                status,
                d.pick + ("" if d.winner else " (provisional)"),
                _ci(d.versus_baseline),
                f"{pair[0]} / {pair[1]}" if named else md.NONE,
                _ci(d.versus_runner_up) if named else md.NONE,
                settle,
                d.reason,
            ]
        )
    out.append(
        md.table(
            [
                "category",
                "status",
                "pick",
                "pick vs baseline (95% CI)",
                "comparison",
                f"ratio ({v.settings.look_confidence:.2%} CI)",
                "rounds to settle",
                "why",
            ],
            rows,
            "lllrlrrl",
        )
    )
    out.append("")
    unresolved = v.race.unresolved()
    if unresolved:
        out.append(unresolved_line(v, unresolved))
        out.append("")
    return out


def settle_rounds(v: SweepView, d: CategoryDecision) -> int | None:
    """The rounds that would settle an open comparison, or None where only more tasks would.

    One instruction per category: the race's own figure is read over rounds, the bench's CI
    of the same pair over tasks and rounds; where that CI says the tasks differ too much (its
    settle adds tasks), no number of rounds is offered here either. The default report told
    the reader "--rounds N would settle" code_gen (~20 rounds) in this table and "more rounds
    alone would not" for the same comparison in the per-category table above it."""
    if not d.rounds_needed:
        return None
    base = v.result.baseline.name
    pair = {d.contender, d.runner_up}
    if base in pair and len(pair - {base}) == 1:
        (arm,) = pair - {base}
        stats = v.result.stats(arm or "", d.category)
        ci = stats.speedup if stats is not None else None
        if ci is not None and ci.settle is not None and ci.settle.add_tasks:
            return None
    return d.rounds_needed


def unresolved_line(v: SweepView, unresolved: Sequence[CategoryDecision]) -> str:
    """The open categories and the one thing that would settle each: rounds, or tasks."""
    by_rounds = [(d.category, n) for d in unresolved if (n := settle_rounds(v, d))]
    by_tasks = [d.category for d in unresolved if not settle_rounds(v, d)]
    parts = [
        f"Unresolved: {', '.join(d.category for d in unresolved)}. Until then each keeps the "
        "provisional pick above: an arm called faster than the baseline at the look's "
        "confidence, else the baseline."
    ]
    if by_rounds:
        names = ", ".join(f"{c} (~{n} rounds)" for c, n in by_rounds)
        parts.append(
            f"More rounds would settle {names}: `watchkeeper sweep --rounds N` with N at least "
            "that many, if the estimates hold."
        )
    if by_tasks:
        parts.append(
            f"More rounds alone would not settle {', '.join(by_tasks)}: the tasks differ too "
            "much, so more tasks per category would (`--per-category`, or a larger task set)."
        )
    return " ".join(parts)


def estimate(result: BenchResult, arm: str, category: str) -> float | None:
    if arm == result.baseline.name:
        return 1.0
    s = result.stats(arm, category)
    return s.speedup.estimate if s is not None and s.speedup is not None else None


def workload_section(v: SweepView) -> list[str]:
    rec = v.recommendation
    out = ["## One setting for the whole workload", ""]
    overall = result_overall(v)
    reason = rec.workload.reason if rec.workload is not None else rec.overall.reason
    out.append(
        f"This build takes no per-request speculative parameters, so a per-category optimum is a "
        f"per-server setting. The one setting that serves the whole workload: **{v.chosen}** "
        f"({md.inline(reason)}; all categories pooled: {overall})."
    )
    out.append("")
    out += mix_lines(v)
    out.append(md.inline(tool_vs_prose(v.result, rec)))
    out.append("")
    if v.race is None or not v.race.decisions:
        return out
    rows = []
    for d in v.race.decisions:
        mine = estimate(v.result, v.chosen, d.category)
        theirs = estimate(v.result, d.pick, d.category)
        if d.pick == v.chosen:
            cost = "nothing: it is this category's pick"
        elif mine is None or theirs is None or theirs <= 0:
            cost = md.NONE
        else:
            cost = f"{(mine / theirs - 1) * 100:+.1f}% decode speed against {d.pick}"
        rows.append([d.category, d.pick, cost])
    out.append(md.table(["category", "category's own pick", f"under {v.chosen}"], rows))
    out.append("")
    return out


def mix_lines(v: SweepView) -> list[str]:
    """The mix the one setting is for, where it came from, and the pick's speed-up for it."""
    rec = v.recommendation
    mix, choice = rec.mix, rec.workload
    if mix is None or choice is None or not mix.weights:
        return []
    source = (
        "the task set's own proportions (measured tasks per category; `--mix` states another)"
        if mix.source == TASK_SET
        else "as given by `--mix`"
    )
    best = choice.best
    if choice.profile is not None and best is not None:
        said = f"**{choice.profile}** at {best.text}"
    else:
        said = f"keep the baseline ({choice.reason})"
    how = (
        "The mix's speed-up is 1 / sum(w / s) of the categories' speed-ups (time adds), taken "
        "per round; its CI carries the rounds and the tasks, as each category's does (the unit "
        "serves tasks the sweep never sent)."
    )
    if best is not None and best.over:
        how = (
            "With rounds too few for a CI over rounds, the mix's speed-up and its CI are over "
            "the tasks (each paired back to back): each category's mean task log ratio "
            "weighted by its share of the mix, floored by the instance and the round's drift, "
            "the pick's lower bound guarded across the arms (Bonferroni; analysis/task_pick). "
            "It is the weighted geometric mean of the categories' speed-ups, within a fraction "
            "of a percent of 1 / sum(w / s) (time adds) where they read alike."
        )
    return [
        f"The workload mix, as shares of decoded tokens: {md.inline(mix.text)}, {source}. For "
        f"it: {md.inline(said)}. {how}",
        "",
    ]


def result_overall(v: SweepView) -> str:
    if v.chosen == v.result.baseline.name:
        return "1.00x by definition"
    s = v.result.stats(v.chosen, ALL)
    return _ci(s.speedup if s is not None else None)
