"""`watchkeeper soak`: closed-loop load for hours, faults survived, every sample kept, a verdict.

Wiring only: the plan comes from config + CLI, the campaign is new or resumed, each profile
gets a supervised server, the loop runs, the spool is flushed, and the verdict is computed
from the stored campaign (so a resumed soak is judged as a whole).
"""

from __future__ import annotations

import hashlib
import json
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from watchkeeper.commands.campaigns import open_campaign, register_profile
from watchkeeper.config import Config
from watchkeeper.config.paths import data_dir, runs_log_dir
from watchkeeper.errors import ServerError, SoakError, StoreError
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.server.launch import prepare
from watchkeeper.soak.durations import format_duration, parse_duration
from watchkeeper.soak.loop import OnSample, ResumePoint, SoakLoop, SoakOutcome, SoakPlan
from watchkeeper.soak.spool import Journal, SpoolingWriter
from watchkeeper.soak.supervisor import ServerSupervisor
from watchkeeper.soak.verdicts import SoakVerdict, judge
from watchkeeper.store.db import Database, masked
from watchkeeper.store.repository import Repository
from watchkeeper.store.soak_store import SoakData, SoakStore

Progress = Callable[[str], None]
FINAL_FLUSH_S = 60.0


@dataclass(frozen=True, slots=True)
class SoakCommandResult:
    campaign_id: int
    status: str
    resumed: bool
    database: str
    outcome: SoakOutcome
    verdict: SoakVerdict

    def to_json(self) -> dict[str, Any]:
        return {
            **self.verdict.to_json(),
            "status": self.status,
            "resumed": self.resumed,
            "database": self.database,
            "this_run": {
                "blocks": self.outcome.blocks,
                "completed_requests": self.outcome.completed,
                "failed_requests": self.outcome.failed,
                "restarts": self.outcome.restarts,
                "stopped_profiles": list(self.outcome.stopped_profiles),
                "elapsed_s": round(self.outcome.elapsed_s, 1),
            },
        }


def spool_dir(campaign_id: int) -> Path:
    return data_dir() / "spool" / f"soak-c{campaign_id}"


def _seconds(text: str, what: str) -> float:
    try:
        return parse_duration(text)
    except ValueError as exc:
        raise SoakError(f"--{what}: {exc}") from None


def _resume_point(data: SoakData) -> ResumePoint:
    """Next block after the last stored one; elapsed = the blocks' measured time."""
    load = [b for b in data.blocks if not b.arm.endswith(":probe")]
    if not load:
        return ResumePoint()
    elapsed = sum(
        (b.finished_at - b.started_at).total_seconds() for b in load if b.finished_at is not None
    )
    return ResumePoint(max(b.round for b in load) + 1, elapsed)


def soak_command(
    config: Config,
    *,
    duration: str | None = None,
    profiles: list[str] | None = None,
    concurrency: list[int] | None = None,
    block: str | None = None,
    taskset: Path | None = None,
    limit: int | None = None,
    per_category: int | None = None,
    seed: int | None = None,
    fresh: bool = False,
    resume_id: int | None = None,
    stop: threading.Event | None = None,
    progress: Progress = lambda _m: None,
    on_sample: OnSample | None = None,
) -> SoakCommandResult:
    stop = stop or threading.Event()
    soak = config.soak
    duration = duration or soak.duration
    block = block or soak.block
    names = tuple(profiles or soak.profiles)
    levels = tuple(concurrency or soak.concurrency)
    if not names or not levels or min(levels) < 1:
        raise SoakError("a soak needs at least one profile and concurrencies >= 1")
    duration_s, block_s = _seconds(duration, "duration"), _seconds(block, "block")
    tasks = select(
        load_taskset(taskset or config.bench.resolved_taskset()),
        limit=limit,
        per_category=per_category,
    )
    prepared = [prepare(config, name, progress=progress) for name in names]
    blob = json.dumps([names, levels, duration_s, block_s, [t.id for t in tasks]])
    signature = hashlib.sha256(blob.encode()).hexdigest()[:16]
    url = config.database.resolved_url()
    db = Database(url)
    try:
        repo, store = Repository(db), SoakStore(db)
        campaign_id = resume_id
        if campaign_id is None and not fresh:
            campaign_id = store.find_resumable(signature)
        resume, resumed = ResumePoint(), campaign_id is not None
        if campaign_id is not None:
            data = store.load(campaign_id)
            if data.params.get("signature") != signature:
                raise SoakError(
                    f"campaign {campaign_id} is not a soak with this plan",
                    hint="use the same --duration/--profiles/--concurrency/--block/task set, "
                    "or --fresh",
                )
            resume, seed = _resume_point(data), int(data.params["seed"])
            store.set_status(campaign_id, "running")
            progress(
                f"resuming soak campaign {campaign_id} at block {resume.next_block}, "
                f"{format_duration(resume.elapsed_s)} of {duration} done"
            )
        else:
            seed = seed if seed is not None else random.SystemRandom().randrange(2**31)
            params = {
                "duration": duration,
                "duration_s": duration_s,
                "block_s": block_s,
                "slice": soak.slice,
                "profiles": list(names),
                "concurrency": list(levels),
                "seed": seed,
                "tasks": [t.id for t in tasks],
                "probe_task": tasks[0].id,
                "temperature": soak.temperature,
                "signature": signature,
            }
            campaign_id = open_campaign(
                repo, kind="soak", prepared=prepared, params=params
            ).campaign_id
            progress(
                f"soak campaign {campaign_id}: {duration} over {', '.join(names)}, seed {seed}"
            )
        plan = SoakPlan(
            duration_s, block_s, names, levels, seed, tuple(tasks), tasks[0], soak.temperature
        )
        return _execute(
            config, repo, store, plan, prepared, campaign_id, resume, resumed,
            stop=stop, progress=progress, on_sample=on_sample, database=masked(url),
        )  # fmt: skip
    finally:
        db.close()


def _execute(
    config: Config,
    repo: Repository,
    store: SoakStore,
    plan: SoakPlan,
    prepared: list[Any],
    campaign_id: int,
    resume: ResumePoint,
    resumed: bool,
    *,
    stop: threading.Event,
    progress: Progress,
    on_sample: OnSample | None,
    database: str,
) -> SoakCommandResult:
    ids = {p.name: register_profile(repo, p) for p in prepared}
    journal = Journal(spool_dir(campaign_id))
    writer = SpoolingWriter(
        journal,
        lambda items: store.write(campaign_id, items),
        interval_s=config.soak.flush_interval_s,
    )
    writer.drain()  # whatever a killed predecessor left behind
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    log_dir = runs_log_dir() / f"{stamp}-c{campaign_id}"
    sups = {
        p.name: ServerSupervisor(
            config, p, log_path=log_dir / f"{p.name}.log", emit=writer.add, stop=stop
        )
        for p in prepared
    }
    writer.start()
    try:
        for sup in sups.values():
            sup.start()
            progress(f"{sup.profile}: server up at {sup.base_url}")
        loop = SoakLoop(
            config,
            plan,
            supervisors=sups,
            profile_ids=ids,
            writer=writer,
            stop=stop,
            on_sample=on_sample,
            progress=progress,
        )
        outcome = loop.run(resume)
    except ServerError:
        writer.stop()
        writer.drain()
        repo.finish_campaign(campaign_id, status="failed")
        raise
    finally:
        for sup in sups.values():
            sup.close()
    writer.stop()
    if not writer.drain_until(FINAL_FLUSH_S):
        raise StoreError(
            f"the database is still unreachable; {journal.backlog()} samples are kept in "
            f"{journal.directory}",
            hint=f"rerun with --resume {campaign_id} once the database is back: the spool is "
            "replayed first",
        )
    journal.close()
    status = "interrupted" if outcome.interrupted else "completed"
    verdict = judge(store.load(campaign_id), config.soak)
    _record_findings(store, campaign_id, verdict, final=status == "completed")
    repo.finish_campaign(campaign_id, status=status, summary=verdict.to_json())
    return SoakCommandResult(campaign_id, status, resumed, database, outcome, verdict)


def _record_findings(
    store: SoakStore, campaign_id: int, verdict: SoakVerdict, *, final: bool
) -> None:
    """Stopped profiles at once; a leak only on a finished soak (a resume may still clear it)."""
    for profile in verdict.figures.get("profiles_stopped", []):
        store.ensure_finding(
            campaign_id,
            fingerprint=f"soak-stopped:{profile}",
            kind="soak_profile_stopped",
            severity="high",
            title=f"{profile} crashed repeatedly during the soak and was stopped",
            evidence={"incidents": verdict.figures.get("incidents", {})},
        )
    if not final:
        return
    for leak in verdict.leaks:
        store.ensure_finding(
            campaign_id,
            fingerprint=f"soak-leak:{leak['profile']}",
            kind="soak_memory_leak",
            severity="high",
            title=f"{leak['profile']}: RSS grows {leak['slope']:.0f} MB/h during the soak",
            evidence=leak,
        )
