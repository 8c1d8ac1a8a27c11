"""`watchkeeper bench`: paired A/B of a baseline profile against speculative profiles.

All arms' servers stay up for the whole campaign and the load moves between them round by
round (ABC, CBA, ABC, ...), so slow drift of the machine (thermal, a neighbour's cron job)
hits every arm alike instead of biasing whichever ran last. Every run is stored the moment it
ends; a crash loses at most the run in progress.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from watchkeeper.analysis.acceptance import result_curves, with_curves
from watchkeeper.analysis.benchmark import (
    IDENTITY_SUFFIX,
    REWARM_TOKENS,
    ArmSpec,
    BenchMethod,
    BenchResult,
    analyze,
)
from watchkeeper.analysis.recommend import Recommendation, recommend
from watchkeeper.analysis.stats import median
from watchkeeper.checks.identity import IdentityResult, Verdict, classify_divergence
from watchkeeper.checks.replay import NoiseFloor, measure_noise_floor, replayer_for
from watchkeeper.commands.campaigns import (
    measure_round,
    measure_run,
    open_campaign,
    register_profile,
)
from watchkeeper.commands.distribution import distribution_pass, with_distribution
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.errors import BenchError, ConfigError, ServerError
from watchkeeper.host import info as hostinfo
from watchkeeper.load.records import RequestSample, RunResult, Task
from watchkeeper.load.runner import LoadSettings, arm_load_settings
from watchkeeper.load.sampling import command_sampling, profile_with_sampling, sampling_label
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.publish.report import write_bench_report
from watchkeeper.server.endpoints import (
    ServerClient,
    TransportError,
    complete,
    make_http_client,
    tokenize,
)
from watchkeeper.server.launch import PreparedProfile, RunningServer, prepare, serve
from watchkeeper.store.db import Database
from watchkeeper.store.findings import FindingStore, NewFinding
from watchkeeper.store.racing_store import RacingStore
from watchkeeper.store.repository import Repository

Progress = Callable[[str], None]
DEFAULT_PROFILES = ("qwen-baseline", "qwen-draft4", "qwen-ngram")
CALIBRATION_TASKS = 3
FLOOR_TASKS = 6
"""The A/A noise floor replays at most this many of the baseline's probes ..."""
FLOOR_POSITIONS = 8
"""... at this many positions each: at most 6 x (2 + 8) requests on the baseline server."""
VERIFY_REPEATS = 3
"""Verification-cost calibration: median of this many batches and of this many decodes."""
VERIFY_DEFAULT_N = 48
"""Draft length measured where a profile sets no n_max (ngram-simple drafts up to 48 tokens)."""
VERIFY_MAX_N = 64
VERIFY_PREFIX_TOKENS = 48
VERIFY_DECODE_TOKENS = 16
VERIFY_TEXT = (
    "The keeper climbed the spiral stairs at dusk, trimmed the wick, polished the great lens "
    "and wrote the weather into the log: wind from the north-west, a falling glass, three "
    "fishing boats running for the harbour before the squall. "
)
VerifyCost = tuple[int | None, float | None, str]


MoreRounds = Callable[[Sequence[RunResult], float], int]
"""(measured runs so far, seconds they took) -> how many more rounds to run."""
Race = Callable[[Sequence[RunResult]], tuple[Sequence[str], bool]]
"""After each measured round: (measured runs so far) -> (arms to keep measuring, go on?)."""


@dataclass(frozen=True, slots=True)
class BenchPlan:
    profiles: tuple[str, ...]
    tasks: tuple[Task, ...]
    rounds: int
    warmup_rounds: int
    warmup_tasks: int
    concurrency: int
    more_rounds: MoreRounds | None = None
    """Asked once after `rounds`: more rounds on the same servers. A review sizes its rounds
    for a CI target from its pilot this way; the pilot's rounds count, nothing is re-run."""
    race: Race | None = None
    """The sweep's racing rule (commands/sweep.py); `rounds` is then the most it may run."""
    restart_every: int = 0
    """Fresh server processes for every arm before every this many measured rounds (0: one
    process per arm for the whole campaign). A process keeps whatever made it a little fast
    or slow (placement, memory layout) for its whole life, an offset no resampling of its own
    rounds can see; restarting makes the process a replicate the rounds carry into the CI."""


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
        restart_every=config.bench.restart_every,
    )


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


def _verify_cost(
    config: Config, baseline: RunningServer, draft_n: int, progress: Progress
) -> VerifyCost:
    """Cost of verifying a draft of `draft_n` tokens: one target batch of draft_n + 1 tokens,
    in target decode steps, on the baseline server.

    A shared prefix is cached first (`cache_prompt`), then each batch is the prefix plus
    draft_n + 1 fresh tokens, so the server evaluates exactly those (timings.prompt_n, with
    cache_n the reused prefix; answers that evaluated anything else are dropped). Its
    prompt_ms is set against the per-token time of a plain decode (predicted_ms / predicted_n)
    on the same prefix; both are the median of `VERIFY_REPEATS`. The prompt batch computes
    logits for its last token only, so it prices verification slightly low: the bound stays
    a bound."""
    k = min(draft_n, VERIFY_MAX_N) + 1
    client = make_http_client(baseline.base_url, request_timeout_s=config.server.request_timeout_s)
    try:
        pool: list[int] = []
        text = VERIFY_TEXT
        while len(pool) < VERIFY_PREFIX_TOKENS + VERIFY_REPEATS * (k + 1) + 1:
            pool = tokenize(client, text)
            text += VERIFY_TEXT
        prefix = pool[:VERIFY_PREFIX_TOKENS]
        base = {"cache_prompt": True, "temperature": 0.0, "samplers": ["top_k"], "top_k": 1}
        complete(client, {**base, "prompt": prefix, "n_predict": 1})
        batch_ms: list[float] = []
        step_ms: list[float] = []
        for i in range(VERIFY_REPEATS):
            start = VERIFY_PREFIX_TOKENS + i * (k + 1)
            timings = complete(
                client, {**base, "prompt": prefix + pool[start : start + k], "n_predict": 1}
            ).get("timings", {})
            if timings.get("prompt_n") == k and timings.get("prompt_ms"):
                batch_ms.append(float(timings["prompt_ms"]))
            timings = complete(
                client,
                {
                    **base,
                    "prompt": prefix + pool[start + k : start + k + 1],
                    "n_predict": VERIFY_DECODE_TOKENS,
                    "ignore_eos": True,
                },
            ).get("timings", {})
            if timings.get("predicted_n", 0) > 1 and timings.get("predicted_ms"):
                step_ms.append(float(timings["predicted_ms"]) / float(timings["predicted_n"]))
    except TransportError as exc:
        return None, None, f"verification cost not measured: {exc}"[:300]
    finally:
        client.close()
    batch, step = median(batch_ms), median(step_ms)
    if not batch or not step:
        return None, None, "verification cost not measured: no clean batch or decode timing"
    note = (
        f"measured on the baseline: a batch of {k} tokens after a cached prefix "
        f"{batch:.2f} ms, one decode step {step:.2f} ms (medians of {len(batch_ms)} and "
        f"{len(step_ms)})"
    )
    progress(f"verification cost: {k} tokens in one batch = {batch / step:.2f} decode steps")
    return k, batch / step, note


def _arm_spec(
    prepared: PreparedProfile,
    role: str,
    argv: tuple[str, ...],
    cost: tuple[float | None, str],
    *,
    drift_only: bool = False,
    verify: VerifyCost = (None, None, ""),
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
        verify_tokens=verify[0],
        verify_cost=verify[1],
        verify_note=verify[2],
        speculative=prepared.profile.speculative and not drift_only,
    )


REWARM_SUFFIX = "#rewarm"
"""Arm-name suffix of the warm-up requests after a restart (stored, never measured)."""


class _Fleet:
    """Every arm's server, started together, replaced together by `restart`."""

    def __init__(
        self, config: Config, prepared: Sequence[PreparedProfile], log_dir: Path, progress: Progress
    ) -> None:
        self._config, self._prepared, self._log_dir = config, prepared, log_dir
        self._progress = progress
        self._stack = ExitStack()
        self.servers: dict[str, RunningServer] = {}
        """Updated in place by `restart`: holders of this dict see the new servers."""
        self.generation = 0

    def start(self) -> None:
        suffix = f"-p{self.generation}" if self.generation else ""
        for p in self._prepared:
            if not self.generation:
                self._progress(f"starting {p.name}")
            self.servers[p.name] = self._stack.enter_context(
                serve(self._config, p, log_path=self._log_dir / f"{p.name}{suffix}.log")
            )

    def restart(self) -> None:
        self.close()
        self.generation += 1
        self.start()

    def close(self) -> None:
        self._stack.close()
        self._stack = ExitStack()


def execute_bench(
    config: Config,
    plan: BenchPlan,
    *,
    kind: str = "bench",
    progress: Progress,
    prepared: Sequence[PreparedProfile] | None = None,
    drift_only: bool = False,
) -> BenchResult:
    """Run the plan, store everything, analyse, write the report.

    ``prepared`` gives the arms already resolved (the nightly's pinned reference runs a
    snapshot binary and models that no profile name resolves to); their names must be
    ``plan.profiles``. ``drift_only``: the candidates are other builds or settings of the
    baseline (the nightly's current vs reference), so their outputs are compared as drift,
    never judged for identity."""
    if prepared is None:
        prepared = [prepare(config, name, progress=progress) for name in plan.profiles]
    elif tuple(p.name for p in prepared) != plan.profiles:
        raise ConfigError("prepared arms must match the plan's profiles")
    prepared = list(prepared)
    db = Database(config.database.resolved_url())
    try:
        return _execute(config, plan, prepared, db, kind, progress, drift_only=drift_only)
    finally:
        db.close()


def _restarts_before(round_index: int, every: int) -> bool:
    """Fresh processes before measured rounds 1 + every, 1 + 2 x every, ..."""
    return every > 0 and round_index > 1 and (round_index - 1) % every == 0


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
    repo = Repository(db)
    params = {
        "profiles": list(plan.profiles),
        "rounds": plan.rounds,
        "tasks": len(plan.tasks),
        "concurrency": plan.concurrency,
        "warmup_rounds": plan.warmup_rounds,
        "restart_every": plan.restart_every,
    }
    sampling = command_sampling(config)
    prepared = [replace(p, profile=profile_with_sampling(p.profile, sampling)) for p in prepared]
    arm_settings = arm_load_settings(prepared, sampling, plan.concurrency)
    params["sampling"] = sampling.to_json()
    ctx = open_campaign(repo, kind=kind, prepared=prepared, params=params)
    profile_ids = {p.name: register_profile(repo, p) for p in prepared}
    settings = LoadSettings(concurrency=plan.concurrency, seed=config.bench.seed)
    started = datetime.now(UTC)
    runs: list[RunResult] = []
    run_ids: dict[tuple[str, int], int] = {}
    status = "failed"
    try:
        with ExitStack() as stack:
            fleet = _Fleet(config, prepared, ctx.log_dir, progress)
            stack.callback(fleet.close)
            fleet.start()
            servers = fleet.servers
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
            verify_costs: dict[str, VerifyCost] = {}
            measured_verify: dict[int, VerifyCost] = {}
            for p in prepared[1:]:
                if not p.spec_type:
                    continue
                n = p.profile.draft_n_max or VERIFY_DEFAULT_N
                if n not in measured_verify:  # one calibration per draft length
                    measured_verify[n] = _verify_cost(config, servers[baseline.name], n, progress)
                verify_costs[p.name] = measured_verify[n]
            schedule = (
                [(r, True) for r in range(-plan.warmup_rounds + 1, 1)] if plan.warmup_rounds else []
            )
            schedule += [(r, False) for r in range(1, plan.rounds + 1)]
            measured_rounds = plan.rounds
            active = list(plan.profiles)  # a race stops measuring the arms it drops

            def run_schedule(rounds: list[tuple[int, bool]], total: int, before: int) -> None:
                nonlocal measured_rounds
                for done, (round_index, warm) in enumerate(rounds, start=before + 1):
                    if not warm and _restarts_before(round_index, plan.restart_every):
                        fleet.restart()
                        rewarm(round_index)
                    tasks = plan.tasks[: plan.warmup_tasks] if warm else plan.tasks
                    label = "warm-up" if warm else f"round {round_index}/{measured_rounds}"
                    progress(
                        f"[{done}/{total}] {label}: {len(tasks)} tasks x {len(active)} arms, "
                        "back to back per task"
                    )
                    for run in measure_round(
                        servers,
                        config,
                        tasks,
                        arms=active,
                        round_index=round_index,
                        is_warmup=warm,
                        settings=settings,
                        arm_settings=arm_settings,
                    ):
                        run_ids[(run.arm, round_index)] = repo.save_run(
                            ctx.campaign_id, profile_ids[run.arm], run
                        )
                        runs.append(run)
                        if run.error:
                            raise ServerError(f"{run.arm}: {run.error}")
                    if plan.race is not None and not warm:
                        keep, go_on = plan.race([r for r in runs if not r.is_warmup])
                        active[:] = keep
                        if not go_on:
                            measured_rounds = round_index
                            return

            def rewarm(round_index: int) -> None:
                """The first requests of a fresh process pay its cold start: not measured."""
                first = plan.tasks[0]
                for run in measure_round(
                    servers,
                    config,
                    [replace(first, max_tokens=min(first.max_tokens, REWARM_TOKENS))],
                    arms=active,
                    round_index=round_index,
                    is_warmup=True,
                    settings=settings,
                ):
                    name = run.arm + REWARM_SUFFIX
                    stored = replace(run, arm=name, profile_name=name)
                    run_ids[(name, round_index)] = repo.save_run(
                        ctx.campaign_id, profile_ids[run.arm], stored
                    )
                    runs.append(stored)
                    if run.error:
                        raise ServerError(f"{run.arm}: {run.error}")

            rounds_started = time.monotonic()
            run_schedule(schedule, len(schedule), 0)
            if plan.more_rounds is not None:
                extra = plan.more_rounds(
                    [r for r in runs if not r.is_warmup], time.monotonic() - rounds_started
                )
                if extra > 0:
                    measured_rounds = plan.rounds + extra
                    more = [(r, False) for r in range(plan.rounds + 1, measured_rounds + 1)]
                    run_schedule(more, len(schedule) + extra, len(schedule))
            probe_settings = replace(settings, top_logprobs=config.bench.identity_top_k)
            identity_round = measured_rounds + 1
            probe_runs: dict[str, RunResult] = {}
            for arm in active:
                progress(
                    f"identity probes: {arm} ({len(plan.tasks)} tasks, top-"
                    f"{probe_settings.top_logprobs} logprobs; not part of any throughput figure)"
                )
                probe = measure_run(
                    servers[arm],
                    config,
                    plan.tasks,
                    arm=arm + IDENTITY_SUFFIX,
                    round_index=identity_round,
                    is_warmup=True,
                    settings=probe_settings,
                )
                run_ids[(probe.arm, identity_round)] = repo.save_run(
                    ctx.campaign_id, profile_ids[arm], probe
                )
                runs.append(probe)
                probe_runs[arm] = probe
                if probe.error:
                    raise ServerError(f"{arm}: {probe.error}")
            floor, overrides = _classify_identity(
                config,
                plan.tasks,
                servers[prepared[0].name],
                probe_runs,
                baseline=prepared[0].name,
                speculative=[
                    p.name for p in prepared[1:] if p.profile.speculative and p.name in active
                ],
                progress=progress,
            )
            distribution = distribution_pass(
                config, servers, prepared, plan.tasks, sampling, progress
            )
            argvs = {name: servers[name].argv for name in servers}
        arms = [_arm_spec(prepared[0], "baseline", argvs[prepared[0].name], (None, ""))]
        arms += [
            _arm_spec(
                p,
                "candidate",
                argvs[p.name],
                costs[p.name],
                drift_only=drift_only,
                verify=verify_costs.get(p.name, (None, None, "")),
            )
            for p in prepared[1:]
        ]
        if not any(s.ok for r in runs if not r.is_warmup for s in r.samples):
            raise BenchError(f"every measured request failed; see the server logs in {ctx.log_dir}")
        first = prepared[0]
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
            identity_overrides=overrides,
            noise_floor=floor.to_json() if floor is not None else None,
        )
        result = with_curves(_with_samples(result, runs), runs)
        result = with_distribution(result, distribution)
        RacingStore(db).save_curves(ctx.campaign_id, result_curves(result))
        _store_checks(repo, ctx.campaign_id, result, run_ids, prepared[0].name)
        status = "completed"
        return result
    except KeyboardInterrupt:
        status = "interrupted"
        raise
    finally:
        if status != "completed":
            repo.finish_campaign(ctx.campaign_id, status=status)


def _no_replay(floor: float, note: str) -> dict[str, Any]:
    return {
        "target_token": None,
        "candidate_token": None,
        "baseline_token": None,
        "margin": None,
        "floor": floor,
        "note": note,
    }


def _classify_identity(
    config: Config,
    tasks: Sequence[Task],
    baseline_server: RunningServer,
    probe_runs: dict[str, RunResult],
    *,
    baseline: str,
    speculative: Sequence[str],
    progress: Progress,
) -> tuple[NoiseFloor | None, dict[tuple[str, str], IdentityResult]]:
    """Noise floor and replay verdicts on the baseline server, for `analyze` to use.

    The A/A floor is measured once on the baseline's own probes. Each speculative probe that
    `compare_samples` does not call identical is classified with a batched replay on the
    baseline server (`classify_divergence`): the target picking the candidate's token, or a
    gap within the floor, is batch variance; only what survives is a mismatch. Near-ties keep
    their verdict but get the same evidence. A replay that fails leaves the floor to decide
    (the error is kept in the evidence); a floor that cannot be measured is taken as 0.
    """
    base_run = probe_runs.get(baseline)
    if base_run is None or not speculative:
        return None, {}
    top_k = config.bench.identity_top_k
    threshold = config.bench.near_tie_threshold
    by_task = {t.id: t for t in tasks}
    base = {s.task_id: s for s in base_run.samples}
    decoded = [
        s
        for s in base_run.samples
        if s.ok and s.tokens and all(t.token_id is not None for t in s.tokens)
    ][:FLOOR_TASKS]
    overrides: dict[tuple[str, str], IdentityResult] = {}
    client = make_http_client(
        baseline_server.base_url, request_timeout_s=config.server.request_timeout_s
    )
    try:
        floor: NoiseFloor | None = None
        progress(
            f"noise floor: replaying {len(decoded)} baseline probes at {FLOOR_POSITIONS} "
            "positions each as one batched prompt (A/A control)"
        )
        try:
            floor = measure_noise_floor(
                client, tasks, decoded, n_probs=top_k, positions_per_task=FLOOR_POSITIONS
            )
        except TransportError as exc:
            progress(f"noise floor not measured ({exc}); the replay alone decides")
        floor_value = floor.floor if floor is not None else 0.0
        for arm in speculative:
            run = probe_runs.get(arm)
            if run is None:
                continue
            for c in run.samples:
                b = base.get(c.task_id)
                task = by_task.get(c.task_id)
                if b is None or task is None or not b.ok or not c.ok:
                    continue
                overrides[(arm, c.task_id)] = _classify_one(
                    client, task, b, c, floor=floor_value, n_probs=top_k, threshold=threshold
                )
        counts: dict[str, int] = {}
        for result in overrides.values():
            counts[result.verdict] = counts.get(result.verdict, 0) + 1
        progress(
            f"identity: noise floor {floor_value:.4f} nats; verdicts "
            + ", ".join(f"{v} {n}" for v, n in sorted(counts.items()))
        )
    finally:
        client.close()
    return floor, overrides


def _classify_one(
    client: ServerClient,
    task: Task,
    b: RequestSample,
    c: RequestSample,
    *,
    floor: float,
    n_probs: int,
    threshold: float,
) -> IdentityResult:
    try:
        replay = replayer_for(client, task, b, n_probs=n_probs)
    except ValueError:
        replay = None  # no baseline token ids (tool calls): nothing to replay
    error: str | None = None

    def classify(near_tie_threshold: float) -> IdentityResult:
        nonlocal error
        try:
            return classify_divergence(
                b, c, replay=replay, floor=floor, near_tie_threshold=near_tie_threshold
            )
        except TransportError as exc:
            error = str(exc)[:300]
            return classify_divergence(
                b, c, replay=None, floor=floor, near_tie_threshold=near_tie_threshold
            )

    result = classify(threshold)
    if result.verdict == Verdict.NEAR_TIE:
        # Same evidence as a mismatch gets: classify as if there were no near-tie allowance,
        # keep the near-tie verdict.
        result = replace(result, replay=classify(0.0).replay)
    if result.verdict != Verdict.IDENTICAL and result.replay is None:
        if result.verdict == Verdict.LENGTH_ONLY:
            note = "one output is a prefix of the other, cut by max_tokens: nothing to replay"
        elif replay is None:
            note = "no baseline token ids (text comparison): nothing to replay"
        else:
            note = "divergence located by text only: nothing to replay"
        result = replace(result, replay=_no_replay(floor, note))
    if error is not None and result.replay is not None:
        result = replace(result, replay={**result.replay, "replay_error": error})
    return result


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
            cand = run_ids.get((rec.arm + IDENTITY_SUFFIX, rec.round))
            base = run_ids.get((baseline + IDENTITY_SUFFIX, rec.round))
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
    findings = FindingStore(repo.db)
    for f in result.findings:
        fingerprint = f"{f.kind}:{f.profile}:{f.category or '*'}"[:64]
        recurring = f.kind == "correctness"  # a fact, not a statistic: one finding, recurring
        new = NewFinding(
            campaign_id=campaign_id,
            fingerprint=fingerprint,
            kind=f.kind,
            label=f.kind if recurring else "candidate",
            severity=f.severity,
            title=f.title,
            evidence=f.evidence,
        )
        if recurring:
            findings.record_recurring(new)
        else:
            findings.add(new)


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
    sections: str = "",
) -> BenchResult:
    rec = recommendation if isinstance(recommendation, Recommendation) else None
    path = write_bench_report(
        result,
        config.bench.resolved_reports_dir(),
        recommendation=rec,
        extra_copy=extra_copy,
        sections=sections,
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
