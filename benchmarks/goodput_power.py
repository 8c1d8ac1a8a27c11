"""SLO attainment (the rate ladder's default crossover metric): coverage, zero-width intervals,
false resolutions and power, before and after the binomial floor of issue 75, on simulated
levels (simulation/goodput.py: binomial requests around a per-round probability that moves
with the host, logit sd 0.5 shared by both arms and 0.3 each arm's own; an assumption, not a
measurement of this host: the one real figure is a round that a hiccup moved from -0.19 to
-0.31, tests/load/test_load_verdicts.py).

    PYTHONPATH=. .venv/bin/python benchmarks/goodput_power.py [--levels 1000]
"""

from __future__ import annotations

import argparse

from watchkeeper.simulation.goodput import Level, simulate

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--levels", type=int, default=1000)
    args = parser.parse_args()
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
