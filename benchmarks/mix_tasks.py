"""The one-round sweep's pick over tasks (workload_mix.mix_speedup(over_tasks=True)), simulated
before it decides anything: per task shape (normal, skewed, bimodal) and task count (12, 36,
300 tasks in six categories; a stratified sample of 36 from a 300-task set; 36 tasks under a
stated mix weighing one category 0.7, stratified by it), the coverage
of each arm's 95% interval over tasks and of the interval the pick quotes (the pick's, else
the closest arm's), the false pick rate with every arm at 1.0x (with a Wilson interval; the
family-wise guard over the arms as the mix over rounds has it: Bonferroni on the guard's
floor, `task_floor(guard=True)`), and the power at 1.10x and 1.15x (one arm that fast, the
others at 1.0x: the pick names it). Before this rule a one-round sweep quoted no interval and
picked nothing: pick rate and power 0. Seeded, no server (watchkeeper/simulation/mix_tasks.py).

    PYTHONPATH=. .venv/bin/python benchmarks/mix_tasks.py [--sweeps 1000] [--arms 4]
"""

from __future__ import annotations

import argparse

from watchkeeper.simulation.mix_tasks import simulate_pick
from watchkeeper.simulation.rates import wilson_text

SHAPES = ("normal", "skewed", "bimodal")
DESIGNS = ((12, 0, False), (36, 0, False), (300, 0, False), (36, 300, False), (36, 0, True))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=1000)
    parser.add_argument("--arms", type=int, default=4)
    args = parser.parse_args()
    n = args.sweeps
    print(f"{n} one-round sweeps a cell, {args.arms} arms, six categories (means +-0.1 log), "
          "task log sd ~0.2 (bimodal: 30% at 2x), cell sd 3%, instance 0.8%, round 2.5%")  # fmt: skip
    print(
        "| shape | tasks | arm's CI covers | quoted CI covers (all at 1.0x) | false pick "
        "(Wilson) | power 1.10x | power 1.15x |"
    )
    print("|---|---|---|---|---|---|---|")
    for shape in SHAPES:
        for tasks, of, stated in DESIGNS:
            kw = {"arms": args.arms, "of": of, "stated": stated}
            null = simulate_pick(shape, tasks, n, seed=1, **kw)
            p10 = simulate_pick(shape, tasks, n, seed=2, faster=1.10, **kw)
            p15 = simulate_pick(shape, tasks, n, seed=3, faster=1.15, **kw)
            label = f"{tasks} of {of}" if of else str(tasks)
            label += ", --mix 0.7 on one" if stated else ""
            print(
                f"| {shape} | {label} | {null.arm_coverage:.1%} | {null.coverage:.1%} | "
                f"{wilson_text(null.picked, n)} | {p10.power:.1%} | {p15.power:.1%} |"
            )


if __name__ == "__main__":
    main()
