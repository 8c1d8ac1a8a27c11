"""Coverage and false calls of the interval over tasks from one round
(analysis/racing_tasks.py), by task count and task-effect shape, with and without the server
instance's and the round's floors (`ROUND_SD`; the simulation draws a round effect of that
size). Then the same at two rounds: the racer's tasks design where a second round fits the
budget (analysis/racing_tasks.plan). Seeded, no server.

    PYTHONPATH=. .venv/bin/python benchmarks/task_interval.py [--sims 2000]
"""

from __future__ import annotations

import argparse

from watchkeeper.analysis.racing_tasks import simulate_coverage


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=2000)
    args = parser.parse_args()
    print(
        f"{args.sims} one-round task sets each (task log sd ~0.2, 'tight' 0.02; cell sd 3%,"
        " instance 0.8%, round 2%)"
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
