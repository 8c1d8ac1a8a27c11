"""The sweep's engine: which arms it races (the candidate set for the installed build) and the
bench plan it races them on.

Split from `commands/sweep.py`, which composes these with the bench, the recommendation, the
report and the unit: the candidate set and the plan are what a sweep *is*, and a job that
wants the same arms (a nightly guarding a sweep's pick, a soak of its arms) reads them here.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from watchkeeper.analysis.racing_types import RaceArm, RaceSettings, RaceState
from watchkeeper.campaign.bench_plan import BenchPlan, plan_bench
from watchkeeper.campaign.budget_trim import plan_active
from watchkeeper.campaign.load_shape import shape_plan
from watchkeeper.campaign.racer import Racer, probe_share
from watchkeeper.campaign.sweep_arms import DEFAULT_MAX_ARMS, ArmPlan, plan_arms
from watchkeeper.config import Config, ModelConfig, ProfileConfig
from watchkeeper.errors import ConfigError
from watchkeeper.load.sampling import SamplingSettings
from watchkeeper.load.shape import LoadShape
from watchkeeper.load.tasks import cap_tokens, select
from watchkeeper.server.flags import LEARNS_ACROSS_REQUESTS, SPELLINGS, HelpInfo, read_help
from watchkeeper.server.install import ensure_binary, resolve_binary
from watchkeeper.server.models import CATALOG, ModelStore
from watchkeeper.server.profiles import QWEN_DRAFT, QWEN_TARGET, SMOLLM2, get_profile
from watchkeeper.server.spec_discovery import ModelFacts, discover, model_facts
from watchkeeper.server.spec_knobs import spec_knobs
from watchkeeper.store.racing_store import RaceArmRecord

Progress = Callable[[str], None]
Clock = Callable[[], float]
FAMILIES = {"qwen": (QWEN_TARGET, QWEN_DRAFT), "smollm2": (SMOLLM2, SMOLLM2)}


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
    every n-gram type of the build, at their defaults (tier 1 of `campaign/sweep_arms.py`,
    without the models' metadata). Every other setting of the baseline is kept."""
    target = ModelFacts(c.baseline.model)
    drafter = ModelFacts(c.draft) if c.draft else None
    methods = discover(spec_types, target, drafter)
    plan = plan_arms(c.prefix, c.baseline, c.draft, methods, {}, max_arms=10**6, tiers=1)
    return plan.profiles


def arm_plan(
    config: Config,
    c: Candidates,
    info: HelpInfo,
    *,
    max_arms: int = DEFAULT_MAX_ARMS,
    fetch: bool = True,
    progress: Progress,
) -> ArmPlan:
    """Every method of the build in or out for this pair (its models' GGUF metadata read,
    fetched first unless `fetch` is off: a dry run reads only what is already here), and the
    arms raced."""
    store = ModelStore(config, progress=progress)

    def facts(name: str) -> ModelFacts:
        path = store.ensure(name).path if fetch else store.path_for(name)
        return model_facts(path, name)

    drafter = facts(c.draft) if c.draft else None
    methods = discover(info.spec_types, facts(c.baseline.model), drafter)
    return plan_arms(
        c.prefix,
        c.baseline,
        c.draft,
        methods,
        spec_knobs(info.descriptions),
        max_arms=max_arms,
        control=True,
    )


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


def sweep_racer(
    config: Config,
    generated: Mapping[str, ProfileConfig],
    arms: Sequence[RaceArm],
    settings: RaceSettings,
    *,
    budget_min: float,
    clock: Clock,
    progress: Progress,
    served_identity: bool = False,
    trim: Sequence[str] = (),
) -> Racer:
    """The racer over the generated arms, in a budget of seconds, told each draft profile's
    draft length (the ceiling rule drops a draft no acceptance can make pay before round 1;
    not a chain's, whose n-gram part drafts without the model), and which arms keep their
    process and prompt cache from round to round (`kept_arms`: the plan prices their later
    rounds without prefill)."""
    drafts = {
        n: p.draft_n_max
        for n in generated
        if (p := config.profiles[n]).draft_model
        and p.draft_n_max
        and "," not in (p.spec_type or "")  # a chain's n-gram steps escape the draft's bound
    }
    return Racer(
        arms,
        settings,
        budget_s=budget_min * 60.0,
        clock=clock,
        progress=progress,
        draft_lengths=drafts,
        probe_share=probe_share(config.bench.identity_mode),
        served=served_identity and config.bench.identity_mode == "exact",
        kept=kept_arms(config, generated),
        trim=trim,
    )


def sweep_candidates(
    config: Config,
    *,
    family: str | None,
    target: str | None,
    draft: str | None,
    profile: str | None,
    progress: Progress,
    max_arms: int = DEFAULT_MAX_ARMS,
) -> tuple[Config, dict[str, ProfileConfig], tuple[str, ...]]:
    """The config with the candidate profiles added (a user's own profile of the same name
    wins, as everywhere else), the candidates: every method the installed build and the
    pair's models can run (campaign/sweep_arms.py), the plan printed first, and those the
    racer may drop before round 1 to fit its budget (`ArmPlan.trim_order`)."""
    config, plan = sweep_arm_plan(
        config,
        family=family,
        target=target,
        draft=draft,
        profile=profile,
        progress=progress,
        max_arms=max_arms,
    )
    for line in plan.lines():
        progress(f"plan: {line}")
    generated = plan.profiles
    merged = config.model_copy(update={"profiles": {**generated, **config.profiles}})
    return merged, generated, plan.trim_order


def sweep_arm_plan(
    config: Config,
    *,
    family: str | None,
    target: str | None,
    draft: str | None,
    profile: str | None,
    progress: Progress,
    max_arms: int = DEFAULT_MAX_ARMS,
    fetch: bool = True,
) -> tuple[Config, ArmPlan]:
    """The sweep's plan (`sweep --dry-run` prints it with `fetch` off: nothing downloaded)."""
    config, source = resolve_candidates(
        config, family=family, target=target, draft=draft, profile=profile
    )
    if fetch:
        binary = ensure_binary(config.server, progress=progress)
    elif (found := resolve_binary(config.server)) is not None:
        binary = found
    else:  # a dry run reads the build's --help, and builds nothing (7-14 minutes here)
        raise ConfigError(
            f"no llama-server {config.server.llama_cpp_version} is built yet: the plan reads "
            "its --help",
            hint="build it first with `watchkeeper setup`, or set server.binary",
        )
    info = read_help(binary, config.server.resolved_cache_dir())
    plan = arm_plan(config, source, info, max_arms=max_arms, fetch=fetch, progress=progress)
    return config, plan


def sweep_plan(
    config: Config,
    generated: Mapping[str, ProfileConfig],
    racer: Racer | None,
    *,
    rounds: int,
    taskset: Path | None,
    per_category: int | None,
    max_tokens: int,
    concurrency: int | None = None,
    load: LoadShape | None = None,
    identity_per_category: int | None = None,
    categories: Sequence[str] | None = None,
    served_identity: bool = False,
    sampling: SamplingSettings | None = None,
) -> BenchPlan:
    """The bench's plan with the sweep's changes: answers capped, the racer's hooks, the
    identity pass on the first `identity_per_category` tasks of each category (as served on
    the round's servers, then exact: `checks.served_identity`), and when
    raced one process per arm for the whole sweep, reusing its prompt cache: on two CPU cores
    prefill costs as much as the decode a round measures (docs/sweep.md). `sampling`: the
    sweep's sampler, resolved from its request (None: the config's [bench] keys)."""
    race = racer is not None
    plan = shape_plan(
        replace(
            plan_bench(
                config,
                profiles=list(generated),
                rounds=rounds,
                taskset=taskset,
                limit=None,
                per_category=per_category,
                concurrency=concurrency,
                categories=categories,
            ),
            sampling=sampling,
        ),
        config,
        load,
    )
    tasks = tuple(cap_tokens(plan.tasks, max_tokens))
    probed = (
        tuple(select(tasks, per_category=identity_per_category))
        if identity_per_category is not None
        else tasks
    )
    return replace(
        plan,
        tasks=tasks,
        identity_tasks=probed if len(probed) < len(tasks) else None,
        race=racer,
        ceiling=racer.ceiling if racer is not None else None,
        before_rounds=(
            lambda runs: plan_active(
                racer, runs, len(tasks), [(t.id, t.category) for t in tasks], tasks
            )
        )
        if racer is not None
        else None,
        sample=racer.sampled if racer is not None else None,
        restart_every=0 if race else plan.restart_every,
        renew_each_round=renewed_arms(config, generated) if race else frozenset(),
        reuse_prompts=race,
        served_identity=served_identity,
        served_gate=(lambda: racer.served_skipped) if racer is not None else None,
    )


def renewed_arms(config: Config, generated: Mapping[str, ProfileConfig]) -> frozenset[str]:
    """The raced arms given a fresh process before every round after the first (the bench's
    `renew_each_round`): spec types that learn across requests would otherwise draft round 2
    from round 1's answers. Every other raced arm keeps one process for the whole sweep."""
    return frozenset(
        n
        for n in generated
        if LEARNS_ACROSS_REQUESTS & set((config.profiles[n].spec_type or "").split(","))
    )


def kept_arms(config: Config, generated: Mapping[str, ProfileConfig]) -> frozenset[str]:
    """The raced arms that keep one process, and its prompt cache, for the whole race
    (`sweep_plan` races with `restart_every = 0` and `reuse_prompts`): every arm but those
    renewed each round and those whose profile turns the host prompt cache off
    (`--cache-ram 0`; the build's default keeps 8 GiB)."""
    renewed = renewed_arms(config, generated)
    return frozenset(
        n for n in generated if n not in renewed and not _cache_off(config.profiles[n].extra_args)
    )


def _cache_off(extra_args: Sequence[str]) -> bool:
    """The profile's own `--cache-ram 0` (or `-cram 0`, `--cache-ram=0`)."""
    spellings = SPELLINGS["cache_ram"]
    for i, arg in enumerate(extra_args):
        flag, eq, value = arg.partition("=")
        if flag in spellings:
            given = value if eq else (extra_args[i + 1] if i + 1 < len(extra_args) else "")
            if given.strip() == "0":
                return True
    return False


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
