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
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path, PurePosixPath

from watchkeeper.analysis.stats import paired_speedup
from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.campaign.release_runs import (
    MeasureSettings,
    ReleaseBuilds,
    paired_pairs,
    refuse_pinned_server,
    release_arm,
    release_server,
    settings_from,
)
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.config.requests import UpgradeCheckRequest
from watchkeeper.errors import WatchkeeperError
from watchkeeper.host import info as hostinfo
from watchkeeper.load.tasks import cap_tokens, load_taskset, select
from watchkeeper.publish.gitrepo import PublishResult, publish_files
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.flags import HelpInfo, read_help
from watchkeeper.server.install import ensure_binary
from watchkeeper.server.launch import PreparedProfile, prepare
from watchkeeper.server.sdist import locate_sdist, read_source_file, version_key
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.references import ReferenceStore
from watchkeeper.upgrade import releases
from watchkeeper.upgrade.flagcheck import FlagCheck, check_flags
from watchkeeper.upgrade.flaghistory import FlagState, declared_flags, first_release_without
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
    published: PublishResult | None = None
    """The commit of the report to the reports repository (None: not asked to commit)."""


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


class FlagHistory:
    """Names the release that stopped accepting each flag a candidate refuses or respells,
    from the sources of the releases between the configured build and the candidate (one
    sdist per step of a binary search; each is read once per check)."""

    def __init__(
        self, config: Config, *, candidate: str, sdists: Path | None, progress: Progress
    ) -> None:
        self._config = config
        self._candidate = candidate
        self._sdists = sdists
        self._progress = progress
        self._span: list[str] | None = None
        self._read: dict[str, dict[str, FlagState]] = {}

    def _releases(self) -> list[str]:
        if self._span is None:
            current = self._config.server.llama_cpp_version
            versions = releases.available(self._config.server.package_index, self._sdists)
            self._span = releases.between(versions, current, self._candidate)
        return self._span

    def _state_of(self, version: str) -> dict[str, FlagState]:
        if version not in self._read:
            server = release_server(self._config, version, self._sdists)
            archive = locate_sdist(server, self._progress)
            self._read[version] = declared_flags(read_source_file(archive, "common/arg.cpp"))
        return self._read[version]

    def __call__(self, flags: FlagCheck) -> FlagCheck:
        server = self._config.server
        if not flags.changed or server.binary or server.external_url:
            return flags  # no release of ours on the old side to start the search from
        if version_key(self._candidate) <= version_key(server.llama_cpp_version):
            return flags
        try:
            span = self._releases()
            found = [first_release_without(f, span, self._state_of) for f in flags.changed]
        except WatchkeeperError as exc:
            self._progress(f"could not name the release that changed the flags: {exc.message}")
            return flags
        return replace(flags, history=tuple(c for c in found if c is not None))


def report_relpath(config: Config, report: Path) -> str:
    """Where an upgrade report goes in the reports repository: `upgrades/` beside the
    digests' folder (`reports/digests` -> `reports/upgrades/upgrade-V-DATE.md`)."""
    parent = PurePosixPath(config.digest.subdir.strip("/") or ".").parent
    return str(parent / "upgrades" / report.name)


def commit_report(
    config: Config,
    report: Path,
    *,
    candidate: str,
    verdicts: list[ProfileVerdict],
    push: bool,
    progress: Progress,
) -> PublishResult:
    """Commit (and push) the report to the digest's reports repository, as the digest is:
    the same repository, branch, author and push retries."""
    digest = config.digest
    rel = report_relpath(config, report)
    progress(f"committing {rel} to {digest.resolved_repo()} ({digest.branch})")
    summary = ", ".join(f"{v.profile} {v.verdict}" for v in verdicts) or "no profiles"
    published = publish_files(
        digest.resolved_repo(),
        {rel: report.read_bytes()},
        message=f"upgrade check: llama.cpp {candidate} ({releases.tag(candidate)}): {summary}",
        author_name=digest.author_name,
        author_email=digest.author_email,
        branch=digest.branch,
        push=push,
        remote=digest.remote,
        push_attempts=digest.push_attempts,
    )
    progress(published.message)
    return published


@dataclass(frozen=True, slots=True)
class _Candidate:
    """The release under check: its version, its build, and the flags that build accepts."""

    version: str
    binary: ServerBinary
    help: HelpInfo


def _check_profile(
    config: Config,
    db: Database,
    name: str,
    current: ServerBinary,
    target: _Candidate,
    history: FlagHistory,
    rounds: int,
    settings: MeasureSettings,
    progress: Progress,
) -> tuple[ProfileVerdict, str | None]:
    """One profile's verdict: its flags on the candidate (which release dropped a refused
    one), then, if it starts, the candidate paired with the baseline build and identity within
    the candidate. The baseline's identity when it was measured, else None."""
    prepared = prepare(config, name, progress=progress)
    assert prepared.help is not None
    flags = history(
        check_flags(
            prepared.profile,
            current=prepared.help,
            candidate=target.help,
            cuda=target.binary.variant == "cuda",
        )
    )
    for line in flags.lines():
        progress(f"{name}: {line}")
    if not flags.ok:
        return judge(name, flags, None, ()), None
    baseline = _baseline(db, name, current)
    progress(f"{name}: measuring {target.version} against {baseline.identity}")
    pairs = paired_pairs(
        config,
        name,
        baseline,
        target.binary,
        rounds=rounds,
        first_round=0,
        settings=settings,
        progress=progress,
        database=db,
    )
    ratio = paired_speedup(pairs, threshold=config.nightly.min_effect)
    identity = identity_within(
        config, prepared, target.binary, settings=settings, progress=progress, database=db
    )
    verdict = judge(name, flags, ratio, identity)
    progress(f"{name}: {verdict.verdict} ({verdict.reason})")
    return verdict, baseline.identity


def _write_report(
    config: Config,
    candidate: str,
    baseline_name: str,
    verdicts: list[ProfileVerdict],
    rounds: int,
    settings: MeasureSettings,
    now: datetime,
) -> Path:
    """The check's report in the reports directory, with the method it was measured by."""
    folder = config.bench.resolved_reports_dir()
    folder.mkdir(parents=True, exist_ok=True)
    report = folder / f"upgrade-{candidate}-{now:%Y-%m-%d}.md"
    method = (
        f"per profile, the candidate paired with {baseline_name} (interleaved, arms back to "
        f"back per task): {rounds} rounds x {settings.per_category} tasks per category, "
        f"answers cut at {settings.max_tokens or 'their own'} tokens, fresh processes every "
        f"{settings.restart_every or 'no'} round(s); ratio = geometric mean of per-task decode "
        "tok/s ratios with a 95% CI over tasks and rounds; regression/improvement only when "
        f"the CI excludes 1 and the estimate is beyond {config.nightly.min_effect:.0%}, safe "
        "when the CI lies within it, else inconclusive. Identity: the speculating profile "
        "against its plain twin within the candidate, temperature 0."
    )
    report.write_text(markdown(candidate, baseline_name, verdicts, method=method), encoding="utf-8")
    return report


def upgrade_check_command(
    config: Config,
    request: UpgradeCheckRequest,
    *,
    now: datetime,
    progress: Progress,
    versions: list[str] | None = None,
    database: Database | None = None,
) -> UpgradeCheck:
    """The check its `request` asks for (the CLI's options or an upgrade job's `[args]`,
    config/requests.py), each choice left out the config's: the profiles and rounds
    [nightly]'s, the measuring the nightly's with `per_category` and `max_tokens` where
    given. `request.commit`/`push`: the report goes to the reports repository like the digest
    (the report file is written first, so a failed push loses nothing). ``versions`` stands in
    for the package index in tests."""
    refuse_pinned_server("upgrade-check")  # before anything is listed, built or measured
    settings = settings_from(
        config, per_category=request.per_category, max_tokens=request.max_tokens
    )
    rounds = request.rounds or config.nightly.rounds
    sdists = request.sdists
    if request.to == "latest":
        candidate = releases.latest(
            versions or releases.available(config.server.package_index, sdists)
        )
    else:
        candidate = request.to
    current = ensure_binary(config.server, progress=progress)
    builds = ReleaseBuilds(config, sdists=sdists, jobs=request.jobs, progress=progress)
    builds(candidate)
    binary = builds.binaries[candidate]
    verdicts: list[ProfileVerdict] = []
    baseline_name = current.identity
    history = FlagHistory(config, candidate=candidate, sdists=sdists, progress=progress)
    target = _Candidate(candidate, binary, read_help(binary, config.server.resolved_cache_dir()))
    with open_database(config.database.resolved_url(), given=database) as db:
        for name in request.profiles or config.nightly.profiles:
            verdict, measured_against = _check_profile(
                config, db, name, current, target, history, rounds, settings, progress
            )
            verdicts.append(verdict)
            baseline_name = measured_against or baseline_name
    report = _write_report(config, candidate, baseline_name, verdicts, rounds, settings, now)
    published = None
    if request.commit or request.push:
        published = commit_report(
            config,
            report,
            candidate=candidate,
            verdicts=verdicts,
            push=request.push,
            progress=progress,
        )
    return UpgradeCheck(candidate, baseline_name, tuple(verdicts), report, published)
