"""The bisect's search on real servers over a sequence with a known step.

Real releases between two neighbours seldom differ beyond the threshold, so the search is
checked on a sequence whose step is known: N release names, every one run by the same real
llama-server build (the configured release, from the cache), the candidate started with
`--threads 1` from release K on and `--threads 2` before (about 0.70x the decode speed on this
2-core host). `--drift-at J --drift 0.04` adds a small second change: from release J on, the
measured decode tok/s of that release's arm is scaled by 0.96 (an injected drift of known
size, the "3.4% slower on the way" of issue 46). The search, the decision rule, the batches
and the state file are the real `watchkeeper bisect`'s (upgrade.bisect.Bisector); only the
build is a lookup (no release is built). Prints each step's ratio and CI, the steps located
(the largest must be K), the notes, the wall time; `--json F` writes the result as JSON.

    .venv/bin/python benchmarks/bisect_known_step.py --releases 8 --step 5 --drift-at 2
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from dataclasses import replace
from pathlib import Path

from watchkeeper.analysis.stats import Pair
from watchkeeper.campaign.release_runs import MeasureSettings, paired_pairs
from watchkeeper.config import Config, DatabaseConfig, ProfileConfig, ServerConfig
from watchkeeper.server.install import ensure_binary
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.upgrade.bisect import Bisector
from watchkeeper.upgrade.bisect_state import Built, start_or_resume
from watchkeeper.upgrade.report import bisect_markdown


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--releases", type=int, default=8)
    parser.add_argument("--step", type=int, default=5, help="index of the first slow release")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--max-rounds", type=int, default=9)
    parser.add_argument("--per-category", type=int, default=1)
    parser.add_argument("--max-tokens", type=int, default=48)
    parser.add_argument(
        "--step-size",
        type=float,
        default=None,
        help="inject the step as a scale of the measured tok/s (e.g. 0.35: x0.65 from --step "
        "on) with both arms at --threads 1, instead of the threads 2 -> 1 step: on a host "
        "loaded by neighbours a threads-2 server collapses (spin-waiting threads) and the "
        "threads step inverts",
    )
    parser.add_argument("--drift-at", type=int, default=None, help="index of a small drift")
    parser.add_argument("--drift", type=float, default=0.04, help="its size (default 4%%)")
    parser.add_argument("--max-ranges", type=int, default=4)
    parser.add_argument(
        "--threshold",
        type=float,
        default=0.03,
        help="nightly.min_effect (default 3%%: it judges the ends and second ranges only; "
        "candidates are placed against the ends' effect)",
    )
    parser.add_argument("--json", type=Path, default=None, help="write the result here")
    parser.add_argument("--state", type=Path, default=None)
    parser.add_argument("--binary", default="", help="a llama-server to use (default: cache)")
    args = parser.parse_args()

    work = Path(tempfile.mkdtemp(prefix="bisect-known-step-"))
    fast = ProfileConfig(model=SMOLLM2, ctx_size=1024, threads=2)
    slow = fast.model_copy(update={"threads": 1})
    config = Config(
        database=DatabaseConfig(url=f"sqlite:///{work / 'wk.db'}"),
        server=ServerConfig(startup_timeout_s=120, binary=args.binary),
        profiles={"s": fast},
    )
    binary = ensure_binary(config.server)
    versions = [f"{9000 + i}.0.0" for i in range(args.releases)]
    first_slow = versions[args.step]
    settings = MeasureSettings(args.per_category, args.max_tokens, warmup_rounds=1)

    def build(version: str) -> Built:
        return Built(version, str(binary.path), binary.sha256, None, binary.identity)

    drifted = versions[args.drift_at] if args.drift_at is not None else None

    def arm(version: str) -> ProfileConfig:
        if args.step_size is not None:
            return slow
        return slow if version >= first_slow else fast

    def scale(version: str) -> float:
        factor = 1.0 - args.drift if drifted is not None and version >= drifted else 1.0
        if args.step_size is not None and version >= first_slow:
            factor *= 1.0 - args.step_size
        return factor

    def measure(base: Built, cand: Built, rounds: int, first: int) -> list[Pair]:
        b, c = base.version, cand.version
        print(
            f"  measuring {c} (threads {arm(c).threads}, x{scale(c):.2f}) vs "
            f"{b} (threads {arm(b).threads}, x{scale(b):.2f})",
            flush=True,
        )
        pairs = paired_pairs(
            config,
            "s",
            binary,
            binary,
            rounds=rounds,
            first_round=first,
            settings=settings,
            progress=lambda _m: None,
            candidate_profile=arm(c),
            baseline_profile=arm(b),
        )
        return [
            replace(p, baseline=p.baseline * scale(b), candidate=p.candidate * scale(c))
            for p in pairs
        ]

    state_path = args.state or work / "bisect.json"
    state = start_or_resume(
        state_path,
        good=versions[0],
        bad=versions[-1],
        profile="s",
        threshold=args.threshold,
        versions=versions,
    )
    started = time.monotonic()
    result = Bisector(
        state,
        state_path=state_path,
        build=build,
        measure=measure,
        rounds=args.rounds,
        max_rounds=args.max_rounds,
        max_ranges=args.max_ranges,
        progress=lambda m: print(m, flush=True),
    ).run()
    wall = time.monotonic() - started
    print(
        bisect_markdown(
            result,
            profile="s",
            good=versions[0],
            bad=versions[-1],
            threshold=state.threshold,
            releases=len(versions),
        )
    )
    rounds = sum(s.rounds for s in state.steps.values())
    print(
        f"known first slow release: {first_slow}; drift from: {drifted}; found: "
        f"{result.first_bad}; located: {[s.release for s in result.located]}; "
        f"{len(state.steps)} measured pairs of releases, {rounds} rounds; wall {wall:.0f} s; "
        "builds: none (every release name runs the cached build)"
    )
    print(f"state: {state_path}")
    if args.json is not None:
        data = {"wall_s": round(wall), "rounds": rounds, **result.to_json()}
        data["known"] = {"step": first_slow, "drift": drifted, "drift_size": args.drift}
        args.json.write_text(json.dumps(data, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
