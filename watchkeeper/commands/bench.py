"""`watchkeeper bench`: paired A/B of a baseline profile against speculative profiles.

All arms' servers stay up for the whole campaign and the load moves between them round by
round (ABC, CBA, ABC, ...), so slow drift of the machine (thermal, a neighbour's cron job)
hits every arm alike instead of biasing whichever ran last. Every run is stored the moment it
ends; a crash loses at most the run in progress.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from watchkeeper import hostinfo
from watchkeeper.analysis.benchmark import ArmSpec, BenchMethod, BenchResult, analyze
from watchkeeper.analysis.recommend import Recommendation, recommend
from watchkeeper.analysis.stats import median
from watchkeeper.campaigns import measure_run, open_campaign, register_profile
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.errors import BenchError, ConfigError, ServerError
from watchkeeper.load.runner import LoadSettings
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.publish.report import write_bench_report
from watchkeeper.records import RunResult, Task
from watchkeeper.server.launch import PreparedProfile, RunningServer, prepare, serve
from watchkeeper.store.db import Database
from watchkeeper.store.repository import Repository

Progress = Callable[[str], None]
DEFAULT_PROFILES = ("qwen-baseline", "qwen-draft4", "qwen-ngram")
CALIBRATION_TASKS = 3


@dataclass(frozen=True, slots=True)
class BenchPlan:
    profiles: tuple[str, ...]
    tasks: tuple[Task, ...]
    rounds: int
    warmup_rounds: int
    warmup_tasks: int
    concurrency: int


def plan_bench(
    config: Config,
    *,
    profiles: Sequence[str] | None,
    rounds: int | None,
    taskset: Path | None,
    limit: int | None,
    per_category: int | None,
    concurrency: int | None,
) -> BenchPlan:
    names = tuple(profiles or DEFAULT_PROFILES)
    if len(names) < 2:
        raise ConfigError("bench needs at least two profiles: a baseline and a candidate")
    if len(set(names)) != len(names):
        raise ConfigError(f"bench profiles must be distinct: {', '.join(names)}")
    tasks = select(
        load_taskset(taskset or config.bench.resolved_taskset()),
        limit=limit,
        per_category=per_category,
    )
    return BenchPlan(
        profiles=names,
        tasks=tuple(tasks),
        rounds=rounds or config.bench.rounds,
        warmup_rounds=config.bench.warmup_rounds,
        warmup_tasks=min(2, len(tasks)),
        concurrency=concurrency or config.bench.concurrency,
    )


def _arm_order(arms: Sequence[str], round_index: int) -> list[str]:
    return list(arms) if round_index % 2 == 1 else list(reversed(arms))


def _cost_ratio(
    config: Config,
    prepared: PreparedProfile,
    baseline: RunningServer,
    tasks: Sequence[Task],
    settings: LoadSettings,
    log_dir: Path,
    progress: Progress,
) -> tuple[float | None, str]:
    """Draft step cost in target steps: measured by running the draft model alone."""
    spec = prepared.spec_type or ""
    if spec.startswith("ngram"):
        return 0.0, "n-gram lookup: no draft model, cost taken as 0"
    if not spec.startswith("draft-") or prepared.draft is None or prepared.model is None:
        return None, "unknown drafter cost"
    if prepared.draft.sha256 == prepared.model.sha256:
        return 1.0, "draft model is the target model"
    draft_profile = ProfileConfig(
        model=prepared.profile.draft_model or "",
        ctx_size=prepared.profile.ctx_size,
        threads=prepared.profile.threads,
    )
    alone = PreparedProfile(
        f"{prepared.name}-draft-alone",
        draft_profile,
        prepared.binary,
        prepared.draft,
        None,
        prepared.help,
    )
    sample_tasks = list(tasks[:CALIBRATION_TASKS])
    progress(
        f"calibrating draft cost for {prepared.name}: the draft model alone on "
        f"{len(sample_tasks)} tasks"
    )
    with serve(config, alone, log_path=log_dir / f"{alone.name}.log") as server:
        draft_run = measure_run(
            server,
            config,
            sample_tasks,
            arm=alone.name,
            round_index=0,
            is_warmup=True,
            settings=settings,
        )
    target_run = measure_run(
        baseline,
        config,
        sample_tasks,
        arm="calibration",
        round_index=0,
        is_warmup=True,
        settings=settings,
    )
    draft_tps = median([s.decode_tps_server for s in draft_run.samples if s.ok])
    target_tps = median([s.decode_tps_server for s in target_run.samples if s.ok])
    if not draft_tps or not target_tps:
        return None, "draft cost calibration failed"
    return target_tps / draft_tps, (
        f"measured: target alone {target_tps:.1f} tok/s, draft alone {draft_tps:.1f} tok/s"
    )


def _arm_spec(
    prepared: PreparedProfile, role: str, argv: tuple[str, ...], cost: tuple[float | None, str]
) -> ArmSpec:
    return ArmSpec(
        name=prepared.name,
        role=role,
        spec_type=prepared.spec_type,
        draft_n_max=prepared.profile.draft_n_max,
        model=prepared.model.name if prepared.model else prepared.profile.model,
        model_sha256=prepared.model.sha256 if prepared.model else "",
        draft_model=prepared.draft.name if prepared.draft else None,
        draft_sha256=prepared.draft.sha256 if prepared.draft else None,
        argv=argv,
        cost_ratio=cost[0],
        cost_note=cost[1],
    )


def execute_bench(
    config: Config,
    plan: BenchPlan,
    *,
    kind: str = "bench",
    progress: Progress,
) -> BenchResult:
    """Run the plan, store everything, analyse, write the report."""
    prepared = [prepare(config, name, progress=progress) for name in plan.profiles]
    db = Database(config.database.resolved_url())
    try:
        return _execute(config, plan, prepared, db, kind, progress)
    finally:
        db.close()


def _execute(
    config: Config,
    plan: BenchPlan,
    prepared: list[PreparedProfile],
    db: Database,
    kind: str,
    progress: Progress,
) -> BenchResult:
    repo = Repository(db)
    params = {
        "profiles": list(plan.profiles),
        "rounds": plan.rounds,
        "tasks": len(plan.tasks),
        "concurrency": plan.concurrency,
        "warmup_rounds": plan.warmup_rounds,
    }
    ctx = open_campaign(repo, kind=kind, prepared=prepared, params=params)
    profile_ids = {p.name: register_profile(repo, p) for p in prepared}
    settings = LoadSettings(concurrency=plan.concurrency, seed=config.bench.seed)
    started = datetime.now(UTC)
    runs: list[RunResult] = []
    run_ids: dict[tuple[str, int], int] = {}
    status = "failed"
    try:
        with ExitStack() as stack:
            servers: dict[str, RunningServer] = {}
            for p in prepared:
                progress(f"starting {p.name}")
                servers[p.name] = stack.enter_context(
                    serve(config, p, log_path=ctx.log_dir / f"{p.name}.log")
                )
            baseline = prepared[0]
            costs: dict[str, tuple[float | None, str]] = {}
            measured_costs: dict[tuple[str, str], tuple[float | None, str]] = {}
            for p in prepared[1:]:
                key = (p.model.sha256 if p.model else "", p.draft.sha256 if p.draft else p.name)
                if key not in measured_costs:  # one calibration per target/draft pair
                    measured_costs[key] = _cost_ratio(
                        config,
                        p,
                        servers[baseline.name],
                        plan.tasks,
                        settings,
                        ctx.log_dir,
                        progress,
                    )
                costs[p.name] = measured_costs[key]
            schedule = (
                [(r, True) for r in range(-plan.warmup_rounds + 1, 1)] if plan.warmup_rounds else []
            )
            schedule += [(r, False) for r in range(1, plan.rounds + 1)]
            total = len(schedule) * len(prepared)
            done = 0
            for round_index, warm in schedule:
                tasks = plan.tasks[: plan.warmup_tasks] if warm else plan.tasks
                for arm in _arm_order(plan.profiles, round_index):
                    done += 1
                    label = "warm-up" if warm else f"round {round_index}/{plan.rounds}"
                    progress(f"[{done}/{total}] {label}: {arm} ({len(tasks)} tasks)")
                    run = measure_run(
                        servers[arm],
                        config,
                        tasks,
                        arm=arm,
                        round_index=round_index,
                        is_warmup=warm,
                        settings=settings,
                    )
                    run_ids[(arm, round_index)] = repo.save_run(
                        ctx.campaign_id, profile_ids[arm], run
                    )
                    runs.append(run)
                    if run.error:
                        raise ServerError(f"{arm}: {run.error}")
            argvs = {name: servers[name].argv for name in servers}
        arms = [_arm_spec(prepared[0], "baseline", argvs[prepared[0].name], (None, ""))]
        arms += [_arm_spec(p, "candidate", argvs[p.name], costs[p.name]) for p in prepared[1:]]
        if not any(s.ok for r in runs if not r.is_warmup for s in r.samples):
            raise BenchError(f"every measured request failed; see the server logs in {ctx.log_dir}")
        first = prepared[0]
        result = analyze(
            campaign_id=ctx.campaign_id,
            kind=kind,
            host=hostinfo.collect(),
            build_version=first.binary.version if first.binary else "external",
            build_variant=first.binary.variant if first.binary else "external",
            started_at=started,
            finished_at=datetime.now(UTC),
            arms=arms,
            runs=runs,
            method=BenchMethod(
                rounds=plan.rounds,
                warmup_rounds=plan.warmup_rounds,
                warmup_tasks=plan.warmup_tasks,
                concurrency=plan.concurrency,
                tasks=len(plan.tasks),
                categories=tuple(sorted({t.category for t in plan.tasks})),
                temperature=0.0,
                seed=config.bench.seed,
                near_tie_threshold=config.bench.near_tie_threshold,
            ),
            degenerate_threshold=config.bench.degenerate_threshold,
            length_tolerance=config.bench.length_parity_tolerance,
        )
        result = _with_samples(result, runs)
        _store_checks(repo, ctx.campaign_id, result, run_ids, prepared[0].name)
        status = "completed"
        return result
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        if status != "completed":
            repo.finish_campaign(ctx.campaign_id, status=status)


def _with_samples(result: BenchResult, runs: list[RunResult]) -> BenchResult:
    tps: dict[str, list[float]] = {}
    for run in runs:
        if not run.is_warmup:
            tps.setdefault(run.arm, []).extend(
                s.decode_tps_server for s in run.samples if s.ok and s.decode_tps_server
            )
    return replace(result, extras={**result.extras, "tps_samples": tps})


def _store_checks(
    repo: Repository,
    campaign_id: int,
    result: BenchResult,
    run_ids: dict[tuple[str, int], int],
    baseline: str,
) -> None:
    rows = []
    for rec in result.identity:
        if rec.arm == "control":
            cand, base = run_ids.get((baseline, rec.round)), run_ids.get((baseline, rec.round - 1))
        else:
            cand, base = run_ids.get((rec.arm, rec.round)), run_ids.get((baseline, rec.round))
        if cand is None or base is None:
            continue
        rows.append(
            {
                "campaign_id": campaign_id,
                "baseline_run_id": base,
                "candidate_run_id": cand,
                "arm": rec.arm,
                "task_id": rec.task_id,
                "category": rec.category,
                "verdict": rec.verdict,
                "first_divergence": rec.first_divergence,
                "margin": rec.margin,
                "baseline_excerpt": rec.baseline_excerpt[:500],
                "candidate_excerpt": rec.candidate_excerpt[:500],
            }
        )
    repo.add_output_checks(rows)
    for f in result.findings:
        fingerprint = f"{f.kind}:{f.profile}:{f.category or '*'}"[:64]
        if f.kind == "correctness":
            repo.record_recurring_finding(
                campaign_id=campaign_id,
                fingerprint=fingerprint,
                kind=f.kind,
                severity=f.severity,
                title=f.title,
                evidence=f.evidence,
            )
            continue
        repo.add_finding(
            campaign_id=campaign_id,
            fingerprint=fingerprint,
            kind=f.kind,
            label="candidate",
            severity=f.severity,
            title=f.title,
            evidence=f.evidence,
        )


def bench_command(
    config: Config,
    *,
    profiles: Sequence[str] | None,
    rounds: int | None,
    taskset: Path | None,
    limit: int | None,
    per_category: int | None,
    concurrency: int | None,
    progress: Progress,
) -> BenchResult:
    plan = plan_bench(
        config,
        profiles=profiles,
        rounds=rounds,
        taskset=taskset,
        limit=limit,
        per_category=per_category,
        concurrency=concurrency,
    )
    result = execute_bench(config, plan, progress=progress)
    return finish_with_report(config, result, progress=progress, recommendation=recommend(result))


def finish_with_report(
    config: Config,
    result: BenchResult,
    *,
    progress: Progress,
    recommendation: object | None = None,
    extra_copy: Path | None = None,
) -> BenchResult:
    rec = recommendation if isinstance(recommendation, Recommendation) else None
    path = write_bench_report(
        result, config.bench.resolved_reports_dir(), recommendation=rec, extra_copy=extra_copy
    )
    progress(f"report: {path}")
    result = replace(result, report_path=str(path))
    db = Database(config.database.resolved_url())
    try:
        repo = Repository(db)
        repo.add_report(result.campaign_id, kind=result.kind, path=str(path))
        repo.finish_campaign(
            result.campaign_id,
            status="completed",
            summary={"report": str(path), "findings": len(result.findings)},
        )
    finally:
        db.close()
    return result
