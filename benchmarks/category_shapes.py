"""Coverage of one category's CI (`analysis.stats.paired_speedup`: the two-way bootstrap,
floored over rounds and tasks) when its tasks' effects are normal, skewed or bimodal: seeded
sweeps of one category, no server (issue 75). The truth is the estimand the code computes:
exp of the mean task log effect of the population the tasks are drawn from. Tasks x 5 rounds,
round sd 2%, cell sd 3%; task log effects: normal (sd 0.35 around log 1.18, the host's
code_edit spread), skewed (log 1.18 + 0.35 (E - 1)), bimodal (30% of tasks at 2x, the rest 1x).

    PYTHONPATH=. flock /tmp/wk-measure.lock .venv/bin/python benchmarks/category_shapes.py [--sims 200]
"""

from __future__ import annotations

import argparse
import math

import numpy as np

from watchkeeper.analysis.stats import Pair, paired_speedup

ROUNDS = 5


def effects(rng: np.random.Generator, shape: str, n: int) -> tuple[np.ndarray, float]:
    mu = math.log(1.18)
    if shape == "bimodal":
        return np.where(rng.random(n) < 0.3, math.log(2.0), 0.0), 0.3 * math.log(2.0)
    if shape == "skewed":
        return mu + 0.35 * (rng.exponential(1.0, n) - 1.0), mu
    return rng.normal(mu, 0.35, n), mu


def coverage(shape: str, tasks: int, sims: int, seed: int, resamples: int) -> float:
    rng = np.random.default_rng(seed)
    held = 0
    for _ in range(sims):
        eff, truth = effects(rng, shape, tasks)
        shared = rng.normal(0.0, 0.02, ROUNDS)
        table = eff[:, None] + shared[None, :] + rng.normal(0.0, 0.03, (tasks, ROUNDS))
        pairs = [
            Pair(f"t{t}", r + 1, 10.0, 10.0 * math.exp(float(table[t, r])))
            for t in range(tasks)
            for r in range(ROUNDS)
        ]
        ci = paired_speedup(pairs, resamples=resamples, seed=1)
        assert ci is not None and ci.has_ci
        held += math.log(ci.low) <= truth <= math.log(ci.high)
    return held / sims


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sims", type=int, default=200)
    parser.add_argument("--resamples", type=int, default=400)
    args = parser.parse_args()
    print(f"{args.sims} simulated categories per cell, {args.resamples} bootstrap resamples")
    print("| task effects | 3 tasks | 6 | 12 |")
    print("|---|---|---|---|")
    for shape in ("normal", "skewed", "bimodal"):
        cells = [f"{coverage(shape, t, args.sims, 1, args.resamples):.1%}" for t in (3, 6, 12)]
        print(f"| {shape} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
