"""Which dips a depth-4 drift verdict may set aside: the rule before and after issue 75, on
seeded synthetic soaks (simulation/soak_series.py, no server), 200 series per scenario by default.

Before: every block beyond both neighbours (shape alone, soak/dips.dip_candidates) was set
aside, up to a tenth of the blocks. After (soak/dips.split_dips): only a dip that something
outside the server explains, at most one per series: the other arm's block at the same time
shares it, or the host's CPU used outside the soak's servers in that block (the sampler's
`host_other_cpu`, soak/hostcpu.py) was both busy and an outlier; the rest stay in the slope
and are named. Each series is a 300-minute soak (150 minutes at depth 4, 35 blocks after
warm-up) beside a second arm simulated from its own seed, its blocks two block lengths later.

The host's CPU outside the servers, a block's mean as a share of all cores, is drawn per
block from its own seed (assumed, not measured on a soak: the column is new): a `quiet` host
at 0.03 (sd 0.01), a `shared` one at 0.40 (sd 0.08), a neighbour's burst adding 0.5 (one of
two cores for the whole block). Scenarios without a host name have no host column (rows
stored before migration 0014), judged by the other arm alone.

Scenarios (the dip multiplies the block's aggregate throughput):

- `A/A`: no dip. Wanted: `no drift`.
- `host blip, both arms`: one block -20% in the middle, the other arm's nearest block too
  (a neighbour's job). Wanted: set aside, `no drift`.
- `one-arm blip`: the same dip in this arm only. Now kept in the slope (the cost of the rule).
- `stall every 10th` / `every 7th`: -20% in every 10th (7th) block, this arm only (the
  server's own). Wanted: never `no drift`.
- `stall -12% every 10th`: smaller stalls, which the slope alone resolves; a series with two
  or more dips kept is held unresolved (`depth.RECURRING_DIPS`).
- `leak -10%`: a decline at the threshold itself (a `no drift` or `no slowdown` there is a
  false resolution at the boundary).
- `leak -10% as the host quietens +8%`: an unpaired series reads the product (-2.8%): its
  absolute throughput cannot tell a leak from a host that got quieter; only a paired soak can.
- `leak + 3 late dips`: a -6% decline over the soak and three -25% dips in its last fifth.
  Wanted: never `no drift`.
- `host burst at a one-arm dip`: the one-arm blip with a burst of the host's CPU in the same
  block, on a quiet and on a shared host. Wanted: set aside, `no drift`.
- `stall every 10th, host bursts at each` / `elsewhere`, `leak + 3 late dips, host bursts
  elsewhere`, `A/A, 3 host bursts`: on a shared host. Wanted: the stalls and the leak never
  `no drift` (one burst-explained stall at most is set aside), A/A `no drift`.
- `one-arm stall, idle neighbours fill the freed cores`: the rule's blind spot. A host kept
  saturated by idle-priority neighbours (nice 19) gives them whatever the server leaves: a
  server that stalls on its own (using 0.9 of the cores, 20% less for one block) reads as
  0.18 more CPU outside it in that block, which is what a neighbour taking the cores reads as.

    PYTHONPATH=. flock /tmp/wk-measure.lock .venv/bin/python benchmarks/soak_dips.py [--series 200]
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from watchkeeper.simulation.soak_series import ORIGIN, SoakModel, simulate_series
from watchkeeper.soak.depth import WARMUP_BLOCKS, block_rows, series_drift, slope_drift
from watchkeeper.soak.depth_figures import HostBusy
from watchkeeper.soak.dips import dip_candidates
from watchkeeper.soak.judgement import BlockRow

THRESHOLD = 0.10
FLOOR = 0.3
MINUTES = 300.0
MODEL = SoakModel()
OTHER_LAG_H = 2 * MODEL.block_s / 3600.0
Rows = list[BlockRow]


def dipped(rows: Rows, at: Sequence[int], factor: float) -> Rows:
    """``rows`` with the blocks at ``at`` (indices after warm-up) multiplied by ``factor``."""
    hit = {WARMUP_BLOCKS + i for i in at}
    return [
        replace(r, throughput_tps=r.throughput_tps * factor) if i in hit else r
        for i, r in enumerate(rows)
    ]


def old_verdict(rows: Rows) -> str:
    """The rule before 6 Dec 2026: every shape candidate set aside, none above a tenth."""
    usable = rows[WARMUP_BLOCKS:]
    values = [r.throughput_tps for r in usable]
    found = dip_candidates(values)
    if len(found) > max(1, len(values) // 10):
        found = []
    keep = [i for i in range(len(usable)) if i not in found]
    drift = slope_drift(
        [usable[i].t_h for i in keep],
        [values[i] for i in keep],
        threshold=THRESHOLD,
        floor=FLOOR,
    )
    assert drift is not None
    return drift.verdict


Scenario = Callable[[Rows, Rows], tuple[Rows, Rows]]
Dips = Callable[[int], list[int]]
"""Block indices after warm-up, given the blocks after warm-up."""
QUIET = (0.03, 0.01)
SHARED = (0.40, 0.08)
"""A host's CPU outside the servers, a block's mean share of all cores: (level, sd)."""
BURST = 0.5
FILLED = (0.10, 0.02, 0.18)
"""A host saturated by idle-priority neighbours: (level, sd) outside a server that uses 0.9
of the cores, and what a -20% stall of its own frees for them (0.2 x 0.9)."""


def _every_at(k: int) -> Dips:
    return lambda n: list(range(k - 1, n, k))


def _middle(n: int) -> list[int]:
    return [n // 2]


def _late_at(n: int) -> list[int]:
    return [n - 10, n - 6, n - 2]


def _elsewhere(n: int) -> list[int]:
    return [n // 6, n // 3, n // 2]


def hosted(
    rows: Rows, seed: int, host: tuple[float, float], bursts: Sequence[int], burst: float = BURST
) -> Rows:
    """``rows`` with each block's `host_other_cpu` drawn from ``host`` (its own seed), plus
    ``burst`` in the blocks at ``bursts`` (indices after warm-up)."""
    level, sd = host
    drawn = np.random.default_rng(200_000 + seed).normal(level, sd, len(rows))
    hit = {WARMUP_BLOCKS + i for i in bursts}
    return [
        replace(r, host_other_cpu=float(np.clip(drawn[i] + (burst if i in hit else 0.0), 0, 1)))
        for i, r in enumerate(rows)
    ]


def _dips(at: Dips, factor: float = 0.8, *, both: bool = False) -> Scenario:
    def apply(mine: Rows, other: Rows) -> tuple[Rows, Rows]:
        where = at(len(mine) - WARMUP_BLOCKS)
        return dipped(mine, where, factor), dipped(other, where, factor) if both else other

    return apply


def _host(
    at: Dips, bursts: Dips, host: tuple[float, float], factor: float = 0.8, burst: float = BURST
) -> Callable[[Rows, Rows, int], tuple[Rows, Rows]]:
    def apply(mine: Rows, other: Rows, seed: int) -> tuple[Rows, Rows]:
        n = len(mine) - WARMUP_BLOCKS
        return hosted(dipped(mine, at(n), factor), seed, host, bursts(n), burst), other

    return apply


def _none(n: int) -> list[int]:
    return []


def _plain(scenario: Scenario) -> Callable[[Rows, Rows, int], tuple[Rows, Rows]]:
    return lambda mine, other, seed: scenario(mine, other)


LEAK6 = replace(MODEL, trend=-0.06)
SCENARIOS: dict[str, tuple[SoakModel, Callable[[Rows, Rows, int], tuple[Rows, Rows]]]] = {
    "A/A": (MODEL, _plain(lambda m, o: (m, o))),
    "host blip, both arms": (MODEL, _plain(_dips(_middle, both=True))),
    "one-arm blip": (MODEL, _plain(_dips(_middle))),
    "stall every 10th": (MODEL, _plain(_dips(_every_at(10)))),
    "stall every 7th": (MODEL, _plain(_dips(_every_at(7)))),
    "stall -12% every 10th": (MODEL, _plain(_dips(_every_at(10), 0.88))),
    "leak -6% + 3 late -25% dips": (LEAK6, _plain(_dips(_late_at, 0.75))),
    "leak -6%, no dips": (LEAK6, _plain(lambda m, o: (m, o))),
    "leak -10% (the threshold)": (replace(MODEL, trend=-0.10), _plain(lambda m, o: (m, o))),
    "leak -10% as the host quietens +8%": (
        replace(MODEL, trend=(1 - 0.10) * 1.08 - 1),
        _plain(lambda m, o: (m, o)),
    ),
    "host burst at a one-arm dip, quiet host": (MODEL, _host(_middle, _middle, QUIET)),
    "host burst at a one-arm dip, shared host": (MODEL, _host(_middle, _middle, SHARED)),
    "one-arm blip, quiet host, no burst": (MODEL, _host(_middle, _none, QUIET)),
    "A/A, shared host, 3 bursts": (MODEL, _host(_none, _elsewhere, SHARED)),
    "stall every 10th, shared host, bursts at each": (
        MODEL,
        _host(_every_at(10), _every_at(10), SHARED),
    ),
    "stall every 10th, shared host, bursts elsewhere": (
        MODEL,
        _host(_every_at(10), _elsewhere, SHARED),
    ),
    "leak -6% + 3 late -25% dips, shared host, bursts elsewhere": (
        LEAK6,
        _host(_late_at, _elsewhere, SHARED, 0.75),
    ),
    "one-arm stall, idle neighbours fill the freed cores": (
        MODEL,
        _host(_middle, _middle, FILLED[:2], burst=FILLED[2]),
    ),
}


def series(model: SoakModel, seed: int) -> tuple[Rows, Rows]:
    mine = block_rows(simulate_series(model, MINUTES, seed), ORIGIN, block_s=model.block_s)
    other = block_rows(
        simulate_series(MODEL, MINUTES, 100_000 + seed), ORIGIN, block_s=MODEL.block_s
    )
    return mine, [replace(r, t_h=r.t_h + OTHER_LAG_H) for r in other]


def run(name: str, n: int) -> dict[str, Any]:
    model, scenario = SCENARIOS[name]
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    aside = by_host = kept = 0
    for seed in range(n):
        mine, other = scenario(*series(model, seed), seed)
        before[old_verdict(mine)] += 1
        drift = series_drift(mine, threshold=THRESHOLD, floor=FLOOR, others=[other])
        assert drift is not None
        after[drift.verdict] += 1
        aside += len(drift.transients)
        by_host += sum(isinstance(t.why, HostBusy) for t in drift.transients)
        kept += len(drift.dips)
    return {
        "before": before,
        "after": after,
        "set_aside": aside,
        "by_host": by_host,
        "named_kept": kept,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=200)
    args = parser.parse_args()
    verdicts = ("no drift", "no slowdown", "inconclusive", "drift")
    print(f"{args.series} series each; verdict counts {' / '.join(verdicts)}")
    print(
        "| scenario | before | after | dips set aside (by the host's CPU) | dips kept and named |"
    )
    print("|---|---|---|---|---|")
    for name in SCENARIOS:
        r = run(name, args.series)
        b = " / ".join(str(r["before"][v]) for v in verdicts)
        a = " / ".join(str(r["after"][v]) for v in verdicts)
        print(f"| {name} | {b} | {a} | {r['set_aside']} ({r['by_host']}) | {r['named_kept']} |")


if __name__ == "__main__":
    main()
