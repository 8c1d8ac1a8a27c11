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
from watchkeeper.commands.nightly import reference_profile
from watchkeeper.config import Config
from watchkeeper.config.paths import data_dir, runs_log_dir
from watchkeeper.errors import ConfigError, ServerError, SoakError, StoreError
from watchkeeper.findings.evidence import SoakRatioEvidence
from watchkeeper.host import info as hostinfo
from watchkeeper.load.sampling import SamplingSettings, soak_sampling
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.nightly.ratios import series_name
from watchkeeper.nightly.reference import identify
from watchkeeper.server.launch import PreparedProfile, prepare
from watchkeeper.soak.durations import format_duration, parse_duration
from watchkeeper.soak.loop import OnSample, ResumePoint, SoakLoop, SoakOutcome, SoakPlan
from watchkeeper.soak.spool import Journal, SpoolingWriter
from watchkeeper.soak.supervisor import ServerSupervisor
from watchkeeper.soak.verdicts import SoakVerdict, judge
from watchkeeper.store.db import Database, masked, open_database
from watchkeeper.store.findings import FindingStore, NewFinding
from watchkeeper.store.references import RatioRecord, ReferenceStore
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


def _resume_point(data: SoakData) -> ResumePoint:
    """Next block after the last stored one; elapsed = the blocks' measured time."""
    load = [b for b in data.blocks if not b.is_probe]
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
    against_reference: bool | None = None,
    database: Database | None = None,
) -> SoakCommandResult:
    """Run (or resume) a soak and judge it. `against_reference` (default: the config's
    soak.against_reference) soaks each profile beside its pinned nightly reference."""
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
    url = config.database.resolved_url()
    with open_database(url, given=database) as db:
        use_reference = soak.against_reference if against_reference is None else against_reference
        arms, references = (
            _reference_arms(config, db, prepared, progress=progress) if use_reference else ([], {})
        )
        plan_names = _interleaved(names, references)
        blob = json.dumps([names, levels, duration_s, block_s, [t.id for t in tasks]])
        if references:  # the reference arms are part of the plan a resume must match
            blob += json.dumps(sorted((k, v["reference_id"]) for k, v in references.items()))
            blob += f"restart_every={soak.restart_every}"
        unseeded = soak_sampling(config, SamplingSettings().seed)  # the seed is resumed
        if unseeded != SamplingSettings():  # greedy soaks keep the signature they always had
            blob += json.dumps(unseeded.to_json(), sort_keys=True)
        signature = hashlib.sha256(blob.encode()).hexdigest()[:16]
        prepared = prepared + arms
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
                "profiles": list(plan_names),
                "references": references,
                "concurrency": list(levels),
                "seed": seed,
                "tasks": [t.id for t in tasks],
                "probe_task": tasks[0].id,
                "temperature": soak.temperature,
                "sampling": soak_sampling(config, seed).to_json(),
                "signature": signature,
                "restart_every": soak.restart_every if references else 0,
            }
            campaign_id = open_campaign(
                repo, kind="soak", prepared=prepared, params=params
            ).campaign_id
            progress(
                f"soak campaign {campaign_id}: {duration} over {', '.join(names)}, seed {seed}"
            )
        sampling = soak_sampling(config, seed)
        plan = SoakPlan(
            duration_s,
            block_s,
            plan_names,
            levels,
            seed,
            tuple(tasks),
            tasks[0],
            sampling,
            arm_sampling={p.name: sampling.with_profile(p.profile) for p in prepared},
            pairs=tuple((name, ref["arm"]) for name, ref in references.items()),
            restart_every=soak.restart_every if references else 0,
        )
        return _execute(
            config, repo, store, plan, prepared, campaign_id, resume, resumed,
            stop=stop, progress=progress, on_sample=on_sample, database=masked(url),
            ratios=ReferenceStore(db),
        )  # fmt: skip


def _reference_arms(
    config: Config, db: Database, prepared: list[PreparedProfile], *, progress: Progress
) -> tuple[list[PreparedProfile], dict[str, dict[str, Any]]]:
    """The pinned reference of each profile on this host, as extra soak arms.

    A profile without one soaks alone, as before, and says so: the nightly pins it."""
    store = ReferenceStore(db)
    host = hostinfo.collect()
    arms: list[PreparedProfile] = []
    references: dict[str, dict[str, Any]] = {}
    for current in prepared:
        ref = store.active(host.fingerprint, current.name)
        if ref is None:
            progress(
                f"{current.name}: no pinned reference on this host (the nightly pins one); "
                "throughput is judged on its own blocks only"
            )
            continue
        try:
            arm = reference_profile(config, current, ref)
        except ConfigError as exc:
            # Six hours of soak are worth more than the pairing: soak alone, and say why.
            progress(f"{current.name}: soaking without its reference: {exc} ({exc.hint})")
            continue
        aa = ref.identity == identify(current, host.fingerprint).digest
        arms.append(arm)
        references[current.name] = {
            "arm": arm.name,
            "reference_id": ref.id,
            "aa": aa,
            "host_fingerprint": host.fingerprint,
        }
        progress(
            f"{current.name}: soaking beside reference #{ref.id} (pinned "
            f"{ref.pinned_at:%Y-%m-%d} by {ref.pinned_by})"
            f"{'; identical to it: an A/A soak' if aa else ''}"
        )
    return arms, references


def _interleaved(names: tuple[str, ...], references: dict[str, dict[str, Any]]) -> tuple[str, ...]:
    out: list[str] = []
    for name in names:
        out.append(name)
        if name in references:
            out.append(references[name]["arm"])
    return tuple(out)


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
    verdict = judge(store.load(campaign_id), config.soak)
    _record_findings(FindingStore(repo.db), campaign_id, verdict, final=status == "completed")
    if status == "completed":
        _record_ratios(ratios, campaign_id, verdict)
    repo.finish_campaign(campaign_id, status=status, summary=verdict.to_json())
    return SoakCommandResult(
        campaign_id, status, resumed, database, outcome, verdict, plan.sampling
    )


def _record_findings(
    findings: FindingStore, campaign_id: int, verdict: SoakVerdict, *, final: bool
) -> None:
    """Stopped profiles at once; a leak only on a finished soak (a resume may still clear it)."""
    for profile in verdict.figures.get("profiles_stopped", []):
        findings.add_once(
            NewFinding(
                campaign_id=campaign_id,
                fingerprint=f"soak-stopped:{profile}",
                kind="soak_profile_stopped",
                severity="high",
                title=f"{profile} crashed repeatedly during the soak and was stopped",
                evidence={"incidents": verdict.figures.get("incidents", {})},
                label="stability",
            )
        )
    if not final:
        return
    for entry in verdict.figures.get("reference", []):
        if entry["aa"] or not entry.get("confirmed"):
            continue
        label = f"{entry['profile']} c{entry['concurrency']}"
        evidence = SoakRatioEvidence.from_verdict(entry)
        findings.add_once(
            NewFinding(
                campaign_id=campaign_id,
                fingerprint=f"soak-regression:{entry['profile']}:c{entry['concurrency']}",
                kind="regression",
                severity="high",
                title=f"{label}: decode tok/s {evidence.delta_text()} against the reference "
                f"through the soak (95% CI {evidence.ci_text()})",
                evidence=evidence.to_json(),
                label="stability",
            )
        )
    for leak in verdict.leaks:
        findings.add_once(
            NewFinding(
                campaign_id=campaign_id,
                fingerprint=f"soak-leak:{leak['profile']}",
                kind="soak_memory_leak",
                severity="high",
                title=f"{leak['profile']}: RSS grows {leak['slope']:.0f} MB/h during the soak",
                evidence=leak,
                label="stability",
            )
        )


def _record_ratios(ratios: ReferenceStore, campaign_id: int, verdict: SoakVerdict) -> None:
    """The soak's paired ratios join the nightly series (digest table, A/A false-alarm rate).

    Only a finished soak: a resumed one is judged again as a whole and stored once."""
    if ratios.ratios_of(campaign_id):
        return
    rows = []
    for entry in verdict.figures.get("reference", []):
        if entry.get("estimate") is None:
            continue
        ci = entry.get("ci95")
        host = entry["host_fingerprint"]
        category = f"soak c{entry['concurrency']}"
        rows.append(
            RatioRecord(
                campaign_id=campaign_id,
                reference_id=entry["reference_id"],
                series=series_name(host, entry["profile"], category),
                host_fingerprint=host,
                profile=entry["profile"],
                category=category,
                metric="decode_tps",
                estimate=entry["estimate"],
                low=ci[0] if ci else None,
                high=ci[1] if ci else None,
                n_pairs=entry["n_cycles"],
                n_tasks=1,
                n_rounds=entry["n_pairs"],
                threshold=entry["threshold"],
                verdict=entry["verdict"],
                aa=entry["aa"],
                confirmed=bool(entry.get("confirmed")),
            )
        )
    ratios.add_ratios(rows)
