"""`watchkeeper upgrade-check [--to latest|VERSION] [--profile P]`: is the next llama.cpp
release safe for our profiles?

Per profile, in order, stopping at the first that fails: (1) the candidate release is built
(offline from the cache when it is there); (2) the profile's flags are checked against the
candidate's `--help` (`upgrade.flagcheck`): a removed or unknown flag is `breaks config`
before anything is measured; (3) the nightly's paired measurement, candidate against the
pinned reference (the configured build when no reference is pinned on this host); (4) the
bench's identity check within the candidate build: the speculating server against its plain
twin, same binary. The verdicts and the report are `upgrade.verdict`'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from watchkeeper.analysis.stats import paired_speedup
from watchkeeper.commands.bench import execute_bench
from watchkeeper.commands.bench_plan import BenchPlan
from watchkeeper.commands.release_runs import (
    MeasureSettings,
    ReleaseBuilds,
    paired_pairs,
    release_arm,
)
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.host import info as hostinfo
from watchkeeper.load.tasks import cap_tokens, load_taskset, select
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.flags import read_help
from watchkeeper.server.install import ensure_binary
from watchkeeper.server.launch import PreparedProfile, prepare
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.references import ReferenceStore
from watchkeeper.upgrade import releases
from watchkeeper.upgrade.flagcheck import check_flags
from watchkeeper.upgrade.verdict import ProfileVerdict, judge, markdown

Progress = Callable[[str], None]
_DRAFT_FIELDS = (
    "draft_model",
    "spec_type",
    "draft_n_max",
    "draft_n_min",
    "draft_p_min",
    "draft_gpu_layers",
    "draft_cache_type_k",
    "draft_cache_type_v",
)


@dataclass(frozen=True, slots=True)
class UpgradeCheck:
    candidate: str
    baseline: str
    verdicts: tuple[ProfileVerdict, ...]
    report_path: Path


def _baseline(db: Database, profile: str, current: ServerBinary) -> ServerBinary:
    """The pinned reference's binary on this host, else the configured build."""
    ref = ReferenceStore(db).active(hostinfo.collect().fingerprint, profile)
    if ref is None or not Path(ref.binary_path).is_file():
        return current
    return ServerBinary(
        Path(ref.binary_path),
        ref.binary_version,
        current.variant,
        ref.binary_sha256,
        llama_cpp_version=f"reference{ref.id}",
    )


def plain_twin(profile: ProfileConfig) -> ProfileConfig:
    """The profile without speculation: the bench's identity baseline for it."""
    return profile.model_copy(update=dict.fromkeys(_DRAFT_FIELDS))


def identity_within(
    config: Config,
    current: PreparedProfile,
    candidate: ServerBinary,
    *,
    settings: MeasureSettings,
    progress: Progress,
    database: Database | None = None,
) -> tuple[str, ...]:
    """Identity verdicts of the candidate's speculating server against its plain twin."""
    if not current.profile.speculative:
        return ()
    spec = release_arm(config, current, candidate)
    plain = PreparedProfile(
        spec.name + "-plain", plain_twin(current.profile), candidate, current.model, None, spec.help
    )
    tasks = cap_tokens(
        select(load_taskset(config.bench.resolved_taskset()), limit=None, per_category=1),
        settings.max_tokens,
    )
    plan = BenchPlan(
        profiles=(plain.name, spec.name),
        tasks=tuple(tasks),
        rounds=1,
        warmup_rounds=0,
        warmup_tasks=0,
        concurrency=1,
    )
    result = execute_bench(
        config,
        plan,
        kind="upgrade-identity",
        progress=progress,
        prepared=[plain, spec],
        database=database,
    )
    return tuple(r.verdict for r in result.identity if r.arm.startswith(spec.name))


def upgrade_check_command(
    config: Config,
    *,
    to: str,
    profiles: list[str] | None,
    settings: MeasureSettings,
    rounds: int,
    now: datetime,
    progress: Progress,
    sdists: Path | None = None,
    jobs: int | None = None,
    versions: list[str] | None = None,
    database: Database | None = None,
) -> UpgradeCheck:
    if to == "latest":
        candidate = releases.latest(
            versions or releases.available(config.server.package_index, sdists)
        )
    else:
        candidate = to
    current = ensure_binary(config.server, progress=progress)
    builds = ReleaseBuilds(config, sdists=sdists, jobs=jobs, progress=progress)
    builds(candidate)
    binary = builds.binaries[candidate]
    cand_help = read_help(binary, config.server.resolved_cache_dir())
    verdicts: list[ProfileVerdict] = []
    baseline_name = current.identity
    with open_database(config.database.resolved_url(), given=database) as db:
        for name in profiles or config.nightly.profiles:
            prepared = prepare(config, name, progress=progress)
            assert prepared.help is not None
            flags = check_flags(
                prepared.profile,
                current=prepared.help,
                candidate=cand_help,
                cuda=binary.variant == "cuda",
            )
            for line in flags.lines():
                progress(f"{name}: {line}")
            if not flags.ok:
                verdicts.append(judge(name, flags, None, ()))
                continue
            baseline = _baseline(db, name, current)
            baseline_name = baseline.identity
            progress(f"{name}: measuring {candidate} against {baseline.identity}")
            pairs = paired_pairs(
                config,
                name,
                baseline,
                binary,
                rounds=rounds,
                first_round=0,
                settings=settings,
                progress=progress,
                database=db,
            )
            ratio = paired_speedup(pairs, threshold=config.nightly.min_effect)
            identity = identity_within(
                config, prepared, binary, settings=settings, progress=progress, database=db
            )
            verdicts.append(judge(name, flags, ratio, identity))
            progress(f"{name}: {verdicts[-1].verdict} ({verdicts[-1].reason})")
    folder = config.bench.resolved_reports_dir()
    folder.mkdir(parents=True, exist_ok=True)
    report = folder / f"upgrade-{candidate}-{now:%Y-%m-%d}.md"
    report.write_text(markdown(candidate, baseline_name, verdicts), encoding="utf-8")
    return UpgradeCheck(candidate, baseline_name, tuple(verdicts), report)
