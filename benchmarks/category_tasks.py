"""A one-round sweep's per-category intervals and picks over each category's tasks
(analysis/category_tasks.py), simulated before they decide anything.

First, what decides the minimum: the coverage of one category's 95% interval over its tasks
by the number of tasks in it (normal, skewed, bimodal task effects; `simulate_coverage`).
Then, per task shape and design (categories x tasks; family = arms with an interval in the
category x categories with one: `category_tasks.pick_families`), the coverage of every category interval formed, the family-wise false pick rate with every arm at
1.0x (some category's pick names an arm; with a Wilson interval), the same on each
category's own 95% CI (no guard), and the power per category at 1.10x and 1.15x (one arm
that fast in every category, the others at 1.0x: the category's pick names it), guarded
(and unguarded). Before this rule a one-round sweep's category rows had no CI and picked
nothing: pick rate and power 0. Last, the family's size: with ``--dropped`` more candidates
the ceiling rule stopped before round 1 (no rows) and designs where some categories have too
few tasks for an interval, the false pick rate and the power at 1.15x with the family before
(every candidate x every category) and after (`pick_families`). Seeded, no server
(watchkeeper/simulation/category_tasks.py).

    PYTHONPATH=. .venv/bin/python benchmarks/category_tasks.py [--sweeps 1000] [--arms 4] \
        [--dropped 4] [--only-family]
"""

from __future__ import annotations

import argparse

from watchkeeper.analysis.category_tasks import MIN_CATEGORY_TASKS
from watchkeeper.simulation.category_tasks import simulate_categories, simulate_coverage
from watchkeeper.simulation.rates import wilson_text

SHAPES = ("normal", "skewed", "bimodal")
PER_CATEGORY = (4, 5, 6, 8, 10, 12, 50)
DESIGNS = (
    (6,) * 6,
    (12,) * 3,
    (8,) * 6,
    (50,) * 6,
    (100, 60, 50, 40, 30, 20),
)
FAMILY_DESIGNS = (
    (50,) * 6,
    (100, 60, 50, 40, 30, 20),
    (20, 20, 20, 4, 4, 4),
    (50, 50, 6, 6, 6, 6),
)
"""Designs for the family's size: every category with an interval, and some without."""


def _label(sizes: tuple[int, ...]) -> str:
    if len(set(sizes)) == 1:
        return f"{sum(sizes)} = {len(sizes)} x {sizes[0]}"
    return f"{sum(sizes)} = {'+'.join(map(str, sizes))}"


def family_table(n: int, arms: int, dropped: int) -> None:
    """False picks and power at 1.15x, the family before (every candidate, the dropped ones
    included, x every category) and after (`pick_families`)."""
    print(
        f"{n} one-round sweeps a cell, {arms} arms measured and {dropped} dropped by the "
        "ceiling rule before round 1; family before: every candidate x every category, "
        "after: arms with an interval in the category x categories with one"
    )
    print(
        "| shape | tasks (categories) | families before / after | false pick before (Wilson) "
        "| false pick after (Wilson) | power 1.15x before | power 1.15x after |"
    )
    print("|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        for sizes in FAMILY_DESIGNS:
            kw = {"arms": arms, "dropped": dropped}
            null = simulate_categories(shape, sizes, n, seed=1, **kw)
            p15 = simulate_categories(shape, sizes, n, seed=3, faster=1.15, **kw)
            with_ci = sum(k >= MIN_CATEGORY_TASKS for k in sizes)
            print(
                f"| {shape} | {_label(sizes)} | {(arms + dropped) * len(sizes)} / "
                f"{arms * with_ci} | {wilson_text(null.picked_wide, n)} | "
                f"{wilson_text(null.picked, n)} | {p15.power_wide:.1%} | {p15.power:.1%} |"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=1000)
    parser.add_argument("--arms", type=int, default=4)
    parser.add_argument(
        "--dropped", type=int, default=4, help="candidates the ceiling rule dropped unmeasured"
    )
    parser.add_argument("--only-family", action="store_true", help="the family's size table only")
    args = parser.parse_args()
    n = args.sweeps
    if args.only_family:
        family_table(n, args.arms, args.dropped)
        return
    print(f"Coverage of one category's interval by its tasks ({4 * n} draws a cell):")
    print("| shape | " + " | ".join(f"{k} tasks" for k in PER_CATEGORY) + " |")
    print("|---|" + "---|" * len(PER_CATEGORY))
    for shape in SHAPES:
        cells = [f"{simulate_coverage(shape, k, 4 * n, seed=k):.1%}" for k in PER_CATEGORY]
        print(f"| {shape} | " + " | ".join(cells) + " |")
    print()
    print(
        f"{n} one-round sweeps a cell, {args.arms} arms, intervals from {MIN_CATEGORY_TASKS} "
        "tasks a category; task log sd ~0.2 (bimodal: 30% at 2x), cell sd 3%, instance 0.8%, "
        "round 2.5%"
    )
    print(
        "| shape | tasks (categories) | category CIs cover | false pick, guarded (Wilson) | "
        "false pick, own 95% CI | power 1.10x | power 1.15x |"
    )
    print("|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        for sizes in DESIGNS:
            kw = {"arms": args.arms}
            null = simulate_categories(shape, sizes, n, seed=1, **kw)
            p10 = simulate_categories(shape, sizes, n, seed=2, faster=1.10, **kw)
            p15 = simulate_categories(shape, sizes, n, seed=3, faster=1.15, **kw)
            cover = f"{null.coverage:.1%}" if null.intervals else "no interval"
            print(
                f"| {shape} | {_label(sizes)} | {cover} | {wilson_text(null.picked, n)} | "
                f"{null.picked_alone / n:.1%} | {p10.power:.1%} ({p10.power_alone:.1%}) | "
                f"{p15.power:.1%} ({p15.power_alone:.1%}) |"
            )
    print()
    family_table(n, args.arms, args.dropped)


if __name__ == "__main__":
    main()
