"""Which dips a depth-4 drift verdict may set aside: the rule before and after issue 75, on
seeded synthetic soaks (simulation/soak_series.py, no server), 200 series per scenario by default.

Before: every block beyond both neighbours (shape alone, soak/dips.dip_candidates) was set
aside, up to a tenth of the blocks. After (soak/dips.split_dips): only a dip the other arm's
block at the same time shares, at most one per series; the rest stay in the slope and are
named. Each series is a 300-minute soak (150 minutes at depth 4, 35 blocks after warm-up)
beside a second arm simulated from its own seed, its blocks two block lengths later.

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

    PYTHONPATH=. flock /tmp/wk-measure.lock .venv/bin/python benchmarks/soak_dips.py [--series 200]
"""

from __future__ import annotations

import argparse
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from watchkeeper.simulation.soak_series import ORIGIN, SoakModel, simulate_series
from watchkeeper.soak.depth import WARMUP_BLOCKS, block_rows, series_drift, slope_drift
from watchkeeper.soak.dips import dip_candidates

THRESHOLD = 0.10
FLOOR = 0.3
MINUTES = 300.0
MODEL = SoakModel()
OTHER_LAG_H = 2 * MODEL.block_s / 3600.0
Rows = list[dict[str, Any]]


def dipped(rows: Rows, at: Sequence[int], factor: float) -> Rows:
    """``rows`` with the blocks at ``at`` (indices after warm-up) multiplied by ``factor``."""
    hit = {WARMUP_BLOCKS + i for i in at}
    return [
        {**r, "throughput_tps": r["throughput_tps"] * factor} if i in hit else r
        for i, r in enumerate(rows)
    ]


def old_verdict(rows: Rows) -> str:
    """The rule before 6 Dec 2026: every shape candidate set aside, none above a tenth."""
    usable = rows[WARMUP_BLOCKS:]
    values = [r["throughput_tps"] for r in usable]
    found = dip_candidates(values)
    if len(found) > max(1, len(values) // 10):
        found = []
    keep = [i for i in range(len(usable)) if i not in found]
    drift = slope_drift(
        [usable[i]["t_h"] for i in keep],
        [values[i] for i in keep],
        threshold=THRESHOLD,
        floor=FLOOR,
    )
    assert drift is not None
    return str(drift["verdict"])


Scenario = Callable[[Rows, Rows], tuple[Rows, Rows]]


def _every(k: int, factor: float = 0.8) -> Scenario:
    def apply(mine: Rows, other: Rows) -> tuple[Rows, Rows]:
        n = len(mine) - WARMUP_BLOCKS
        return dipped(mine, range(k - 1, n, k), factor), other

    return apply


def _blip(both: bool) -> Scenario:
    def apply(mine: Rows, other: Rows) -> tuple[Rows, Rows]:
        middle = (len(mine) - WARMUP_BLOCKS) // 2
        return dipped(mine, [middle], 0.8), dipped(other, [middle], 0.8) if both else other

    return apply


def _late(mine: Rows, other: Rows) -> tuple[Rows, Rows]:
    n = len(mine) - WARMUP_BLOCKS
    return dipped(mine, [n - 10, n - 6, n - 2], 0.75), other


SCENARIOS: dict[str, tuple[SoakModel, Scenario]] = {
    "A/A": (MODEL, lambda m, o: (m, o)),
    "host blip, both arms": (MODEL, _blip(True)),
    "one-arm blip": (MODEL, _blip(False)),
    "stall every 10th": (MODEL, _every(10)),
    "stall every 7th": (MODEL, _every(7)),
    "stall -12% every 10th": (MODEL, _every(10, 0.88)),
    "leak -6% + 3 late -25% dips": (replace(MODEL, trend=-0.06), _late),
    "leak -6%, no dips": (replace(MODEL, trend=-0.06), lambda m, o: (m, o)),
    "leak -10% (the threshold)": (replace(MODEL, trend=-0.10), lambda m, o: (m, o)),
    "leak -10% as the host quietens +8%": (
        replace(MODEL, trend=(1 - 0.10) * 1.08 - 1),
        lambda m, o: (m, o),
    ),
}


def series(model: SoakModel, seed: int) -> tuple[Rows, Rows]:
    mine = block_rows(simulate_series(model, MINUTES, seed), ORIGIN, block_s=model.block_s)
    other = block_rows(
        simulate_series(MODEL, MINUTES, 100_000 + seed), ORIGIN, block_s=MODEL.block_s
    )
    return mine, [{**r, "t_h": r["t_h"] + OTHER_LAG_H} for r in other]


def run(name: str, n: int) -> dict[str, Any]:
    model, scenario = SCENARIOS[name]
    before: Counter[str] = Counter()
    after: Counter[str] = Counter()
    aside = kept = 0
    for seed in range(n):
        mine, other = scenario(*series(model, seed))
        before[old_verdict(mine)] += 1
        drift = series_drift(mine, threshold=THRESHOLD, floor=FLOOR, others=[other])
        assert drift is not None
        after[drift["verdict"]] += 1
        aside += len(drift.get("transients", []))
        kept += len(drift.get("dips", []))
    return {"before": before, "after": after, "set_aside": aside, "named_kept": kept}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--series", type=int, default=200)
    args = parser.parse_args()
    verdicts = ("no drift", "no slowdown", "inconclusive", "drift")
    print(f"{args.series} series each; verdict counts {' / '.join(verdicts)}")
    print("| scenario | before | after | dips set aside | dips kept and named |")
    print("|---|---|---|---|---|")
    for name in SCENARIOS:
        r = run(name, args.series)
        b = " / ".join(str(r["before"][v]) for v in verdicts)
        a = " / ".join(str(r["after"][v]) for v in verdicts)
        print(f"| {name} | {b} | {a} | {r['set_aside']} | {r['named_kept']} |")


if __name__ == "__main__":
    main()
