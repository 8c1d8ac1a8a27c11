"""How long a soak must run before its depth-4 drift verdict resolves, and whether it keeps its
power: simulated, no server (simulation/soak_series.py's seeded closed loop, judged by soak/depth.py).

The soak of the recommendation runs two arms at depths 1 and 4 in blocks of `--block`
minutes, so each (arm, depth 4) series gets one block every 4 blocks and the soak spends half
its time at depth 4. For both task orders at depth 4 (`replayed`: every block the same order,
as `plan.block_cycle` sends since 28 Nov 2026; `shuffled`: each block its own stretch, as
before) it prints, over `--seeds` soaks of one series:

- the 95% CI half-width of the drift over the soak (median and 90th percentile) and how many
  soaks resolved (`no drift`: the CI inside +-10%; or `no slowdown`: only its upper end past
  +10%, resolved since 29 Nov 2026), on an A/A series;
- at `--depth4-minutes` (default 150) of depth-4 soak: the A/A count (soaks with no slowdown
  reason, wanted in at least 19 of 20) and the positive control (a server slowed 15% halfway,
  read as drift);
- the old estimator (Theil-Sen over block medians, shuffled order) after the 100-minute soak
  of 27 Nov, against its measured half-width there (~21%: -16..+26% and -11..+35%);
- the replayed design's half-width at `--depth4-minutes` if the host's own block noise
  (`host_sd`, 1.2% measured by `benchmarks/depth4_host_wander.py`) were 3.4% or 6%.

    .venv/bin/python benchmarks/soak_depth4_power.py [--seeds 20] [--block 2]
        [--depth4-minutes 150] [--json]
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from typing import Any

import numpy as np

from watchkeeper.simulation.soak_series import ORIGIN, SoakModel, simulate_series
from watchkeeper.soak.depth import block_rows, is_slowdown, series_drift
from watchkeeper.soak.depth_figures import SlopeDrift
from watchkeeper.soak.trends import block_medians, relative_trend

THRESHOLD = 0.10
FLOOR = 0.3  # soak.autocorrelation_floor
RESOLVED = ("no drift", "no slowdown")
"""The depth-4 verdicts that resolve a series (soak/depth.classify_drift)."""


def judged(model: SoakModel, depth4_minutes: float, seed: int) -> SlopeDrift:
    soak_minutes = 2.0 * depth4_minutes  # depths 1 and 4 alternate
    samples = simulate_series(model, soak_minutes, seed)
    rows = block_rows(samples, ORIGIN, block_s=model.block_s)
    drift = series_drift(rows, threshold=THRESHOLD, floor=FLOOR)
    assert drift is not None
    return drift


def old_half_width(model: SoakModel, soak_minutes: float, seed: int) -> float:
    """soak/drift.py's depth-1 estimator on the same series: Theil-Sen over block medians,
    its CI as a change over the soak relative to the median block."""
    samples = simulate_series(model, soak_minutes, seed)
    points = [((w - ORIGIN).total_seconds() / 3600.0, v) for w, v in block_medians(samples)]
    relative = relative_trend(points, soak_minutes / 60.0)
    assert relative is not None
    return relative.half_width


def widths_for(model: SoakModel, seeds: range) -> list[dict[str, Any]]:
    widths = []
    for minutes in (50, 75, 100, 150):
        aa = [judged(model, minutes, s) for s in seeds]
        hw = [d.half_width for d in aa]
        widths.append(
            {
                "depth4_minutes": minutes,
                "soak_minutes": 2 * minutes,
                "blocks_per_series": aa[0].blocks,
                "half_width_median": float(np.median(hw)),
                "half_width_p90": float(np.percentile(hw, 90)),
                "resolved": sum(d.verdict in RESOLVED for d in aa),
            }
        )
    return widths


def controls(model: SoakModel, at: float, seeds: range) -> dict[str, Any]:
    aa = [judged(model, at, s) for s in seeds]
    step = [judged(replace(model, step=-0.15), at, s) for s in seeds]
    return {
        "aa_no_reason": sum(not is_slowdown(d) for d in aa),
        "positive_control_detected": sum(is_slowdown(d) for d in step),
        "positive_control_change_median": float(np.median([d.change for d in step])),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--block", type=float, default=2.0, help="block length, minutes")
    parser.add_argument("--depth4-minutes", type=float, default=150.0)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    block_s = args.block * 60.0
    replayed = SoakModel(block_s=block_s, cycle_s=4 * block_s)
    designs = {"replayed": replayed, "shuffled": replace(replayed, replayed=False)}
    seeds = range(args.seeds)
    at = args.depth4_minutes
    out: dict[str, Any] = {"model": {f: getattr(replayed, f) for f in replayed.__slots__}}
    for name, model in designs.items():
        out[name] = {"half_width": widths_for(model, seeds), **controls(model, at, seeds)}
    out["old_estimator_half_width_100min"] = float(
        np.median([old_half_width(designs["shuffled"], 100.0, s) for s in seeds])
    )
    out["sensitivity"] = {
        f"host_sd {sd:.1%}": float(
            np.median([judged(replace(replayed, host_sd=sd), at, s).half_width for s in seeds])
        )
        for sd in (0.012, 0.034, 0.06)
    }
    if args.json:
        print(json.dumps(out, indent=2))
        return
    print(
        f"block {args.block:g} min, one depth-4 block per arm every {4 * args.block:g} min, "
        f"{args.seeds} seeds, threshold {THRESHOLD:.0%}"
    )
    for name in designs:
        print(f"\n{name} task order at depth 4:")
        print("depth-4 min  soak min  blocks/series  half-width median  p90  resolved (A/A)")
        for w in out[name]["half_width"]:
            print(
                f"{w['depth4_minutes']:>11}  {w['soak_minutes']:>8}  {w['blocks_per_series']:>13}  "
                f"{w['half_width_median']:>17.1%}  {w['half_width_p90']:.1%}  "
                f"{w['resolved']}/{args.seeds}"
            )
        c = out[name]
        print(
            f"at {at:g} depth-4 min: A/A without a slowdown reason {c['aa_no_reason']}/"
            f"{args.seeds}; 15% slowdown halfway read as drift {c['positive_control_detected']}/"
            f"{args.seeds} (median change over the soak {c['positive_control_change_median']:+.1%})"
        )
    print(
        "\nold estimator (Theil-Sen over block medians, shuffled) after the 100-min soak: "
        f"half-width {out['old_estimator_half_width_100min']:.1%} (measured 27 Nov: ~21%)"
    )
    print(
        f"replayed: half-width at {at:g} depth-4 min if the host's own block noise were: "
        + ", ".join(f"{k} {v:.1%}" for k, v in out["sensitivity"].items())
    )


if __name__ == "__main__":
    main()
