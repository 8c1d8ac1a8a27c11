"""The depth-4 drift verdict on a real soak's committed blocks: does it resolve as simulated,
does the noise match the model it was sized with, and does it still catch a slowdown?

`soak_depth4_power.py` sizes the verdict on a model of the host (simulation/soak_series.py: prefill
stalls, the host's own block noise 1.2%, AR(1) r 0.3). This reads the `blocks` rows a real
soak commits (`reports/speculative_soak.json`: start, requests, the work's requests, tokens
and wall time, aggregate tok/s, median decode tok/s per block) and prints, for every series
above depth 1:

- the verdict as the soak judged it (`soak/depth.py:series_drift`): change, 95% CI, its
  half-width, the lag-1 estimate and the value used;
- the noise: the sd of the log aggregate's residuals from a line and a step halfway (what the
  model calls host_sd), and the block medians' sd (the old estimator's input);
- how fast it resolved: the half-width after the first 12, 18, 25 blocks and all of them,
  against the simulation's median at those counts;
- the old estimator on the same blocks (Theil-Sen over block medians of per-request decode
  speed, as depth 1 is still judged), for the side-by-side;
- a positive control on the real noise: the same blocks with every block in the second half
  slowed by `--step` (15%), which must read `drift`; and an A/A by construction, the real
  blocks with their time order shuffled (`--shuffles` seeds: no trend can survive a shuffle),
  counted as soaks without a slowdown reason.

    .venv/bin/python benchmarks/soak_depth4_real.py [reports/speculative_soak.json]
        [--step 0.15] [--shuffles 20] [--json]
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

import numpy as np

from watchkeeper.soak.depth import WARMUP_BLOCKS, line_and_step, series_drift
from watchkeeper.soak.judgement import BlockRow
from watchkeeper.soak.trends import relative_trend

THRESHOLD = 0.10  # soak.drift_threshold
FLOOR = 0.3  # soak.autocorrelation_floor
SIMULATED = {12: 0.057, 18: 0.042, 25: 0.034, 37: 0.027}
"""The simulation's median half-width after these blocks of a series (two of them warm-up),
blocks replaying one task order (`soak_depth4_power.py`, docs/soak.md's table)."""


def residual_sd(rows: list[dict[str, Any]]) -> float:
    """The sd of log aggregate throughput around a line and a step halfway, as
    `slope_drift` reads its noise (warm-up blocks set aside, as `series_drift` does)."""
    rows = rows[WARMUP_BLOCKS:]
    x = np.asarray([r["t_h"] for r in rows], float)
    y = np.log(np.asarray([r["throughput_tps"] for r in rows], float))
    _, res = line_and_step(x, y)
    return float(math.sqrt(res @ res / max(x.size - 3, 1)))


def old_estimator(rows: list[dict[str, Any]]) -> dict[str, float] | None:
    """Theil-Sen over block medians of per-request decode speed, as a change over the span."""
    points = [(r["t_h"], r["median_decode_tps"]) for r in rows if r["median_decode_tps"]]
    if len(points) < 6:
        return None
    t = relative_trend(points, points[-1][0] - points[0][0])
    if t is None:
        return None
    return {"change": t.change, "low": t.low, "high": t.high, "half_width": t.half_width}


def judge(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    """The soak's verdict on committed rows, as the figures' JSON holds it."""
    drift = series_drift([BlockRow.from_json(r) for r in rows], threshold=THRESHOLD, floor=FLOOR)
    return None if drift is None else drift.to_json()


def analyse(series: dict[str, Any], step: float, shuffles: int) -> dict[str, Any]:
    rows = [r for r in series["rows"] if r["throughput_tps"] > 0]
    verdict = judge(rows)
    growth = {}
    for k in (12, 18, 25, len(rows)):
        part = judge(rows[:k]) if k <= len(rows) else None
        if part is not None:
            growth[k] = part["half_width"]
    mid = (rows[0]["t_h"] + rows[-1]["t_h"]) / 2.0
    slowed = [
        {**r, "throughput_tps": r["throughput_tps"] * (1 - step)} if r["t_h"] >= mid else r
        for r in rows
    ]
    control = judge(slowed)
    rng = np.random.default_rng(1)
    aa_clean = 0
    for _ in range(shuffles):
        values = [r["throughput_tps"] for r in rows]
        order = rng.permutation(len(values))
        shuffled = [{**r, "throughput_tps": values[i]} for r, i in zip(rows, order, strict=True)]
        got = judge(shuffled)
        aa_clean += got is None or not (got["verdict"] == "drift" and got["change"] < 0)
    medians = [r["median_decode_tps"] for r in rows if r["median_decode_tps"]]
    return {
        "series": f"{series['profile']} c{series['concurrency']}",
        "blocks": len(rows),
        "verdict": verdict,
        "noise_sd": residual_sd(rows),
        "median_decode_sd": float(np.std(np.log(medians), ddof=1)) if len(medians) > 1 else None,
        "half_width_by_blocks": growth,
        "old_estimator": old_estimator(rows),
        "positive_control": control,
        "aa_shuffled_without_reason": [aa_clean, shuffles],
    }


def show(out: dict[str, Any]) -> None:
    v = out["verdict"]
    print(f"## {out['series']}: {out['blocks']} blocks")
    if v is None:
        print("  too few blocks to judge")
        return
    low, high = v["change_ci95"]
    ac = v["autocorrelation"]
    print(
        f"  verdict: {v['verdict']}, {v['change']:+.1%} over {v['span_h'] * 60:.0f} min "
        f"(95% CI {low:+.1%}..{high:+.1%}, half-width {v['half_width']:.1%}); lag-1 "
        f"{ac['estimate']:+.2f}, used {ac['used']:.2f}; n_eff {v['n_eff']:.1f}"
    )
    sd = out["median_decode_sd"]
    print(
        f"  noise: aggregate {out['noise_sd']:.1%} a block (the model, replayed: ~1.7%); block "
        f"medians "
        f"of per-request decode {sd:.1%}"
        if sd is not None
        else ""
    )
    for k, hw in out["half_width_by_blocks"].items():
        sim = SIMULATED.get(k)
        print(
            f"  after {k} blocks: half-width {hw:.1%}"
            + (f" (simulated median {sim:.1%})" if sim else "")
        )
    old = out["old_estimator"]
    if old is not None:
        print(
            f"  old estimator (block medians, Theil-Sen): {old['change']:+.1%} "
            f"({old['low']:+.1%}..{old['high']:+.1%}, half-width {old['half_width']:.1%})"
        )
    c = out["positive_control"]
    if c is not None:
        lo, hi = c["change_ci95"]
        print(
            f"  positive control (second half slowed): {c['verdict']}, {c['change']:+.1%} "
            f"({lo:+.1%}..{hi:+.1%})"
        )
    clean, total = out["aa_shuffled_without_reason"]
    print(f"  A/A (time order shuffled): {clean} of {total} without a slowdown reason")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("soak", nargs="?", type=Path,
                        default=Path("reports/speculative_soak.json"))  # fmt: skip
    parser.add_argument("--step", type=float, default=0.15, help="the control's slowdown")
    parser.add_argument("--shuffles", type=int, default=20, help="A/A shuffles per series")
    parser.add_argument("--json", action="store_true", help="print JSON instead")
    args = parser.parse_args()
    data = json.loads(args.soak.read_text(encoding="utf-8"))
    outs = [
        analyse(s, args.step, args.shuffles)
        for s in data.get("blocks", [])
        if int(s["concurrency"]) > 1
    ]
    if args.json:
        print(json.dumps(outs, indent=2, default=float))
        return
    print(f"{args.soak}: soak campaign {data.get('campaign_id')}, {data.get('command')}")
    for out in outs:
        show(out)


if __name__ == "__main__":
    main()
