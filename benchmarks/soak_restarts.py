"""The soak's restarted pairs, measured: SmolLM2 soaked beside a pinned reference on real
llama-server processes, once with the current system identical to the reference (an A/A soak)
and once with a current system that differs by the profile overrides given (`--current`, e.g.
'{"threads": 1}'). Both servers restart every `--restart-every` cycles; the verdict, its CI,
the judged cycles, the process pairs and the autocorrelation used are printed.

    flock /tmp/wk-cpu.lock .venv/bin/python benchmarks/soak_restarts.py \\
        [--current '{"cache_type_k": "q8_0"}'] [--duration 10m] [--block 20s] \\
        [--restart-every 2] [--min-effect 0.03] [--limit 16] [--json FILE] [--ready-file F]

Without `--current` the soak is A/A. Under the CPU lock: it starts servers.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from watchkeeper.campaign.night import pin_reference
from watchkeeper.commands.soak import soak_command
from watchkeeper.config import Config, DatabaseConfig, ProfileConfig, ServerConfig, SoakConfig
from watchkeeper.config.requests import SoakRequest
from watchkeeper.host import info as hostinfo
from watchkeeper.server.install import ensure_binary
from watchkeeper.server.launch import prepare
from watchkeeper.server.models import ModelStore
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.store.db import Database
from watchkeeper.store.references import ReferenceStore


def config_for(binary: Path, db_url: str, profile: dict[str, Any], soak: SoakConfig) -> Config:
    return Config(
        database=DatabaseConfig(url=db_url),
        server=ServerConfig(startup_timeout_s=120, binary=str(binary)),
        profiles={"s": ProfileConfig(model=SMOLLM2, ctx_size=2048, threads=2, **profile)},
        soak=soak,
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--current", default="", help="JSON profile overrides of the current arm")
    ap.add_argument("--duration", default="10m")
    ap.add_argument("--block", default="20s")
    ap.add_argument("--restart-every", type=int, default=2)
    ap.add_argument("--min-effect", type=float, default=0.03)
    ap.add_argument("--limit", type=int, default=16)
    ap.add_argument("--seed", type=int, default=11)
    ap.add_argument("--json", type=Path)
    ap.add_argument(
        "--ready-file",
        type=Path,
        help="touched when the soak itself starts (after the reference is pinned): "
        "scripts/neighbour.sh --when waits for it",
    )
    args = ap.parse_args()

    binary = ensure_binary(ServerConfig())
    ModelStore(Config()).ensure(SMOLLM2)
    soak = SoakConfig.model_validate(
        {
            "sample_interval_s": 2.0,
            "probe_interval_s": 3600.0,
            "flush_interval_s": 2.0,
            "ramp_s": 0.5,
            "restart_backoff_s": 0.5,
            "restart_backoff_cap_s": 2.0,
            "rss_warmup_s": 0.0,
            "restart_every": args.restart_every,
            "min_effect": args.min_effect,
        }
    )
    current = json.loads(args.current) if args.current else {}
    with tempfile.TemporaryDirectory(prefix="wk-soak-restarts-") as tmp:
        os.environ["WATCHKEEPER_DATA_DIR"] = tmp
        url = f"sqlite:///{Path(tmp) / 'wk.db'}"
        good = config_for(binary.path, url, {}, soak)
        db = Database(url)
        try:
            ref = pin_reference(
                good,
                ReferenceStore(db),
                prepare(good, "s"),
                host_fingerprint=hostinfo.collect().fingerprint,
                by="benchmarks/soak_restarts.py",
                reason="the reference",
            )
        finally:
            db.close()
        if args.ready_file is not None:
            args.ready_file.touch()
        result = soak_command(
            config_for(binary.path, url, current, soak),
            SoakRequest(
                duration=args.duration,
                block=args.block,
                profiles=["s"],
                limit=args.limit,
                seed=args.seed,
                fresh=True,
            ),
            progress=lambda m: print(m, file=sys.stderr, flush=True),
        )
    (ratio,) = result.verdict.figures.reference
    entry = ratio.to_json()
    summary = {
        "current": current or "identical (A/A)",
        "reference_id": ref.id,
        "aa": entry["aa"],
        "verdict": entry["verdict"],
        "estimate": entry.get("estimate"),
        "ci95": entry.get("ci95"),
        "threshold": entry["threshold"],
        "n_cycles": entry["n_cycles"],
        "n_pairs": entry["n_pairs"],
        "n_eff": entry.get("n_eff"),
        "autocorrelation": entry.get("autocorrelation"),
        "warmup_cycles": entry["warmup_cycles"],
        "unbalanced_dropped": entry["unbalanced_dropped"],
        "cycles": [
            (c["cycle"], round(c["ratio"], 4), c["current_first"], c["judged"])
            for c in entry["cycles"]
        ],
        "restarts": result.verdict.figures.restarts,
        "requests": result.verdict.figures.requests,
        "errors": result.verdict.figures.errors,
        "span_s": result.verdict.figures.span_s,
        "paired_drift": [d.to_json() for d in result.verdict.figures.paired_drift],
        "series_drift": [
            {
                "series": e.name,
                "drift_judged": e.judged,
                "throughput_shift": e.to_json().get("throughput_shift"),
            }
            for e in result.verdict.figures.series
        ],
        "notes": list(result.verdict.notes),
        "reasons": list(result.verdict.reasons),
    }
    text = json.dumps(summary, indent=2, default=str)
    print(text)
    if args.json:
        args.json.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
