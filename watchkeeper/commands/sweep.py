"""`watchkeeper sweep`: spec types x draft lengths on the paired design, raced, then a
recommendation per category and for the whole workload, and a service file that runs it.

The candidate list comes from the installed build and the pair's models: every method its
`--help` lists that the target's and the drafter's GGUF metadata let run, at the knob values
worth racing (campaign/sweep_arms.py; `--dry-run` prints the plan); its models come from a
built-in family (`--family`), the user's own target and draft (`--target/--draft`, catalog
names or GGUF paths) or a profile (`--profile`, its model and draft, its other settings kept).

Measuring every arm every round costs hours here (9 Qwen arms x 18 tasks: 20-25 minutes a
round), so the sweep races (analysis/racing.py): after each round arms that lost stop being
measured, and it stops when every category is decided, the planned rounds are done or the
next round would not fit `--budget`. Dropped arms keep their rows; the report says when and
why each was dropped. The recommendation never picks a profile whose speed-up CI reaches below
1.0, and says "keep the baseline" plainly when nothing qualifies: on a 2-core CPU box that is
the expected, honest answer.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, cast

from watchkeeper.analysis import aa_control
from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.category_tasks import category_note, with_category_cis
from watchkeeper.analysis.identity_gate import withheld
from watchkeeper.analysis.racing_types import RaceArm, RaceSettings, RaceState
from watchkeeper.analysis.recommend import MIX, Recommendation, recommend
from watchkeeper.analysis.task_pick import TaskCIs, with_task_cis
from watchkeeper.analysis.workload_mix import Mix, check_mix, parse_mix, task_set_mix
from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_report import finish_with_report
from watchkeeper.campaign.load_shape import load_text
from watchkeeper.campaign.racer import Racer, race_arms
from watchkeeper.campaign.round_price import pair_probe_s
from watchkeeper.campaign.sweep_plan import (
    race_records,
    sweep_arm_plan,
    sweep_candidates,
    sweep_plan,
    sweep_racer,
)
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.config.paths import under_working_dir
from watchkeeper.config.requests import SweepRequest
from watchkeeper.errors import ConfigError
from watchkeeper.load.records import RunResult
from watchkeeper.load.sampling import command_sampling
from watchkeeper.load.shape import LoadShape
from watchkeeper.load.tasks import load_taskset
from watchkeeper.publish.deliverable import RECORD_NAME, build_record, write_record
from watchkeeper.publish.report import campaign_folder_name
from watchkeeper.publish.served import served_extra
from watchkeeper.publish.soak_report import summary_for
from watchkeeper.publish.sweep_report import preface, render_sweep_sections
from watchkeeper.publish.sweep_view import SweepView, soak_command
from watchkeeper.publish.systemd import render_unit, write_service
from watchkeeper.publish.verify import record_digests
from watchkeeper.publish.verify_price_section import read_verify_price
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.racing_store import RacingStore
from watchkeeper.store.repository import Repository

Progress = Callable[[str], None]
Clock = Callable[[], float]
SPECULATIVE_REPORT = "speculative_benchmark.md"
DEFAULT_MAX_ROUNDS = 5
"""A raced sweep's most rounds when `rounds` is not given (the other defaults: SweepRequest)."""
DEFAULT_SERVICE_FILE = Path("systemd/llama-server-speculative.service")


@dataclass(frozen=True, slots=True)
class SweepResult:
    bench: BenchResult
    recommendation: Recommendation
    service_path: Path
    race: RaceState | None = None
    stop_reason: str = ""
    wall_s: float = 0.0
    plan: str = ""
    """The racer's design before round 1, in words."""
    task_cis: dict[str, dict[str, float]] = field(default_factory=dict)
    """Each racing arm's CI over tasks where the race stopped short of a CI over rounds."""
    pair_probe_s: float = 0.0
    """An exact identity probe of the chosen setting on two servers, as the nightly that
    guards it runs it (campaign/round_price.pair_probe_s, from its round 1); 0: not priced
    (no race, or its round was not priced task by task). `deliver-set` prices its nightly
    stage with it."""

    def to_json(self) -> dict[str, Any]:
        race = None
        if self.race is not None:
            race = {
                "rounds": self.race.rounds,
                "survivors": list(self.race.active),
                "rounds_by_arm": dict(self.race.rounds_by_arm),
                "drops": [asdict(d) for d in self.race.drops],
                "decisions": [asdict(d) for d in self.race.decisions],
                "stop_reason": self.stop_reason,
                "plan": self.plan,
                "task_cis": self.task_cis,
            }
        return {
            "bench": self.bench.to_json(),
            "recommendation": asdict(self.recommendation),
            "headline": self.recommendation.headline,
            "service_path": str(self.service_path),
            "race": race,
            "wall_s": round(self.wall_s, 1),
        }


def sweep_command(
    config: Config,
    request: SweepRequest,
    *,
    progress: Progress,
    database: Database | None = None,
    clock: Clock = time.monotonic,
) -> SweepResult:
    """The sweep its `request` asks for (the CLI's options or a sweep job's `[args]`,
    config/requests.py), each choice left out the config's; its sampler (over the config's
    [bench] keys) is resolved here once and rides on the plan. `database`: the caller's, else
    one opened for the sweep.

    `request.concurrency` and `request.rate` (its arrivals: campaign/load_shape.py): the load
    every arm is measured under, named by the recommendation and the unit (a speed-up holds
    for the load it was measured at: docs/load.md). Default: one request at a time.

    `request.identity_as_served`: probe the rounds' own servers as served too, beside the exact
    pass. Off by default: its A/A floor replays every probe position by position with the
    prompt prefilled afresh: about an hour for three probes on a slow host
    (docs/measurements.md#figures-behind-the-code).

    `request.rounds`: with racing, the most rounds it may run (default 5); without
    (`no_race`), every arm runs exactly that many (default bench.rounds). The identity pass
    probes the first `identity_per_category` measured tasks of each category (0: every one).

    The steps: the candidate profiles for the installed build, the racer (`campaign/racer.py`),
    the plan, the paired bench, the report with the sweep's sections, the service file.

    `request.mix`: the workload the one setting and the unit are for (checked against the task
    set's categories before anything starts); None: the task set's own proportions."""
    if request.dry_run:
        raise ConfigError("a dry run is the plan's (sweep_plan_lines), not a sweep")
    mix = None if request.mix is None else parse_mix(request.mix)
    categories = request.categories or None
    if mix is not None:
        _check_mix(mix, request.taskset or config.bench.resolved_taskset(), categories)
    started = clock()
    sampling = command_sampling(config, given=request.sampler())
    config, generated, trim = sweep_candidates(
        config,
        family=request.family,
        target=request.target,
        draft=request.draft,
        profile=request.profile,
        progress=progress,
        max_arms=request.max_arms,
    )
    race = not request.no_race
    max_rounds = request.rounds or (DEFAULT_MAX_ROUNDS if race else config.bench.rounds)
    settings = RaceSettings(
        min_effect=config.bench.min_effect, max_rounds=max_rounds, seed=sampling.seed
    )
    arms = race_arms({n: config.profiles[n] for n in generated})
    racer = (
        sweep_racer(
            config,
            generated,
            arms,
            settings,
            budget_min=request.budget,
            clock=clock,
            progress=progress,
            served_identity=request.identity_as_served,
            trim=trim,
        )
        if race
        else None
    )
    plan = sweep_plan(
        config,
        generated,
        racer,
        rounds=max_rounds,
        taskset=request.taskset,
        per_category=request.per_category,
        max_tokens=request.max_tokens,
        concurrency=request.concurrency,
        load=LoadShape.from_request(request, max_concurrency=request.max_concurrency),
        identity_per_category=request.probe_tasks(),
        categories=categories,
        served_identity=request.identity_as_served,
        sampling=sampling,
    )
    if racer is not None:
        racer.probe_fraction = len(plan.probe_tasks) / max(1, len(plan.tasks))
        racer.probe_count = len(plan.probe_tasks)
        racer.probe_tasks = lambda: plan.probe_tasks  # the sample's, once drawn
    progress(
        f"sweep: {len(plan.profiles)} profiles x {len(plan.tasks)} tasks "
        f"at {load_text(plan.concurrency, plan.arrival)}, "
        + (
            f"raced: at most {plan.rounds} rounds within {request.budget:g} min"
            if race
            else f"{plan.rounds} rounds, every arm"
        )
    )
    with open_database(config.database.resolved_url(), given=database) as db:
        result = execute_bench(config, plan, kind="sweep", progress=progress, database=db)
        tasks = _over_tasks(racer, settings)
        if tasks is not None:  # one round over many tasks: its answer reads them
            result = with_task_cis(result, tasks.cis, of=tasks.of)
            population = racer.sample.population if racer and racer.sample else None
            result = with_category_cis(result, tasks.cis, population=population)
        if mix is None and racer is not None and racer.sample is not None:
            mix = task_set_mix(racer.sample.population)  # the set's, not the sample's
        outcome = _Outcome(
            result,
            recommend(
                result,
                withheld=withheld(result) | aa_control.withheld(result),
                mix=mix,
                answer=MIX,
                tasks=tasks,
            ),
            tuple(arms),
            settings,
            racer,
            {n: config.profiles[n] for n in generated},
            load_text(plan.concurrency, plan.arrival),
            tuple(t.id for t in plan.probe_tasks if len(plan.probe_tasks) < len(plan.round_tasks)),
            over_tasks=tasks is not None,
            categories_over_tasks=category_note(result, tasks.cis) if tasks else "",
        )
        return _report(
            config,
            db,
            outcome,
            budget_min=request.budget if race else None,
            started=started,
            clock=clock,
            service_path=request.service_file or DEFAULT_SERVICE_FILE,
            max_tokens=request.max_tokens,
            progress=progress,
        )


def _over_tasks(racer: Racer | None, settings: RaceSettings) -> TaskCIs | None:
    """The racing arms' intervals over tasks where the whole race stopped short of a CI over
    rounds (one round over many tasks: analysis/task_pick.py); None in a sweep whose rounds
    give CIs (an arm the early or idle rule stopped keeps its interval over tasks in the race
    section only)."""
    if racer is None or not racer.task_cis or racer.state.rounds >= settings.min_rounds:
        return None
    of = sum(racer.sample.population.values()) if racer.sample is not None else 0
    return TaskCIs(racer.task_cis, of)


def sweep_plan_lines(config: Config, request: SweepRequest, *, progress: Progress) -> list[str]:
    """`sweep --dry-run`: every method of the build for the pair, in or out with the reason,
    and the arms with why each is raced. Nothing is fetched or measured (a model not on disk
    yet is named as unread)."""
    _, plan = sweep_arm_plan(
        config,
        family=request.family,
        target=request.target,
        draft=request.draft,
        profile=request.profile,
        progress=progress,
        max_arms=request.max_arms,
        fetch=False,
    )
    return plan.lines()


def _check_mix(mix: Mix, taskset: Path, categories: Sequence[str] | None) -> None:
    """Refuse a mix naming a category the sweep will not measure (the task set lacks it, or
    `--category` leaves it out) now, not after hours of rounds."""
    measured = {t.category for t in load_taskset(taskset)}
    if categories:
        measured &= set(categories)
    try:
        check_mix(mix, measured)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None


@dataclass(frozen=True, slots=True)
class _Outcome:
    """What the sweep's bench produced, as its report reads it."""

    result: BenchResult
    rec: Recommendation
    arms: tuple[RaceArm, ...]
    settings: RaceSettings
    racer: Racer | None
    profiles: dict[str, ProfileConfig]
    """The generated candidates: the recommendation record names their settings."""
    load: str
    """The load the arms were measured under, in words (the record and the unit name it)."""
    probe_tasks: tuple[str, ...] = ()
    """The identity pass's tasks where a subset of the measured ones (BenchPlan.identity_tasks)."""
    over_tasks: bool = False
    """The answer reads the intervals over tasks (`_over_tasks`)."""
    categories_over_tasks: str = ""
    """What the per-category rows read where the answer is over tasks, in words
    (`category_tasks.category_note`); empty otherwise."""


def _report(
    config: Config,
    db: Database,
    outcome: _Outcome,
    *,
    budget_min: float | None,
    started: float,
    clock: Clock,
    service_path: Path,
    max_tokens: int,
    progress: Progress,
) -> SweepResult:
    """The race stored, the recommendation record, the report with the sweep's sections (the
    race, a winner per category, the soak that backs it), and the unit rendered from the
    record for this host's `[service]` settings."""
    result, rec, racer = outcome.result, outcome.rec, outcome.racer
    reports = config.bench.resolved_reports_dir()
    state = racer.state if racer is not None else None
    chosen = rec.setting or result.baseline.name
    store = RacingStore(db)
    if state is not None:
        store.save_race(result.campaign_id, race_records(state, outcome.arms))
    record = build_record(
        result,
        rec,
        chosen=chosen,
        profiles=outcome.profiles,
        report=SPECULATIVE_REPORT,
        campaign_report=f"{campaign_folder_name(result)}/report.md",
        race=state,
        load=outcome.load,
        also_change=(racer.budget_hint,) if racer is not None and racer.budget_hint else (),
    )
    # The unit rendered from this record, so its soak names the unit it soaked: relative to
    # the checkout it is committed in, never a host path (the record is committed).
    record.extra["unit"] = _committed_name(service_path)
    # ...and the slots and prompt cache it renders with, so a soak or re-render under a
    # config that does not repeat them serves the same unit.
    record.extra["served"] = served_extra(config.service)
    record.extra["record"] = _committed_name(reports / RECORD_NAME)  # the set it belongs to
    record.extra["digests"] = {"models": record_digests(result)}  # checked before each start
    write_record(reports / RECORD_NAME, record)
    view = SweepView(
        result=result,
        recommendation=rec,
        arms=outcome.arms,
        settings=outcome.settings,
        race=state,
        stop_reason=racer.stop_reason if racer is not None else "every arm ran every round",
        budget_min=budget_min,
        wall_s=clock() - started,
        chosen=chosen,
        chosen_profile=config.profiles.get(chosen),
        # only a soak of this sweep's own pick, from the store or the folder: one of the
        # sweep before (same arm name, another pick) lies in both (publish/soak_lineage.py)
        soak=store.latest_soak(result.host.fingerprint, chosen, sweep_campaign=result.campaign_id),
        soak_command=soak_command(chosen),
        service_path=service_path,
        max_tokens=max_tokens,
        record=record,
        soak_report=summary_for(reports, record),
        profiles=outcome.profiles,
        unprobed=dict(racer.unprobed) if racer is not None else {},
        served_skipped=racer.served_skipped if racer is not None else "",
        probe_tasks=outcome.probe_tasks,
        race_plan=racer.plan_text if racer is not None else "",
        task_cis=racer.task_ci_text() if racer is not None else "",
        answer_over_tasks=outcome.over_tasks,
        categories_over_tasks=outcome.categories_over_tasks,
        verify_price=read_verify_price(reports),
    )
    result = finish_with_report(
        config,
        result,
        progress=progress,
        recommendation=rec,
        extra_copy=reports / SPECULATIVE_REPORT,
        sections=render_sweep_sections(view),
        database=db,
        preface=preface(view),
    )
    write_service(service_path, render_unit(record, config.service, filename=service_path.name))
    progress(f"service file: {service_path} (profile {chosen})")
    wall_s = clock() - started
    return SweepResult(
        result,
        rec,
        service_path,
        state,
        view.stop_reason,
        wall_s=wall_s,
        plan=view.race_plan,
        task_cis=racer.task_cis_json() if racer is not None else {},
        pair_probe_s=_pair_probe_s(db, result.campaign_id, racer, chosen),
    )


def _pair_probe_s(db: Database, campaign_id: int, racer: Racer | None, chosen: str) -> float:
    if racer is None or racer.price is None:
        return 0.0
    runs = cast(list[RunResult], Repository(db).load_runs(campaign_id))  # arm, round, samples
    return pair_probe_s(racer.price, runs, chosen) or 0.0


def _committed_name(path: Path) -> str:
    """`systemd/x.service` for a unit under the working directory, else its file name."""
    return under_working_dir(path) or path.name
