"""The steps of one profile's night: its reference (pinned when there is none), the paired
bench against it, its ratios judged, regressions confirmed, findings filed.

Split from `commands/nightly.py`, which runs these steps in order for each profile: they are
the nightly's engine, and what a rerun, a soak beside the reference or a release check shares
with it (`pin_reference`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from watchkeeper.analysis.benchmark import ALL, BenchResult
from watchkeeper.campaign.acceptance_findings import record_acceptance_alarms
from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_plan import BenchPlan
from watchkeeper.campaign.bench_report import finish_with_report
from watchkeeper.campaign.nightly_findings import (
    finding_evidence,
    finding_series,
    finding_title,
)
from watchkeeper.config import Config
from watchkeeper.load.sampling import SamplingSettings
from watchkeeper.load.tasks import cap_tokens, load_taskset, select
from watchkeeper.nightly.night_checks import SeriesCheck
from watchkeeper.nightly.ratios import (
    CONFIRM_WINDOW,
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
from watchkeeper.server.launch import PreparedProfile
from watchkeeper.store.db import Database
from watchkeeper.store.findings import FindingStore, NewFinding
from watchkeeper.store.references import RatioRecord, ReferenceRecord, ReferenceStore

Progress = Callable[[str], None]


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


def night_bench(
    config: Config,
    current: PreparedProfile,
    ref_arm: PreparedProfile,
    *,
    kind: str,
    categories: Sequence[str],
    progress: Progress,
    database: Database,
    sampling: SamplingSettings | None = None,
) -> BenchResult:
    """The paired bench of tonight's current system against its reference, on `categories`'
    tasks (empty: every category), at `sampling` (None: the config's [bench] keys)."""
    n = config.nightly
    taskset = Path(n.taskset) if n.taskset else config.bench.resolved_taskset()
    tasks = cap_tokens(
        select(
            load_taskset(taskset),
            limit=None,
            categories=list(categories) or None,
            per_category=n.per_category,
        ),
        n.max_tokens,
    )
    plan = BenchPlan(
        profiles=(ref_arm.name, current.name),
        tasks=tuple(tasks),
        rounds=n.rounds,
        warmup_rounds=config.bench.warmup_rounds,
        warmup_tasks=min(2, len(tasks)),
        concurrency=1,
        restart_every=n.restart_every,
        sampling=sampling,
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


def tonights_reference(
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
class Night:
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
    categories: tuple[str, ...] = ()
    """The categories measured (empty: every one): the request's, else [nightly]'s."""
    sampling: SamplingSettings | None = None
    """The night's sampler, resolved from its request (None: the config's [bench] keys)."""

    def bench(self, kind: str) -> BenchResult:
        return night_bench(
            self.config,
            self.current,
            self.ref_arm,
            kind=kind,
            categories=self.categories,
            progress=self.progress,
            database=self.db,
            sampling=self.sampling,
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


def confirm_regressions(
    night: Night, result: BenchResult, ratios: list[RatioRecord], now: datetime | None
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


def file_findings(
    night: Night,
    result: BenchResult,
    stored: list[RatioRecord],
    checks: dict[str, SeriesCheck],
    rerun_id: int | None,
) -> list[int]:
    """One finding per confirmed regression (not per series that shows it), with the night's
    checks of its category in the evidence; then the acceptance alarms of its drafting arms."""
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
    findings += record_acceptance_alarms(
        night.db, result.campaign_id, kinds=("nightly",), source="nightly"
    )
    return findings
