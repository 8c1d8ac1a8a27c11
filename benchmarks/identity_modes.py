"""Identity verdicts in the exact and the batched mode, what the exact pass costs, and the
power of the check (offline and live positive controls), without the bench's measured rounds.

The exact mode restarts every arm with `--ubatch-size 1` for the probes (bench's default
identity pass, `campaign/identity_pass.py`); the batched mode probes the arms as configured
and judges by replay and noise floor. Both print each arm's verdict counts, the A/A floor
(or that the replay reproduced the decode), the token scores and the controls, and the
minutes the pass took. Run it under `flock /tmp/wk-measure.lock` on a shared host.

    .venv/bin/python benchmarks/identity_modes.py [--profiles smollm2-baseline,smollm2-selfdraft,
        smollm2-ngram] [--per-category 2] [--mode exact|batched] [--live] [--json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from watchkeeper.campaign.identity_pass import (
    exact_pass,
    floor_key,
    label_settings,
    probe_settings,
    run_probes,
)
from watchkeeper.checks.classify import IdentityVerdicts, classify_identity
from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.config import Config
from watchkeeper.load.runner import LoadSettings
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.server.launch import prepare
from watchkeeper.server.serverset import ServerSet


def _say(line: str) -> None:
    print(f"· {line}", file=sys.stderr, flush=True)


def _batched(config: Config, names: list[str], tasks: list[Any], logs: Path) -> IdentityVerdicts:
    prepared = [prepare(config, n) for n in names]
    spec = [p.name for p in prepared[1:] if p.speculative]
    with ServerSet(config, prepared, logs, _say) as servers:
        probes = run_probes(
            servers,
            config,
            tasks,
            names,
            probe_settings(config, LoadSettings()),
            identity_round=1,
            rows=None,
            progress=_say,
        )
        verdicts = classify_identity(
            servers[names[0]].base_url,
            tasks,
            probes,
            baseline=names[0],
            speculative=spec,
            top_k=config.bench.identity_top_k,
            near_tie_threshold=config.bench.near_tie_threshold,
            request_timeout_s=config.server.request_timeout_s,
            progress=_say,
            mode_reason="benchmarks/identity_modes.py --mode batched",
            key=floor_key(prepared),
            live=config.bench.identity_live_control,
        )
    return label_settings(verdicts, prepared, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--profiles", default="smollm2-baseline,smollm2-selfdraft,smollm2-ngram")
    parser.add_argument("--per-category", type=int, default=2)
    parser.add_argument("--mode", choices=("exact", "batched"), default="exact")
    parser.add_argument("--live", action="store_true")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    unwind_on_sigterm()
    config = Config.model_validate({"bench": {"identity_live_control": args.live}})
    names = [n for n in args.profiles.split(",") if n]
    tasks = select(load_taskset(config.bench.resolved_taskset()), per_category=args.per_category)
    started = time.monotonic()
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp)
        if args.mode == "exact":
            prepared = [prepare(config, n) for n in names]
            verdicts = exact_pass(
                config,
                prepared,
                names,
                [p.name for p in prepared[1:] if p.speculative],
                tasks,
                LoadSettings(),
                None,
                logs,
                identity_round=1,
                live=args.live,
                progress=_say,
            )
        else:
            verdicts = _batched(config, names, tasks, logs)
    minutes = (time.monotonic() - started) / 60
    counts: dict[str, Counter[str]] = {}
    for (arm, _), r in verdicts.overrides.items():
        counts.setdefault(arm, Counter())[str(r.verdict)] += 1
    out = {
        "mode": args.mode,
        "tasks": len(tasks),
        "minutes": round(minutes, 2),
        "verdicts": {a: dict(c) for a, c in counts.items()},
        "modes": verdicts.modes,
        "floor": verdicts.floor_json(),
        "token_scores": verdicts.scores,
        "power": verdicts.power,
    }
    if args.json:
        print(json.dumps(out, indent=1, default=str))
    else:
        print(f"{args.mode} mode, {len(tasks)} tasks, {minutes:.1f} min")
        for arm, c in counts.items():
            print(f"  {arm}: " + ", ".join(f"{v} {n}" for v, n in sorted(c.items())))
            print(f"    mode: {verdicts.modes.get(arm)}")
            print(f"    tokens: {verdicts.scores.get(arm, {}).get('summary')}")
        if verdicts.floor is not None:
            print(f"  A/A: {verdicts.floor.describe()}; exact {verdicts.floor.exact}")
        for kind in ("offline", "live"):
            if kind in verdicts.power:
                print(f"  {verdicts.power[kind]['summary']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
