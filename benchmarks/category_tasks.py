"""A one-round sweep's per-category intervals and picks over each category's tasks
(analysis/category_tasks.py), simulated before they decide anything.

First, what decides the minimum: the coverage of one category's 95% interval over its tasks
by the number of tasks in it (normal, skewed, bimodal task effects; `simulate_coverage`).
Then, per task shape and design (categories x tasks; family = arms x categories), the
coverage of every category interval formed, the family-wise false pick rate with every arm at
1.0x (some category's pick names an arm; with a Wilson interval), the same on each
category's own 95% CI (no guard), and the power per category at 1.10x and 1.15x (one arm
that fast in every category, the others at 1.0x: the category's pick names it), guarded
(and unguarded). Before this rule a one-round sweep's category rows had no CI and picked
nothing: pick rate and power 0. Seeded, no server (watchkeeper/simulation/category_tasks.py).

    PYTHONPATH=. .venv/bin/python benchmarks/category_tasks.py [--sweeps 1000] [--arms 4]
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


def _label(sizes: tuple[int, ...]) -> str:
    if len(set(sizes)) == 1:
        return f"{sum(sizes)} = {len(sizes)} x {sizes[0]}"
    return f"{sum(sizes)} = {'+'.join(map(str, sizes))}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=1000)
    parser.add_argument("--arms", type=int, default=4)
    args = parser.parse_args()
    n = args.sweeps
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


if __name__ == "__main__":
    main()
