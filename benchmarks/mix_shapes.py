"""The workload mix's CI (analysis/workload_mix.py) when task effects are not normal, its
power at this host's task spreads, and the recommendation's family-wise rate: simulated
sweeps, no server. Issue 75; `mix_coverage.py` has the normal-effects baseline.

The estimand, as the code computes it and as the truth here is computed: within a category
each task counts once (the geometric mean of its task speed-ups, i.e. exp of the mean task log
effect), across categories time adds (1 / sum_c w_c / s_c). Each sweep: 6 categories x
`tasks` x 5 rounds, round sd 0.02, cell sd 0.03, other categories' tasks sd 0.05 around 1.02x.
code_edit's task effects are drawn in one of three shapes:

- `normal`: log effects normal, sd 0.35 around log 1.18 (the host's code_edit spread);
- `skewed`: log 1.18 + 0.35 (E - 1), E exponential (a long slow-to-fast tail);
- `bimodal`: 30% of tasks at 2x, the rest 1x (the issue's shape).

Printed per shape, mix (equal weights; 0.7 on code_edit) and tasks per category: coverage of
the 95% CI. Then, at 3 tasks a category, the family-wise rate: four arms identical to the
baseline (every task 1.0x, a 2% instance offset per task), how often `choose_for_mix`
recommends one (each arm's own 95% CI; the guard: Bonferroni over the four on the guard's
floor, `task_floor(guard=True)`), with a Wilson interval; the power of a uniform 1.10x /
1.15x at the host's task spreads; and the per-category picks' family-wise rate: with every
arm at 1.0x, how often some category's pick names an arm (`recommend._choose` picks where an
arm's own category CI reads `faster`; `paired_speedup`, `--resamples` bootstrap resamples).

    PYTHONPATH=. flock /tmp/wk-measure.lock .venv/bin/python benchmarks/mix_shapes.py [--sweeps 1000]
    PYTHONPATH=. .venv/bin/python benchmarks/mix_shapes.py --only-family --family-sweeps 1000 \
        --category-sweeps 400
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable

import numpy as np

from watchkeeper.analysis.category_tasks import family_low
from watchkeeper.analysis.stats import Pair, paired_speedup, wilson
from watchkeeper.analysis.workload_mix import Mix, choose_for_mix, mix_speedup

CATEGORIES = ("code_edit", "code_gen", "multi_turn", "prose", "summarize", "tool_call")
THRESHOLD = 0.03
ROUNDS = 5
Draw = Callable[[np.random.Generator, int], np.ndarray]


def normal(mu: float, sd: float) -> tuple[Draw, float]:
    return (lambda rng, n: rng.normal(mu, sd, n)), mu


def skewed(mu: float, sd: float) -> tuple[Draw, float]:
    return (lambda rng, n: mu + sd * (rng.exponential(1.0, n) - 1.0)), mu


def bimodal(share: float, high: float) -> tuple[Draw, float]:
    return (
        lambda rng, n: np.where(rng.random(n) < share, math.log(high), 0.0),
        share * math.log(high),
    )


SHAPES = {
    "normal": normal(math.log(1.18), 0.35),
    "skewed": skewed(math.log(1.18), 0.35),
    "bimodal": bimodal(0.3, 2.0),
}


def sweep(
    rng: np.random.Generator, draws: dict[str, Draw], tasks: int
) -> tuple[dict[str, dict[int, float]], dict[str, tuple[float, ...]]]:
    shared = rng.normal(0.0, 0.02, ROUNDS)
    per_round: dict[str, dict[int, float]] = {}
    per_task: dict[str, tuple[float, ...]] = {}
    for c in CATEGORIES:
        effects = draws[c](rng, tasks)
        table = effects[:, None] + shared[None, :] + rng.normal(0.0, 0.03, (tasks, ROUNDS))
        per_round[c] = {r + 1: float(math.exp(v)) for r, v in enumerate(table.mean(axis=0))}
        per_task[c] = tuple(float(v) for v in table.mean(axis=1))
    return per_round, per_task


def others(mu: float = math.log(1.02), sd: float = 0.05) -> dict[str, tuple[Draw, float]]:
    return {c: normal(mu, sd) for c in CATEGORIES[1:]}


def coverage(shape: str, mix: Mix, tasks: int, sweeps: int, seed: int) -> float:
    setup = {"code_edit": SHAPES[shape], **others()}
    truth = 1.0 / math.fsum(w / math.exp(setup[c][1]) for c, w in mix.weights)
    rng = np.random.default_rng(seed)
    held = 0
    for _ in range(sweeps):
        per_round, per_task = sweep(rng, {c: d for c, (d, _) in setup.items()}, tasks)
        m = mix_speedup("x", per_round, mix, THRESHOLD, per_task=per_task)
        assert m.low is not None and m.high is not None
        held += m.low <= truth <= m.high
    return held / sweeps


def family_rate(mix: Mix, sweeps: int, seed: int, family: int, spread: float = 0.02) -> float:
    """Four arms whose mix speed-up is 1.0x: how often one is recommended. ``spread``: the
    code_edit tasks' log sd around 1.0x (0.02: identical arms, a 2% instance offset per task;
    0.35: arms that help some edits and hurt others, the host's code_edit spread)."""
    draws = {c: normal(0.0, spread if c == "code_edit" else 0.02)[0] for c in CATEGORIES}
    rng = np.random.default_rng(seed)
    picked = 0
    for _ in range(sweeps):
        speedups = []
        for arm in range(4):
            per_round, per_task = sweep(rng, draws, 3)
            speedups.append(
                mix_speedup(f"a{arm}", per_round, mix, THRESHOLD, per_task=per_task, family=family)
            )
        picked += choose_for_mix(mix, speedups, {}).profile is not None
    return picked / sweeps


def power(speedup: float, mix: Mix, sweeps: int, seed: int, family: int) -> float:
    setup = {"code_edit": normal(math.log(speedup), 0.35), **others(math.log(speedup))}
    draws = {c: d for c, (d, _) in setup.items()}
    rng = np.random.default_rng(seed)
    called = 0
    for _ in range(sweeps):
        per_round, per_task = sweep(rng, draws, 3)
        m = mix_speedup("x", per_round, mix, THRESHOLD, per_task=per_task, family=family)
        called += choose_for_mix(mix, [m], {}).profile is not None
    return called / sweeps


def category_family_rate(sweeps: int, seed: int, spread: float, resamples: int) -> tuple[int, int]:
    """Four arms at 1.0x, 6 categories x 3 tasks x 5 rounds each: in how many sweeps some
    category's pick is named, (on each arm's own CI reading `faster`, with the family-wise
    bound over the 24 comparisons above 1 too: `recommend.family_low`)."""
    rng = np.random.default_rng(seed)
    picked = guarded = 0
    for _ in range(sweeps):
        named = kept = False
        for _arm in range(4):
            shared = rng.normal(0.0, 0.02, ROUNDS)
            for c in CATEGORIES:
                sd = spread if c == "code_edit" else 0.02
                table = (
                    rng.normal(0.0, sd, 3)[:, None]
                    + shared[None, :]
                    + rng.normal(0.0, 0.03, (3, ROUNDS))
                )
                pairs = [
                    Pair(f"t{t}", r + 1, 10.0, 10.0 * math.exp(float(table[t, r])))
                    for t in range(3)
                    for r in range(ROUNDS)
                ]
                ci = paired_speedup(pairs, resamples=resamples, seed=1, threshold=THRESHOLD)
                faster = ci is not None and ci.verdict == "faster"
                named = named or faster
                kept = kept or (faster and ci is not None and family_low(ci, 24) > 1.0)
        picked += named
        guarded += kept
    return picked, guarded


def _wilson(count: int, n: int) -> str:
    low, high = wilson(count, n)
    return f"{count} of {n} ({count / n:.1%}, Wilson {low:.1%}-{high:.1%})"


def family_only(sweeps: int, category_sweeps: int, resamples: int) -> None:
    """The recommendation's family-wise rates and the guard's price in power."""
    equal = Mix(tuple((c, 1.0 / 6) for c in CATEGORIES))
    for spread in (0.02, 0.35):
        for family in (1, 4):
            count = round(family_rate(equal, sweeps, 2, family, spread) * sweeps)
            label = "each arm's own 95% CI" if family == 1 else "the guard over 4 arms"
            print(f"mix: four arms at 1.0x, code_edit task sd {spread}, {label}: one "
                  f"recommended in {_wilson(count, sweeps)}")  # fmt: skip
    for speedup in (1.10, 1.15):
        p1, p4 = (power(speedup, equal, sweeps, 3, f) for f in (1, 4))
        print(f"mix: uniform {speedup:.2f}x at the host's task spreads, 3 tasks: recommended "
              f"{p1:.1%} (one arm), {p4:.1%} (guarded for 4 arms)")  # fmt: skip
    for spread in (0.02, 0.35) if category_sweeps else ():
        own, kept = category_family_rate(category_sweeps, 4, spread, resamples)
        print(f"categories: four arms at 1.0x, code_edit task sd {spread}: some category "
              f"pick named in {_wilson(own, category_sweeps)} on each arm's own CI, "
              f"{_wilson(kept, category_sweeps)} guarded over 24")  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=1000)
    parser.add_argument("--only-family", action="store_true", help="family-wise rates only")
    parser.add_argument("--family-sweeps", type=int, default=1000)
    parser.add_argument("--category-sweeps", type=int, default=400)
    parser.add_argument("--resamples", type=int, default=200)
    args = parser.parse_args()
    if args.only_family:
        family_only(args.family_sweeps, args.category_sweeps, args.resamples)
        return
    equal = Mix(tuple((c, 1.0 / 6) for c in CATEGORIES))
    heavy = Mix(tuple((c, 0.7 if c == "code_edit" else 0.06) for c in CATEGORIES))
    print(f"{args.sweeps} sweeps each")
    print("| code_edit's tasks | mix | 3 tasks a category | 6 | 12 |")
    print("|---|---|---|---|---|")
    for shape in SHAPES:
        for name, mix in (("equal", equal), ("0.7 code_edit", heavy)):
            cells = [f"{coverage(shape, mix, t, args.sweeps, 1):.1%}" for t in (3, 6, 12)]
            print(f"| {shape} | {name} | " + " | ".join(cells) + " |")
    for spread in (0.02, 0.35):
        for family in (1, 4):
            rate = family_rate(equal, args.sweeps, 2, family, spread)
            label = "each arm's own 95% CI" if family == 1 else "the guard over 4 arms"
            print(f"four arms at 1.0x, code_edit task sd {spread}, {label}: one recommended "
                  f"in {rate:.1%}")  # fmt: skip
    for speedup in (1.10, 1.15):
        p1, p4 = (power(speedup, equal, args.sweeps, 3, f) for f in (1, 4))
        print(f"uniform {speedup:.2f}x at the host's task spreads, 3 tasks: recommended "
              f"{p1:.1%} (one arm), {p4:.1%} (guarded for 4 arms)")  # fmt: skip


if __name__ == "__main__":
    main()
