"""APScheduler 3 wiring: cron triggers with time zones, a SQLAlchemy job store per host.

Job state lives in the database (`apscheduler_jobs_<host>`, one table per host because an
APScheduler job store must not be shared between schedulers), so a daemon restarted after a
missed start still runs it within the job's misfire grace, once (coalesce). Every job is
`max_instances=1`: a run that overruns its next start makes APScheduler skip that start, which
is reported, never run twice. The stored job is only a reference to `fire(name)`; the
definition and the config are looked up when it fires, so a reload needs no re-pickling.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from zoneinfo import ZoneInfo

from apscheduler.events import (
    EVENT_JOB_MAX_INSTANCES,
    EVENT_JOB_MISSED,
    JobExecutionEvent,
    JobSubmissionEvent,
)
from apscheduler.executors.base import run_job
from apscheduler.executors.pool import ThreadPoolExecutor
from apscheduler.jobstores.memory import MemoryJobStore
from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
from apscheduler.schedulers.background import BackgroundScheduler
from apscheduler.triggers.cron import CronTrigger
from apscheduler.triggers.date import DateTrigger

from watchkeeper.daemon.jobdefs import JobDef
from watchkeeper.store.db import make_engine

FIRE = "watchkeeper.daemon.scheduler:fire"
Target = Callable[[str, datetime | None], None]
Skip = Callable[[str, str], None]

_target: Target | None = None
_local = threading.local()


def fire(name: str, signature: str = "") -> None:
    """What the job store references: hand the start to the daemon that owns this process."""
    if _target is None:
        raise RuntimeError("no daemon is running in this process")
    _target(name, getattr(_local, "scheduled_for", None))


def table_name(host_id: str) -> str:
    return ("apscheduler_jobs_" + re.sub(r"[^a-z0-9]+", "_", host_id.lower()))[:63]


def _run_at(job: Any, alias: str, run_times: list[datetime], logger_name: str) -> list[Any]:
    events: list[Any] = []
    for run_time in run_times:
        _local.scheduled_for = run_time
        try:
            events += run_job(job, alias, [run_time], logger_name)
        finally:
            _local.scheduled_for = None
    return events


class _Executor(ThreadPoolExecutor):  # type: ignore[misc]
    """APScheduler's thread pool, telling the job which scheduled start it is running (the
    fleet claim key); the rest is `BasePoolExecutor._do_submit_job` as shipped."""

    def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
        def callback(future: Any) -> None:
            exc = future.exception()
            if exc:
                self._run_job_error(job.id, exc, getattr(exc, "__traceback__", None))
            else:
                self._run_job_success(job.id, future.result())

        future = self._pool.submit(_run_at, job, job._jobstore_alias, run_times, self._logger.name)
        future.add_done_callback(callback)


@dataclass(frozen=True, slots=True)
class SyncReport:
    added: tuple[str, ...]
    rescheduled: tuple[str, ...]
    kept: tuple[str, ...]
    removed: tuple[str, ...]


class Schedule:
    def __init__(self, url: str, host_id: str, *, target: Target, on_skip: Skip) -> None:
        global _target  # noqa: PLW0603  (the job store can only reference a module function)
        _target = target
        self._on_skip = on_skip
        self._engine = make_engine(url)
        self.scheduler = BackgroundScheduler(
            jobstores={
                "default": SQLAlchemyJobStore(engine=self._engine, tablename=table_name(host_id)),
                "once": MemoryJobStore(),
            },
            executors={"default": _Executor(max_workers=8)},
            job_defaults={"max_instances": 1},
            timezone=UTC,
        )
        self.scheduler.add_listener(self._event, EVENT_JOB_MAX_INSTANCES | EVENT_JOB_MISSED)

    def _event(self, event: JobSubmissionEvent | JobExecutionEvent) -> None:
        name = str(event.job_id).split("@", 1)[0]
        if event.code == EVENT_JOB_MAX_INSTANCES:
            self._on_skip(name, "the previous run is still going")
        else:
            self._on_skip(name, "missed its start by more than the misfire grace")

    def start(self) -> None:
        """Started paused: `sync` first, then `resume`, so no stale definition ever fires."""
        self.scheduler.start(paused=True)

    def resume(self) -> None:
        self.scheduler.resume()

    def sync(self, jobs: Sequence[JobDef]) -> SyncReport:
        """Make the stored jobs match the definitions; an unchanged schedule keeps its next
        start (so a start missed while the daemon was down still runs)."""
        wanted = {j.name: j for j in jobs if j.enabled}
        added: list[str] = []
        rescheduled: list[str] = []
        kept: list[str] = []
        removed: list[str] = []
        for stored in self.scheduler.get_jobs(jobstore="default"):
            if stored.id not in wanted:
                stored.remove()
                removed.append(stored.id)
        for name, job in wanted.items():
            stored = self.scheduler.get_job(name, jobstore="default")
            if stored is not None and stored.kwargs.get("signature") == job.signature():
                kept.append(name)
                continue
            self.scheduler.add_job(
                FIRE,
                CronTrigger(**job.cron_fields(), timezone=ZoneInfo(job.timezone)),
                id=name,
                name=name,
                kwargs={"name": name, "signature": job.signature()},
                jobstore="default",
                replace_existing=True,
                misfire_grace_time=job.misfire_grace_s,
                coalesce=job.coalesce,
                max_instances=1,
            )
            (rescheduled if stored is not None else added).append(name)
        return SyncReport(tuple(added), tuple(rescheduled), tuple(kept), tuple(removed))

    def run_now(self, name: str, *, reason: str) -> None:
        """A one-off start (not persisted), e.g. resuming an interrupted soak."""
        self.scheduler.add_job(
            FIRE,
            DateTrigger(datetime.now(UTC)),
            id=f"{name}@{reason}",
            kwargs={"name": name},
            jobstore="once",
            replace_existing=True,
            misfire_grace_time=3600,
            max_instances=1,
        )

    def next_runs(self) -> dict[str, datetime | None]:
        return {job.id: job.next_run_time for job in self.scheduler.get_jobs(jobstore="default")}

    def shutdown(self) -> None:
        """Stop firing; a running job is left to finish (the daemon waits for it)."""
        if self.scheduler.running:
            self.scheduler.shutdown(wait=False)
        self._engine.dispose()
