"""Coverage and false calls of the interval over tasks from one round
(analysis/racing_tasks.py), by task count and task-effect shape, with and without the server
instance's and the round's floors (`ROUND_SD`; the simulation draws a round effect of that
size). Then the same at two rounds: the racer's tasks design where a second round fits the
budget (analysis/racing_tasks.plan). Then (or alone, `--sampled-only`) the interval from a
stratified sample of a larger set (analysis/task_sample.py): a fresh set each draw (36 tasks
of six categories, or 300 in categories of 100 to 20 whose means differ), sampled as the
planner draws it, one round of the sample, coverage of the set's own mean. Seeded, no server.

    PYTHONPATH=. .venv/bin/python benchmarks/task_interval.py [--sims 2000] [--sampled-only]

`--round-sd X [X ...]` prints instead the one-round interval's coverage and false calls when
the round effect drawn is X while the interval floors by `ROUND_SD` (how its coverage depends
on the host's round drift; `benchmarks/round_sd.py` measures it), `--cell-sd` the cell noise.

    PYTHONPATH=. .venv/bin/python benchmarks/task_interval.py --sims 2000 --round-sd 0 0.0247
"""

from __future__ import annotations

import argparse

from watchkeeper.analysis.racing_tasks import ROUND_SD, simulate_coverage
from watchkeeper.analysis.task_sample import (
    CATEGORY_SPREAD,
    SIZES_300,
    simulate_sampled_coverage,
)

SHAPES = ("normal", "skewed", "bimodal", "tight")


def drift(sims: int, drawn: list[float], cell_sd: float) -> None:
    """One round: coverage and false calls with the round effect drawn at each of ``drawn``."""
    print(f"{sims} one-round task sets each; the interval floors by ROUND_SD {ROUND_SD}, the "
          f"round effect drawn at sd X; cell sd {cell_sd}")  # fmt: skip
    print("| shape | tasks | " + " | ".join(f"coverage at X = {x:g}" for x in drawn) + " |")
    print("|---|---|" + "---|" * len(drawn))
    for shape in ("normal", "bimodal", "tight"):
        for tasks in (12, 36, 300):
            cells = [
                simulate_coverage(shape, tasks, sims, seed=1, cell_sd=cell_sd, drawn_round_sd=x)
                for x in drawn
            ]
            print(f"| {shape} | {tasks} | "
                  + " | ".join(f"{c:.1%} (false {a:.1%})" for c, a in cells) + " |")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000)
    parser.add_argument(
        "--sampled-only", action="store_true", help="only the stratified samples' table"
    )
    parser.add_argument("--round-sd", type=float, nargs="+", help="round effects to draw")
    parser.add_argument("--cell-sd", type=float, default=0.03)
    args = parser.parse_args()
    if args.round_sd:
        drift(args.sims, args.round_sd, args.cell_sd)
        return
    if not args.sampled_only:
        every_task(args.sims)
        print()
    sampled(args.sims)


def every_task(sims: int) -> None:
    """One round, then two, of every task of the set."""
    print(
        f"{sims} one-round task sets each (task log sd ~0.2, 'tight' 0.02; cell sd 3%,"
        f" instance 0.8%, round {ROUND_SD:.1%})"
    )
    print(
        "| shape | tasks | coverage, no floors | coverage | mean 1.0x called (false) | 1.10x called |"
    )
    print("|---|---|---|---|---|---|")
    for shape in SHAPES:
        for tasks in (12, 24, 36, 300):
            bare, _ = simulate_coverage(shape, tasks, sims, seed=1, floor=False)
            cov, aa = simulate_coverage(shape, tasks, sims, seed=1)
            _, power = simulate_coverage(shape, tasks, sims, seed=2, mu=0.0953)
            print(f"| {shape} | {tasks} | {bare:.1%} | {cov:.1%} | {aa:.1%} | {power:.1%} |")
    print()
    print("Two rounds (one instance per run, a round effect and cell noise per round)")
    print("| shape | tasks | coverage | mean 1.0x called (false) | 1.10x called |")
    print("|---|---|---|---|---|")
    for shape in SHAPES:
        for tasks in (12, 36, 300):
            cov, aa = simulate_coverage(shape, tasks, sims, seed=3, rounds=2)
            _, power = simulate_coverage(shape, tasks, sims, seed=4, mu=0.0953, rounds=2)
            print(f"| {shape} | {tasks} | {cov:.1%} | {aa:.1%} | {power:.1%} |")


def sampled(sims: int) -> None:
    """A stratified sample of a set too large for one round, the interval for the set."""
    print(
        f"{sims} sets each, a stratified sample of each, one round of it (task log sd ~0.2, "
        "'tight' 0.02; category means spread +- the log given, largest category slowest; "
        "cell sd 3%, "
        "instance 0.8%, round 2%); coverage of the set's own mean task log ratio"
    )
    print(
        "| shape | categories +- | set | sample | coverage, weighted | coverage, unweighted | "
        "mean 1.0x called (false) | 1.10x called |"
    )
    print("|---|---|---|---|---|---|---|---|")
    designs = (((6,) * 6, 12), (SIZES_300, 12), (SIZES_300, 24), (SIZES_300, 60))
    rows = [(shape, CATEGORY_SPREAD, d) for shape in SHAPES for d in designs]
    # Categories far apart (n-gram drafting pays on code that copies, not on prose).
    rows += [(shape, 0.3, d) for shape in ("normal", "bimodal") for d in designs[1:]]
    for shape, spread, (sizes, size) in rows:
        got = simulate_sampled_coverage(shape, sizes, size, sims, seed=5, spread=spread)
        power = simulate_sampled_coverage(
            shape, sizes, size, sims, seed=6, mu=0.0953, spread=spread
        )
        wide = "none" if shape == "tight" else f"{spread:g}"
        print(
            f"| {shape} | {wide} | {sum(sizes)} | {size} | {got.weighted:.1%} | "
            f"{got.plain:.1%} | {got.called:.1%} | {power.called:.1%} |"
        )


if __name__ == "__main__":
    main()
