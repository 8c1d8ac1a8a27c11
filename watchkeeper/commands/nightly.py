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
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from watchkeeper.analysis.acceptance import result_curves
from watchkeeper.analysis.stats import MIN_TASKS
from watchkeeper.campaign.defaults import measured_categories, no_profiles, with_recommendation
from watchkeeper.campaign.night import (
    Night,
    confirm_regressions,
    file_findings,
    pin_reference,
    tonights_reference,
)
from watchkeeper.campaign.nightly_findings import (
    family_false_alarms,
    with_confirmed,
)
from watchkeeper.campaign.references import reference_profile
from watchkeeper.config import Config
from watchkeeper.config.model import NightlyConfig
from watchkeeper.config.requests import NightlyRequest
from watchkeeper.errors import ConfigError
from watchkeeper.host import info as hostinfo
from watchkeeper.load.sampling import SamplingSettings, command_sampling
from watchkeeper.nightly.night_checks import SeriesCheck, series_checks
from watchkeeper.nightly.ratios import (
    FLAGS,
    FalseAlarms,
)
from watchkeeper.nightly.reference import (
    identify,
)
from watchkeeper.server.launch import prepare
from watchkeeper.store.db import Database, open_database
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


def run_night(
    config: Config,
    db: Database,
    profile: str,
    *,
    categories: Sequence[str],
    progress: Progress,
    now: datetime | None = None,
    sampling: SamplingSettings | None = None,
) -> PairedNight:
    """One profile's night as steps: the reference (pinned if there is none), the paired
    bench on `categories`' tasks (empty: every one), its ratios judged, regressions confirmed
    (the previous night, or a rerun), the ratios stored and the confirmed regressions filed as
    findings."""
    store = ReferenceStore(db)
    host = hostinfo.collect()
    current = prepare(config, profile, progress=progress)
    ident = identify(current, host.fingerprint)
    ref, pinned_now = tonights_reference(
        config, store, current, host.fingerprint, profile, progress
    )
    aa = ref.identity == ident.digest
    progress(
        f"{profile}: current vs reference #{ref.id} (pinned {ref.pinned_at:%Y-%m-%d} by "
        f"{ref.pinned_by}){' — A/A night: they are identical' if aa else ''}"
    )
    night = Night(
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
        tuple(categories),
        sampling,
    )
    result = night.bench("nightly")
    ratios = night.ratios_of(result)
    checks = series_checks(result, current_arm=current.name)
    confirmed, rerun_id, rerun_ratios = confirm_regressions(night, result, ratios, now)
    stored = [with_confirmed(r, r.series in confirmed and r.verdict in FLAGS) for r in ratios]
    store.add_ratios(stored)
    store.add_ratios(rerun_ratios)
    tails = night.tails_of(result)
    store.add_ratios(tails)
    findings = [] if aa else file_findings(night, result, stored, checks, rerun_id)
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
    request: NightlyRequest,
    *,
    progress: Progress,
    database: Database | None = None,
) -> NightlyOutcome:
    """The night its `request` asks for (the CLI's options or a nightly job's `[args]`,
    config/requests.py), each choice left out the config's; its sampler (over the config's
    [bench] keys) is resolved here once and rides on each night's plan.

    `request.recommendation`: a sweep's record; the night guards the setting its unit runs
    (the recommended arm, else the baseline it keeps), as the unit ships it, against that
    profile's pinned reference. The profile comes from the record, so the guarded setting is
    the committed one even where watchkeeper.toml has no block for it. `request.categories`:
    only those tasks (over [nightly] categories): a workload's own setting on its own
    requests; guarding a recommendation with neither, the categories its sweep measured, the
    same rule as `soak --recommendation` (campaign/defaults.measured_categories)."""
    sampling = command_sampling(config, given=request.sampler())
    profiles, categories = request.profiles, request.categories or None
    if request.recommendation is not None:
        if profiles:
            raise ConfigError("nightly takes --profile or --recommendation, not both")
        config, _, record = with_recommendation(config, request.recommendation)
        profiles = [record.chosen.name]
        categories = measured_categories(record, categories or config.nightly.categories)
        progress(
            f"guarding the sweep's recommendation (campaign {record.campaign_id}): "
            f"{record.chosen.name}"
        )
    categories = categories or config.nightly.categories
    names = list(profiles or config.nightly.profiles)
    if not names:
        raise no_profiles("[nightly] profiles", config, flag="--profile P")
    check_per_category(config.nightly)
    with open_database(config.database.resolved_url(), given=database) as db:
        nights = tuple(
            run_night(config, db, name, categories=categories, progress=progress, sampling=sampling)
            for name in names
        )
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


def reference_history(
    config: Config,
    *,
    profile: str | None,
    active_only: bool,
    database: Database | None = None,
) -> list[dict[str, Any]]:
    """The pinned references (of `profile`, else every profile's), oldest first, as plain
    rows; `active_only`: the one each profile is measured against now."""
    with open_database(config.database.resolved_url(), given=database) as db:
        refs = ReferenceStore(db).history(profile)
    return [
        {
            "id": r.id,
            "profile": r.profile,
            "active": r.active,
            "pinned_at": r.pinned_at.isoformat(),
            "pinned_by": r.pinned_by,
            "reason": r.reason,
            "binary": f"{r.binary_version} sha256 {r.binary_sha256}",
            "model_sha256": r.model_sha256,
            "draft_sha256": r.draft_sha256,
            "config_hash": r.config_hash,
            "host": r.host_fingerprint,
        }
        for r in refs
        if r.active or not active_only
    ]
