"""One plain function per job kind: the daemon and `watchkeeper job run` call the same ones.

Each takes the config, the job's validated `[args]` and a `JobContext` (a stop event and a
progress callback) and returns a `JobResult`. They wrap the stage commands and hold no logic
of their own. Stopping: the soak watches the stop event itself (it finishes the requests in
flight, flushes the spool and marks the campaign interrupted); the other commands report
progress between steps, and the progress callback raises `StepInterrupted` there once a stop
is requested, which unwinds them exactly like the CLI's Ctrl-C: servers stopped, campaign
marked interrupted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from watchkeeper.commands.benchmark import bench_command
from watchkeeper.commands.bisect import auto_bisect_command, bisect_command
from watchkeeper.commands.digest import digest_command
from watchkeeper.commands.nightly import nightly_command
from watchkeeper.commands.review_pr import review_pr_command
from watchkeeper.commands.soak import soak_command
from watchkeeper.commands.sweep import sweep_command, sweep_plan_lines
from watchkeeper.commands.triage import triage_command
from watchkeeper.commands.upgrade_check import upgrade_check_command
from watchkeeper.config import Config
from watchkeeper.config.requests import (
    BisectRequest,
    NightlyRequest,
    ReviewPrRequest,
    SoakRequest,
    SweepRequest,
    UpgradeCheckRequest,
)
from watchkeeper.daemon.jobdefs import BenchArgs, DigestArgs, HealthArgs
from watchkeeper.errors import ConfigError
from watchkeeper.redaction import redact_url
from watchkeeper.server.process import check_external
from watchkeeper.store.db import Database, masked
from watchkeeper.tracker.bodies import digest_day

Progress = Callable[[str], None]


class StepInterrupted(KeyboardInterrupt):
    """Raised at a step boundary after SIGTERM: the commands treat it as the CLI's Ctrl-C."""


@dataclass(frozen=True, slots=True)
class JobContext:
    stop: threading.Event = field(default_factory=threading.Event)
    progress: Progress = lambda _m: None
    db: Database | None = None
    """The daemon's database, passed to the commands (None: each opens its own)."""

    def checkpoint(self, message: str) -> None:
        """Progress that is also a step boundary: after a stop request, go no further."""
        if self.stop.is_set():
            raise StepInterrupted(f"stop requested before: {message}")
        self.progress(message)


@dataclass(frozen=True, slots=True)
class JobResult:
    outcome: str = "ok"
    """ok or interrupted (a failure is an exception)."""
    summary: str = ""
    campaign_id: int | None = None
    samples: int | None = None
    """Request samples this run stored; None: count the campaign's rows."""
    details: dict[str, Any] = field(default_factory=dict)


def _path(text: str | None) -> Path | None:
    return Path(text).expanduser() if text else None


def soak_job(config: Config, args: SoakRequest, ctx: JobContext) -> JobResult:
    result = soak_command(
        config,
        args,
        stop=ctx.stop,
        progress=ctx.progress,
        database=ctx.db,
        command_line="watchkeeper daemon (soak job)",
    )
    return JobResult(
        outcome="interrupted" if result.status == "interrupted" else "ok",
        summary=f"soak campaign {result.campaign_id} {result.status}: {result.verdict.headline}",
        campaign_id=result.campaign_id,
        samples=result.outcome.completed + result.outcome.failed,
        details={"resumed": result.resumed, "stable": result.verdict.stable},
    )


def bench_job(config: Config, args: BenchArgs, ctx: JobContext) -> JobResult:
    result = bench_command(
        config,
        profiles=args.profiles,
        rounds=args.rounds,
        taskset=_path(args.taskset),
        limit=args.limit,
        per_category=args.per_category,
        concurrency=args.concurrency,
        progress=ctx.checkpoint,
    )
    return JobResult(
        summary=f"bench campaign {result.campaign_id}: report {result.report_path}",
        campaign_id=result.campaign_id,
        details={"report": result.report_path, "findings": len(result.findings)},
    )


def nightly_job(config: Config, args: NightlyRequest, ctx: JobContext) -> JobResult:
    outcome = nightly_command(config, args, progress=ctx.checkpoint, database=ctx.db)
    parts = []
    for night in outcome.nights:
        verdicts = ", ".join(f"{r.category} {r.estimate:.3f} {r.verdict}" for r in night.ratios)
        kind = "A/A" if night.aa else "current vs reference"
        parts.append(f"{night.profile} ({kind}, campaign {night.campaign_id}): {verdicts}")
    return JobResult(
        summary="; ".join(parts),
        campaign_id=outcome.nights[-1].campaign_id if outcome.nights else None,
        details=outcome.to_json(),
    )


def digest_job(config: Config, args: DigestArgs, ctx: JobContext) -> JobResult:
    # The digest of the night this run falls in (nights run noon to noon UTC): at 07:15 that is
    # last night's, as before; on an evening schedule it is tonight's, not last night's again.
    # Issue bodies link to the same day (`digest_day` of the finding).
    outcome = digest_command(
        config,
        day=digest_day(datetime.now(UTC)),
        commit=args.commit or args.push,
        push=args.push,
        rerun=args.rerun,
        progress=ctx.checkpoint,
        database=ctx.db,
    )
    data = outcome.to_json()
    return JobResult(
        summary=f"digest {outcome.path}: {outcome.digest.headline}",
        samples=0,
        details={k: data[k] for k in ("path", "headline", "judged_now", "commit", "pushed")},
    )


NO_TRACKER = "nothing to do: no [tracker] configured"


def triage_job(config: Config, args: object, ctx: JobContext) -> JobResult:
    # The shipped jobs/triage.toml is enabled everywhere; a host without a tracker must not
    # record a failure every morning for it.
    if not config.tracker.kind:
        return JobResult(summary=NO_TRACKER, samples=0)
    result = triage_command(config, progress=ctx.checkpoint, database=ctx.db)
    return JobResult(summary="triage done", samples=0, details=result.to_json())


def review_pr_job(config: Config, args: ReviewPrRequest, ctx: JobContext) -> JobResult:
    """One PR (`pr`), else every matching open one."""
    if not config.tracker.kind:
        return JobResult(summary=NO_TRACKER, samples=0)
    result = review_pr_command(config, args, progress=ctx.checkpoint, database=ctx.db)
    return JobResult(summary="PR review poll done", samples=0, details=result.to_json())


def health_job(config: Config, args: HealthArgs, ctx: JobContext) -> JobResult:
    """The database answers at the expected schema, and the watched server's /health is 200."""
    url = config.database.resolved_url()
    Database(url).close()
    checked = [f"database {masked(url)}"]
    server = args.url or config.server.resolved_external_url()
    if server:
        check_external(server, timeout_s=args.timeout_s)
        checked.append(f"llama-server {redact_url(server)}")
    ctx.progress(f"healthy: {', '.join(checked)}")
    return JobResult(summary=f"healthy: {', '.join(checked)}", samples=0)


def upgrade_job(config: Config, args: UpgradeCheckRequest, ctx: JobContext) -> JobResult:
    check = upgrade_check_command(
        config, args, now=datetime.now(UTC), progress=ctx.checkpoint, database=ctx.db
    )
    return JobResult(
        summary=f"llama.cpp {check.candidate}: "
        + ", ".join(f"{v.profile} {v.verdict}" for v in check.verdicts),
        details={
            "report": str(check.report_path),
            "commit": check.published.commit_sha if check.published else None,
            "pushed": check.published.pushed if check.published else None,
        },
    )


def bisect_job(config: Config, args: BisectRequest, ctx: JobContext) -> JobResult:
    """With `good` and `bad`: bisect them, as `watchkeeper bisect` does. Without, and with
    `bisect.auto`: bisect one confirmed nightly regression whose reference and current
    releases differ (the decision: `commands.bisect.next_auto_bisect`)."""
    if args.good is not None:
        explicit = bisect_command(config, args, progress=ctx.checkpoint, database=ctx.db)
        return JobResult(
            summary=f"bisect {args.good}..{args.bad}: {explicit.result.status}",
            samples=0,
            details=explicit.to_json(),
        )
    if not config.bisect.auto:
        return JobResult(summary="nothing to do: bisect.auto is off", samples=0)
    run = auto_bisect_command(
        config, args, now=datetime.now(UTC), progress=ctx.checkpoint, database=ctx.db
    )
    if run is None:
        return JobResult(summary="nothing to bisect", samples=0)
    return JobResult(summary=run.summary(), samples=0, details=run.to_json())


def sweep_job(config: Config, args: SweepRequest, ctx: JobContext) -> JobResult:
    """`watchkeeper sweep` from a job file: the same request, the same command."""
    if args.dry_run:  # the plan
        return JobResult(
            summary="; ".join(sweep_plan_lines(config, args, progress=ctx.progress)), samples=0
        )
    result = sweep_command(config, args, progress=ctx.checkpoint, database=ctx.db)
    return JobResult(
        summary=f"sweep campaign {result.bench.campaign_id}: {result.recommendation.headline}",
        campaign_id=result.bench.campaign_id,
        details={"service_path": str(result.service_path)},
    )


JobFunction = Callable[[Config, Any, JobContext], JobResult]
JOB_FUNCTIONS: dict[str, JobFunction] = {
    "soak": soak_job,
    "sweep": sweep_job,
    "bench": bench_job,
    "nightly": nightly_job,
    "digest": digest_job,
    "triage": triage_job,
    "review-pr": review_pr_job,
    "health": health_job,
    "upgrade": upgrade_job,
    "bisect": bisect_job,
}


def job_function(kind: str) -> JobFunction:
    try:
        return JOB_FUNCTIONS[kind]
    except KeyError:
        raise ConfigError(f"no job function for kind {kind!r}") from None
