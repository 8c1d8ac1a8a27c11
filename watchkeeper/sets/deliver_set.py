"""`watchkeeper deliver-set`: one command makes a whole deliverable set, within a stated budget,
resumable: the sweep (its report, record and unit), the pick's ladder at every load the unit
serves (`sets/served_ladder.py`), the soak of exactly that unit at depth 1 and at its
slots, the nightly's first A/A pair guarding it, the set's own page, then `check-set`.

The committed sets were made by hand, command by command, and disagreed (a unit serving 4
slots beside a sweep of 1, a soak of another unit, README lines nobody re-read). Each stage
here is the existing command's function, called with the set's folder as the reports folder,
so nothing is measured differently from the commands run one by one.

The budget: each stage gets its share of what is left (sweep 45%, ladder 20%, soak 25%,
nightly 10%), so time a stage did not use goes to the later ones. The sweep and the soak are
sized to their budget (the race stops rounds that do not fit; the soak runs that long). The
ladder and the nightly are not: each is priced first at the sweep's measured seconds per
request, and one that does not fit is skipped with the price in its line, leaving the claims it
would support "not yet" (the unit keeps the sweep's own load line; the soak's hours stay short
of the target). The nightly's price adds its exact identity pass (`nightly_price`): every task
it measures probed on both servers at `--ubatch-size 1`, priced as the sweep prices its own
exact probes (campaign/round_price.pair_probe_s). Without it the code-edit set of 7 Dec 2026
priced its nightly at its rounds alone, 12.4 min (6 rounds x 2 arms x 8 tasks = 96 requests at
the sweep's 7.73 s), inside the stage's 14.1 min; the night took 30.8 min, 18.2 of them the
identity pass (8 probes of ~600-token prompts on each server, a prompt token a pass).

Progress goes to `progress`; the state goes to the set's `deliver_set.json` after every stage,
so a rerun of the same command continues from the first unfinished stage.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from watchkeeper.commands.check_set import check_set_command
from watchkeeper.commands.nightly import nightly_command
from watchkeeper.commands.soak import soak_command
from watchkeeper.commands.sweep import sweep_command
from watchkeeper.config import Config
from watchkeeper.config.requests import NightlyRequest, SoakRequest, SweepRequest
from watchkeeper.errors import ConfigError
from watchkeeper.publish.deliverable import RECORD_NAME, read_record
from watchkeeper.publish.served import as_rendered, served_settings
from watchkeeper.publish.set_state import (
    FINISHED,
    SetState,
    StageState,
    load_or_start,
    plan_signature,
    save,
    write_manifest,
)
from watchkeeper.publish.systemd import render_unit, unit_name, write_service
from watchkeeper.sets.served_ladder import (
    DEFAULT_ROUNDS,
    served_ladder_command,
    served_levels,
)

Progress = Callable[[str], None]
Clock = Callable[[], float]
SHARES: tuple[tuple[str, float], ...] = (
    ("sweep", 0.45),
    ("ladder", 0.20),
    ("soak", 0.25),
    ("nightly", 0.10),
    ("reports", 0.0),
    ("check", 0.0),
)
MIN_BLOCK_S = 10.0
"""A soak block shorter than this measures server starts, not load."""


@dataclass(frozen=True, slots=True)
class SetPlan:
    """Everything that makes a set what it is (its signature is kept in the folder)."""

    out: Path
    budget_min: float
    service_file: Path
    root: Path = Path(".")
    family: str | None = None
    target: str | None = None
    draft: str | None = None
    profile: str | None = None
    categories: tuple[str, ...] = ()
    per_category: int | None = None
    identity_per_category: int | None = 1
    taskset: Path | None = None
    max_tokens: int = 64
    sweep_rounds: int | None = None
    max_arms: int | None = None
    ladder_rounds: int = DEFAULT_ROUNDS

    def options(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "root"}


@dataclass(frozen=True, slots=True)
class DeliverSetResult:
    state: SetState
    manifest: Path
    check_lines: tuple[str, ...]

    @property
    def ok(self) -> bool:
        return all(s.status in FINISHED for s in self.state.stages)


def plan_lines(state: SetState) -> list[str]:
    lines = [f"deliver-set: budget {state.budget_min:g} min, stages in order:"]
    for s in state.stages:
        what = "no budget of its own" if not s.budget_s else f"{s.budget_s / 60:.1f} min"
        done = f" [{s.status}: {s.detail}]" if s.status in FINISHED else ""
        lines.append(f"  {s.name}: {what}{done}")
    return lines


def deliver_set_command(
    config: Config,
    plan: SetPlan,
    *,
    command: str,
    progress: Progress,
    clock: Clock = time.monotonic,
) -> DeliverSetResult:
    """Run the stages not yet finished in `plan.out`, in order; stops at a failed stage (its
    error propagates after the state is saved, so a rerun tries it again)."""
    if plan.budget_min <= 0:
        raise ConfigError(f"--budget {plan.budget_min:g}: a set needs some minutes")
    bench = {"reports_dir": str(plan.out)}
    if plan.taskset is not None:
        bench["taskset"] = str(plan.taskset)
    config = config.model_copy(update={"bench": config.bench.model_copy(update=bench)})
    total = plan.budget_min * 60
    shares = dict(SHARES)
    state = load_or_start(
        plan.out,
        command,
        plan_signature(plan.options()),
        plan.budget_min,
        [(n, total * f) for n, f in SHARES],
    )
    for line in plan_lines(state):
        progress(line)
    save(plan.out, state)
    runners: Mapping[str, Callable[[Config, SetPlan, SetState, float, Progress], StageState]]
    runners = {
        "sweep": _sweep,
        "ladder": _ladder,
        "soak": _soak,
        "nightly": _nightly,
        "reports": _reports,
        "check": _check,
    }
    check_lines: tuple[str, ...] = ()
    for stage in state.stages:
        if stage.status in FINISHED:
            continue
        left = [s.name for s in state.stages if s.status not in FINISHED]
        weight = sum(shares[n] for n in left)
        budget = max(0.0, total - state.spent_s) * (shares[stage.name] / weight if weight else 0)
        progress(f"stage {stage.name}: budget {budget / 60:.1f} min")
        started = clock()
        try:
            done = runners[stage.name](config, plan, state, budget, progress)
        except BaseException as exc:
            failed = replace(
                stage, budget_s=budget, status="failed", wall_s=clock() - started, detail=str(exc)
            )
            save(plan.out, state.with_stage(failed))
            raise
        done = replace(done, budget_s=budget, wall_s=clock() - started)
        state = state.with_stage(done)
        save(plan.out, state)
        progress(f"stage {done.name}: {done.status} in {done.wall_s / 60:.1f} min: {done.detail}")
        if done.name == "check":
            check_lines = tuple(done.facts.get("lines", ()))
        if done.status == "failed":
            break
    manifest = write_manifest(plan.out, state)
    return DeliverSetResult(state, manifest, check_lines)


def _record_path(plan: SetPlan) -> Path:
    return plan.out / RECORD_NAME


def _pace(state: SetState) -> float:
    return float(state.stage("sweep").facts.get("pace_s", 0.0))


def _sweep(
    config: Config, plan: SetPlan, state: SetState, budget: float, progress: Progress
) -> StageState:
    extra: dict[str, Any] = {"max_arms": plan.max_arms} if plan.max_arms else {}
    request = SweepRequest.model_validate(
        {
            "family": plan.family, "target": plan.target, "draft": plan.draft,
            "profile": plan.profile, "rounds": plan.sweep_rounds, "taskset": plan.taskset,
            "per_category": plan.per_category, "service_file": plan.service_file,
            "identity_per_category": plan.identity_per_category or 0, "budget": budget / 60,
            "max_tokens": plan.max_tokens, "categories": list(plan.categories) or None, **extra,
        }
    )  # fmt: skip
    result = sweep_command(config, request, progress=progress)
    requests = sum(a.overall.requests for a in result.bench.arm_stats)
    tasks = result.bench.method.tasks
    return StageState(
        "sweep",
        budget,
        "done",
        detail=f"campaign {result.bench.campaign_id}: {result.recommendation.headline}",
        facts={
            "campaign_id": result.bench.campaign_id,
            "pace_s": result.wall_s / max(1, requests),
            "requests": requests,
            "tasks": tasks,
            "pair_probe_s": result.pair_probe_s,
        },
    )


def _ladder(
    config: Config, plan: SetPlan, state: SetState, budget: float, progress: Progress
) -> StageState:
    record = read_record(_record_path(plan))
    if not record.speculates:
        return StageState("ladder", budget, "skipped", detail="the set keeps the baseline")
    slots = served_settings(record.chosen, as_rendered(record, config.service)).slots
    levels = served_levels(slots)
    per_level = max(1, int(state.stage("sweep").facts.get("tasks", 0)))
    price = sum(
        (plan.ladder_rounds + 1) * 2 * max(per_level, 2 * lv) * _pace(state) for lv in levels
    )
    if price > budget:
        return StageState(
            "ladder",
            budget,
            "skipped",
            detail=f"priced at {price / 60:.1f} min at the sweep's pace, over its "
            f"{budget / 60:.1f} min: the unit keeps the sweep's load line (not yet measured "
            "at its slots)",
        )
    done = served_ladder_command(
        config,
        recommendation=_record_path(plan),
        rounds=plan.ladder_rounds,
        taskset=plan.taskset,
        per_category=plan.per_category,
        max_tokens=plan.max_tokens,
        level_min_requests=per_level,
        progress=progress,
    )
    rungs = ", ".join(f"c{c.level} {c.decode_text()}" for c in done.ladder.levels)
    return StageState(
        "ladder",
        budget,
        "done",
        detail=f"{rungs}; pays up to {done.ladder.pays_up_to} of {slots}",
        facts={"campaigns": [c.campaign_id for c in done.ladder.levels]},
    )


def _soak(
    config: Config, plan: SetPlan, state: SetState, budget: float, progress: Progress
) -> StageState:
    record = read_record(_record_path(plan))
    slots = served_settings(record.chosen, as_rendered(record, config.service)).slots
    depths = sorted({1, slots})
    arms = 2 if record.subject is not None else 1
    blocks = arms * len(depths)
    if budget < 2 * blocks * MIN_BLOCK_S:
        return StageState(
            "soak",
            budget,
            "skipped",
            detail=f"{budget:.0f} s is under two {MIN_BLOCK_S:g}-second blocks for each of "
            f"{blocks} arm-depths: stability stays not yet",
        )
    block = max(MIN_BLOCK_S, min(600.0, budget / (2 * blocks)))
    request = SoakRequest(
        duration=f"{int(budget)}s",
        concurrency=depths,
        block=f"{int(block)}s",
        taskset=plan.taskset,
        per_category=plan.per_category,
        recommendation=_record_path(plan),
    )
    result = soak_command(
        config,
        request,
        progress=progress,
        command_line=f"watchkeeper soak --recommendation {_record_path(plan)} --duration "
        f"{int(budget)}s --concurrency {','.join(map(str, depths))} --block {int(block)}s",
    )
    return StageState(
        "soak",
        budget,
        "done" if result.status == "completed" else "failed",
        detail=f"campaign {result.campaign_id} {result.status} at depths "
        f"{','.join(map(str, depths))}: {result.verdict.headline}",
        facts={"campaign_id": result.campaign_id},
    )


@dataclass(frozen=True, slots=True)
class NightlyPrice:
    """The nightly's first A/A pair: its rounds at the sweep's pace, then its identity pass."""

    requests: int
    rounds_s: float
    probes: int
    probes_s: float
    """The exact identity pass: every measured task probed on both servers at ubatch 1, the
    floor and the replays (`pair_probe_s` a probe, from the sweep); 0: not priced."""

    @property
    def seconds(self) -> float:
        return self.rounds_s + self.probes_s

    @property
    def text(self) -> str:
        rounds = f"{self.requests} requests at the sweep's pace"
        if not self.probes_s:
            return f"{self.seconds / 60:.1f} min ({rounds})"
        return (
            f"{self.seconds / 60:.1f} min ({rounds}, {self.rounds_s / 60:.1f} min, and "
            f"{self.probes} exact identity probes on both servers, {self.probes_s / 60:.1f} min)"
        )


def nightly_price(config: Config, sweep: Mapping[str, Any], categories: int) -> NightlyPrice:
    """The nightly's rounds at the sweep's seconds a request (`sweep`: its stage's facts)
    and, in the exact identity mode, its probes: the nightly probes every task it measures
    (campaign/night.py sets no `identity_tasks`), each on the reference's server and
    tonight's, priced at the sweep's `pair_probe_s` (campaign/round_price.py). The batched
    mode's probes are not priced."""
    n = config.nightly
    tasks = n.per_category * max(1, categories)
    requests = n.rounds * 2 * tasks
    rounds_s = requests * float(sweep.get("pace_s", 0.0))
    exact = config.bench.identity_mode == "exact"
    probes_s = tasks * float(sweep.get("pair_probe_s", 0.0)) if exact else 0.0
    return NightlyPrice(requests, rounds_s, tasks, probes_s)


def _nightly(
    config: Config, plan: SetPlan, state: SetState, budget: float, progress: Progress
) -> StageState:
    record = read_record(_record_path(plan))
    cats = len(record.workload.categories) if record.workload else 1
    price = nightly_price(config, state.stage("sweep").facts, cats)
    if price.seconds > budget:
        return StageState(
            "nightly",
            budget,
            "skipped",
            detail=f"its first A/A pair priced at {price.text}, over its {budget / 60:.1f} "
            "min: no A/A night yet",
        )
    request = NightlyRequest(recommendation=_record_path(plan))
    outcome = nightly_command(config, request, progress=progress)
    nights = ", ".join(
        f"campaign {n.campaign_id} ({'A/A' if n.aa else 'paired'}): "
        + "; ".join(f"{r.category} {r.estimate:.3f} {r.verdict}" for r in n.ratios)
        for n in outcome.nights
    )
    return StageState(
        "nightly",
        budget,
        "done",
        detail=nights,
        facts={"campaigns": [n.campaign_id for n in outcome.nights]},
    )


def _reports(
    config: Config, plan: SetPlan, state: SetState, budget: float, progress: Progress
) -> StageState:
    """The unit rendered from the record as it ends (the ladder's claim, the served settings),
    and the set's own page."""
    record = read_record(_record_path(plan))
    name = unit_name(record)
    write_service(plan.service_file, render_unit(record, config.service, filename=name))
    path = write_manifest(plan.out, state)
    progress(f"unit {plan.service_file}; set page {path}")
    return StageState("reports", budget, "done", detail=f"{plan.service_file}, {path.name}")


def _check(
    config: Config, plan: SetPlan, state: SetState, budget: float, progress: Progress
) -> StageState:
    del config, state
    result = check_set_command(plan.root, [plan.out])
    lines = result.lines()
    for line in lines:
        progress(line)
    return StageState(
        "check",
        budget,
        "done" if result.ok else "failed",
        detail=lines[-1],
        facts={"lines": lines},
    )
