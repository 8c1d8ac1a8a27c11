"""Decision quality of the racing sweep, replayed on full tables.

A full table is a sweep in which every arm ran every round (`watchkeeper sweep --no-race`, or a
bench of the same arms): the full sweep's pick per category is `decide` on all of it (95%).
Each replay draws the rounds of a race from the table's rounds, with replacement, and runs the
racing rule (analysis/racing.py) on them exactly as `watchkeeper sweep` does, with as many
planned rounds as the table has: arms it drops stop contributing cells from that round on. It
prints, over the replays:

- how often the race's pick per category equals the full sweep's pick, and how often it is
  equal or within the threshold of it (the race's pick's full-table ratio to the baseline at
  least 1 / (1 + min_effect) of the full pick's);
- how often each arm was dropped, when and by which rule (an early drop of an arm the full
  table does not call slower than 1 / (1 + min_effect) on every category is an early-rule
  error and is counted);
- the fraction of the full sweep's requests the race used.

With `--aa`, the table's candidates are replaced by the identical twins of the baseline (arms
whose name has `twin`): the race should recommend the baseline in every category in at least
95% of replays.

    .venv/bin/python benchmarks/racing.py [--table benchmarks/fixtures/racing_smollm2.json]
        [--replays 200] [--aa] [--json]
    .venv/bin/python benchmarks/racing.py --export sqlite:///wk.db 12 13 --out FILE
        (a fixture from stored campaigns; their rounds are numbered on in order)
"""

from __future__ import annotations

import argparse
import json
import math
import re
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from watchkeeper.analysis.racing import decide, simulate
from watchkeeper.analysis.racing_types import Cell, RaceArm, RaceSettings, Table, cells_from_rows
from watchkeeper.analysis.stats import paired_speedup
from watchkeeper.store.db import Database
from watchkeeper.store.racing_store import RacingStore

DEFAULT_TABLE = Path(__file__).parent / "fixtures" / "racing_smollm2.json"


def load(path: Path) -> tuple[list[RaceArm], list[Cell], dict[str, Any]]:
    data = json.loads(path.read_text())
    arms = [RaceArm(a["name"], float(a["cost"]), bool(a.get("baseline"))) for a in data["arms"]]
    return arms, cells_from_rows(data["cells"]), data.get("source", {})


def arms_from_names(names: list[str]) -> list[dict[str, Any]]:
    """Costs from the sweep's arm names: baseline, twins, n-gram types, drafts by n_max."""
    out = []
    for name in names:
        m = re.search(r"draft(\d+)$", name)
        if name.endswith("-baseline"):
            out.append({"name": name, "cost": 0.0, "baseline": True})
        elif "twin" in name:
            out.append({"name": name, "cost": 0.5})
        elif "ngram" in name:
            out.append({"name": name, "cost": 1.0})
        else:
            out.append({"name": name, "cost": 2.0 + float(m.group(1)) if m else 100.0})
    return sorted(out, key=lambda a: (not a.get("baseline"), a["cost"], a["name"]))


def export(url: str, campaigns: list[int], out: Path, arms: list[dict[str, Any]]) -> None:
    db = Database(url)
    try:
        rows: list[dict[str, Any]] = []
        offset = 0
        for cid in campaigns:
            cells = RacingStore(db).cells(cid)
            for c in cells:
                rows.append({**c, "round": c["round"] + offset, "campaign": cid})
            offset = max((r["round"] for r in rows), default=offset)
    finally:
        db.close()
    if not arms:
        arms = arms_from_names(sorted({r["arm"] for r in rows}))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"source": {"campaigns": campaigns}, "arms": arms, "cells": rows}, indent=0)
        + "\n"
    )


def _estimates(table: Table, arms: list[str], base: str, category: str) -> dict[str, float]:
    out = {base: 1.0}
    for a in arms:
        if a != base:
            ci = paired_speedup(table.pairs(a, base, category), min_rounds=1 << 30)
            out[a] = ci.estimate if ci is not None else 0.0
    return out


def replay(
    arms: list[RaceArm],
    cells: list[Cell],
    *,
    replays: int,
    seed: int,
    settings: RaceSettings,
) -> dict[str, Any]:
    rounds = sorted({c.round for c in cells})
    names = [a.name for a in arms]
    base = next(a.name for a in arms if a.baseline)
    full_table = Table(cells)
    full = {d.category: d for d in decide(full_table, arms, names, settings, confidence=0.95)}
    est = {cat: _estimates(full_table, names, base, cat) for cat in full}
    slower_everywhere = {
        a
        for a in names
        if a != base and all(est[cat][a] < 1.0 / (1.0 + settings.min_effect) for cat in full)
    }
    rng = np.random.default_rng(seed)
    equal: Counter[str] = Counter()
    within: Counter[str] = Counter()
    baseline_picks: Counter[str] = Counter()
    all_baseline = 0
    drops: dict[str, Counter[str]] = defaultdict(Counter)
    early_errors = 0
    used = []
    rounds_run = []
    for _ in range(replays):
        order = [int(r) for r in rng.choice(rounds, size=len(rounds), replace=True)]
        sim = simulate(cells, arms, order, settings)
        used.append(sim.requests / len(cells))
        rounds_run.append(sim.state.rounds)
        for d in sim.state.drops:
            drops[d.arm][f"{d.rule}@{d.round}"] += 1
            if d.rule == "early" and d.arm not in slower_everywhere:
                early_errors += 1
        picks = {d.category: d.pick for d in sim.state.decisions}
        if all(p == base for p in picks.values()):
            all_baseline += 1
        for cat, f in full.items():
            mine = picks.get(cat, base)
            baseline_picks[cat] += mine == base
            if mine == f.pick:
                equal[cat] += 1
                within[cat] += 1
            elif est[cat].get(mine, 0.0) * (1.0 + settings.min_effect) >= est[cat][f.pick]:
                within[cat] += 1
    cats = sorted(full)
    return {
        "replays": replays,
        "rounds_in_table": len(rounds),
        "arms": names,
        "full_pick": {c: full[c].pick for c in cats},
        "full_status": {c: full[c].status for c in cats},
        "full_estimates": {c: {a: round(v, 3) for a, v in est[c].items()} for c in cats},
        "equal": {c: equal[c] / replays for c in cats},
        "equal_or_within": {c: within[c] / replays for c in cats},
        "baseline_pick": {c: baseline_picks[c] / replays for c in cats},
        "all_categories_baseline": all_baseline / replays,
        "drops": {a: dict(v) for a, v in sorted(drops.items())},
        "early_rule_errors": early_errors,
        "request_fraction_mean": float(np.mean(used)),
        "request_fraction_range": [float(np.min(used)), float(np.max(used))],
        "rounds_mean": float(np.mean(rounds_run)),
        "settings": settings.method,
    }


INJECTED = {
    # arm: (new name, cost, {category: factor}, factor elsewhere)
    "twin1": ("injected-ngram", 1.0, {"code_edit": 1.4, "summarize": 1.1}, 1.0),
    "twin2": ("injected-draft", 6.0, {}, 0.5),
}
"""`--inject`: real A/A noise with known effects: twin1 becomes an n-gram-like arm (1.4x on
code edits, 1.1x on summaries, equal elsewhere), twin2 a draft-like arm at half speed
everywhere (what a draft model costs on two CPU cores)."""


def inject(arms: list[RaceArm], cells: list[Cell]) -> tuple[list[RaceArm], list[Cell]]:
    """A full table with known answers from an A/A table: each twin's measured cells times a
    fixed factor per category, so the table keeps the host's real noise."""
    out_arms = [a for a in arms if a.baseline]
    renamed = {}
    for a in arms:
        key = next((k for k in INJECTED if a.name.endswith(k)), None)
        if key is not None:
            name, cost, _, _ = INJECTED[key]
            renamed[a.name] = key
            out_arms.append(RaceArm(name, cost))
    base = out_arms[0].name
    out_cells = []
    for c in cells:
        if c.arm == base:
            out_cells.append(c)
        elif c.arm in renamed:
            name, _, factors, other = INJECTED[renamed[c.arm]]
            f = factors.get(c.category, other)
            out_cells.append(Cell(name, c.task_id, c.category, c.round, c.tps * f))
    return out_arms, out_cells


def as_aa(arms: list[RaceArm], cells: list[Cell]) -> tuple[list[RaceArm], list[Cell]]:
    """The baseline and its identical twins only."""
    keep = [a for a in arms if a.baseline or "twin" in a.name]
    names = {a.name for a in keep}
    return keep, [c for c in cells if c.arm in names]


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--table", type=Path, default=DEFAULT_TABLE)
    p.add_argument("--replays", type=int, default=200)
    p.add_argument("--seed", type=int, default=7)
    p.add_argument("--resamples", type=int, default=300, help="bootstrap resamples per CI")
    p.add_argument("--min-effect", type=float, default=0.03)
    p.add_argument("--aa", action="store_true", help="baseline and its twins only")
    p.add_argument(
        "--inject", action="store_true", help="twins turned into arms with known effects"
    )
    p.add_argument("--export", nargs="+", metavar="URL CAMPAIGN", help="write a fixture")
    p.add_argument("--arms", help="JSON list of {name, cost, baseline} for --export")
    p.add_argument("--out", type=Path, default=DEFAULT_TABLE)
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    if args.export:
        url, *ids = args.export
        export(url, [int(i) for i in ids], args.out, json.loads(args.arms or "[]"))
        print(f"wrote {args.out}")
        return 0
    arms, cells, source = load(args.table)
    if args.inject:
        arms, cells = inject(*as_aa(arms, cells))
    elif args.aa:
        arms, cells = as_aa(arms, cells)
    else:
        arms = [a for a in arms if "twin" not in a.name]
        names = {a.name for a in arms}
        cells = [c for c in cells if c.arm in names]
    rounds = len({c.round for c in cells})
    settings = RaceSettings(min_effect=args.min_effect, max_rounds=rounds, resamples=args.resamples)
    out = replay(arms, cells, replays=args.replays, seed=args.seed, settings=settings)
    out["source"] = source
    out["table"] = str(args.table)
    out["aa"] = args.aa
    out["inject"] = args.inject
    if args.json:
        print(json.dumps(out, indent=1))
        return 0
    kind = "injected effects on A/A" if args.inject else ("A/A" if args.aa else "full")
    print(
        f"table {args.table} ({kind}): "
        f"{len(arms)} arms, {rounds} rounds, {len(cells)} requests; {args.replays} replays"
    )
    print(f"racing rule: {settings.method}")
    print("category     full pick (status)                 race = full   race ~ full   baseline")
    for c in sorted(out["full_pick"]):
        print(
            f"{c:<12} {out['full_pick'][c] + ' (' + out['full_status'][c] + ')':<34} "
            f"{out['equal'][c]:>10.1%} {out['equal_or_within'][c]:>12.1%} "
            f"{out['baseline_pick'][c]:>10.1%}"
        )
    print(f"every category picks the baseline: {out['all_categories_baseline']:.1%} of replays")
    lo, hi = out["request_fraction_range"]
    print(
        f"requests used: {out['request_fraction_mean']:.1%} of the full table on average "
        f"({lo:.1%}-{hi:.1%}); rounds run {out['rounds_mean']:.2f} on average"
    )
    for arm, counts in out["drops"].items():
        print(f"  dropped {arm}: " + ", ".join(f"{k} x{v}" for k, v in sorted(counts.items())))
    print(
        f"early-rule drops of an arm the full table does not call slower everywhere: "
        f"{out['early_rule_errors']}"
    )
    if not math.isfinite(out["request_fraction_mean"]):
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
