"""A paired A/B of a baseline profile against speculative profiles: `execute_bench`, the engine
under bench, nightly, sweep, review-pr, upgrade-check and bisect.

All arms' servers stay up for the whole campaign and the load moves between them round by
round (ABC, CBA, ABC, ...), so slow drift of the machine (thermal, a neighbour's cron job)
hits every arm alike instead of biasing whichever ran last. Every run is stored the moment it
ends; a crash loses at most the run in progress.

`_execute` is the bench as a list of steps; each step lives in its own module where it is more
than wiring: costs in `campaign.calibration`, the rounds in `campaign.bench_rounds`, identity
verdicts in `checks.classify`, rows in `store.bench_rows`, the analysis in
`analysis.benchmark`; the plan in `campaign.bench_plan`, the report and the campaign's
completion in `campaign.bench_report`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from watchkeeper.analysis.acceptance import result_curves, with_curves
from watchkeeper.analysis.benchmark import (
    ArmSpec,
    BenchMethod,
    BenchResult,
    analyze,
)
from watchkeeper.analysis.greedy_echo import with_echoes
from watchkeeper.analysis.latency import slo_json
from watchkeeper.analysis.request_acceptance import with_request_acceptance
from watchkeeper.campaign.bench_plan import BenchPlan, Progress, plan_params
from watchkeeper.campaign.bench_rounds import Bench, measure_rounds
from watchkeeper.campaign.calibration import Calibration, arm_specs, calibrate
from watchkeeper.campaign.campaigns import (
    CampaignContext,
    build_arm,
    open_campaign,
    register_profile,
)
from watchkeeper.campaign.distribution import distribution_pass, with_distribution
from watchkeeper.campaign.identity_pass import (
    exact_pass,
    floor_key,
    identity_plan,
    label_settings,
    probe_settings,
    run_probes,
    store_floors,
)
from watchkeeper.campaign.load_shape import (
    bench_latency,
    config_slo,
    save_latency,
    with_slots,
)
from watchkeeper.campaign.time_split import (
    CALIBRATION,
    DISTRIBUTION,
    EXACT,
    SERVED,
    SERVER_STARTS,
    TimeSplit,
)
from watchkeeper.checks.classify import IdentityVerdicts, classify_identity
from watchkeeper.checks.distribution import ArmDistribution
from watchkeeper.checks.served_identity import served_summary
from watchkeeper.config import Config
from watchkeeper.errors import BenchError, ConfigError
from watchkeeper.host import info as hostinfo
from watchkeeper.load.records import RunPurpose, RunResult
from watchkeeper.load.runner import LoadSettings, arm_load_settings
from watchkeeper.load.sampling import SamplingSettings, profile_with_sampling, sampling_label
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
    """The bench as steps: open the campaign, start every arm's server and measure
    (`_with_servers`: calibrate the costs, the rounds, the identity probes and their verdicts,
    the distribution pass), then (servers stopped) analyse and store the checks
    (`_conclude`). The campaign is marked failed or interrupted unless the steps complete;
    `finish_with_report` marks it completed."""
    repo = Repository(db)
    sampling = plan.sampler(config)
    prepared = [replace(p, profile=profile_with_sampling(p.profile, sampling)) for p in prepared]
    prepared = with_slots(prepared, plan.slots)
    params = plan_params(plan, sampling) | {"slo": slo_json(config_slo(config))}  # nightly series
    ctx = open_campaign(repo, kind=kind, prepared=prepared, params=params)
    profile_ids = {p.name: register_profile(repo, p) for p in prepared}
    rows = BenchRows(repo, ctx.campaign_id, profile_ids)
    started = datetime.now(UTC)
    status = "failed"
    split = TimeSplit()
    try:
        split.start(SERVER_STARTS)
        with ServerSet(config, prepared, ctx.log_dir, progress) as servers:
            split.stop(SERVER_STARTS)
            measured = _with_servers(
                config, plan, prepared, servers, rows, ctx, sampling, progress, split
            )
        with split.phase(EXACT):
            measured = _exact_identity(config, plan, prepared, measured, rows, ctx, progress)
        store_floors(db, ctx.campaign_id, measured.verdicts, prepared[0].name)
        arms = arm_specs(prepared, measured.argvs, measured.costs, drift_only=drift_only)
        result = _conclude(
            config, plan, ctx, kind, prepared, arms, rows, started, measured, sampling
        )
        result = replace(result, extras={**result.extras, "time_split": split.to_json()})
        RacingStore(db).save_curves(ctx.campaign_id, result_curves(result))
        result = bench_latency(config, plan, result, rows.runs)
        save_latency(db, result)
        rows.store_checks(result, prepared[0].name)
        status = "completed"
        return result
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        if status != "completed":
            repo.finish_campaign(ctx.campaign_id, status=status)


@dataclass(frozen=True, slots=True)
class _Measured:
    """What the steps with the servers up hand to the analysis."""

    costs: Calibration
    rounds: int
    """Measured rounds run (a race may stop early)."""
    verdicts: IdentityVerdicts
    distribution: list[ArmDistribution] | None
    argvs: dict[str, tuple[str, ...]]
    exact: bool
    """Identity is judged by the exact pass (`campaign/identity_pass.py`), after the servers
    of the rounds are stopped, instead of the batched probes on them."""
    active: tuple[str, ...]
    speculative: tuple[str, ...]
    settings: LoadSettings
    offloads: dict[str, dict[str, str]] = field(default_factory=dict)
    """How each arm's offload was verified (`ServerSet.offloads`)."""
    served: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Identity as served (`checks.served_identity`), where the plan asked for it beside
    the exact pass: per speculative arm, its verdict counts."""


def _with_servers(
    config: Config,
    plan: BenchPlan,
    prepared: list[PreparedProfile],
    servers: ServerSet,
    rows: BenchRows,
    ctx: CampaignContext,
    sampling: SamplingSettings,
    progress: Progress,
    split: TimeSplit,
) -> _Measured:
    """Every step that needs the servers: calibration, the rounds, the identity probes and
    their verdicts (as served, on these servers, where the exact pass follows and the plan
    asks for both), the distribution pass at temperature > 0."""
    settings = LoadSettings(
        concurrency=plan.concurrency,
        seed=sampling.seed,
        cache_prompt=plan.reuse_prompts,
        arrival=plan.arrival,
    )
    arm_settings = arm_load_settings(
        prepared,
        sampling,
        plan.concurrency,
        cache_prompt=plan.reuse_prompts,
        arrival=plan.arrival,
    )
    bench = Bench(
        config,
        plan,
        prepared,
        servers,
        rows,
        settings,
        progress,
        arm_settings,
        list(plan.profiles),
        split,
    )
    with split.phase(CALIBRATION):
        costs = (
            Calibration()
            if plan.speed_only
            else calibrate(
                config,
                prepared,
                servers[bench.baseline],
                plan.tasks,
                replace(settings, arrival=None),
                ctx.log_dir,
                progress,
            )
        )
    if plan.ceiling is not None and not plan.speed_only:
        bench.active[:] = plan.ceiling(costs)
    measured_rounds = measure_rounds(bench)
    verdicts = IdentityVerdicts()
    served: dict[str, dict[str, Any]] = {}
    identity = identity_plan(config, prepared)
    if not plan.speed_only and not identity.exact:
        with split.phase(SERVED):
            probes = _identity_probes(bench, identity_round=measured_rounds + 1)
            verdicts = _classify(bench, probes, reason=identity.reason)
    elif not plan.speed_only and plan.runs_served:
        with split.phase(SERVED):
            probes = _identity_probes(bench, identity_round=measured_rounds + 1, store=False)
            judged = _classify(bench, probes, reason="as served, beside the exact pass")
            served = served_summary(judged, _speculative(bench))
    with split.phase(DISTRIBUTION):
        distribution = distribution_pass(
            config,
            servers,
            [p for p in prepared if p.name in bench.active],
            plan.probe_tasks,
            sampling,
            progress,
        )
    return _Measured(
        costs,
        measured_rounds,
        verdicts,
        distribution,
        servers.argvs(),
        exact=identity.exact,
        active=tuple(bench.active),
        speculative=tuple(_speculative(bench)),
        settings=settings,
        offloads=servers.offloads(),
        served=served,
    )


def _exact_identity(
    config: Config,
    plan: BenchPlan,
    prepared: list[PreparedProfile],
    measured: _Measured,
    rows: BenchRows,
    ctx: CampaignContext,
    progress: Progress,
) -> _Measured:
    """The exact mode's correctness pass (its own servers, the same kernels on both sides),
    where the identity plan chose it; otherwise the batched probes' verdicts stand."""
    if plan.speed_only or not measured.exact:
        return measured
    verdicts = exact_pass(
        config,
        prepared,
        list(measured.active),
        list(measured.speculative),
        plan.probe_tasks,
        measured.settings,
        rows,
        ctx.log_dir,
        identity_round=measured.rounds + 1,
        live=config.bench.identity_live_control,
        progress=progress,
    )
    return replace(measured, verdicts=verdicts)


def _conclude(
    config: Config,
    plan: BenchPlan,
    ctx: CampaignContext,
    kind: str,
    prepared: Sequence[PreparedProfile],
    arms: Sequence[ArmSpec],
    rows: BenchRows,
    started: datetime,
    measured: _Measured,
    sampling: SamplingSettings,
) -> BenchResult:
    """The analysis, once the servers are stopped: refused when every measured request
    failed, then the result with the distribution pass's verdicts."""
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
        measured.rounds,
        measured.verdicts,
        sampling,
    )
    if measured.offloads:
        result = replace(result, extras={**result.extras, "offload": measured.offloads})
    if measured.served:
        result = replace(result, extras={**result.extras, "identity_served": measured.served})
    return with_distribution(result, measured.distribution)


def _speculative(bench: Bench) -> list[str]:
    return [p.name for p in bench.prepared[1:] if p.speculative and p.name in bench.active]


def _identity_probes(
    bench: Bench, *, identity_round: int, store: bool = True
) -> dict[str, RunResult]:
    """The batched mode's probe pass on the arms' own servers (`campaign.identity_pass`):
    one per arm after the measured rounds, stored so no throughput figure reads them (not at
    all where the exact pass's probes are the stored ones: `store` False)."""
    return run_probes(
        bench.servers,
        bench.config,
        bench.plan.probe_tasks,
        bench.active,
        probe_settings(bench.config, bench.settings),
        identity_round=identity_round,
        rows=bench.rows if store else None,
        progress=bench.progress,
    )


def _classify(bench: Bench, probes: Mapping[str, RunResult], *, reason: str) -> IdentityVerdicts:
    """The probes' verdicts, replayed on the baseline server (`checks.classify`)."""
    speculative = _speculative(bench)
    verdicts = classify_identity(
        bench.servers[bench.baseline].base_url,
        bench.plan.probe_tasks,
        probes,
        baseline=bench.baseline,
        speculative=speculative,
        top_k=bench.config.bench.identity_top_k,
        near_tie_threshold=bench.config.bench.near_tie_threshold,
        request_timeout_s=bench.config.server.request_timeout_s,
        progress=bench.progress,
        mode_reason=reason,
        key=floor_key(bench.prepared),
        live=bench.config.bench.identity_live_control,
    )
    return label_settings(verdicts, bench.prepared, speculative)


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
            tasks=len(plan.round_tasks),
            categories=tuple(sorted({t.category for t in plan.round_tasks})),
            temperature=sampling.temperature,
            seed=sampling.seed,
            sampling=sampling_label(sampling, prepared),
            near_tie_threshold=config.bench.near_tie_threshold,
            threshold=config.bench.min_effect,
            restart_every=plan.restart_every,
            renewed=tuple(a.name for a in arms if a.name in plan.renew_each_round),
        ),
        degenerate_threshold=config.bench.degenerate_threshold,
        length_tolerance=config.bench.length_parity_tolerance,
        identity_overrides=verdicts.overrides,
        noise_floor=verdicts.floor_json(),
        identity_extras=verdicts.extras(),
    )
    samplers = {p.name: sampling.with_profile(p.profile) for p in prepared}
    result = with_echoes(_with_samples(result, runs), runs, samplers)
    return with_request_acceptance(with_curves(result, runs), runs)


def _with_samples(result: BenchResult, runs: Sequence[RunResult]) -> BenchResult:
    tps: dict[str, list[float]] = {}
    for run in runs:
        if run.purpose == RunPurpose.MEASURED:
            tps.setdefault(run.arm, []).extend(
                s.decode_tps_server for s in run.samples if s.ok and s.decode_tps_server
            )
    return replace(result, extras={**result.extras, "tps_samples": tps})
