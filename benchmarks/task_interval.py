"""Coverage and false calls of the interval over tasks from one round
(analysis/racing_tasks.py), by task count and task-effect shape, with and without the server
instance's and the round's floors (`ROUND_SD`; the simulation draws a round effect of that
size). Then the same at two rounds: the racer's tasks design where a second round fits the
budget (analysis/racing_tasks.plan). Seeded, no server.

    PYTHONPATH=. .venv/bin/python benchmarks/task_interval.py [--sims 2000]

`--round-sd X [X ...]` prints instead the one-round interval's coverage and false calls when
the round effect drawn is X while the interval floors by `ROUND_SD` (how its coverage depends
on the host's round drift; `benchmarks/round_sd.py` measures it), `--cell-sd` the cell noise.

    PYTHONPATH=. .venv/bin/python benchmarks/task_interval.py --sims 2000 --round-sd 0 0.0247
"""

from __future__ import annotations

import argparse

from watchkeeper.analysis.racing_tasks import ROUND_SD, simulate_coverage


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
    parser.add_argument("--round-sd", type=float, nargs="+", help="round effects to draw")
    parser.add_argument("--cell-sd", type=float, default=0.03)
    args = parser.parse_args()
    if args.round_sd:
        drift(args.sims, args.round_sd, args.cell_sd)
        return
    print(
        f"{args.sims} one-round task sets each (task log sd ~0.2, 'tight' 0.02; cell sd 3%,"
        f" instance 0.8%, round {ROUND_SD:.1%})"
    )
    print(
        "| shape | tasks | coverage, no floors | coverage | mean 1.0x called (false) | 1.10x called |"
    )
    print("|---|---|---|---|---|---|")
    for shape in ("normal", "skewed", "bimodal", "tight"):
        for tasks in (12, 24, 36, 300):
            bare, _ = simulate_coverage(shape, tasks, args.sims, seed=1, floor=False)
            cov, aa = simulate_coverage(shape, tasks, args.sims, seed=1)
            _, power = simulate_coverage(shape, tasks, args.sims, seed=2, mu=0.0953)
            print(f"| {shape} | {tasks} | {bare:.1%} | {cov:.1%} | {aa:.1%} | {power:.1%} |")
    print()
    print("Two rounds (one instance per run, a round effect and cell noise per round)")
    print("| shape | tasks | coverage | mean 1.0x called (false) | 1.10x called |")
    print("|---|---|---|---|---|")
    for shape in ("normal", "skewed", "bimodal", "tight"):
        for tasks in (12, 36, 300):
            cov, aa = simulate_coverage(shape, tasks, args.sims, seed=3, rounds=2)
            _, power = simulate_coverage(shape, tasks, args.sims, seed=4, mu=0.0953, rounds=2)
            print(f"| {shape} | {tasks} | {cov:.1%} | {aa:.1%} | {power:.1%} |")


if __name__ == "__main__":
    main()
