"""The committed soaks and load ladders re-judged with issue 75's rules, from their committed JSON
(no server, no database: the campaigns' own database is not in the repository, so
`watchkeeper report --campaign N` cannot re-render them here).

- **Soaks** (`reports/**/speculative_soak.json`): every series above depth 1 with its `blocks`
  rows, judged three ways on the same blocks: nothing set aside; the rule before 6 Dec 2026
  (every dip by shape alone, up to a tenth of the blocks: `benchmarks/soak_dips.old_verdict`);
  and now (`soak/depth.series_drift` with the other arm's blocks, as `soak/drift.py` calls
  it: a dip set aside only where the other arm's block at the same time dipped too, or where
  the block's stored `host_other_cpu` was busy and an outlier, at most one; the committed
  soaks predate that figure, so only the other arm explains theirs). Beside them, the verdict the committed JSON recorded. Depth-1 series are judged on
  per-request speeds, which the dips rule does not touch.
- **Load ladders** (`reports/*load-ladder*/load_ladder.json`): every SLO-attainment reading
  (`goodput`), its half-width floored by the per-request binomial (`load_compare.binomial_half`)
  from each arm's pooled attainment and requests at that level, as `paired_reading` now does;
  a state that changes, and a zero-width interval, are named.

    PYTHONPATH=. .venv/bin/python benchmarks/rejudge_committed.py [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

from soak_dips import old_verdict

from watchkeeper.analysis.load_compare import (
    ATTAINMENT_THRESHOLD,
    binomial_half,
    state_of,
)
from watchkeeper.soak.depth import WARMUP_BLOCKS, series_drift, slope_drift
from watchkeeper.soak.judgement import BlockRow

ROOT = Path(__file__).resolve().parent.parent
THRESHOLD = 0.10  # soak.drift_threshold, as the committed soaks ran
FLOOR = 0.3  # soak.autocorrelation_floor


def _recorded(data: dict[str, Any], profile: str, conc: int) -> str:
    for d in data.get("drift") or []:
        if d.get("profile") == profile and d.get("concurrency") == conc:
            return str(d.get("verdict") or "(not recorded)")
    return "(not judged)"


def _none_aside(rows: list[BlockRow]) -> str:
    usable = [r for r in rows if r.throughput_tps > 0][WARMUP_BLOCKS:]
    drift = slope_drift(
        [r.t_h for r in usable],
        [r.throughput_tps for r in usable],
        threshold=THRESHOLD,
        floor=FLOOR,
    )
    return "(too few blocks)" if drift is None else drift.verdict


def soaks() -> list[dict[str, Any]]:
    out = []
    for path in sorted(ROOT.glob("reports/**/speculative_soak.json")):
        data = json.loads(path.read_text())
        # Soaks before 29 Nov did not record the work's own requests per block: its requests.
        blocks = {
            (b["profile"], b["concurrency"]): [
                BlockRow.from_json({"work_requests": r["requests"], **r}) for r in b["rows"]
            ]
            for b in data.get("blocks") or []
        }
        for (profile, conc), rows in sorted(blocks.items()):
            if conc <= 1:
                continue
            others = [r for (p, _), r in sorted(blocks.items()) if p != profile]
            now = series_drift(rows, threshold=THRESHOLD, floor=FLOOR, others=others)
            usable = [r for r in rows if r.throughput_tps > 0]
            enough = len(usable) - WARMUP_BLOCKS >= 6
            row = {
                "soak": str(path.relative_to(ROOT)),
                "series": f"{profile} c{conc}",
                "blocks": len(rows),
                "recorded": _recorded(data, profile, conc),
                "nothing_aside": _none_aside(rows) if enough else "(too few blocks)",
                "before": old_verdict(usable) if enough else "(too few blocks)",
                "now": "(too few blocks)" if now is None else now.verdict,
            }
            if now is not None:
                row["now_ci"] = [round(x, 3) for x in now.ci95]
                row["now_change"] = round(now.change, 3)
                row["set_aside"] = [(t.block, round(t.deviation, 3)) for t in now.transients]
                row["kept_dips"] = [(d.block, round(d.deviation, 3)) for d in now.dips]
            out.append(row)
    return out


def _attainment(level: dict[str, Any], arm: str) -> tuple[float, float] | None:
    for lat in level.get("latency") or []:
        if lat.get("arm") == arm and lat.get("requests"):
            return float(lat["good_fraction"]), float(lat["requests"])
    return None


def ladders() -> list[dict[str, Any]]:
    out = []
    for path in sorted(ROOT.glob("reports/*load-ladder*/load_ladder.json")):
        data = json.loads(path.read_text())
        base = data["baseline"]
        levels = {lv["level"]: lv for lv in data.get("levels") or []}
        for cross in data.get("crossovers") or []:
            for lv in cross.get("levels") or []:
                reading = (lv.get("readings") or {}).get("goodput")
                level = levels.get(lv["level"])
                if not reading or level is None or reading.get("low") is None:
                    continue
                cand = _attainment(level, cross["arm"])
                ref = _attainment(level, base)
                if cand is None or ref is None:
                    continue
                est, low, high = reading["estimate"], reading["low"], reading["high"]
                half = (high - low) / 2.0
                floor = binomial_half([cand[0]], [ref[0]], [(cand[1], ref[1])])
                new_half = max(half, floor)
                now = (
                    reading["state"]  # both arms at 0 every round: no floor makes a difference
                    if reading["state"] == "neither meets the SLO"
                    else state_of(est, est - new_half, est + new_half, 0.0, ATTAINMENT_THRESHOLD)
                )
                out.append(
                    {
                        "ladder": str(path.parent.relative_to(ROOT)),
                        "decides": data.get("crossover_metric", "decode"),
                        "arm": cross["arm"],
                        "level": lv["level"],
                        "difference": round(est, 3),
                        "half_before": round(half, 3),
                        "floor": round(floor, 3),
                        "zero_width_before": half <= 0.0,
                        "state_before": reading["state"],
                        "state_now": now,
                    }
                )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    found = {"soaks": soaks(), "ladders": ladders()}
    if args.json:
        print(json.dumps(found, indent=1))
        return
    print("soak series above depth 1: recorded | nothing set aside | before | now")
    for r in found["soaks"]:
        print(
            f"  {r['soak']} {r['series']} ({r['blocks']} blocks): {r['recorded']} | "
            f"{r['nothing_aside']} | {r['before']} | {r['now']}"
            + (
                f" (change {r['now_change']:+.1%}, CI {r['now_ci'][0]:+.1%}..{r['now_ci'][1]:+.1%};"
                f" set aside {r['set_aside']}, kept {r['kept_dips']})"
                if "now_ci" in r
                else ""
            )
        )
    ladder_rows = found["ladders"]
    changed = [r for r in ladder_rows if r["state_before"] != r["state_now"]]
    floored = [r for r in ladder_rows if r["floor"] > r["half_before"]]
    print(
        f"goodput readings: {len(ladder_rows)} (arm x level) in "
        f"{len({r['ladder'] for r in ladder_rows})} ladders; zero-width before: "
        f"{sum(r['zero_width_before'] for r in ladder_rows)}; widened by the floor: "
        f"{len(floored)}; state changed: {len(changed)}"
    )
    for r in floored + [c for c in changed if c not in floored]:
        print(
            f"  {r['ladder']} {r['arm']} at {r['level']} (decides on {r['decides']}): "
            f"{r['difference']:+.3f} +-{r['half_before']:.3f} -> "
            f"+-{max(r['half_before'], r['floor']):.3f} ({r['state_before']} -> {r['state_now']}"
            + (", zero width before)" if r["zero_width_before"] else ")")
        )


if __name__ == "__main__":
    main()
