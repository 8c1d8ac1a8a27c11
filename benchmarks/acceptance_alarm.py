"""The acceptance alarms on simulated series, no server (checks/acceptance_alarm.py with
checks/acceptance_sim.py's shapes): false alarms on A/A, catches on the positive controls.

Each replicate draws a series' history (`--history` runs) and one more run judged against it:

- collapse, A/A: the run from the same series; a `collapse` is a false alarm;
- collapse, controls: the run's acceptance times 0.25 (a drafter that stopped fitting) and
  times 0.45 (just under half); times 0.7 (a 30% fall: real, but not a collapse) must stay
  quiet here, the acceptance series and the soak's drift own it;
- loop, A/A: an ordinary run; negative control: a copy task (acceptance ~0.96 on output that
  does not repeat itself); positive controls: 30% and all of the run's requests looping.

Shapes: series means 0.3, 0.75, 0.95, run-to-run sd 3 and 6 points, 12 and 36 requests a run.

    .venv/bin/python benchmarks/acceptance_alarm.py [--replicates 2000] [--history 5] [--seed 0]
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np

from watchkeeper.checks.acceptance_alarm import judge_collapse, judge_loop, run_acceptance
from watchkeeper.checks.acceptance_sim import SeriesShape, simulate_run


def collapse_rate(shape: SeriesShape, scale: float, history: int, n: int, seed: int) -> float:
    rng = np.random.default_rng(seed)
    fired = 0
    for i in range(n):
        past = [run_acceptance(f"h{j}", simulate_run(rng, shape)) for j in range(history)]
        now = run_acceptance(f"r{i}", simulate_run(rng, shape, scale=scale))
        fired += judge_collapse(past, now).fired
    return fired / n


def loop_rate(shape: SeriesShape, n: int, seed: int, **kw: float | bool) -> float:
    rng = np.random.default_rng(seed)
    runs = (run_acceptance("r", simulate_run(rng, shape, **kw)) for _ in range(n))  # type: ignore[arg-type]
    return sum(judge_loop(r).fired for r in runs) / n


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--replicates", type=int, default=2000)
    ap.add_argument("--history", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    a = ap.parse_args()
    print(f"{a.replicates} replicates per cell, history {a.history} runs, seed {a.seed}")
    print("collapse: rate of `collapse` verdicts (A/A x1.0; a 30% fall x0.7 must stay quiet)")
    print(f"{'mean':>5} {'run sd':>6} {'req':>4} {'A/A':>7} {'x0.7':>7} {'x0.45':>7} {'x0.25':>7}")
    for mean in (0.3, 0.75, 0.95):
        for run_sd in (0.03, 0.06):
            for requests in (12, 36):
                shape = SeriesShape(mean=mean, run_sd=run_sd, requests=requests)
                rates = [
                    collapse_rate(shape, s, a.history, a.replicates, a.seed)
                    for s in (1.0, 0.7, 0.45, 0.25)
                ]
                cells = " ".join(f"{r:7.2%}" for r in rates)
                print(f"{mean:5.2f} {run_sd:6.2f} {requests:4d} {cells}")
    print("loop: rate of loop alarms")
    print(f"{'mean':>5} {'req':>4} {'A/A':>7} {'copy':>7} {'30%':>7} {'all':>7}")
    for mean in (0.3, 0.75, 0.95):
        for requests in (12, 36):
            shape = replace(SeriesShape(mean=mean), requests=requests)
            rates = [
                loop_rate(shape, a.replicates, a.seed),
                loop_rate(shape, a.replicates, a.seed, copy_task=True),
                loop_rate(shape, a.replicates, a.seed, loop_share=0.3),
                loop_rate(shape, a.replicates, a.seed, loop_share=1.0),
            ]
            cells = " ".join(f"{r:7.2%}" for r in rates)
            print(f"{mean:5.2f} {requests:4d} {cells}")


if __name__ == "__main__":
    main()
