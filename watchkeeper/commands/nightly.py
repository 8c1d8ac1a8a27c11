"""`watchkeeper nightly`: tonight's current system against its pinned reference, paired.

Both servers are up for the whole run and every task goes to both back to back, order
alternating (exactly `bench`'s schedule), so the ratio current/reference is measured inside
the same minutes on the same host. The first night pins the reference (the current system,
snapshotted by content hash); a night whose current system *is* the reference is an A/A
night. A regression is confirmed by an immediate rerun (or the next night) before it becomes
a finding that triage files.
"""

from __future__ import annotations

import getpass
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from watchkeeper.analysis.acceptance import result_curves
from watchkeeper.analysis.benchmark import ALL, BenchResult
from watchkeeper.analysis.stats import MIN_TASKS
from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.campaign.bench_report import finish_with_report
from watchkeeper.campaign.defaults import no_profiles
from watchkeeper.campaign.nightly_findings import (
    family_false_alarms,
    finding_evidence,
    finding_series,
    finding_title,
    with_confirmed,
)
from watchkeeper.campaign.references import reference_profile
from watchkeeper.config import Config
from watchkeeper.config.model import NightlyConfig
from watchkeeper.errors import ConfigError
from watchkeeper.host import info as hostinfo
from watchkeeper.load.tasks import cap_tokens, load_taskset, select
from watchkeeper.nightly.night_checks import SeriesCheck, series_checks
from watchkeeper.nightly.ratios import (
    CONFIRM_WINDOW,
    FLAGS,
    FalseAlarms,
    confirmed_series,
    judge_night,
    night_noise,
    night_ratios,
    prior_night_sd,
    tail_records,
    with_night_noise,
)
from watchkeeper.nightly.reference import (
    identify,
    snapshot_binary,
    snapshot_model,
    snapshot_root,
)
from watchkeeper.server.launch import PreparedProfile, prepare
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.findings import FindingStore, NewFinding
from watchkeeper.store.references import RatioRecord, ReferenceRecord, ReferenceStore

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class PairedNight:
    profile: str
    campaign_id: int
    reference_id: int
    aa: bool
    pinned_now: bool
    ratios: tuple[RatioRecord, ...]
    rerun_campaign_id: int | None = None
    confirmed: tuple[str, ...] = ()
    findings: tuple[int, ...] = ()
    report_path: str | None = None
    checks: tuple[SeriesCheck, ...] = ()
    """Per category: failed requests between the arms and the winsorized cells' balance."""
    acceptance_curves: tuple[dict[str, Any], ...] = ()
    """Per speculative arm, acceptance by draft position over the night's measured requests:
    a drafter that got worse shows here before the ratio says why."""
    tails: tuple[RatioRecord, ...] = ()
    """The p90-TTFT and goodput series (nightly/ratios.py `tail_records`): watched, never
    filed."""

    def to_json(self) -> dict[str, Any]:
        return {
            "profile": self.profile,
            "campaign_id": self.campaign_id,
            "reference_id": self.reference_id,
            "aa": self.aa,
            "pinned_now": self.pinned_now,
            "rerun_campaign_id": self.rerun_campaign_id,
            "confirmed": list(self.confirmed),
            "findings": list(self.findings),
            "report": self.report_path,
            "acceptance_curves": list(self.acceptance_curves),
            "ratios": [
                {
                    "series": r.series,
                    "category": r.category,
                    "ratio": r.estimate,
                    "ci95": [r.low, r.high],
                    "n_pairs": r.n_pairs,
                    "n_tasks": r.n_tasks,
                    "n_rounds": r.n_rounds,
                    "threshold": r.threshold,
                    "verdict": r.verdict,
                    "checks": next(
                        (c.to_json() for c in self.checks if c.category == r.category), None
                    ),
                }
                for r in self.ratios
            ],
            "tails": [
                {
                    "series": r.series,
                    "metric": r.metric,
                    "ratio": r.estimate,
                    "ci95": [r.low, r.high],
                    "n_rounds": r.n_rounds,
                    "verdict": r.verdict,
                }
                for r in self.tails
            ],
        }


@dataclass(frozen=True, slots=True)
class NightlyOutcome:
    nights: tuple[PairedNight, ...] = field(default_factory=tuple)
    false_alarms: tuple[tuple[str, FalseAlarms], ...] = ()
    """Per profile, over its whole history: flags on A/A series-nights and the family rate
    (A/A nights with a confirmed flag in any series, target <= 1% per profile-night)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "nights": [n.to_json() for n in self.nights],
            "false_alarms": {profile: fa.to_json() for profile, fa in self.false_alarms},
        }


def pin_reference(
    config: Config,
    store: ReferenceStore,
    prepared: PreparedProfile,
    *,
    host_fingerprint: str,
    by: str,
    reason: str,
) -> ReferenceRecord:
    """Snapshot the prepared system's files by content hash and make it the reference."""
    ident = identify(prepared, host_fingerprint)
    assert prepared.binary is not None and prepared.model is not None
    root = snapshot_root(config.server.resolved_cache_dir())
    binary = snapshot_binary(prepared.binary, root)
    model = snapshot_model(prepared.model, root)
    draft = snapshot_model(prepared.draft, root) if prepared.draft else None
    return store.pin(
        host_fingerprint=host_fingerprint,
        profile=prepared.name,
        identity=ident.digest,
        binary_sha256=ident.binary_sha256,
        binary_version=prepared.binary.identity,
        model_sha256=ident.model_sha256,
        draft_sha256=ident.draft_sha256,
        config_hash=ident.config_hash,
        config=prepared.profile.model_dump(mode="json"),
        binary_path=str(binary),
        model_path=str(model),
        draft_path=str(draft) if draft else None,
        pinned_by=by,
        reason=reason,
    )


def _bench(
    config: Config,
    current: PreparedProfile,
    ref_arm: PreparedProfile,
    *,
    kind: str,
    progress: Progress,
    database: Database,
) -> BenchResult:
    n = config.nightly
    taskset = Path(n.taskset) if n.taskset else config.bench.resolved_taskset()
    tasks = cap_tokens(
        select(load_taskset(taskset), limit=None, per_category=n.per_category), n.max_tokens
    )
    plan = BenchPlan(
        profiles=(ref_arm.name, current.name),
        tasks=tuple(tasks),
        rounds=n.rounds,
        warmup_rounds=config.bench.warmup_rounds,
        warmup_tasks=min(2, len(tasks)),
        concurrency=1,
        restart_every=n.restart_every,
    )
    bench_config = config.model_copy(
        update={"bench": config.bench.model_copy(update={"min_effect": n.min_effect})}
    )
    result = execute_bench(
        bench_config,
        plan,
        kind=kind,
        progress=progress,
        prepared=[ref_arm, current],
        drift_only=True,
        database=database,
    )
    return finish_with_report(bench_config, result, progress=progress, database=database)


def run_night(
    config: Config,
    db: Database,
    profile: str,
    *,
    progress: Progress,
    now: datetime | None = None,
) -> PairedNight:
    """One profile's night as steps: the reference (pinned if there is none), the paired
    bench, its ratios judged, regressions confirmed (the previous night, or a rerun), the
    ratios stored and the confirmed regressions filed as findings."""
    store = ReferenceStore(db)
    host = hostinfo.collect()
    current = prepare(config, profile, progress=progress)
    ident = identify(current, host.fingerprint)
    ref, pinned_now = _reference(config, store, current, host.fingerprint, profile, progress)
    aa = ref.identity == ident.digest
    progress(
        f"{profile}: current vs reference #{ref.id} (pinned {ref.pinned_at:%Y-%m-%d} by "
        f"{ref.pinned_by}){' — A/A night: they are identical' if aa else ''}"
    )
    night = _Night(
        config,
        db,
        store,
        profile,
        current,
        ref,
        reference_profile(config, current, ref),
        host.fingerprint,
        aa,
        progress,
    )
    result = night.bench("nightly")
    ratios = night.ratios_of(result)
    checks = series_checks(result, current_arm=current.name)
    confirmed, rerun_id, rerun_ratios = _confirm(night, result, ratios, now)
    stored = [with_confirmed(r, r.series in confirmed and r.verdict in FLAGS) for r in ratios]
    store.add_ratios(stored)
    store.add_ratios(rerun_ratios)
    tails = night.tails_of(result)
    store.add_ratios(tails)
    findings = [] if aa else _file_findings(night, result, stored, checks, rerun_id)
    return PairedNight(
        profile,
        result.campaign_id,
        ref.id,
        aa,
        pinned_now,
        tuple(stored),
        rerun_id,
        tuple(sorted(confirmed)),
        tuple(findings),
        result.report_path,
        tuple(checks.values()),
        tuple(c.to_json() for c in result_curves(result)),
        tuple(tails),
    )


def _reference(
    config: Config,
    store: ReferenceStore,
    current: PreparedProfile,
    host_fingerprint: str,
    profile: str,
    progress: Progress,
) -> tuple[ReferenceRecord, bool]:
    """The active reference on this host, or tonight's system pinned as the first one (True)."""
    ref = store.active(host_fingerprint, profile)
    if ref is not None:
        return ref, False
    retired = [r for r in store.history(profile) if r.host_fingerprint == host_fingerprint]
    reason = f"after #{retired[-1].id} ({retired[-1].reason})" if retired else "first nightly run"
    progress(f"{profile}: no active reference on this host; pinning tonight's system")
    pinned = pin_reference(
        config,
        store,
        current,
        host_fingerprint=host_fingerprint,
        by="watchkeeper nightly",
        reason=reason,
    )
    return pinned, True


@dataclass(frozen=True, slots=True)
class _Night:
    """What every step of one profile's night shares."""

    config: Config
    db: Database
    store: ReferenceStore
    profile: str
    current: PreparedProfile
    ref: ReferenceRecord
    ref_arm: PreparedProfile
    host_fingerprint: str
    aa: bool
    progress: Progress

    def bench(self, kind: str) -> BenchResult:
        return _bench(
            self.config,
            self.current,
            self.ref_arm,
            kind=kind,
            progress=self.progress,
            database=self.db,
        )

    def _series(self) -> dict[str, Any]:
        """What places tonight's ratios in their series (the same for every metric)."""
        return {
            "current_arm": self.current.name,
            "profile": self.profile,
            "reference_id": self.ref.id,
            "host_fingerprint": self.host_fingerprint,
            "aa": self.aa,
            "threshold": self.config.nightly.min_effect,
        }

    def tails_of(self, bench: BenchResult) -> list[RatioRecord]:
        """The night's p90-TTFT and goodput series, floored by their own A/A nights."""
        records = tail_records(bench, reference_arm=self.ref_arm.name, **self._series())
        prior = prior_night_sd(self.config.nightly)
        return [
            with_night_noise(r, night_noise(self.store.series_history(r.series), prior))
            for r in records
        ]

    def ratios_of(self, bench: BenchResult) -> list[RatioRecord]:
        records = night_ratios(bench, **self._series())
        prior = prior_night_sd(self.config.nightly)
        return judge_night(
            bench,
            records,
            current_arm=self.current.name,
            noise=lambda r: night_noise(self.store.series_history(r.series), prior),
        )


def _confirm(
    night: _Night, result: BenchResult, ratios: list[RatioRecord], now: datetime | None
) -> tuple[set[str], int | None, list[RatioRecord]]:
    """The regressions confirmed by the previous night within the window or, for the overall
    series, by an immediate rerun: (confirmed series, the rerun's campaign, its ratios)."""
    flagged = [r for r in ratios if r.verdict == "regression"]
    since = (now or datetime.now(UTC)) - CONFIRM_WINDOW

    def previous(r: RatioRecord) -> RatioRecord | None:
        return night.store.previous(r.series, night.ref.id, result.campaign_id, since=since)

    confirmed = confirmed_series(flagged, previous)
    pending = [r for r in flagged if r.series not in confirmed and r.category == ALL]
    if not (pending and night.config.nightly.confirm_rerun):
        return confirmed, None, []
    night.progress(f"{night.profile}: {len(pending)} regression candidate(s); rerunning to confirm")
    rerun = night.bench("nightly-rerun")
    rerun_ratios = night.ratios_of(rerun)
    again = {r.series for r in rerun_ratios if r.verdict == "regression"}
    confirmed |= confirmed_series(flagged, previous, again)
    return confirmed, rerun.campaign_id, rerun_ratios


def _file_findings(
    night: _Night,
    result: BenchResult,
    stored: list[RatioRecord],
    checks: dict[str, SeriesCheck],
    rerun_id: int | None,
) -> list[int]:
    """One finding per confirmed regression (not per series that shows it), with the night's
    checks of its category in the evidence."""
    recorded = FindingStore(night.db)
    findings = []
    for r, also in finding_series(stored):
        built = night.current.binary.identity if night.current.binary else None
        evidence = finding_evidence(r, night.ref, result, rerun_id, also, built)
        check = checks.get(r.category)
        if check is not None:
            evidence = replace(evidence, checks=check.to_json())
        findings.append(
            recorded.record_recurring(
                NewFinding(
                    campaign_id=result.campaign_id,
                    fingerprint=f"nightly:{r.series}"[:64],
                    kind="regression",
                    label="regression",
                    severity="high",
                    title=finding_title(night.profile, r, check),
                    evidence=evidence.to_json(),
                )
            )
        )
    return findings


def check_per_category(nightly: NightlyConfig) -> None:
    """Refuse a ``per_category`` that leaves every category series without a CI.

    A category series needs `MIN_TASKS` tasks (analysis/stats.py); with fewer, every category
    said `insufficient data` every night and nothing said why."""
    if nightly.per_category < MIN_TASKS:
        raise ConfigError(
            f"nightly.per_category = {nightly.per_category}: a category series needs "
            f"{MIN_TASKS} tasks for a CI, so every category would read `insufficient data` "
            "every night",
            hint=f"set nightly.per_category to {MIN_TASKS} or more (4 is the default)",
        )


def nightly_command(
    config: Config,
    *,
    profiles: Sequence[str] | None = None,
    progress: Progress,
    database: Database | None = None,
) -> NightlyOutcome:
    names = list(profiles or config.nightly.profiles)
    if not names:
        raise no_profiles("[nightly] profiles", config, flag="--profile P")
    check_per_category(config.nightly)
    with open_database(config.database.resolved_url(), given=database) as db:
        nights = tuple(run_night(config, db, name, progress=progress) for name in names)
        return NightlyOutcome(nights, family_false_alarms(db, names))


def reference_pin(
    config: Config,
    *,
    profile: str,
    by: str | None,
    reason: str,
    progress: Progress,
    database: Database | None = None,
) -> ReferenceRecord:
    """A maintainer's re-pin: tonight's current system becomes the reference."""
    with open_database(config.database.resolved_url(), given=database) as db:
        current = prepare(config, profile, progress=progress)
        return pin_reference(
            config,
            ReferenceStore(db),
            current,
            host_fingerprint=hostinfo.collect().fingerprint,
            by=by or getpass.getuser(),
            reason=reason,
        )
