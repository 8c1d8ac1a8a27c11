"""What do the identity probes' logprobs cost the server, and would they move a throughput figure?

One server (the baseline profile), the bench's task set without tool tasks (llama-server sends
no logprobs with tools, so those requests would be identical). Every round sends each task as
a clean request (no logprobs: what the bench's throughput figures read) and as probe requests
with `top_logprobs` = k for each k in `--top-k`, back to back, the order rotated per task and
per round so a disturbance lands on each kind alike. Each probe kind is then judged against
the clean requests exactly as the bench judges an arm against its baseline: the paired ratio
of server decode tok/s (probe/clean), two-way bootstrap over tasks and rounds, +-3% threshold.

Why it matters: on an H100 top-2 logprobs halved the baseline's decode (380-425 -> 207-257
tok/s) and inflated every speed-up. The bench now keeps them out of throughput; this script
shows what they would have cost on this host.

    .venv/bin/python benchmarks/probe_cost.py [--profile smollm2-baseline] [--rounds 6]
        [--per-category 3] [--top-k 2,5] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from watchkeeper.analysis.stats import Pair, median, paired_speedup
from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.config import Config
from watchkeeper.load.client import chat
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.server.endpoints import make_http_client
from watchkeeper.server.launch import prepare, serve

CLEAN = 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile", default="smollm2-baseline")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--per-category", type=int, default=3)
    parser.add_argument("--top-k", default="2,5", help="probe kinds, comma-separated k values")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    unwind_on_sigterm()
    ks = sorted({int(k) for k in args.top_k.split(",") if k.strip()})
    if not ks or min(ks) < 1:
        parser.error("--top-k needs positive integers, e.g. 2,5")
    kinds = [CLEAN, *ks]
    config = Config()
    tasks = [
        t
        for t in select(
            load_taskset(config.bench.resolved_taskset()), per_category=args.per_category
        )
        if not t.tools
    ]
    prepared = prepare(config, args.profile)
    tps: dict[int, dict[tuple[str, int], float]] = {k: {} for k in kinds}
    started = time.monotonic()
    with (
        tempfile.TemporaryDirectory() as tmp,
        serve(config, prepared, log_path=Path(tmp) / "server.log") as server,
        make_http_client(server.base_url, request_timeout_s=300) as client,
    ):
        for task in tasks[:2]:  # warm-up, discarded
            chat(client, task, seq=0, top_logprobs=0)
        for rnd in range(1, args.rounds + 1):
            for i, task in enumerate(tasks):
                shift = (i + rnd) % len(kinds)
                for k in kinds[shift:] + kinds[:shift]:
                    sample = chat(client, task, seq=i, top_logprobs=k)
                    if sample.ok and sample.decode_tps_server:
                        tps[k][(task.id, rnd)] = sample.decode_tps_server
            if not args.json:
                print(f"round {rnd}/{args.rounds} done ({time.monotonic() - started:.0f} s)")
    out: dict[str, Any] = {
        "profile": args.profile,
        "tasks": len(tasks),
        "rounds": args.rounds,
        "minutes": round((time.monotonic() - started) / 60, 1),
        "clean_median_tps": median(list(tps[CLEAN].values())),
        "probes": {},
    }
    for k in ks:
        pairs = [
            Pair(task, rnd, base, tps[k][(task, rnd)])
            for (task, rnd), base in tps[CLEAN].items()
            if (task, rnd) in tps[k]
        ]
        ci = paired_speedup(pairs)
        out["probes"][str(k)] = {
            "median_tps": median(list(tps[k].values())),
            "ratio": ci.estimate if ci else None,
            "ci95": [ci.low, ci.high] if ci and ci.has_ci else None,
            "verdict": ci.verdict if ci else None,
            "pairs": ci.n_pairs if ci else 0,
        }
    if args.json:
        print(json.dumps(out, indent=2))
        return 0
    print(
        f"\n{args.profile}: {len(tasks)} tasks (no tool tasks) x {args.rounds} rounds, "
        f"{out['minutes']} min"
    )
    print(f"{'requests':<22} {'median tok/s':>12} {'probe/clean':>12} {'95% CI':>15}  verdict")
    print(f"{'clean (no logprobs)':<22} {out['clean_median_tps']:>12.1f}")
    for k in ks:
        p = out["probes"][str(k)]
        ci_text = f"{p['ci95'][0]:.3f}-{p['ci95'][1]:.3f}" if p["ci95"] else "(no CI)"
        print(
            f"{f'top_logprobs {k}':<22} {p['median_tps']:>12.1f} {p['ratio']:>12.3f} "
            f"{ci_text:>15}  {p['verdict']}"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
