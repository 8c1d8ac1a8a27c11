"""How far a soak's sizing hint (`soak.paired.pairs_needed`) scatters when it is read from the
few pairs of a real inconclusive soak: before and after issue 75, over `--draws` draws.

The truth: a build at `--speed` (0.93x) against its reference, `--sd` (6%) of spread per
process pair, lag-1 `--r` (0.3), threshold 3%. Its true need is sized from 3000 pairs (so
its estimate holds) and checked by fresh soaks (`decided`). Each draw is a soak of `--pairs`
(6) pairs of that truth; the hint is read from it:

- before: one number, at the draw's own estimate, spread and bias-corrected lag-1, or "not
  even 400";
- after: a range, the point spread to its 80% upper bound, lag-1 fixed at the floor; never
  "not even 400" from fewer than 8 pairs.

It prints the hints' spread (min, median, max), how many gave up, how many ranges hold the
true need, and how often a soak of the hinted length decides the truth (at the range's
ends).

    PYTHONPATH=. .venv/bin/python benchmarks/pairs_needed_scatter.py [--draws 20]
"""

from __future__ import annotations

import argparse
import math
import statistics

import numpy as np

from watchkeeper.analysis.stats import classify
from watchkeeper.soak.ar1 import CONFIDENCE, ar1_rows, ar1_t_interval
from watchkeeper.soak.paired import MAX_SIZED_PAIRS, ar1_draws, fewest_pairs, pairs_needed

THRESHOLD = 0.03
FLOOR = 0.3


def ar1(rng: np.random.Generator, n: int, r: float) -> np.ndarray:
    e = rng.standard_normal(n)
    x = np.empty(n)
    x[0] = e[0]
    for t in range(1, n):
        x[t] = r * x[t - 1] + math.sqrt(1.0 - r * r) * e[t]
    return x


def old_pairs_needed(logs: np.ndarray) -> int | None:
    """`pairs_needed` before issue 75: one number at the series' own point values."""
    rows = ar1_rows(logs, FLOOR, CONFIDENCE)
    mean, r_used, sigma = float(rows.mean), float(rows.r), math.sqrt(float(rows.variance))
    return fewest_pairs(ar1_draws(r_used), mean, sigma, threshold=THRESHOLD, floor=FLOOR)


def decided(n: int, mean: float, sd: float, r: float, reps: int = 400) -> float:
    rng = np.random.default_rng(11)
    hits = 0
    for _ in range(reps):
        i = ar1_t_interval(mean + sd * ar1(rng, n, r), floor=FLOOR)
        hits += classify(*np.exp([i.mean, i.low, i.high]), THRESHOLD) == "slower"
    return hits / reps


def show(name: str, values: list[int | None]) -> None:
    sized = sorted(v for v in values if v is not None)
    gave_up = len(values) - len(sized)
    spread = f"{sized[0]} / {statistics.median(sized):.0f} / {sized[-1]}" if sized else "-"
    print(f"  {name}: min / median / max {spread}; over {MAX_SIZED_PAIRS}: {gave_up}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--draws", type=int, default=20)
    parser.add_argument("--pairs", type=int, default=6)
    parser.add_argument("--speed", type=float, default=0.93)
    parser.add_argument("--sd", type=float, default=0.06)
    parser.add_argument("--r", type=float, default=0.3)
    args = parser.parse_args()
    mean = math.log(args.speed)
    truth = pairs_needed(mean + args.sd * ar1(np.random.default_rng(7), 3000, args.r),
                         threshold=THRESHOLD, floor=FLOOR)  # fmt: skip
    assert truth is not None and truth.low is not None
    need = truth.low
    print(f"truth {args.speed}x, sd {args.sd}, r {args.r}: {need} pairs "
          f"(decided {decided(need, mean, args.sd, args.r):.0%} of fresh soaks)")  # fmt: skip
    olds: list[int | None] = []
    lows: list[int | None] = []
    highs: list[int | None] = []
    for seed in range(args.draws):
        logs = mean + args.sd * ar1(np.random.default_rng(100 + seed), args.pairs, args.r)
        olds.append(old_pairs_needed(logs))
        new = pairs_needed(logs, threshold=THRESHOLD, floor=FLOOR)
        assert new is not None
        lows.append(new.low)
        highs.append(new.high)
    print(f"{args.draws} draws of {args.pairs} pairs:")
    show("before (one hint)", olds)
    show("after, range's low end", lows)
    show("after, range's high end", highs)
    held = sum(
        lo is not None and lo <= need and (hi is None or need <= hi)
        for lo, hi in zip(lows, highs, strict=True)
    )
    print(f"  ranges holding the true {need}: {held} of {args.draws}")
    for name, values in (("before", olds), ("after, low", lows), ("after, high", highs)):
        powers = [decided(v, mean, args.sd, args.r, reps=200) for v in values if v is not None]
        if powers:
            print(f"  {name}: fresh soaks of the hinted length decide "
                  f"{statistics.median(powers):.0%} (median), {min(powers):.0%} (worst)")  # fmt: skip


if __name__ == "__main__":
    main()
