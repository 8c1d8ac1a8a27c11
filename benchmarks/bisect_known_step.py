"""The bisect's search on real servers over a sequence with a known step.

Real releases between two neighbours seldom differ beyond the threshold, so the search is
checked on a sequence whose step is known: N release names, every one run by the same real
llama-server build (the configured release, from the cache), the candidate started with
`--threads 1` from release K on and `--threads 2` before (about half the decode speed on this
2-core host). The search, the decision rule, the batches and the state file are the real
`watchkeeper bisect`'s (upgrade.bisect.Bisector); only the build is a lookup. Prints each
step's ratio and CI, the first bad release (must be K), the wall time and the steps.

    .venv/bin/python benchmarks/bisect_known_step.py --releases 8 --step 5 [--threshold 0.10]
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from watchkeeper.analysis.stats import Pair
from watchkeeper.commands.release_runs import MeasureSettings, paired_pairs
from watchkeeper.config import Config, DatabaseConfig, ProfileConfig, ServerConfig
from watchkeeper.server.install import ensure_binary
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.upgrade.bisect import Bisector, Built, start_or_resume
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
        "--threshold",
        type=float,
        default=0.10,
        help="the decision band (default 0.10: the known step is ~2x, and a 3%% band on this "
        "noisy 2-core host leaves the good steps undecided for 12+ rounds)",
    )
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

    def measure(base: Built, cand: Built, rounds: int, first: int) -> list[Pair]:
        profile = slow if cand.version >= first_slow else fast
        print(f"  measuring {cand.version} (threads {profile.threads}) vs {base.version}")
        return paired_pairs(
            config,
            "s",
            binary,
            binary,
            rounds=rounds,
            first_round=first,
            settings=settings,
            progress=lambda _m: None,
            candidate_profile=profile,
        )

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
    print(f"known first slow release: {first_slow}; found: {result.first_bad}; wall {wall:.0f} s")
    print(f"state: {state_path}")


if __name__ == "__main__":
    main()
