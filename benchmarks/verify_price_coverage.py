"""How often does the break-even acceptance's CI hold the true break-even, and how is it said?

Simulates verification-pricing passes with a known price c (`watchkeeper/simulation/
verify_price.py`: synthetic arms at 25/50/75% acceptance, draft length 4, a shared round factor
and each arm's own, lognormal) and fits each with the pass's own code
(`analysis/verify_price.fit`). Prints, per true break-even and noise setting, the CI's coverage,
how the passes stated the break-even (bracketed, above, below, partly, none pays) and how many
said "bracketed" with the truth outside. No server, no clock: seconds.

    .venv/bin/python benchmarks/verify_price_coverage.py [--passes 1000] [--seed 1]
"""

from __future__ import annotations

import argparse

from watchkeeper.simulation.verify_price import coverage, true_break_even

COSTS = (0.6, 0.4, 1 / 3, 0.27, 0.2)
"""Verification prices: break-evens of 17%, 38%, 50%, 68% and 100% at draft length 4."""
NOISE = ((0.04, 0.03, 3), (0.10, 0.08, 3), (0.10, 0.08, 5))
"""(round sd, arm sd, rounds): a quiet host, then a loaded one at 3 and 5 rounds."""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--passes", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    if args.passes < 500:
        parser.error("--passes: at least 500 for a coverage figure worth quoting")
    print(f"{args.passes} passes per row, rates 25/50/75%, draft length 4, nominal 95% CIs")
    print("| true break-even | round sd | arm sd | rounds | coverage | stated | wrong bracket |")
    print("|---|---|---|---|---|---|---|")
    for cost in COSTS:
        for round_sd, cell_sd, rounds in NOISE:
            c = coverage(
                args.passes, cost=cost, seed=args.seed, rounds=rounds,
                round_sd=round_sd, cell_sd=cell_sd,
            )  # fmt: skip
            stated = ", ".join(f"{k} {v / c.runs:.0%}" for k, v in sorted(c.kinds.items()))
            print(
                f"| {true_break_even(cost):.0%} | {round_sd:.2f} | {cell_sd:.2f} | {rounds} | "
                f"{c.rate:.1%} | {stated} | {c.wrong_bracket / c.runs:.1%} |"
            )


if __name__ == "__main__":
    main()
