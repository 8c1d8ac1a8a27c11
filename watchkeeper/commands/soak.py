"""`watchkeeper soak`: closed-loop load for hours, faults survived, every sample kept, a verdict.

Wiring only: the plan comes from config + CLI, the campaign is new or resumed, each profile
gets a supervised server, the loop runs, the spool is flushed, and the verdict is computed
from the stored campaign (so a resumed soak is judged as a whole).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from watchkeeper.campaign.acceptance_findings import record_acceptance_alarms
from watchkeeper.campaign.campaigns import register_profile
from watchkeeper.campaign.defaults import measured_categories, no_profiles, soak_profiles
from watchkeeper.campaign.load_shape import shape_arrival
from watchkeeper.campaign.soak_campaign import (
    interleaved,
    open_or_resume,
    plan_signature,
    reference_arms,
    soak_cache_ram,
    soak_servers,
)
from watchkeeper.campaign.soak_deliverable import soaked_unit, write_soak_deliverable
from watchkeeper.campaign.soak_findings import record_findings, record_ratios
from watchkeeper.config import Config
from watchkeeper.config.durations import parse_duration
from watchkeeper.config.paths import data_dir, runs_log_dir
from watchkeeper.config.requests import SoakRequest
from watchkeeper.errors import ServerError, SoakError, StoreError
from watchkeeper.load.records import Task
from watchkeeper.load.sampling import SamplingSettings, soak_sampling
from watchkeeper.load.shape import LoadShape
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.publish.deliverable import RecommendationRecord
from watchkeeper.publish.served import check_depth
from watchkeeper.server.launch import PreparedProfile, prepare
from watchkeeper.soak.loop import OnSample, SoakLoop
from watchkeeper.soak.plan import ResumePoint, SoakOutcome, SoakPlan
from watchkeeper.soak.spool import Journal, SpoolingWriter
from watchkeeper.soak.supervisor import ServerSupervisor
from watchkeeper.soak.verdicts import SoakVerdict, judge
from watchkeeper.store.db import Database, masked, open_database
from watchkeeper.store.findings import FindingStore
from watchkeeper.store.references import ReferenceStore
from watchkeeper.store.repository import Repository
from watchkeeper.store.soak_store import SoakStore

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
    sampling: SamplingSettings
    """The load requests' sampler (the temperature-0 probes aside)."""

    def to_json(self) -> dict[str, Any]:
        return {
            **self.verdict.to_json(),
            "sampling": self.sampling.to_json(),
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


@dataclass(frozen=True, slots=True)
class _Shape:
    """What the soak runs, the flags over the config: checked before any server starts."""

    names: tuple[str, ...]
    levels: tuple[int, ...]
    duration: str
    duration_s: float
    block_s: float


def _shape(
    config: Config,
    duration: str | None,
    profiles: list[str] | None,
    concurrency: list[int] | None,
    block: str | None,
) -> _Shape:
    """The profiles, concurrencies, duration and block length, each the flag or else the
    config's; a soak without a profile, a concurrency, or a duration that parses is refused
    here, not hours in."""
    soak = config.soak
    names = tuple(profiles or soak.profiles)
    if not names:
        raise no_profiles("[soak] profiles", config, flag="--profiles A,B or --recommendation")
    levels = tuple(concurrency or soak.concurrency)
    if not levels or min(levels) < 1:
        raise SoakError("a soak needs at least one profile and concurrencies >= 1")
    duration = duration or soak.duration
    duration_s = _seconds(duration, "duration")
    block_s = _seconds(block or soak.block, "block")
    return _Shape(names, levels, duration, duration_s, block_s)


def soak_command(
    config: Config,
    request: SoakRequest,
    *,
    stop: threading.Event | None = None,
    progress: Progress = lambda _m: None,
    on_sample: OnSample | None = None,
    database: Database | None = None,
    committed_default: bool = False,
    command_line: str = "",
) -> SoakCommandResult:
    """Run (or resume) a soak and judge it: what to soak is the `request` (the CLI's options
    or a soak job's `[args]`, config/requests.py), each choice left out the config's.

    `request.against_reference` (default: the config's soak.against_reference) soaks each
    profile beside its pinned nightly reference. `request.rate`: open-loop arrivals in every
    block, the block's concurrency then the cap on requests in flight; None: the closed loop.
    The request's sampler (`--temperature` and friends) goes over the config's [soak] keys.

    `request.recommendation`: soak a sweep's recommendation (its arm beside the baseline) and,
    once the soak completes, write its deliverable beside the sweep's report (`command_line`
    is the command it names); `committed_default`: with no profiles given or configured, soak
    the committed recommendation (the CLI's default; a job names its profiles).

    `request.categories`: only those tasks; soaking a recommendation, the default is the
    categories its sweep measured (a `sweep --category code_edit` unit is soaked on code
    edits, not on the prose it was never chosen for)."""
    record, profiles, categories = None, request.profiles, request.categories
    if request.recommendation is not None or committed_default:
        config, profiles, record = soak_profiles(
            config, request.profiles, request.recommendation, progress=progress
        )
        categories = measured_categories(record, request.categories)
    result = _soak(
        config, request, _Chosen(profiles, categories, record), stop=stop or threading.Event(),
        progress=progress, on_sample=on_sample, database=database,
    )  # fmt: skip
    if record is not None and result.status == "completed":
        write_soak_deliverable(
            config,
            result.campaign_id,
            result.verdict,
            record,
            names=profiles or [],
            duration=request.duration or config.soak.duration,
            command=command_line,
            progress=progress,
        )
    return result


@dataclass(frozen=True, slots=True)
class _Chosen:
    """What the soak settled before it starts: the profiles and categories (a
    recommendation's, else the request's) and the recommendation whose unit is soaked
    (`shipped`: its servers run the unit's flags, [service]'s slots and prompt cache, no
    deeper than its slots)."""

    profiles: list[str] | None
    categories: list[str] | None
    shipped: RecommendationRecord | None


def _soak(
    config: Config,
    request: SoakRequest,
    chosen: _Chosen,
    *,
    stop: threading.Event,
    progress: Progress,
    on_sample: OnSample | None,
    database: Database | None,
) -> SoakCommandResult:
    """The soak of `chosen` as `request` asks, its sampler (`--temperature` and friends) over
    the config's [soak] keys."""
    soak, shipped = config.soak, chosen.shipped
    shape = _shape(config, request.duration, chosen.profiles, request.concurrency, request.block)
    sampling = soak_sampling(config, SamplingSettings().seed, given=request.sampler())
    if shipped is not None:
        check_depth(shipped, config.service, max(shape.levels))
    arrival = shape_arrival(config, LoadShape.from_request(request))
    tasks = select(
        load_taskset(request.taskset or config.bench.resolved_taskset()),
        limit=request.limit,
        categories=chosen.categories,
        per_category=request.per_category,
    )
    prepared = [prepare(config, name, progress=progress) for name in shape.names]
    url = config.database.resolved_url()
    with open_database(url, given=database) as db:
        use_reference = (
            soak.against_reference
            if request.against_reference is None
            else request.against_reference
        )
        arms, references = (
            reference_arms(config, db, prepared, progress=progress) if use_reference else ([], {})
        )
        plan_names = interleaved(shape.names, references)
        signature = plan_signature(
            config,
            shape.names,
            shape.levels,
            shape.duration_s,
            shape.block_s,
            tasks,
            references,
            shipped=shipped is not None,
            sampling=sampling,
            arrival=arrival,
        )
        prepared = soak_servers(
            config, prepared + arms, max(shape.levels), shipped=shipped is not None
        )
        repo, store = Repository(db), SoakStore(db)
        campaign_id, resume, resumed, seed = open_or_resume(
            config,
            repo,
            store,
            prepared,
            shape.names,
            signature=signature,
            resume_id=request.resume_id,
            fresh=request.fresh,
            seed=request.seed,
            sampling=sampling,
            params=_campaign_params(
                config, shape, sampling, plan_names, references, tasks, signature
            )
            | _served_params(config, prepared, shipped=shipped is not None)
            | ({"unit": soaked_unit(config, shipped, shape.names)} if shipped else {})
            # the sweep whose pick this soaks: the sweep's report reads only its own soak
            | ({"sweep_campaign": shipped.campaign_id} if shipped else {})
            | ({"arrival": arrival.to_json()} if arrival is not None else {}),
            progress=progress,
        )
        plan = _soak_plan(
            config, shape, replace(sampling, seed=seed), plan_names, tasks, prepared, references
        )
        if arrival is not None:  # the arrivals drawn from the campaign's (resumed) seed
            plan = replace(plan, arrival=replace(arrival, seed=seed))
            progress(f"soak: open loop at {arrival.label}, at most a block's concurrency in flight")
        return _execute(
            config, repo, store, plan, prepared, campaign_id, resume, resumed,
            stop=stop, progress=progress, on_sample=on_sample, database=masked(url),
            ratios=ReferenceStore(db),
        )  # fmt: skip


def _campaign_params(
    config: Config,
    shape: _Shape,
    sampling: SamplingSettings,
    plan_names: tuple[str, ...],
    references: dict[str, dict[str, Any]],
    tasks: Sequence[Task],
    signature: str,
) -> dict[str, Any]:
    """What the campaign row keeps of the plan: enough for a resume to rebuild it and for the
    judge to read the cycles (a soak beside references restarts its pairs; alone it never)."""
    soak = config.soak
    return {
        "duration": shape.duration,
        "duration_s": shape.duration_s,
        "block_s": shape.block_s,
        "slice": soak.slice,
        "profiles": list(plan_names),
        "references": references,
        "concurrency": list(shape.levels),
        "tasks": [t.id for t in tasks],
        "probe_task": tasks[0].id,
        "temperature": sampling.temperature,
        "signature": signature,
        "restart_every": soak.restart_every if references else 0,
    }


def _served_params(
    config: Config, prepared: Sequence[PreparedProfile], *, shipped: bool
) -> dict[str, Any]:
    """The slots and prompt cache the servers ran with (a shipped soak's are the unit's)."""
    mib = soak_cache_ram(config, shipped=shipped)
    return {"slots": max(p.profile.slots for p in prepared), "cache_ram_mib": mib}


def _soak_plan(
    config: Config,
    shape: _Shape,
    sampling: SamplingSettings,
    plan_names: tuple[str, ...],
    tasks: Sequence[Task],
    prepared: Sequence[PreparedProfile],
    references: dict[str, dict[str, Any]],
) -> SoakPlan:
    """The loop's plan, with the campaign's seed (a resumed one keeps its own): each arm's
    sampler carries its profile's settings, and each profile is paired with its reference."""
    return SoakPlan(
        shape.duration_s,
        shape.block_s,
        plan_names,
        shape.levels,
        sampling.seed,
        tuple(tasks),
        tasks[0],
        sampling,
        arm_sampling={p.name: sampling.with_profile(p.profile) for p in prepared},
        pairs=tuple((name, ref["arm"]) for name, ref in references.items()),
        restart_every=config.soak.restart_every if references else 0,
    )


def _execute(
    config: Config,
    repo: Repository,
    store: SoakStore,
    plan: SoakPlan,
    prepared: list[PreparedProfile],
    campaign_id: int,
    resume: ResumePoint,
    resumed: bool,
    *,
    stop: threading.Event,
    progress: Progress,
    on_sample: OnSample | None,
    database: str,
    ratios: ReferenceStore,
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
    verdict = judge(
        store.load(campaign_id), config.soak, near_tie_threshold=config.bench.near_tie_threshold
    )
    record_findings(FindingStore(repo.db), campaign_id, verdict, final=status == "completed")
    if status == "completed":
        record_ratios(ratios, campaign_id, verdict)
        record_acceptance_alarms(repo.db, campaign_id, kinds=("soak",), source="soak")
    repo.finish_campaign(campaign_id, status=status, summary=verdict.to_json())
    return SoakCommandResult(
        campaign_id, status, resumed, database, outcome, verdict, plan.sampling
    )
