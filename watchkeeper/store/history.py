"""Reads and writes for regression tracking: run history, exclusions, resets, and findings
(delegated to `store.findings`, the finding table's owner).

The detector works on plain dataclasses (`RunRecord`) so that it can be tested without a
database; this module is the only place that turns run rows into them. Findings keep their
lifecycle (active → acknowledged / dismissed / fixed / silenced, or expired when a one-night
candidate is never confirmed) in the database, so the CLI, the digest and a later tracker sync
all see the same state.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Unpack

from sqlalchemy import select

from watchkeeper.analysis.latency import Slo, slo_of
from watchkeeper.store.campaigns import CampaignRows
from watchkeeper.store.db import Database
from watchkeeper.store.findings import FindingChanges, FindingStore, NewFinding, StoredFinding
from watchkeeper.store.runs import RunRows
from watchkeeper.store.schema import (
    Campaign,
    Host,
    Model,
    OutputCheck,
    Profile,
    RequestSampleRow,
    Run,
    SeriesReset,
    ServerBuild,
)

NOT_NIGHTLY = ("soak", "review", "nightly", "nightly-rerun")
"""Campaign kinds that never join the absolute series: a soak has its own verdicts, a PR
review measures somebody's proposal, and a nightly is judged by its paired ratio against the
pinned reference (nightly_ratio), which host drift cannot move as it moves absolute tok/s."""


@dataclass(frozen=True, slots=True)
class SampleFacts:
    """The few per-request numbers the detector reads."""

    category: str
    ok: bool
    decode_tps: float | None
    ttft_ms: float | None
    completion_tokens: int | None
    draft_n: int | None
    draft_n_accepted: int | None
    latency_ms: float | None = None


@dataclass(frozen=True, slots=True)
class RunRecord:
    """One measured (non-warm-up) run with everything that places it in a series."""

    run_id: int
    campaign_id: int
    campaign_kind: str
    started_at: datetime
    arm: str
    profile_name: str
    profile_hash: str
    model_key: str
    host: str
    build_label: str
    build_flavour: str
    concurrency: int
    error: str | None
    peak_rss_bytes: int | None
    samples: tuple[SampleFacts, ...]
    checks: tuple[tuple[str, str], ...]
    """(category, verdict) of every identity check where this run was the candidate."""
    slo: Slo | None = None
    """The service levels its campaign judged requests by (`[load]` when it ran); None for a
    campaign from before they were recorded: it has no good-fraction series point."""


def _aware(value: datetime) -> datetime:
    """SQLite hands back naive datetimes for timezone-aware columns; they were stored as UTC."""
    return value if value.tzinfo else value.replace(tzinfo=UTC)


class History:
    def __init__(self, db: Database) -> None:
        self._db = db

    @property
    def db(self) -> Database:
        return self._db

    # -- runs -------------------------------------------------------------------------------

    def run_records(
        self, *, up_to_campaign: int | None = None, campaigns: Iterable[int] | None = None
    ) -> list[RunRecord]:
        """Measured runs in chronological order, optionally only up to (and including) one
        campaign or only from the given campaigns. Soak and PR-review campaigns are not
        nightly series (``NOT_NIGHTLY``)."""
        with self._db.session() as s:
            query = (
                select(Run, Campaign, Host, ServerBuild, Profile)
                .join(Campaign, Run.campaign_id == Campaign.id)
                .join(Host, Campaign.host_id == Host.id)
                .outerjoin(ServerBuild, Campaign.server_build_id == ServerBuild.id)
                .join(Profile, Run.profile_id == Profile.id)
                .where(Run.is_warmup.is_(False), Campaign.kind.not_in(NOT_NIGHTLY))
                .order_by(Run.started_at, Run.id)
            )
            if up_to_campaign is not None:
                query = query.where(Run.campaign_id <= up_to_campaign)
            if campaigns is not None:
                query = query.where(Run.campaign_id.in_(list(campaigns)))
            rows = s.execute(query).all()
            run_ids = [int(r.Run.id) for r in rows]
            models = {int(m.id): m.sha256 for m in s.scalars(select(Model))}
            samples: dict[int, list[SampleFacts]] = defaultdict(list)
            checks: dict[int, list[tuple[str, str]]] = defaultdict(list)
            for chunk in _chunks(run_ids, 500):
                for r in s.scalars(
                    select(RequestSampleRow)
                    .where(RequestSampleRow.run_id.in_(chunk))
                    .order_by(RequestSampleRow.run_id, RequestSampleRow.seq)
                ):
                    samples[r.run_id].append(
                        SampleFacts(
                            r.category,
                            r.error is None,
                            r.decode_tps_server,
                            r.ttft_ms,
                            r.completion_tokens,
                            r.draft_n,
                            r.draft_n_accepted,
                            r.latency_ms,
                        )
                    )
                for c in s.scalars(
                    select(OutputCheck).where(OutputCheck.candidate_run_id.in_(chunk))
                ):
                    checks[c.candidate_run_id].append((c.category, c.verdict))
            out = []
            for run, campaign, host, build, profile in rows:
                target = models.get(profile.target_model_id or -1, "none")[:12]
                draft = models.get(profile.draft_model_id or -1)
                out.append(
                    RunRecord(
                        run_id=int(run.id),
                        campaign_id=int(campaign.id),
                        campaign_kind=campaign.kind,
                        started_at=_aware(run.started_at),
                        arm=run.arm,
                        profile_name=profile.name,
                        profile_hash=profile.config_hash,
                        model_key=f"{target}+{draft[:12]}" if draft else target,
                        host=host.fingerprint[:12],
                        build_label=_build_label(build),
                        build_flavour=build.variant if build else "unknown",
                        concurrency=run.concurrency,
                        error=run.error,
                        peak_rss_bytes=run.peak_rss_bytes,
                        samples=tuple(samples[int(run.id)]),
                        checks=tuple(checks[int(run.id)]),
                        slo=slo_of((campaign.params or {}).get("slo")),
                    )
                )
            return out

    def run_profile(self, run_id: int) -> tuple[str, dict[str, Any], int]:
        """(profile name, profile config, concurrency) a run measured: what a rerun repeats."""
        with self._db.session() as s:
            run = s.get_one(Run, run_id)
            profile = s.get_one(Profile, run.profile_id)
            return profile.name, dict(profile.config), run.concurrency

    def run_task_ids(self, run_id: int, category: str | None) -> list[str]:
        """The tasks a run sent (of one category, or all), in order."""
        with self._db.session() as s:
            query = select(RequestSampleRow.task_id).where(RequestSampleRow.run_id == run_id)
            if category is not None:
                query = query.where(RequestSampleRow.category == category)
            return list(s.scalars(query.order_by(RequestSampleRow.seq)))

    def record_exclusions(self, reasons: dict[int, str | None]) -> None:
        """Store why each run may (None) or may not be a baseline; idempotent."""
        RunRows(self._db).record_exclusions(reasons)

    # -- campaigns --------------------------------------------------------------------------

    def pending_campaigns(self) -> list[int]:
        """Finished campaigns the detector has not judged yet, oldest first."""
        with self._db.session() as s:
            return [
                int(i)
                for i in s.scalars(
                    select(Campaign.id)
                    .where(
                        Campaign.analysed_at.is_(None),
                        Campaign.status == "completed",
                        Campaign.kind.not_in((*NOT_NIGHTLY, "aa")),
                    )
                    .order_by(Campaign.id)
                )
            ]

    def mark_analysed(self, campaign_id: int, detection: dict[str, Any]) -> None:
        """Record the detector's summary of the campaign (kept beside the command's own)."""
        CampaignRows(self._db).mark_analysed(campaign_id, detection)

    def campaigns_between(self, since: datetime, until: datetime) -> list[dict[str, Any]]:
        with self._db.session() as s:
            rows = s.scalars(
                select(Campaign)
                .where(Campaign.started_at >= since, Campaign.started_at < until)
                .order_by(Campaign.id)
            )
            return [
                {
                    "id": int(c.id),
                    "kind": c.kind,
                    "status": c.status,
                    "started_at": _aware(c.started_at),
                    "finished_at": _aware(c.finished_at) if c.finished_at else None,
                    "summary": dict(c.summary) if c.summary else {},
                    "params": dict(c.params),
                }
                for c in rows
            ]

    def mismatches(self, campaign_ids: Sequence[int]) -> list[dict[str, Any]]:
        """Identity checks that are real mismatches (not near-ties), for the digest."""
        with self._db.session() as s:
            rows = s.scalars(
                select(OutputCheck)
                .where(
                    OutputCheck.campaign_id.in_(list(campaign_ids)),
                    OutputCheck.verdict == "mismatch",
                )
                .order_by(OutputCheck.id)
            )
            return [
                {
                    "campaign_id": c.campaign_id,
                    "arm": c.arm,
                    "task_id": c.task_id,
                    "category": c.category,
                    "first_divergence": c.first_divergence,
                    "margin": c.margin,
                    "baseline_excerpt": c.baseline_excerpt,
                    "candidate_excerpt": c.candidate_excerpt,
                }
                for c in rows
            ]

    # -- resets -----------------------------------------------------------------------------

    def resets(self) -> dict[str, int]:
        """Per series fingerprint, the run id where its current baseline begins."""
        with self._db.session() as s:
            latest: dict[str, int] = {}
            for r in s.scalars(select(SeriesReset).order_by(SeriesReset.run_id)):
                latest[r.series_fingerprint] = max(latest.get(r.series_fingerprint, 0), r.run_id)
            return latest

    def add_reset(
        self, fingerprint: str, run_id: int, *, reason: str, finding_id: int | None
    ) -> bool:
        """Restart a series' baseline at a run; False when that reset already exists."""
        with self._db.session() as s:
            exists = s.scalars(
                select(SeriesReset.id).filter_by(series_fingerprint=fingerprint, run_id=run_id)
            ).first()
            if exists is not None:
                return False
            s.add(
                SeriesReset(
                    series_fingerprint=fingerprint,
                    run_id=run_id,
                    reason=reason,
                    finding_id=finding_id,
                )
            )
            return True

    # -- findings ---------------------------------------------------------------------------

    def findings(
        self,
        *,
        statuses: Sequence[str] | None = None,
        kinds: Sequence[str] | None = None,
        fingerprint: str | None = None,
    ) -> list[StoredFinding]:
        return FindingStore(self._db).find(statuses=statuses, kinds=kinds, fingerprint=fingerprint)

    def finding(self, finding_id: int) -> StoredFinding | None:
        return FindingStore(self._db).get(finding_id)

    def create_finding(self, new: NewFinding) -> int:
        return FindingStore(self._db).add(new)

    def update_finding(self, finding_id: int, **changes: Unpack[FindingChanges]) -> None:
        FindingStore(self._db).update(finding_id, **changes)


def _build_label(build: ServerBuild | None) -> str:
    """Version words plus a short binary hash: two builds of one version stay apart."""
    if build is None:
        return "unknown"
    version = build.version.removeprefix("version:").strip() or build.version
    return f"{version} #{build.fingerprint.removeprefix('external:')[:8]}"


def _chunks(items: Sequence[int], size: int) -> Iterable[Sequence[int]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]
