"""How often does the ladder's crossover interval hold the true crossover?

Simulates synthetic ladders with a known crossover (`watchkeeper/simulation/crossover.py`:
the true log ratio falls linearly in log2 load; each level's rounds add normal noise) and reads
each with the ladder's own code. Prints, per noise setting, the measured coverage of the
interval (all ladders, and those whose interval closed inside the ladder), how many curves
noise alone made non-monotone, and the median closed width. No server, no clock: seconds.

    .venv/bin/python benchmarks/crossover_coverage.py [--ladders 1000] [--seed 1]
"""

from __future__ import annotations

import argparse

from watchkeeper.simulation.crossover import simulate_coverage

SETTINGS = ((0.05, 3), (0.10, 3), (0.10, 5), (0.20, 5))
"""(sd of a round's log ratio, rounds per level): a quiet host to a noisy one."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--ladders", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.ladders < 500:
        parser.error("--ladders: at least 500 for a coverage figure worth quoting")
    print(f"{args.ladders} ladders per row, levels 1-16, nominal 95% CIs per level")
    print("| round sd | rounds | coverage | closed | coverage (closed) | non-monotone | width |")
    print("|---|---|---|---|---|---|---|")
    for sd, rounds in SETTINGS:
        c = simulate_coverage(args.ladders, seed=args.seed, sd=sd, rounds=rounds)
        width = f"{c.median_width_doublings:.2f}" if c.median_width_doublings else "-"
        print(
            f"| {sd:.2f} | {rounds} | {c.rate:.1%} | {c.closed / c.ladders:.0%} | "
            f"{c.closed_rate:.1%} | {c.non_monotone / c.ladders:.1%} | {width} doublings |"
        )
    print("On SLO attainment (the rate ladder's default; issue 75): 30 requests a round, the")
    print("difference falling 0.1-0.3 points a doubling, round logit sd shared / half own")
    print("| logit sd | rounds | coverage | closed | coverage (closed) | non-monotone | width |")
    print("|---|---|---|---|---|---|---|")
    for sd, rounds in ((0.3, 3), (0.3, 5), (0.5, 5)):
        c = simulate_coverage(args.ladders, seed=args.seed, sd=sd, rounds=rounds, metric="goodput")
        width = f"{c.median_width_doublings:.2f}" if c.median_width_doublings else "-"
        print(
            f"| {sd:.1f} | {rounds} | {c.rate:.1%} | {c.closed / c.ladders:.0%} | "
            f"{c.closed_rate:.1%} | {c.non_monotone / c.ladders:.1%} | {width} doublings |"
        )
    print("Conditional on where the true crossover falls (issue 75): on a measured level, or")
    print("midway (in log load) between two")
    print("| round sd | rounds | at level 4 | at 2.83 (between 2 and 4) | at 5.66 |")
    print("|---|---|---|---|---|")
    for sd, rounds in SETTINGS:
        rates = [
            simulate_coverage(args.ladders, seed=args.seed, sd=sd, rounds=rounds, truth_at=t).rate
            for t in (4.0, 2.0**1.5, 2.0**2.5)
        ]
        print(f"| {sd:.2f} | {rounds} | " + " | ".join(f"{r:.1%}" for r in rates) + " |")


if __name__ == "__main__":
    main()
