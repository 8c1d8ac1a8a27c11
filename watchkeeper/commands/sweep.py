"""`watchkeeper sweep`: spec types x draft lengths on the paired design, raced, then a
recommendation per category and for the whole workload, and a service file that runs it.

The candidate list comes from the installed build: draft-simple at n_max 4, 8 and 16 (where a
draft model is given) and every n-gram spec type its `--help` lists; its models come from a
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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from watchkeeper.analysis.bench_bound import perfect_acceptance_bound
from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.racing import ceiling_drops, keep_going, race_round, start
from watchkeeper.analysis.racing_types import (
    Ceiling,
    Cell,
    RaceArm,
    RaceSettings,
    RaceState,
    Table,
    arm_cost,
)
from watchkeeper.analysis.recommend import Recommendation, recommend
from watchkeeper.commands.bench import execute_bench
from watchkeeper.commands.bench_plan import plan_bench
from watchkeeper.commands.bench_report import finish_with_report
from watchkeeper.commands.calibration import Calibration
from watchkeeper.config import Config, ModelConfig, ProfileConfig
from watchkeeper.errors import ConfigError
from watchkeeper.load.records import RunResult
from watchkeeper.load.tasks import cap_tokens
from watchkeeper.publish.sweep_report import SweepView, render_sweep_sections, soak_command
from watchkeeper.publish.systemd import current_user, render_service, write_service
from watchkeeper.server.flags import LEARNS_ACROSS_REQUESTS, read_help
from watchkeeper.server.install import ensure_binary
from watchkeeper.server.models import CATALOG
from watchkeeper.server.profiles import QWEN_DRAFT, QWEN_TARGET, SMOLLM2, get_profile
from watchkeeper.store.db import Database, open_database
from watchkeeper.store.racing_store import RaceArmRecord, RacingStore

Progress = Callable[[str], None]
Clock = Callable[[], float]
DRAFT_LENGTHS = (4, 8, 16)
FAMILIES = {"qwen": (QWEN_TARGET, QWEN_DRAFT), "smollm2": (SMOLLM2, SMOLLM2)}
SPECULATIVE_REPORT = "speculative_benchmark.md"
DEFAULT_BUDGET_MIN = 40.0
DEFAULT_MAX_ROUNDS = 5
DEFAULT_MAX_TOKENS = 64
"""Each answer is cut at this many tokens (the nightly's cap; 0 keeps the task set's own,
96-192, mean 139): the sweep ranks settings by decode speed, which the first tokens show, and
the full lengths more than double each round's decode time. It does not shorten prompt
processing, which on two CPU cores costs as much (the 2026-11-25 Qwen sweep: 20.7 minutes a
round of nine arms at 64 tokens; docs/sweep.md). What the cap leaves out: n-gram drafting
that only pays late in a long, repetitive answer."""
PROBE_SHARE = 1.2
"""The identity probes after the last round cost about one uncached round (round 1) of the
arms they probe (same tasks, logprobs on, every prompt prefilled) plus the replays: reserved
from the budget before every further round."""


@dataclass(frozen=True, slots=True)
class SweepResult:
    bench: BenchResult
    recommendation: Recommendation
    service_path: Path
    race: RaceState | None = None
    stop_reason: str = ""
    wall_s: float = 0.0

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
            }
        return {
            "bench": self.bench.to_json(),
            "recommendation": asdict(self.recommendation),
            "headline": self.recommendation.headline,
            "service_path": str(self.service_path),
            "race": race,
            "wall_s": round(self.wall_s, 1),
        }


@dataclass(frozen=True, slots=True)
class Candidates:
    """Where the sweep's arms come from: a name prefix, a baseline profile and a draft."""

    prefix: str
    baseline: ProfileConfig
    draft: str | None


def sweep_profiles(family: str, spec_types: tuple[str, ...]) -> dict[str, ProfileConfig]:
    """Baseline first, then draft-simple lengths, then the build's n-gram types."""
    if family not in FAMILIES:
        raise ConfigError(f"unknown sweep family {family!r}; known: {', '.join(FAMILIES)}")
    target, draft = FAMILIES[family]
    return candidate_profiles(Candidates(family, ProfileConfig(model=target), draft), spec_types)


def candidate_profiles(c: Candidates, spec_types: tuple[str, ...]) -> dict[str, ProfileConfig]:
    """The baseline (no speculation), draft-simple at each length where there is a draft, and
    every n-gram type of the build. Every other setting of the baseline is kept."""
    plain = c.baseline.model_copy(
        update={"draft_model": None, "spec_type": None, "draft_n_max": None, "description": ""}
    )
    profiles = {f"{c.prefix}-baseline": plain}
    if c.draft and "draft-simple" in spec_types:
        for n in DRAFT_LENGTHS:
            profiles[f"{c.prefix}-sweep-draft{n}"] = plain.model_copy(
                update={"draft_model": c.draft, "spec_type": "draft-simple", "draft_n_max": n}
            )
    for spec in spec_types:
        if spec.startswith("ngram"):
            profiles[f"{c.prefix}-sweep-{spec}"] = plain.model_copy(update={"spec_type": spec})
    return profiles


def _model_ref(config: Config, ref: str) -> tuple[Config, str]:
    """A catalog or configured model name as it is; a GGUF path becomes a user model named
    after its file (the file is hashed when the sweep prepares it)."""
    if ref in config.models or ref in CATALOG:
        return config, ref
    path = Path(ref).expanduser()
    if path.suffix != ".gguf" and not path.is_file():
        known = ", ".join(sorted({*CATALOG, *config.models}))
        raise ConfigError(f"unknown model {ref!r}: neither a catalog name ({known}) nor a .gguf")
    name = path.stem
    models = {**config.models, name: ModelConfig(path=str(path.resolve()))}
    return config.model_copy(update={"models": models}), name


def resolve_candidates(
    config: Config,
    *,
    family: str | None,
    target: str | None,
    draft: str | None,
    profile: str | None,
) -> tuple[Config, Candidates]:
    """One of --family, --target [--draft], --profile; the config gains any user model."""
    chosen = [x for x in (family, target, profile) if x]
    if len(chosen) > 1:
        raise ConfigError("sweep takes one of --family, --target (with --draft) or --profile")
    if draft and not target:
        raise ConfigError("--draft needs --target (the model it drafts for)")
    if target:
        config, target_name = _model_ref(config, target)
        draft_name = None
        if draft:
            config, draft_name = _model_ref(config, draft)
        # A file's quantisation suffix (".Q4_K_M") is not part of a readable arm name.
        prefix = target_name if target_name == target else target_name.split(".")[0]
        return config, Candidates(prefix, ProfileConfig(model=target_name), draft_name)
    if profile:
        base = get_profile(config, profile)
        return config, Candidates(profile, base, base.draft_model)
    name = family or "qwen"
    if name not in FAMILIES:
        raise ConfigError(f"unknown sweep family {name!r}; known: {', '.join(FAMILIES)}")
    t, d = FAMILIES[name]
    return config, Candidates(name, ProfileConfig(model=t), d)


def race_arms(profiles: dict[str, ProfileConfig]) -> list[RaceArm]:
    """The first profile is the baseline; costs order ties (baseline, n-gram, drafts by n)."""
    return [
        RaceArm(n, arm_cost(p.spec_type, p.draft_n_max, p.speculative), baseline=(i == 0))
        for i, (n, p) in enumerate(profiles.items())
    ]


def cells_of(runs: Sequence[RunResult]) -> list[Cell]:
    """Measured, clean requests as racing cells (server-reported decode tok/s)."""
    return [
        Cell(r.arm, s.task_id, s.category, r.round, s.decode_tps_server)
        for r in runs
        if not r.is_warmup
        for s in r.samples
        if s.ok and s.decode_tps_server
    ]


def _round_seconds(
    runs: Sequence[RunResult], arms: Sequence[str], round_index: int | None = None
) -> float:
    """What a round (default: the last) cost `arms`: the sum of their requests' latencies."""
    if not runs:
        return 0.0
    which = round_index if round_index is not None else max(r.round for r in runs)
    return sum(
        s.latency_s or 0.0 for r in runs if r.round == which and r.arm in arms for s in r.samples
    )


class Racer:
    """The bench's per-round hook: feeds the measured runs to the racing rule, reports drops,
    and says whether another round fits the budget."""

    def __init__(
        self,
        arms: Sequence[RaceArm],
        settings: RaceSettings,
        *,
        budget_s: float,
        clock: Clock,
        progress: Progress,
        draft_lengths: Mapping[str, int] | None = None,
    ) -> None:
        self.arms = list(arms)
        self.draft_lengths = dict(draft_lengths or {})
        """Draft-model arms and their n_max: the ones the ceiling rule can price."""
        self.settings = settings
        self.budget_s = budget_s
        self.clock = clock
        self.started = clock()
        self.progress = progress
        self.state = start(arms)
        self.stop_reason = ""

    def __call__(self, runs: Sequence[RunResult]) -> tuple[Sequence[str], bool]:
        before = len(self.state.drops)
        self.state = race_round(Table(cells_of(runs)), self.arms, self.state, self.settings)
        for d in self.state.drops[before:]:
            self.progress(f"race: dropped {d.arm} after round {d.round} ({d.rule}): {d.reason}")
        nxt = _round_seconds(runs, self.state.active)
        probed = self.probe_arms(runs)
        go, why = keep_going(
            self.state,
            self.settings,
            elapsed_s=self.clock() - self.started,
            budget_s=self.budget_s,
            next_round_s=nxt,
            # Probes prefill every prompt afresh (no prompt cache): priced at round 1's cost.
            reserve_s=PROBE_SHARE * _round_seconds(runs, probed, 1),
        )
        if not go:
            self.stop_reason = why
            self.progress(
                f"race: stop after round {self.state.rounds}: {why}; identity probes for "
                + ", ".join(probed)
            )
            return probed, False
        return self.state.active, go

    def ceiling(self, costs: Calibration) -> Sequence[str]:
        """Before round 1: drop the draft settings whose speed-up at perfect acceptance, at the
        costs just calibrated, cannot tie the baseline (analysis/racing.ceiling_drops)."""
        found = [c for arm, n in self.draft_lengths.items() if (c := arm_ceiling(arm, n, costs))]
        for c in found:
            self.progress(f"race: {c.arm} at perfect acceptance: {c.bound:.2f}x ({c.how})")
        before = len(self.state.drops)
        self.state = ceiling_drops(self.state, found, self.settings)
        for d in self.state.drops[before:]:
            self.progress(f"race: dropped {d.arm} before round 1 ({d.rule}): {d.reason}")
        return self.state.active

    def probe_arms(self, runs: Sequence[RunResult]) -> list[str]:
        """The arms whose identity the report needs: the baseline, every category's pick
        (decided or provisional) and the fastest surviving speculative arm overall (the seed's
        criteria are checked on it when the baseline is recommended). Probing every survivor
        would cost about another round."""
        base = self.arms[0].name
        table = Table(cells_of(runs))
        picks = {d.pick for d in self.state.decisions}
        others = [a for a in self.state.active if a != base]
        if others:
            ests = {
                a: (ci.estimate if (ci := table.ratio(a, base, None, self.settings, 0.95)) else 0.0)
                for a in others
            }
            picks.add(max(others, key=lambda a: ests[a]))
        return [a for a in self.state.active if a == base or a in picks]


def arm_ceiling(arm: str, draft_length: int, costs: Calibration) -> Ceiling | None:
    """The arm's bound at perfect acceptance, where both its costs were measured."""
    draft = costs.draft_cost(arm)
    verify = costs.verify_cost(arm)
    if draft.ratio is None or draft.ratio <= 0 or verify.cost is None:
        return None
    bound = perfect_acceptance_bound(draft_length, draft.ratio, verify.tokens, verify.cost)
    how = (
        f"n {draft_length}: ({draft_length} + 1) / ({draft_length} x draft {draft.ratio:.2f} "
        f"+ verify {bound.verify_cost:.2f}) target steps"
    )
    return Ceiling(arm, bound.predicted_speedup, how)


def sweep_command(
    config: Config,
    *,
    family: str | None = None,
    target: str | None = None,
    draft: str | None = None,
    profile: str | None = None,
    rounds: int | None,
    taskset: Path | None,
    per_category: int | None,
    service_path: Path,
    progress: Progress,
    budget_min: float = DEFAULT_BUDGET_MIN,
    race: bool = True,
    max_tokens: int = DEFAULT_MAX_TOKENS,
    clock: Clock = time.monotonic,
    database: Database | None = None,
) -> SweepResult:
    """`rounds`: with racing, the most rounds it may run (default 5); without, every arm
    runs exactly that many (default bench.rounds). ``max_tokens``: cap on every answer (0: the
    tasks' own). ``database``: the caller's, else one opened for the sweep."""
    started = clock()
    config, source = resolve_candidates(
        config, family=family, target=target, draft=draft, profile=profile
    )
    binary = ensure_binary(config.server, progress=progress)
    info = read_help(binary, config.server.resolved_cache_dir())
    generated = candidate_profiles(source, info.spec_types)
    # User profiles of the same name win, as everywhere else.
    config = config.model_copy(update={"profiles": {**generated, **config.profiles}})
    max_rounds = rounds or (DEFAULT_MAX_ROUNDS if race else config.bench.rounds)
    settings = RaceSettings(
        min_effect=config.bench.min_effect, max_rounds=max_rounds, seed=config.bench.seed
    )
    arms = race_arms({n: config.profiles[n] for n in generated})
    drafts = {
        n: p.draft_n_max
        for n in generated
        if (p := config.profiles[n]).draft_model and p.draft_n_max
    }
    racer = (
        Racer(
            arms,
            settings,
            budget_s=budget_min * 60.0,
            clock=clock,
            progress=progress,
            draft_lengths=drafts,
        )
        if race
        else None
    )
    plan = plan_bench(
        config,
        profiles=list(generated),
        rounds=max_rounds,
        taskset=taskset,
        limit=None,
        per_category=per_category,
        concurrency=None,
    )
    plan = replace(
        plan,
        tasks=tuple(cap_tokens(plan.tasks, max_tokens)),
        race=racer,
        ceiling=racer.ceiling if racer is not None else None,
        # One process per arm for the whole sweep, reusing its prompt cache: on two CPU cores
        # prefill costs as much as the decode a round measures (docs/sweep.md).
        restart_every=0 if race else plan.restart_every,
        renew_each_round=frozenset(
            n for n in generated if config.profiles[n].spec_type in LEARNS_ACROSS_REQUESTS
        )
        if race
        else frozenset(),
        reuse_prompts=race,
    )
    progress(
        f"sweep: {len(plan.profiles)} profiles x {len(plan.tasks)} tasks, "
        + (
            f"raced: at most {plan.rounds} rounds within {budget_min:g} min"
            if race
            else f"{plan.rounds} rounds, every arm"
        )
    )
    with open_database(config.database.resolved_url(), given=database) as db:
        result = execute_bench(config, plan, kind="sweep", progress=progress, database=db)
        rec = recommend(result)
        reports = config.bench.resolved_reports_dir()
        state = racer.state if racer is not None else None
        chosen = rec.overall.profile or result.baseline.name
        store = RacingStore(db)
        if state is not None:
            store.save_race(result.campaign_id, race_records(state, arms))
        soak = store.latest_soak(result.host.fingerprint, chosen)
        final_report = Path(result.report_path or reports / SPECULATIVE_REPORT)
        view = SweepView(
            result=result,
            recommendation=rec,
            arms=tuple(arms),
            settings=settings,
            race=state,
            stop_reason=racer.stop_reason if racer is not None else "every arm ran every round",
            budget_min=budget_min if race else None,
            wall_s=clock() - started,
            chosen=chosen,
            chosen_profile=config.profiles.get(chosen),
            soak=soak,
            soak_command=soak_command(chosen),
            service_path=service_path,
            max_tokens=max_tokens,
        )
        result = finish_with_report(
            config,
            result,
            progress=progress,
            recommendation=rec,
            extra_copy=reports / SPECULATIVE_REPORT,
            sections=render_sweep_sections(view),
            database=db,
        )
        final_report = Path(result.report_path or final_report)
        arm = next(a for a in result.arms if a.name == chosen)
        text = render_service(
            arm,
            headline=f"Recommendation: {rec.headline}",
            campaign_id=result.campaign_id,
            report=final_report,
            filename=service_path.name,
            user=current_user(),
            gpu=bool(result.host.gpu),
        )
        write_service(service_path, text)
        progress(f"service file: {service_path} (profile {chosen})")
        wall_s = clock() - started
        return SweepResult(result, rec, service_path, state, view.stop_reason, wall_s=wall_s)


def race_records(state: RaceState, arms: Sequence[RaceArm]) -> list[RaceArmRecord]:
    dropped = {d.arm: d for d in state.drops}
    out = []
    for a in arms:
        d = dropped.get(a.name)
        rounds = state.rounds_by_arm.get(a.name, 0)
        if d is None:
            out.append(RaceArmRecord(a.name, "survived", rounds))
        else:
            out.append(RaceArmRecord(a.name, "dropped", rounds, d.round, d.rule, d.reason, d.error))
    return out
