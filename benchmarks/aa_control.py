"""The race's A/A control rule, simulated before it decides anything: how often an identical
twin of the baseline reads biased (false withholds: every pick of the sweep withheld for
nothing) and how often a handicap of the baseline's own server (5%, 10%: the 7 Dec Qwen sweeps
showed 5-20%) is caught, one round over 12/18/36 tasks (the interval over tasks) and three
rounds over 18 tasks (over rounds and tasks), with and without recurring stalls of the
baseline. Seeded, no server (watchkeeper/simulation/aa_control.py).

    PYTHONPATH=. .venv/bin/python benchmarks/aa_control.py [--sweeps 400]
"""

from __future__ import annotations

import argparse

from watchkeeper.simulation.aa_control import Shape, alarm_rate
from watchkeeper.simulation.rates import wilson_text

DESIGNS = ((12, 1), (18, 1), (36, 1), (18, 3))
SHAPES = {"plain": Shape(), "stalls 5%": Shape(stall_share=0.05)}


def _rate(hits: int, n: int) -> str:
    if n == 0:
        return "no interval"
    return wilson_text(hits, n)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sweeps", type=int, default=400)
    args = parser.parse_args()
    print(
        f"{args.sweeps} sweeps a cell; cell sd 0.057 an arm, process offset 0.0057 an arm, "
        "round drift 0.02 an arm where there are rounds"
    )
    print("| shape | tasks x rounds | A/A: false 'biased' | 5% handicap caught | 10% caught |")
    print("| --- | --- | ---: | ---: | ---: |")
    for name, shape in SHAPES.items():
        for tasks, rounds in DESIGNS:
            cells = [
                _rate(
                    *alarm_rate(
                        sweeps=args.sweeps,
                        tasks=tasks,
                        rounds=rounds,
                        handicap=h,
                        shape=shape,
                        seed=int(h * 100) + tasks + rounds,
                    )
                )
                for h in (0.0, 0.05, 0.10)
            ]
            print(f"| {name} | {tasks} x {rounds} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
