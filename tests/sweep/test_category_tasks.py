"""A one-round sweep's per-category rows and picks over each category's own tasks
(analysis/category_tasks.py), and the rule's rates on seeded
simulated sweeps (watchkeeper/simulation/category_tasks.py; the full table is
`benchmarks/category_tasks.py`, docs/statistics-checks.md "Per-category picks over tasks")."""

import math
from dataclasses import replace

import numpy as np
from support.sweepview import sweep_view

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.category_tasks import (
    MIN_CATEGORY_TASKS,
    category_interval,
    category_note,
    category_ratio,
    family_low,
    pick_families,
    with_category_cis,
)
from watchkeeper.analysis.racing_tasks import INSTANCE_SD, ROUND_SD
from watchkeeper.analysis.racing_types import RaceState
from watchkeeper.analysis.recommend import recommend
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.analysis.workload_mix import FAMILY_ALPHA
from watchkeeper.publish.report_rows import category_rows
from watchkeeper.publish.sweep_report import render_sweep_sections
from watchkeeper.simulation.category_tasks import simulate_categories, simulate_coverage
from watchkeeper.student import t_quantile

LOGS = (0.30, 0.22, 0.41, 0.18, 0.35, 0.27, 0.25, 0.33)
"""Eight code tasks of ngram, one round: about 1.34x."""


def _bare(estimate: float, logs: tuple[float, ...] = ()) -> RatioCI:
    """A row measured in one round: no CI over rounds."""
    return RatioCI(estimate, estimate, estimate, len(logs), len(logs), 1, task_logs=logs)


def _one_round_categories(result: BenchResult, logs: dict[str, tuple[float, ...]]) -> BenchResult:
    """``result`` with ngram's category rows measured in one round over ``logs`` per category."""
    rows = [
        replace(c, speedup=_bare(math.exp(float(np.mean(logs[c.category]))), logs[c.category]))
        if c.arm == "ngram"
        else c
        for c in result.categories
    ]
    return replace(result, categories=tuple(rows))


def test_a_category_interval_is_t_over_its_tasks_with_the_floors_from_eight_tasks() -> None:
    got = category_interval(LOGS, 1)
    assert got is not None and got.tasks == 8 and got.df == 7
    values = np.asarray(LOGS)
    se = math.sqrt(values.var(ddof=1) / 8 + INSTANCE_SD**2 + ROUND_SD**2)
    assert math.isclose(got.se, se)
    assert math.isclose(math.log(got.high / got.low) / 2, t_quantile(7) * se)
    assert math.isclose(math.log(got.estimate), values.mean())
    assert MIN_CATEGORY_TASKS == 8
    assert category_interval(LOGS[:7], 1) is None  # seven tasks: too few
    assert category_ratio(_bare(1.3, LOGS[:7])) is None
    assert category_ratio(replace(_bare(1.3, LOGS), verdict="faster")) is None  # CI over rounds


def test_a_category_row_reads_its_interval_over_tasks_and_one_with_few_tasks_says_so(
    result: BenchResult,
) -> None:
    short = _one_round_categories(result, {"code": LOGS, "chat": (0.0, 0.02, -0.01)})
    got = with_category_cis(short, {"ngram"})
    code = got.stats("ngram", "code")
    assert code is not None and code.speedup is not None
    want = category_interval(LOGS, 1)
    assert want is not None
    assert (code.speedup.low, code.speedup.high) == (want.low, want.high)
    assert code.speedup.over == "8 tasks" and code.speedup.verdict == "faster"
    rows = {(r[0], r[1]): r[4] for r in category_rows(got)}
    assert rows[("code", "ngram")] == (
        f"{want.estimate:.2f}x (95% CI over 8 tasks {want.low:.2f}-{want.high:.2f}) faster"
    )
    assert rows[("chat", "ngram")] == "1.00x (1 round(s): no CI)"  # three tasks: none
    assert got.stats("draft4", "code") == short.stats("draft4", "code")  # not an arm over tasks
    sampled = with_category_cis(short, {"ngram"}, population={"code": 100, "chat": 40})
    assert "95% CI over 8 of 100 tasks" in dict(((r[0], r[1]), r[4]) for r in category_rows(sampled))[("code", "ngram")]  # fmt: skip
    note = category_note(short, {"ngram"})
    assert note.startswith("The per-category rows of code 8 tasks carry a 95% CI over")
    assert "chat (3 tasks): too few tasks for an interval over the category's tasks" in note
    assert "8 tasks in the category" in note and "3 rounds" in note
    assert category_note(short, set()) == ""


def test_the_race_section_says_which_category_rows_read_their_own_tasks(
    result: BenchResult,
) -> None:
    short = _one_round_categories(result, {"code": LOGS, "chat": (0.0, 0.02, -0.01)})
    note = category_note(short, {"ngram"})
    view = replace(
        sweep_view(result, RaceState(1, ("baseline", "ngram"))),
        task_cis="ngram 1.20x (1.05-1.37), 95% CI over 11 tasks each paired back to back",
        answer_over_tasks=True,
        categories_over_tasks=note,
    )
    text = render_sweep_sections(view)
    assert f"each named '95% CI over N tasks'. {note}." in text
    assert "chat (3 tasks): too few tasks" in text
    assert "the per-category tables carry none" not in text
    bare = render_sweep_sections(replace(view, categories_over_tasks=""))
    assert "'95% CI over N tasks'; the per-category tables carry none" in bare


CHAT = (0.01, -0.02, 0.03, 0.0, -0.01, 0.02, 0.0, -0.03)
"""Eight chat tasks of ngram, one round: about 1.0x (an interval, no pick)."""


def test_the_category_pick_over_tasks_is_guarded_across_arms_and_categories(
    result: BenchResult,
) -> None:
    """Bonferroni at 1 - 0.05 / (arms x categories) on the t interval over the category's
    tasks, counting the comparisons that have an interval: ngram's 1.34x over eight code
    tasks clears 1 on its own 95% CI and across its two categories (draft4, dropped by the
    ceiling rule, has no rows and is not counted), but a 1.10x does not."""
    read = category_ratio(_bare(1.0, LOGS))
    assert read is not None
    task = category_interval(LOGS, 1)
    assert task is not None
    assert math.isclose(family_low(read, 2), task.bounds(1.0 - FAMILY_ALPHA / 2)[0])
    assert family_low(read, 2) < read.low and family_low(read, 1) == read.low
    assert family_low(read, 2) > 1.0
    both = _ngram_alone(result, LOGS, CHAT)
    assert pick_families(both.categories, ("draft4", "ngram")) == {"code": 2, "chat": 2}
    picked = recommend(both).choice("code")
    assert picked is not None and picked.profile == "ngram"
    assert (picked.low, picked.high) == (read.low, read.high)
    assert "task(s) in a category" not in picked.reason  # no few-tasks caveat over tasks
    weak = tuple(v - 0.2 for v in LOGS)  # ~1.10x: faster on its own 95% CI only
    alone = category_ratio(_bare(1.0, weak))
    assert alone is not None and alone.verdict == "faster" and family_low(alone, 2) < 1.0
    kept = recommend(_ngram_alone(result, weak, CHAT)).choice("code")
    assert kept is not None and kept.profile is None and kept.best == "ngram"
    assert "not across the 2 comparisons picked among" in kept.reason


def test_the_family_counts_only_comparisons_that_could_name_a_pick(result: BenchResult) -> None:
    """An arm the ceiling rule dropped (no rows) and a category with too few tasks for an
    interval (chat, three tasks) cannot be claimed, so they spend none of the alpha: ngram's
    1.10x over eight code tasks is the one comparison, and its own 95% CI picks it (with the
    family every candidate x every category, 4, it was kept at the baseline). Arms with an
    interval count per category; categories with one count once each."""
    weak = tuple(v - 0.2 for v in LOGS)
    alone = category_ratio(_bare(1.0, weak))
    assert alone is not None and family_low(alone, 1) > 1.0 > family_low(alone, 4)
    short = _ngram_alone(result, weak, (0.0,) * 3)
    assert pick_families(short.categories, ("draft4", "ngram")) == {"code": 1}
    picked = recommend(short).choice("code")
    assert picked is not None and picked.profile == "ngram"
    # draft4's CIs over rounds in both categories count beside ngram's interval over code
    # tasks: code has two arms with an interval, chat one, and both categories have one.
    mixed = with_category_cis(
        _one_round_categories(result, {"code": weak, "chat": (0.0,) * 3}), {"ngram"}
    )
    assert pick_families(mixed.categories, ("draft4", "ngram")) == {"code": 4, "chat": 2}
    assert pick_families(mixed.categories, ("ngram",)) == {"code": 1}


def _ngram_alone(
    result: BenchResult, code: tuple[float, ...], chat: tuple[float, ...]
) -> BenchResult:
    """ngram's rows over ``code`` and ``chat`` read over tasks; draft4 measured nothing per
    category (the ceiling rule's: its rows gone), so the code pick is ngram's or none."""
    short = with_category_cis(
        _one_round_categories(result, {"code": code, "chat": chat}), {"ngram"}
    )
    return replace(short, categories=tuple(c for c in short.categories if c.arm != "draft4"))


def test_the_per_category_rule_holds_its_rates_on_simulated_sweeps() -> None:
    """Seeded, small: the minimum is where bimodal coverage passes 90% (six tasks do not),
    every category interval from eight bimodal tasks covers near nominal, four arms at 1.0x
    over 6 x 8 tasks are picked in some category rarely with the guard and often without it,
    and 1.15x over 50 tasks a category is found in most categories (the measured table:
    docs/statistics-checks.md, `benchmarks/category_tasks.py`)."""
    assert simulate_coverage("bimodal", 6, 400, seed=6) < 0.9
    assert simulate_coverage("bimodal", MIN_CATEGORY_TASKS, 400, seed=8) >= 0.9
    null = simulate_categories("bimodal", (8,) * 6, 150, seed=1)
    assert null.intervals == 150 * 4 * 6 and null.coverage >= 0.9, null
    assert null.picked <= 7 and null.picked_alone >= 20, null  # 5% of 150; unguarded ~24%
    fast = simulate_categories("normal", (50,) * 6, 40, seed=3, faster=1.15)
    assert fast.power >= 0.5 and fast.power_alone > fast.power, fast
    none = simulate_categories("normal", (6,) * 6, 20, seed=2, faster=1.15)
    assert none.intervals == 0 and none.chances == 0 and none.picked == 0, none


def test_counting_only_claimable_comparisons_holds_the_rate_and_gains_power() -> None:
    """Seeded, small: four arms measured and four the ceiling rule dropped, three of six
    categories with an interval (family 12, before 48): four arms at 1.0x are picked in some
    category within the 5% the family is sized for, and a 1.15x arm is found more often than
    with the family before (the measured table: docs/statistics-checks.md)."""
    design = (20, 20, 20, 4, 4, 4)
    null = simulate_categories("normal", design, 150, seed=1, dropped=4)
    assert null.picked <= 7 and null.picked_wide <= null.picked, null  # 5% of 150
    fast = simulate_categories("normal", design, 60, seed=3, faster=1.15, dropped=4)
    assert fast.power > fast.power_wide and fast.right >= fast.right_wide + 5, fast
