"""SLO attainment (the rate ladder's default crossover metric): coverage, zero-width intervals,
false resolutions and power, before and after the binomial floor of issue 75, on simulated
levels (simulation/goodput.py: binomial requests around a per-round probability that moves
with the host, logit sd 0.5 shared by both arms and 0.3 each arm's own; an assumption, not a
measurement of this host: the one real figure is a round that a hiccup moved from -0.19 to
-0.31, tests/load/test_load_verdicts.py).

    PYTHONPATH=. .venv/bin/python benchmarks/goodput_power.py [--levels 1000]

`--control` measures the fake-server positive control instead (simulation.goodput.CONTROL,
90% -> 60% within the SLO, 40 requests x 5 rounds, and its A/A at 90%, `CONTROL_AA`): the
share read `costs` (power) and the A/A's false resolutions, with Wilson 95% intervals.

    PYTHONPATH=. .venv/bin/python benchmarks/goodput_power.py --control --levels 5000
"""

from __future__ import annotations

import argparse

from watchkeeper.analysis.stats import wilson
from watchkeeper.simulation.goodput import CONTROL, CONTROL_AA, Level, Rates, simulate

SCENARIOS = {
    "A/A 95%, 3 requests x 3 rounds": Level(0.95, 0.95, 3, 3),
    "A/A 80%, 30 x 3": Level(0.8, 0.8, 30, 3),
    "-10 points (90 -> 80%), 3 x 3": Level(0.9, 0.8, 3, 3),
    "-10 points, 30 x 3": Level(0.9, 0.8, 30, 3),
    "-10 points, 100 x 3": Level(0.9, 0.8, 100, 3),
    "-10 points, 30 x 5": Level(0.9, 0.8, 30, 5),
    "-10 points, 30 x 8": Level(0.9, 0.8, 30, 8),
    "-10 points, 30 x 12": Level(0.9, 0.8, 30, 12),
    "-30 points (90 -> 60%), 40 x 3": Level(0.9, 0.6, 40, 3),
    "-30 points, 40 x 5": Level(0.9, 0.6, 40, 5),
}


def _share(rates: Rates, count: int) -> str:
    low, high = wilson(count, rates.levels)
    return f"{count} of {rates.levels} ({rates.share(count):.1%}, Wilson {low:.1%}-{high:.1%})"


def control(levels: int) -> None:
    """The positive control's power and its A/A, seeds 1 and 2 (the test draws its own)."""
    for seed in (1, 2):
        caught = simulate(CONTROL, levels, seed=seed)
        aa = simulate(CONTROL_AA, levels, seed=seed)
        print(f"seed {seed}: control (truth {caught.truth:+.3f}) read costs in "
              f"{_share(caught, caught.costs)}, covered {caught.share(caught.covered):.1%}; "
              f"A/A resolved in {_share(aa, aa.decided)} (costs {aa.costs}), covered "
              f"{aa.share(aa.covered):.1%}")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, default=1000)
    parser.add_argument("--control", action="store_true", help="the positive control only")
    args = parser.parse_args()
    if args.control:
        control(args.levels)
        return
    print(f"{args.levels} levels each; before -> after")
    print("| scenario | truth | coverage | zero-width CI | decided (pays or costs) |")
    print("|---|---|---|---|---|")
    for name, level in SCENARIOS.items():
        old = simulate(level, args.levels, seed=1, floor=False)
        new = simulate(level, args.levels, seed=1, floor=True)
        cells = [
            f"{old.share(getattr(old, k)):.1%} -> {new.share(getattr(new, k)):.1%}"
            for k in ("covered", "zero_width", "decided")
        ]
        print(f"| {name} | {new.truth:+.3f} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
