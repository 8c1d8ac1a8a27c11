"""Build a given llama.cpp release and measure two releases paired: the real `build` and
`measure` that `watchkeeper bisect` and `watchkeeper upgrade-check` inject into their logic.

A release is built through the build cache (`install.ensure_binary` with that version: a
finished build is reused, never rebuilt). A measurement is the nightly's: both releases as arms
of one profile (same model, same flags, in each build's own dialect), the nightly's task
selection, rounds interleaved, fresh server processes every `nightly.restart_every` rounds,
drift-only (two builds are compared for speed, not judged for identity); its throughput pairs
feed `analysis.stats.paired_speedup` like the nightly's ratio.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import cast

from watchkeeper.analysis.benchmark import ALL, throughput_pairs
from watchkeeper.analysis.stats import Pair
from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.config import Config, ProfileConfig, ServerConfig
from watchkeeper.errors import ConfigError
from watchkeeper.load.records import RunResult
from watchkeeper.load.tasks import cap_tokens, load_taskset, select
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.flags import read_help
from watchkeeper.server.install import cached_binary, ensure_binary
from watchkeeper.server.launch import PreparedProfile, prepare
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.repository import Repository
from watchkeeper.upgrade.bisect_state import Built
from watchkeeper.upgrade.releases import from_directory, tag

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class MeasureSettings:
    """How much each batch measures (the nightly's defaults; smaller for a quick bisect)."""

    per_category: int
    max_tokens: int
    warmup_rounds: int = 1
    restart_every: int = 1


def settings_from(
    config: Config, *, per_category: int | None, max_tokens: int | None
) -> MeasureSettings:
    n = config.nightly
    return MeasureSettings(
        per_category or n.per_category,
        n.max_tokens if max_tokens is None else max_tokens,
        config.bench.warmup_rounds,
        n.restart_every,
    )


PINNING_ENV = ("WATCHKEEPER_SERVER_BINARY", "WATCHKEEPER_SERVER_URL")
"""Environment overrides that win over every server setting (`ServerConfig.resolved_binary`,
`resolved_external_url`): under them, each "release" would be the same binary or server."""


def refuse_pinned_server(command: str, environ: Mapping[str, str] | None = None) -> None:
    """A command that compares llama.cpp releases refuses to start under an override that
    pins the server: it would log "building 1.0.0 ... building 3.0.0", run one binary for
    each, and give a verdict about releases that never ran."""
    env = os.environ if environ is None else environ
    pinned = [name for name in PINNING_ENV if env.get(name)]
    if pinned:
        raise ConfigError(
            f"{command} compares llama.cpp releases, each built from its own source, but "
            f"{' and '.join(pinned)} pins every release to one server",
            hint=f"unset {' '.join(pinned)} for this command (server.binary and "
            "server.external_url in the config are not used by it)",
        )


def release_server(config: Config, version: str, sdists: Path | None = None) -> ServerConfig:
    """The server settings that build `version` (from `sdists` when given), never a
    configured binary or external server."""
    update: dict[str, object] = {"llama_cpp_version": version, "binary": "", "external_url": ""}
    if sdists is not None:
        found = from_directory(sdists).get(version)
        if found is not None:
            update["sdist"] = str(found)
    return config.server.model_copy(update=update)


class ReleaseBuilds:
    """Builds releases on demand and remembers the binaries (the measure needs them)."""

    def __init__(
        self, config: Config, *, sdists: Path | None, jobs: int | None, progress: Progress
    ) -> None:
        refuse_pinned_server("a release build")
        self._config = config
        self._sdists = sdists
        self._jobs = jobs
        self._progress = progress
        self.binaries: dict[str, ServerBinary] = {}
        if config.server.binary or config.server.external_url:
            progress(
                "server.binary / server.external_url are not used for releases: each release "
                "runs its own build"
            )

    def __call__(self, version: str) -> Built:
        server = release_server(self._config, version, self._sdists)
        cached = cached_binary(server)
        started = time.monotonic()
        if cached is None:
            self._progress(f"building llama.cpp {version} ({tag(version)})")
        binary = cached or ensure_binary(server, progress=self._progress, jobs=self._jobs)
        seconds = None if cached is not None else round(time.monotonic() - started, 1)
        twin = next((v for v, b in self.binaries.items() if b.path == binary.path), None)
        if twin is not None and twin != version:
            raise ConfigError(
                f"releases {twin} and {version} resolve to the same binary {binary.path}",
                hint="each release must be its own build; check the build cache and sdists",
            )
        self.binaries[version] = binary
        return Built(version, str(binary.path), binary.sha256, seconds, binary.identity)


def release_arm(config: Config, current: PreparedProfile, binary: ServerBinary) -> PreparedProfile:
    """`current`'s profile (model, draft, flags) run by another release's binary."""
    if current.profile.url is not None:
        raise ConfigError(
            f"profile {current.name}: runs on a server watchkeeper did not start "
            f"({current.external_url}), so no other llama.cpp release can run it",
            hint="use a profile with a model (and its flags) for upgrade-check and bisect",
        )
    info = read_help(binary, config.server.resolved_cache_dir())
    name = f"{current.name}@{tag(binary.llama_cpp_version)}"
    return PreparedProfile(name, current.profile, binary, current.model, current.draft, info)


def paired_pairs(
    config: Config,
    profile: str,
    baseline: ServerBinary,
    candidate: ServerBinary,
    *,
    rounds: int,
    first_round: int,
    settings: MeasureSettings,
    progress: Progress,
    candidate_profile: ProfileConfig | None = None,
    baseline_profile: ProfileConfig | None = None,
    database: Database | None = None,
) -> list[Pair]:
    """One batch: `rounds` measured rounds of both releases, interleaved; the throughput pairs
    under ALL, their rounds renumbered from `first_round` so batches pool. `candidate_profile`
    runs the candidate with other settings (a known step for checking the search itself), and
    `baseline_profile` the baseline (a range whose good end is already past that step)."""
    current = prepare(config, profile, progress=progress)
    base_arm = release_arm(config, current, baseline)
    cand_arm = release_arm(config, current, candidate)
    if candidate_profile is not None:
        cand_arm = replace(cand_arm, profile=candidate_profile)
    if baseline_profile is not None:
        base_arm = replace(base_arm, profile=baseline_profile)
    if base_arm.name == cand_arm.name:
        cand_arm = replace(cand_arm, name=cand_arm.name + "'")
    taskset = Path(config.nightly.taskset) if config.nightly.taskset else None
    tasks = select(
        load_taskset(taskset or config.bench.resolved_taskset()),
        limit=None,
        per_category=settings.per_category,
    )
    tasks = cap_tokens(tasks, settings.max_tokens)
    plan = BenchPlan(
        profiles=(base_arm.name, cand_arm.name),
        tasks=tuple(tasks),
        rounds=rounds,
        warmup_rounds=settings.warmup_rounds,
        warmup_tasks=min(2, len(tasks)),
        concurrency=1,
        restart_every=settings.restart_every,
        speed_only=True,
    )
    result = execute_bench(
        config,
        plan,
        kind="bisect",
        progress=progress,
        prepared=[base_arm, cand_arm],
        drift_only=True,
        database=database,
    )
    with open_database(config.database.resolved_url(), given=database) as db:
        stored = Repository(db).load_runs(result.campaign_id)
    # A stored run carries what the pairing reads (arm, round, warm-up flag, samples).
    runs = cast(list[RunResult], stored)
    pairs = throughput_pairs(runs, base_arm.name, cand_arm.name).get(ALL, [])
    numbering = {r: first_round + i for i, r in enumerate(sorted({p.round for p in pairs}))}
    return [replace(p, round=numbering[p.round]) for p in pairs]
