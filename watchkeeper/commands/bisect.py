"""`watchkeeper bisect --good V1 --bad V2 [--profile P]`: the first bad release between two.

The search and its decision rule are `upgrade.bisect`'s; this module gives them the real
build (the build cache) and the real paired measurement (`release_runs`), keeps the state file
and writes the report."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from watchkeeper.analysis.stats import Pair
from watchkeeper.commands.release_runs import MeasureSettings, ReleaseBuilds, paired_pairs
from watchkeeper.config import Config
from watchkeeper.config.paths import data_dir
from watchkeeper.server.profiles import get_profile
from watchkeeper.store.db import Database
from watchkeeper.upgrade import releases
from watchkeeper.upgrade.bisect import Bisector, BisectResult, Built, start_or_resume
from watchkeeper.upgrade.report import bisect_markdown

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class BisectRun:
    result: BisectResult
    state_path: Path
    report_path: Path
    releases: int


def default_state_path(profile: str, good: str, bad: str) -> Path:
    return data_dir() / "bisect" / f"{profile}-{good}-{bad}.json"


def bisect_command(
    config: Config,
    *,
    good: str,
    bad: str,
    profile: str,
    settings: MeasureSettings,
    progress: Progress,
    sdists: Path | None = None,
    state_path: Path | None = None,
    rounds: int = 3,
    max_rounds: int = 12,
    jobs: int | None = None,
    versions: list[str] | None = None,
    database: Database | None = None,
) -> BisectRun:
    get_profile(config, profile)  # an unknown profile fails before any build
    every = versions or releases.available(config.server.package_index, sdists)
    window = releases.between(every, good, bad)
    path = state_path or default_state_path(profile, good, bad)
    state = start_or_resume(
        path,
        good=good,
        bad=bad,
        profile=profile,
        threshold=config.nightly.min_effect,
        versions=window,
    )
    builds = ReleaseBuilds(config, sdists=sdists, jobs=jobs, progress=progress)

    def measure(base: Built, cand: Built, n: int, first: int) -> list[Pair]:
        progress(f"measuring {cand.version} against {base.version}: {n} rounds")
        return paired_pairs(
            config,
            profile,
            builds.binaries[base.version],
            builds.binaries[cand.version],
            rounds=n,
            first_round=first,
            settings=settings,
            progress=progress,
            database=database,
        )

    progress(f"bisect {good}..{bad}: {len(window)} releases; state {path}")
    result = Bisector(
        state,
        state_path=path,
        build=builds,
        measure=measure,
        rounds=rounds,
        max_rounds=max_rounds,
        progress=progress,
    ).run()
    report = path.with_suffix(".md")
    report.write_text(
        bisect_markdown(
            result,
            profile=profile,
            good=good,
            bad=bad,
            threshold=state.threshold,
            releases=len(window),
        ),
        encoding="utf-8",
    )
    return BisectRun(result, path, report, len(window))
