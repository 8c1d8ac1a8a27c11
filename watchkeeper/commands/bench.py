"""`watchkeeper bench`: paired A/B of a baseline profile against speculative profiles.

All arms' servers stay up for the whole campaign and the load moves between them round by
round (ABC, CBA, ABC, ...), so slow drift of the machine (thermal, a neighbour's cron job)
hits every arm alike instead of biasing whichever ran last. Every run is stored the moment it
ends; a crash loses at most the run in progress.

`_execute` is the bench as a list of steps; each step lives in its own module where it is more
than wiring: costs in `commands.calibration`, identity verdicts in `checks.classify`, rows in
`store.bench_rows`, the analysis in `analysis.benchmark`; the plan in `commands.bench_plan`,
the report and the campaign's completion in `commands.bench_report`.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from watchkeeper.analysis.acceptance import result_curves, with_curves
from watchkeeper.analysis.benchmark import (
    REWARM_TOKENS,
    ArmSpec,
    BenchMethod,
    BenchResult,
    analyze,
)
from watchkeeper.analysis.greedy_echo import with_echoes
from watchkeeper.analysis.recommend import recommend
from watchkeeper.checks.classify import IdentityVerdicts, classify_identity
from watchkeeper.commands.bench_plan import BenchPlan, Progress, plan_bench, plan_params
from watchkeeper.commands.bench_report import finish_with_report
from watchkeeper.commands.calibration import Calibration, arm_specs, calibrate
from watchkeeper.commands.campaigns import (
    CampaignContext,
    build_arm,
    measure_round,
    measure_run,
    open_campaign,
    register_profile,
)
from watchkeeper.commands.distribution import distribution_pass, with_distribution
from watchkeeper.config import Config
from watchkeeper.errors import BenchError, ConfigError
from watchkeeper.host import info as hostinfo
from watchkeeper.load.records import RunPurpose, RunResult
from watchkeeper.load.runner import LoadSettings, arm_load_settings
from watchkeeper.load.sampling import (
    SamplingSettings,
    command_sampling,
    profile_with_sampling,
    sampling_label,
)
from watchkeeper.server.launch import PreparedProfile, prepare
from watchkeeper.server.serverset import ServerSet
from watchkeeper.store.bench_rows import BenchRows
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.racing_store import RacingStore
from watchkeeper.store.repository import Repository


def execute_bench(
    config: Config,
    plan: BenchPlan,
    *,
    kind: str = "bench",
    progress: Progress,
    prepared: Sequence[PreparedProfile] | None = None,
    drift_only: bool = False,
    database: Database | None = None,
) -> BenchResult:
    """Run the plan, store everything, analyse, write the report.

    ``prepared`` gives the arms already resolved (the nightly's pinned reference runs a
    snapshot binary and models that no profile name resolves to); their names must be
    ``plan.profiles``. ``drift_only``: the candidates are other builds or settings of the
    baseline (the nightly's current vs reference), so their outputs are compared as drift,
    never judged for identity. ``database``: the caller's (the CLI's, the daemon's); without
    one the bench opens its own for its duration."""
    if prepared is None:
        prepared = [prepare(config, name, progress=progress) for name in plan.profiles]
    elif tuple(p.name for p in prepared) != plan.profiles:
        raise ConfigError("prepared arms must match the plan's profiles")
    prepared = list(prepared)
    with open_database(config.database.resolved_url(), given=database) as db:
        return _execute(config, plan, prepared, db, kind, progress, drift_only=drift_only)


def _restarts_before(round_index: int, every: int) -> bool:
    """Fresh processes before measured rounds 1 + every, 1 + 2 x every, ..."""
    return every > 0 and round_index > 1 and (round_index - 1) % every == 0


@dataclass(frozen=True, slots=True)
class _Bench:
    """What every step of one bench shares: the plan, the servers, where rows go."""

    config: Config
    plan: BenchPlan
    prepared: Sequence[PreparedProfile]
    servers: ServerSet
    rows: BenchRows
    settings: LoadSettings
    progress: Progress
    arm_settings: Mapping[str, LoadSettings]
    """Each arm's throughput requests: the command's sampler under the arm's own keys."""
    active: list[str]
    """The arms still measured: a race (the sweep) drops the ones it has decided."""

    @property
    def baseline(self) -> str:
        return self.prepared[0].name


def _execute(
    config: Config,
    plan: BenchPlan,
    prepared: list[PreparedProfile],
    db: Database,
    kind: str,
    progress: Progress,
    *,
    drift_only: bool = False,
) -> BenchResult:
    """The bench as steps: open the campaign, start every arm's server, calibrate the costs,
    measure the rounds, run the identity probes and classify them, then (servers stopped)
    analyse and store the checks. The campaign is marked failed or interrupted unless the
    steps complete; `finish_with_report` marks it completed."""
    repo = Repository(db)
    sampling = command_sampling(config)
    prepared = [replace(p, profile=profile_with_sampling(p.profile, sampling)) for p in prepared]
    ctx = open_campaign(repo, kind=kind, prepared=prepared, params=plan_params(plan, sampling))
    profile_ids = {p.name: register_profile(repo, p) for p in prepared}
    rows = BenchRows(repo, ctx.campaign_id, profile_ids)
    started = datetime.now(UTC)
    status = "failed"
    try:
        with ServerSet(config, prepared, ctx.log_dir, progress) as servers:
            settings = LoadSettings(
                concurrency=plan.concurrency,
                seed=config.bench.seed,
                cache_prompt=plan.reuse_prompts,
            )
            arm_settings = arm_load_settings(
                prepared, sampling, plan.concurrency, cache_prompt=plan.reuse_prompts
            )
            bench = _Bench(
                config,
                plan,
                prepared,
                servers,
                rows,
                settings,
                progress,
                arm_settings,
                list(plan.profiles),
            )
            costs = (
                Calibration()
                if plan.speed_only
                else calibrate(
                    config,
                    prepared,
                    servers[bench.baseline],
                    plan.tasks,
                    settings,
                    ctx.log_dir,
                    progress,
                )
            )
            if plan.ceiling is not None and not plan.speed_only:
                bench.active[:] = plan.ceiling(costs)
            measured_rounds = _measure_rounds(bench)
            verdicts = IdentityVerdicts()
            if not plan.speed_only:
                probes = _identity_probes(bench, identity_round=measured_rounds + 1)
                verdicts = _classify(bench, probes)
            distribution = distribution_pass(
                config,
                servers,
                [p for p in prepared if p.name in bench.active],
                plan.tasks,
                sampling,
                progress,
            )
            argvs = servers.argvs()
        arms = arm_specs(prepared, argvs, costs, drift_only=drift_only)
        if not any(s.ok for r in rows.measured() for s in r.samples):
            raise BenchError(f"every measured request failed; see the server logs in {ctx.log_dir}")
        result = _analyze(
            config,
            plan,
            ctx,
            kind,
            prepared,
            arms,
            rows.runs,
            started,
            measured_rounds,
            verdicts,
            sampling,
        )
        result = with_distribution(result, distribution)
        RacingStore(db).save_curves(ctx.campaign_id, result_curves(result))
        rows.store_checks(result, bench.baseline)
        status = "completed"
        return result
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        if status != "completed":
            repo.finish_campaign(ctx.campaign_id, status=status)


def _measure_rounds(bench: _Bench) -> int:
    """Warm-up rounds, the planned measured rounds, then as many more as `more_rounds` asks
    for on the same servers; returns how many measured rounds ran (fewer where a race
    stopped early)."""
    plan = bench.plan
    schedule = [(r, True) for r in range(-plan.warmup_rounds + 1, 1)] if plan.warmup_rounds else []
    schedule += [(r, False) for r in range(1, plan.rounds + 1)]
    rounds_started = time.monotonic()
    stopped = _run_schedule(
        bench, schedule, total=len(schedule), before=0, measured_rounds=plan.rounds
    )
    if stopped is not None:
        return stopped
    if plan.more_rounds is None:
        return plan.rounds
    extra = plan.more_rounds(bench.rows.measured(), time.monotonic() - rounds_started)
    if extra <= 0:
        return plan.rounds
    measured_rounds = plan.rounds + extra
    more = [(r, False) for r in range(plan.rounds + 1, measured_rounds + 1)]
    stopped = _run_schedule(
        bench,
        more,
        total=len(schedule) + extra,
        before=len(schedule),
        measured_rounds=measured_rounds,
    )
    return measured_rounds if stopped is None else stopped


def _run_schedule(
    bench: _Bench,
    rounds: list[tuple[int, bool]],
    *,
    total: int,
    before: int,
    measured_rounds: int,
) -> int | None:
    """Each (round, is warm-up) of `rounds`, arms back to back per task; fresh processes (and
    their rewarm) before the measured rounds `restart_every` names. After each measured round
    a race (if any) narrows the active arms; the round it stops at is returned (else None)."""
    plan = bench.plan
    for done, (round_index, warm) in enumerate(rounds, start=before + 1):
        if not warm and _restarts_before(round_index, plan.restart_every):
            bench.servers.restart(bench.active)  # arms a race dropped stay stopped
            _rewarm(bench, round_index, bench.active)
        elif not warm and round_index > 1:
            renew = [a for a in bench.active if a in plan.renew_each_round]
            if renew:
                bench.servers.renew(renew)
                _rewarm(bench, round_index, renew)
        tasks = plan.tasks[: plan.warmup_tasks] if warm else plan.tasks
        label = "warm-up" if warm else f"round {round_index}/{measured_rounds}"
        bench.progress(
            f"[{done}/{total}] {label}: {len(tasks)} tasks x {len(bench.active)} arms, "
            "back to back per task"
        )
        for run in measure_round(
            bench.servers,
            bench.config,
            tasks,
            arms=bench.active,
            round_index=round_index,
            is_warmup=warm,
            settings=bench.settings,
            arm_settings=bench.arm_settings,
        ):
            bench.rows.save(run, run.arm)
        if plan.race is not None and not warm:
            keep, go_on = plan.race(bench.rows.measured())
            bench.active[:] = keep
            if not go_on:
                return round_index
    return None


def _rewarm(bench: _Bench, round_index: int, arms: Sequence[str]) -> None:
    """The first requests of a fresh process pay its cold start: not measured."""
    first = bench.plan.tasks[0]
    for run in measure_round(
        bench.servers,
        bench.config,
        [replace(first, max_tokens=min(first.max_tokens, REWARM_TOKENS))],
        arms=list(arms),
        round_index=round_index,
        is_warmup=True,
        settings=bench.settings,
    ):
        bench.rows.save(replace(run, purpose=RunPurpose.REWARM), run.arm)


def _identity_probes(bench: _Bench, *, identity_round: int) -> dict[str, RunResult]:
    """One probe pass per arm after the measured rounds (top-k logprobs), stored as warm-ups
    so no throughput figure reads them. They prefill afresh even where the rounds reused the
    prompt cache: a restored prompt is not bit-for-bit a fresh prefill."""
    settings = replace(
        bench.settings, top_logprobs=bench.config.bench.identity_top_k, cache_prompt=False
    )
    probes: dict[str, RunResult] = {}
    for arm in bench.active:
        bench.progress(
            f"identity probes: {arm} ({len(bench.plan.tasks)} tasks, top-"
            f"{settings.top_logprobs} logprobs; not part of any throughput figure)"
        )
        probe = measure_run(
            bench.servers[arm],
            bench.config,
            bench.plan.tasks,
            arm=arm,
            round_index=identity_round,
            is_warmup=True,
            settings=settings,
            purpose=RunPurpose.IDENTITY,
        )
        probes[arm] = bench.rows.save(probe, arm)
    return probes


def _classify(bench: _Bench, probes: Mapping[str, RunResult]) -> IdentityVerdicts:
    """The probes' verdicts, replayed on the baseline server (`checks.classify`)."""
    return classify_identity(
        bench.servers[bench.baseline].base_url,
        bench.plan.tasks,
        probes,
        baseline=bench.baseline,
        speculative=[
            p.name for p in bench.prepared[1:] if p.speculative and p.name in bench.active
        ],
        top_k=bench.config.bench.identity_top_k,
        near_tie_threshold=bench.config.bench.near_tie_threshold,
        request_timeout_s=bench.config.server.request_timeout_s,
        progress=bench.progress,
    )


def _analyze(
    config: Config,
    plan: BenchPlan,
    ctx: CampaignContext,
    kind: str,
    prepared: Sequence[PreparedProfile],
    arms: Sequence[ArmSpec],
    runs: Sequence[RunResult],
    started: datetime,
    measured_rounds: int,
    verdicts: IdentityVerdicts,
    sampling: SamplingSettings,
) -> BenchResult:
    first = build_arm(prepared)
    result = analyze(
        campaign_id=ctx.campaign_id,
        kind=kind,
        host=hostinfo.collect(),
        build_version=first.binary.identity if first.binary else "external",
        build_variant=first.binary.variant if first.binary else "external",
        started_at=started,
        finished_at=datetime.now(UTC),
        arms=arms,
        runs=runs,
        method=BenchMethod(
            rounds=measured_rounds,
            warmup_rounds=plan.warmup_rounds,
            warmup_tasks=plan.warmup_tasks,
            concurrency=plan.concurrency,
            tasks=len(plan.tasks),
            categories=tuple(sorted({t.category for t in plan.tasks})),
            temperature=sampling.temperature,
            seed=config.bench.seed,
            sampling=sampling_label(sampling, prepared),
            near_tie_threshold=config.bench.near_tie_threshold,
            threshold=config.bench.min_effect,
            restart_every=plan.restart_every,
        ),
        degenerate_threshold=config.bench.degenerate_threshold,
        length_tolerance=config.bench.length_parity_tolerance,
        identity_overrides=verdicts.overrides,
        noise_floor=verdicts.floor_json(),
    )
    samplers = {p.name: sampling.with_profile(p.profile) for p in prepared}
    return with_curves(with_echoes(_with_samples(result, runs), runs, samplers), runs)


def _with_samples(result: BenchResult, runs: Sequence[RunResult]) -> BenchResult:
    tps: dict[str, list[float]] = {}
    for run in runs:
        if run.purpose == RunPurpose.MEASURED:
            tps.setdefault(run.arm, []).extend(
                s.decode_tps_server for s in run.samples if s.ok and s.decode_tps_server
            )
    return replace(result, extras={**result.extras, "tps_samples": tps})


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
    database: Database | None = None,
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
    with open_database(config.database.resolved_url(), given=database) as db:
        result = execute_bench(config, plan, progress=progress, database=db)
        return finish_with_report(
            config, result, progress=progress, recommendation=recommend(result), database=db
        )
