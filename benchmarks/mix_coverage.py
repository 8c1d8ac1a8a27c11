"""Coverage of the workload mix's CI, rounds only against rounds and tasks: simulated sweeps,
no server (analysis/workload_mix.py).

A unit serves tasks the sweep never sent, so the mix's interval is a claim about the tasks of
each kind, not about the sweep's own. Each simulated sweep draws fresh tasks per category
(task log effects around the category's true log speed-up, sd `task_sd`), a round effect
shared by every task of a round (`round_sd`) and cell noise (`cell_sd`), fits each category
as the sweep does (per-round means, per-task means) and judges the task set's own mix
(equal weights) both ways. Printed per scenario, over `--replicates` sweeps:

- coverage: how often the 95% CI holds the true mix speed-up, 1 / sum_c(w_c / exp(mu_c));
- calls: how often the verdict reads `faster` or `slower`.

Scenarios (6 categories x 3 tasks x 5 rounds, as the default sweep of 2026-11-28):
- `aa`: identical servers (every mu_c = 0); a verdict there is a false alarm;
- `host`: this host's spreads as that sweep measured them: one category whose tasks differ
  widely (code_edit, task sd 0.35 in log: its CIs spanned 0.59-2.35), the others sd 0.05,
  round sd 0.02, cell sd 0.03; true speed-ups 1.18x on code_edit and 1.02x elsewhere (about
  ngram-mod's);
- `positive`: every category 1.15x with tasks alike (sd 0.02): a change it must catch.

    .venv/bin/python benchmarks/mix_coverage.py [--replicates 2000] [--seed 0] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
from dataclasses import dataclass

import numpy as np

from watchkeeper.analysis.workload_mix import Mix, mix_speedup

CATEGORIES = ("code_edit", "code_gen", "multi_turn", "prose", "summarize", "tool_call")
THRESHOLD = 0.03


@dataclass(frozen=True)
class Scenario:
    name: str
    mu: dict[str, float]
    task_sd: dict[str, float]
    round_sd: float = 0.02
    cell_sd: float = 0.03


def scenarios() -> list[Scenario]:
    flat = {c: 0.05 for c in CATEGORIES}
    return [
        Scenario("aa", {c: 0.0 for c in CATEGORIES}, flat),
        Scenario(
            "host",
            {c: math.log(1.18 if c == "code_edit" else 1.02) for c in CATEGORIES},
            {**flat, "code_edit": 0.35},
        ),
        Scenario(
            "positive", {c: math.log(1.15) for c in CATEGORIES}, {c: 0.02 for c in CATEGORIES}
        ),
    ]


def one_sweep(
    s: Scenario, rng: np.random.Generator, tasks: int, rounds: int
) -> tuple[dict[str, dict[int, float]], dict[str, tuple[float, ...]]]:
    shared = rng.normal(0.0, s.round_sd, rounds)
    per_round: dict[str, dict[int, float]] = {}
    per_task: dict[str, tuple[float, ...]] = {}
    for c in CATEGORIES:
        effects = rng.normal(s.mu[c], s.task_sd[c], tasks)
        table = effects[:, None] + shared[None, :] + rng.normal(0.0, s.cell_sd, (tasks, rounds))
        per_round[c] = {r + 1: float(math.exp(v)) for r, v in enumerate(table.mean(axis=0))}
        per_task[c] = tuple(float(v) for v in table.mean(axis=1))
    return per_round, per_task


def run(
    s: Scenario, replicates: int, seed: int, tasks: int = 3, rounds: int = 5
) -> dict[str, object]:
    mix = Mix(tuple((c, 1.0 / len(CATEGORIES)) for c in CATEGORIES))
    truth = 1.0 / math.fsum(w / math.exp(s.mu[c]) for c, w in mix.weights)
    rng = np.random.default_rng(seed)
    held = {"rounds only": 0, "rounds and tasks": 0}
    called = {"rounds only": 0, "rounds and tasks": 0}
    for _ in range(replicates):
        per_round, per_task = one_sweep(s, rng, tasks, rounds)
        for label, given in (("rounds only", None), ("rounds and tasks", per_task)):
            m = mix_speedup("x", per_round, mix, THRESHOLD, per_task=given)
            assert m.low is not None and m.high is not None
            held[label] += m.low <= truth <= m.high
            called[label] += m.verdict in ("faster", "slower")
    return {
        "scenario": s.name,
        "true_speedup": round(truth, 4),
        "replicates": replicates,
        "coverage": {k: round(v / replicates, 4) for k, v in held.items()},
        "faster_or_slower": {k: round(v / replicates, 4) for k, v in called.items()},
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--replicates", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    results = [run(s, args.replicates, args.seed) for s in scenarios()]
    if args.json:
        print(json.dumps(results, indent=2))
        return
    print(f"95% CI of the task set's own mix, {args.replicates} simulated sweeps per scenario")
    print(f"{'scenario':<10} {'true':>6}  {'coverage r / r+t':>17}  {'faster|slower r / r+t':>22}")
    for r in results:
        cov, call = r["coverage"], r["faster_or_slower"]
        assert isinstance(cov, dict) and isinstance(call, dict)
        print(
            f"{r['scenario']:<10} {r['true_speedup']:>6.3f}  "
            f"{cov['rounds only']:>8.1%} / {cov['rounds and tasks']:>6.1%}  "
            f"{call['rounds only']:>12.1%} / {call['rounds and tasks']:>6.1%}"
        )


if __name__ == "__main__":
    main()
