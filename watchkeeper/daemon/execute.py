"""One job execution: fleet lock, claim, run the job function, record the outcome.

A failing job is recorded (outcome `failed`, the error's one line) and the daemon goes on;
only the daemon's own stop interrupts a job. Everything a run logs carries its job, run and
host ids (structlog contextvars, bound in the job's thread).
"""

from __future__ import annotations

import threading
import time
import traceback
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import structlog

from watchkeeper.config import Config
from watchkeeper.daemon.fleet import FleetLock
from watchkeeper.daemon.jobdefs import JobDef
from watchkeeper.daemon.jobs import JobContext, JobResult, job_function
from watchkeeper.daemon.logs import get_logger
from watchkeeper.daemon.memory import release_free_memory
from watchkeeper.daemon.metrics import DaemonMetrics
from watchkeeper.errors import WatchkeeperError
from watchkeeper.redaction import redact, redact_json
from watchkeeper.store.db import Database
from watchkeeper.store.jobs import JobStore
from watchkeeper.store.runs import RunRows

log = get_logger("watchkeeper.daemon.job")


@dataclass(frozen=True, slots=True)
class JobOutcome:
    job: str
    outcome: str
    """ok, failed, interrupted, or skipped (not run here: see `reason`)."""
    run_id: int | None = None
    error: str | None = None
    reason: str = ""
    details: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        return {
            "job": self.job,
            "outcome": self.outcome,
            "run_id": self.run_id,
            "error": self.error,
            "reason": self.reason,
            "details": self.details,
        }


class JobRunner:
    """Runs jobs for one host. `config` may be swapped by a reload; a running job keeps its own."""

    def __init__(
        self,
        *,
        config: Config,
        host_id: str,
        db: Database,
        lock: FleetLock,
        metrics: DaemonMetrics | None = None,
        stop: threading.Event | None = None,
    ) -> None:
        self.config = config
        self.host_id = host_id
        self._db, self._store, self._runs = db, JobStore(db), RunRows(db)
        self._lock, self._metrics = lock, metrics
        self.stop = stop or threading.Event()
        self._running: dict[str, int] = {}
        self._cond = threading.Condition()

    def running(self) -> dict[str, int]:
        """Job name -> job_run id, for the jobs running now."""
        with self._cond:
            return dict(self._running)

    def wait_idle(self, timeout_s: float) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: not self._running, timeout=timeout_s)

    def run(self, job: JobDef, scheduled_for: datetime | None = None) -> JobOutcome:
        with structlog.contextvars.bound_contextvars(job=job.name, host_id=self.host_id):
            if self.stop.is_set():
                return self._skipped(job, "the daemon is stopping")
            if job.scope != "fleet":
                return self._claimed(job, scheduled_for)
            with self._lock.hold(job.name) as got:
                if not got:
                    return self._skipped(job, "another host holds the fleet lock")
                return self._claimed(job, scheduled_for)

    def _skipped(self, job: JobDef, reason: str) -> JobOutcome:
        log.info("job_skipped", reason=reason)
        if self._metrics:
            self._metrics.skipped.labels(job=job.name, reason=reason).inc()
        return JobOutcome(job.name, "skipped", reason=reason)

    def _claimed(self, job: JobDef, scheduled_for: datetime | None) -> JobOutcome:
        with self._cond:
            if job.name in self._running:
                busy = True
            else:
                busy, self._running[job.name] = False, 0
        if busy:
            return self._skipped(job, "the previous run is still going")
        try:
            run_id = self._store.claim(
                job=job.name,
                kind=job.kind,
                scope=job.scope,
                host_id=self.host_id,
                scheduled_for=scheduled_for,
            )
            if run_id is None:
                return self._skipped(job, "this start was already claimed by another host")
            with self._cond:
                self._running[job.name] = run_id
            with structlog.contextvars.bound_contextvars(job_run_id=run_id, kind=job.kind):
                return self._execute(job, run_id, scheduled_for)
        finally:
            with self._cond:
                self._running.pop(job.name, None)
                self._cond.notify_all()

    def _execute(self, job: JobDef, run_id: int, scheduled_for: datetime | None) -> JobOutcome:
        config = self.config
        metrics = self._metrics
        log.info("job_started", scope=job.scope, scheduled_for=_iso(scheduled_for))
        if metrics:
            metrics.running.labels(job=job.name).set(1)
        started = time.monotonic()
        error: str | None = None
        result = JobResult()
        try:
            # The daemon's one database, unless a reload pointed the config at another.
            same = self._db.url == config.database.resolved_url()
            ctx = JobContext(
                stop=self.stop,
                progress=lambda m: log.info("progress", message=m),
                db=self._db if same else None,
            )
            result = job_function(job.kind)(config, job.args, ctx)
            outcome = result.outcome
        except KeyboardInterrupt as exc:  # StepInterrupted: the daemon is stopping
            outcome, error = "interrupted", str(exc) or "interrupted"
        except WatchkeeperError as exc:
            outcome = "failed"
            error = exc.message + (f" (hint: {exc.hint})" if exc.hint else "")
        except Exception as exc:  # a bug in a job must not take the daemon down
            # Stored and shown by `status`: a library's message may carry a URL's password.
            outcome, error = "failed", redact(f"{type(exc).__name__}: {exc}")
            log.error("job_crashed", traceback=traceback.format_exc())
        duration = time.monotonic() - started
        # Stored, shown by `status` and logged: whatever a job put in its summary or details
        # (a URL it checked) passes the one redactor first.
        details = redact_json({**result.details, "summary": result.summary})
        if result.campaign_id is not None:
            details["campaign_id"] = result.campaign_id
        samples = result.samples
        try:
            if samples is None and result.campaign_id is not None:
                samples = self._runs.samples_for_campaign(result.campaign_id)
            details["samples"] = samples or 0
            self._store.finish(run_id, outcome=outcome, error=error, details=details)
        except WatchkeeperError as exc:  # the row stays `running`; the next start marks it
            log.error("job_not_recorded", error=exc.message)
        if metrics:
            metrics.running.labels(job=job.name).set(0)
            metrics.record(job.name, outcome, duration, time.time())
            metrics.samples.labels(job=job.name).inc(samples or 0)
        event = log.info if outcome == "ok" else log.warning
        event(
            "job_finished",
            outcome=outcome,
            duration_s=round(duration, 3),
            campaign_id=result.campaign_id,
            summary=details["summary"],
            error=error,
        )
        # The job's peak is over: without this the daemon's resting RSS is the highest peak
        # any night reached (glibc keeps freed heap pages), which reads as a leak.
        freed = release_free_memory()
        log.info(
            "memory_released",
            rss_mb=round(freed.rss_after / 2**20, 1),
            released_mb=round(freed.released / 2**20, 1),
            trimmed=freed.trimmed,
        )
        return JobOutcome(job.name, outcome, run_id, error, details=details)


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value else None
