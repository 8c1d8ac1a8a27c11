"""Acceptance of each draft length per position and per category, where the speed cannot win.

The sweep's ceiling rule drops draft-model arms before their first round when a draft step
costs too much of a target step (0.73 on two CPU cores), so the committed sweep says nothing
about the request's own question: how do draft lengths 4, 8 and 16 accept on tool calls and on
prose? Acceptance does not depend on the hardware (it is the draft and target models agreeing),
so it travels to a GPU where the same pair can win. This script sends the task set's first
task(s) of each category to each arm once, at temperature 0 with answers cut at `--max-tokens`,
and reads the server's own speculative counters (/metrics) before and after every request:
per category, drafted and accepted tokens and the per-position acceptance (the share of drafts
surviving to position i), the mean accepted length per draft, and each arm's peak RSS over the
baseline's. It prints the forecast speed-up at other draft-to-target cost ratios from the
measured mean accepted length (`analysis/speculation.py:measured_bound`, verification priced
at one decode step: a GPU's), marked as a forecast: nothing here measures a speed-up.

    flock /tmp/wk-measure.lock .venv/bin/python benchmarks/acceptance_probes.py \
        [--profiles qwen-baseline,qwen-draft4,qwen-draft8,qwen-draft16] [--per-category 1]
        [--max-tokens 64] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import defaultdict
from dataclasses import replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from watchkeeper.analysis.acceptance import delta
from watchkeeper.analysis.speculation import measured_bound
from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.config import Config
from watchkeeper.load.client import chat
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.server.counters import EMPTY, SpecCounters
from watchkeeper.server.endpoints import fetch_metrics, make_http_client
from watchkeeper.server.launch import prepare, serve

RATIOS = (0.02, 0.05, 0.1, 0.25)


def _row(c: SpecCounters, n_max: int | None) -> dict[str, Any]:
    per = list(c.per_position)
    if n_max:
        per = (per + [0.0] * n_max)[:n_max]
    return {
        "drafts": int(c.drafts),
        "drafted": int(c.drafted),
        "accepted": int(c.accepted),
        "acceptance": c.accepted / c.drafted if c.drafted else None,
        "accepted_per_draft": c.accepted / c.drafts if c.drafts else None,
        "per_position": [p / c.drafts for p in per] if c.drafts else [],
    }


def probe(config: Config, profile: str, tasks: list[Any]) -> dict[str, Any]:
    prepared = prepare(config, profile)
    n_max = prepared.profile.draft_n_max if prepared.profile.draft_model else None
    by_cat: dict[str, SpecCounters] = defaultdict(lambda: EMPTY)
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve(config, prepared, log_path=Path(tmp) / "server.log") as server,
        make_http_client(server.base_url, request_timeout_s=600) as client,
    ):
        chat(client, tasks[0], seq=0, top_logprobs=0)  # warm-up, not counted
        for i, task in enumerate(tasks, start=1):
            before = fetch_metrics(client)
            sample = chat(client, task, seq=i, top_logprobs=0)
            after = fetch_metrics(client)
            if sample.ok:
                by_cat[task.category] = by_cat[task.category] + delta(before, after)
            print(f"{profile} {i}/{len(tasks)} {time.monotonic() - started:.0f} s", file=sys.stderr)
        rss = server.peak_rss_bytes()
    total = EMPTY
    for c in by_cat.values():
        total = total + c
    return {
        "profile": profile,
        "n_max": n_max,
        "seconds": round(time.monotonic() - started, 1),
        "peak_rss_mib": round(rss / (1 << 20)) if rss else None,
        "all": _row(total, n_max),
        "categories": {cat: _row(c, n_max) for cat, c in sorted(by_cat.items())},
    }


def forecast(row: dict[str, Any], n_max: int) -> list[float]:
    acc = row["accepted_per_draft"] or 0.0
    return [
        measured_bound(
            mean_accepted=acc,
            draft_length=float(n_max),
            cost_ratio=c,
            verify_tokens=None,
            verify_cost=None,
            acceptance=row["acceptance"] or 0.0,
        ).predicted_speedup
        for c in RATIOS
    ]


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{x:.0%}"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profiles", default="qwen-baseline,qwen-draft4,qwen-draft8,qwen-draft16")
    parser.add_argument("--per-category", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=64)
    parser.add_argument(
        "--category", action="append", help="only these categories (e.g. tool_call, prose)"
    )
    parser.add_argument("--json", action="store_true")
    parser.add_argument(
        "--from",
        dest="source",
        nargs="+",
        metavar="F",
        help="print saved --json output (one arm per line; several files: one table)",
    )
    args = parser.parse_args()
    if args.source:
        lines = [x for f in args.source for x in Path(f).read_text(encoding="utf-8").splitlines()]
        arms = [json.loads(x) for x in lines if x.startswith("{")]
        minutes = round(sum(a["seconds"] for a in arms) / 60, 1)
        return show({"tasks": arms[0]["tasks"], "max_tokens": arms[0]["max_tokens"],
                     "arms": arms, "minutes": minutes})  # fmt: skip
    unwind_on_sigterm()
    config = Config()
    tasks = [
        replace(t, max_tokens=min(t.max_tokens, args.max_tokens))
        for t in select(
            load_taskset(config.bench.resolved_taskset()), per_category=args.per_category
        )
        if not args.category or t.category in args.category
    ]
    started = time.monotonic()
    arms = []
    for name in (p for p in args.profiles.split(",") if p):
        arm = {**probe(config, name, tasks), "tasks": len(tasks), "max_tokens": args.max_tokens}
        arms.append(arm)
        if args.json:  # one arm per line as it finishes: a cut run keeps what it measured
            print(json.dumps(arm), flush=True)
    if args.json:
        return 0
    minutes = round((time.monotonic() - started) / 60, 1)
    return show({"tasks": len(tasks), "max_tokens": args.max_tokens, "arms": arms,
                 "minutes": minutes})  # fmt: skip


def show(out: dict[str, Any]) -> int:
    arms = out["arms"]
    base = next((a for a in arms if not a["all"]["drafts"]), None)
    print(f"{out['tasks']} tasks, answers cut at {out['max_tokens']} tokens, {out['minutes']} min")
    cats = sorted({c for a in arms for c in a["categories"]})
    for a in arms:
        if not a["n_max"]:
            continue
        t = a["all"]
        added = (
            f", peak RSS {a['peak_rss_mib'] - base['peak_rss_mib']:+d} MiB over the baseline"
            if base and a["peak_rss_mib"] and base["peak_rss_mib"]
            else ""
        )
        print(f"\n{a['profile']} (n_max {a['n_max']}): acceptance {_pct(t['acceptance'])} "
              f"({t['accepted']}/{t['drafted']} tokens, {t['drafts']} drafts), "
              f"{t['accepted_per_draft'] or 0:.2f} accepted per draft{added}")  # fmt: skip
        print("  per position: " + " ".join(_pct(p) for p in t["per_position"]))
        for cat in cats:
            r = a["categories"].get(cat)
            if r:
                print(f"  {cat:<11} {_pct(r['acceptance']):>5} ({r['accepted']}/{r['drafted']})"
                      f"  by position: " + " ".join(_pct(p) for p in r["per_position"][:8]))  # fmt: skip
        fc = ", ".join(
            f"c={c:g}: {x:.2f}x" for c, x in zip(RATIOS, forecast(t, a["n_max"]), strict=True)
        )
        print(f"  FORECAST (not measured; verification at one decode step): {fc}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
