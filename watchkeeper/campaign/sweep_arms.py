"""The sweep's arm list: every method the pair can run (server/spec_discovery.py) at the knob
values worth racing, each with the reason it is there, in priority order under an arm cap.

Tiers, in the order the cap keeps them:
0. the baseline (`--spec-type none`) and, in a race, its A/A control: a second server with the
   baseline's settings, never picked, whose speed-up must read no change
   (analysis/aa_control.py);
1. each method at the values the requests name: draft-simple at n_max 4/8/16, draft-mtp at
   1/2/3 (public numbers: depth 1 beat depth 3), an EAGLE-3/DFlash/DSpark drafter at the build's
   default length, every n-gram type at the build's defaults;
2. chains: the n-gram type with each model drafter (draft-simple, -mtp, -eagle3, -dflash,
   -dspark) at its most promising length (each step the n-gram part wins where it has a draft,
   the model drafts the rest: common/speculative.cpp);
3. knobs: p-min 0.5/0.9 for every model drafter, n-gram lookup sizes where the defaults are
   known to starve (each only where it differs from the build's default). A p-min arm the
   build would ignore or refuse (a DSpark drafter without a confidence head; a build without
   `--spec-draft-p-min`) is listed out, with the reason (server/spec_discovery.py).
Priorities and values are priors, not results: the race (analysis/racing.py) decides, and
drops losers after their first rounds, so an extra arm costs its share of the early rounds
only. The cap (`--max-arms`) bounds that share: every arm of round 1 costs ~1/9 of the
default Qwen round. On two CPU cores the ceiling rule drops the draft-model arms before round
1, so round 1 there measures the baseline, the n-gram arms and the chain (the figures:
docs/measurements.md#figures-behind-the-code).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from watchkeeper.analysis import aa_control
from watchkeeper.config import ProfileConfig
from watchkeeper.server.spec_discovery import Method
from watchkeeper.server.spec_knobs import SpecKnob

DRAFT_LENGTHS = (4, 8, 16)
MTP_DEPTHS = (1, 2, 3)
P_MIN_VALUES = (0.5, 0.9)
"""p-min only shortens drafts (a draft stops where the drafter's top probability falls below
it): 0.5 stops at real doubt, 0.9 at the first; 11434's default, 0.00, never stops one."""
CHAIN_NGRAM = "ngram-mod"
"""The n-gram part of a chain: the type upstream's `--spec-default` turns on, and the one the
public chain figures (+15-24% on copy edits over MTP) used."""
TRAINED = ("draft-eagle3", "draft-dflash", "draft-dspark")
"""The drafters trained against their target: raced at the build's default length (their
training fixed the block they draft; DFlash/DSpark clamp n_max to it, common/speculative.cpp)."""
CHAIN_LENGTHS: dict[str, int | None] = {
    "draft-simple": 4,
    "draft-mtp": 1,
    **dict.fromkeys(TRAINED),
}
"""The model part's length in a chain: the shortest, since the n-gram part covers the long
copied runs (draft-simple n 4 was also the least-bad length on this host, DESIGN.md); a trained
drafter at the build's default (None), as in its tier-1 arm."""
P_MIN_LENGTHS: dict[str, int | None] = {"draft-simple": 8, "draft-mtp": 3, **dict.fromkeys(TRAINED)}
"""The length of each model drafter's p-min arms: that of one of its tier-1 arms, so the two
differ in p-min only (the longer lengths, where a cut draft saves most)."""
P_MIN_WHY = {
    "draft-dspark": "p-min cuts a DSpark draft where its confidence head predicts a rejection "
    "(11434 reads that head, not the top probability)",
}
NGRAM_SIZES = (
    ("ngram-map-k", "spec-ngram-map-k-size-n", 4,
     "a 12-token lookup rarely repeats in a short answer: map-k drafted nothing at its defaults "
     "in the 2026-11-27 sweeps (dropped as idle)"),
    ("ngram-map-k4v", "spec-ngram-map-k4v-size-n", 4,
     "the same for map-k4v (idle at its defaults in the 2026-11-27 sweeps)"),
    ("ngram-mod", "spec-ngram-mod-n-match", 12,
     "half the default lookup: more matches, shorter drafts"),
)  # fmt: skip
"""The n-gram sizes raced where the defaults are known to starve a type; an arm is made only
where its value differs from the build's default (read from --help)."""
DEFAULT_MAX_ARMS = 16


@dataclass(frozen=True, slots=True)
class PlannedArm:
    name: str
    profile: ProfileConfig
    tier: int
    why: str
    included: bool = True
    left_out: str = ""


TRIM_TIER = 3
"""Arms of this tier and above are the budget's to drop before round 1 (`ArmPlan.trim_order`)."""


@dataclass(frozen=True, slots=True)
class ArmPlan:
    methods: tuple[Method, ...]
    arms: tuple[PlannedArm, ...]

    @property
    def profiles(self) -> dict[str, ProfileConfig]:
        return {a.name: a.profile for a in self.arms if a.included}

    @property
    def trim_order(self) -> tuple[str, ...]:
        """The arms the racer may drop before round 1 where one round of every arm cannot fit
        the budget, in the order it drops them: the tier-3 knob settings, last planned first.
        Each tunes a method raced at its default anyway, so the request's own lengths, every
        method and the chain stay; the default Qwen sweep on two cores priced a round of its
        16 arms past its 40 minutes (7 Dec: 43 min with 15 arms, the plan 5.9 min over)."""
        return tuple(a.name for a in reversed(self.arms) if a.included and a.tier >= TRIM_TIER)

    def lines(self) -> list[str]:
        """The plan as the sweep prints it (and `--dry-run` shows)."""
        out = ["methods of this build for this pair:"]
        out += [f"  {'in ' if m.runs else 'out'} {m.spec_type}: {m.why}" for m in self.methods]
        kept = [a for a in self.arms if a.included]
        out.append(f"arms: {len(kept)} raced of {len(self.arms)} planned")
        for a in self.arms:
            mark = "race" if a.included else "skip"
            tail = f" [left out: {a.left_out}]" if a.left_out else ""
            out.append(f"  {mark} {a.name} (tier {a.tier}): {a.why}{tail}")
        return out


def _default(knobs: Mapping[str, SpecKnob], flag: str) -> str:
    knob = knobs.get(flag)
    return knob.default if knob is not None and knob.default is not None else "?"


def plan_arms(
    prefix: str,
    baseline: ProfileConfig,
    draft: str | None,
    methods: Sequence[Method],
    knobs: Mapping[str, SpecKnob],
    *,
    max_arms: int = DEFAULT_MAX_ARMS,
    tiers: int = 3,
    control: bool = False,
) -> ArmPlan:
    """Every arm worth racing for these methods, tier by tier, the cap applied last;
    ``control``: the A/A control right after the baseline (the sweep's race)."""
    plain = baseline.model_copy(
        update={
            "draft_model": None,
            "spec_type": None,
            "draft_n_max": None,
            "draft_n_min": None,
            "draft_p_min": None,
            "spec_knobs": None,
            "description": "",
        }
    )
    runs = {m.spec_type: m for m in methods if m.runs}
    b = _Builder(prefix, plain, draft, runs)
    if control:
        name = aa_control.control_name(b.arms[0].name)
        b.arms.append(PlannedArm(name, plain, 0, aa_control.WHY))
    _method_arms(b, knobs)
    if tiers >= 2 and CHAIN_NGRAM in runs:
        _chain_arms(b, knobs)
    if tiers >= 3:
        _p_min_arms(b, knobs)
        _size_arms(b, knobs)
    return ArmPlan(tuple(methods), tuple(_cap(b.arms, max_arms)))


class _Builder:
    """Arms over one plain baseline; the draft model goes only where a part drafts with it."""

    def __init__(
        self, prefix: str, plain: ProfileConfig, draft: str | None, runs: Mapping[str, Method]
    ) -> None:
        self.prefix, self.plain, self.draft, self.runs = prefix, plain, draft, runs
        self.arms = [PlannedArm(f"{prefix}-baseline", plain, 0, "no speculation")]

    def add(self, name: str, tier: int, why: str, out: str = "", **update: object) -> None:
        """One arm; `out` non-empty lists it, not raced, with that reason."""
        parts = str(update["spec_type"]).split(",")
        sidecar = any(self.runs[p].sidecar for p in parts if p in self.runs)
        update["draft_model"] = self.draft if sidecar else None
        profile = self.plain.model_copy(update=update)
        arm = PlannedArm(f"{self.prefix}-sweep-{name}", profile, tier, why, not out, out)
        self.arms.append(arm)


def _short(model: str) -> str:
    """An arm name's stem for a model drafter: draft-simple is `draft`, the rest their kind."""
    return "draft" if model == "draft-simple" else model.removeprefix("draft-")


def _length(n: int | None, default_n: str) -> str:
    return f"n_max {n}" if n is not None else f"the build's default n_max ({default_n})"


def _method_arms(b: _Builder, knobs: Mapping[str, SpecKnob]) -> None:
    """Tier 1: each method at the values the requests name."""
    if "draft-simple" in b.runs:
        for n in DRAFT_LENGTHS:
            why = f"draft-simple, n_max {n}: a length the requests name"
            b.add(f"draft{n}", 1, why, spec_type="draft-simple", draft_n_max=n)
    if "draft-mtp" in b.runs:
        for n in MTP_DEPTHS:
            why = f"draft-mtp, n_max {n}: MTP depth 1-3 (depth 1 beat 3 publicly)"
            b.add(f"mtp{n}", 1, why, spec_type="draft-mtp", draft_n_max=n)
    default_n = _default(knobs, "--spec-draft-n-max")
    for spec in TRAINED:
        if spec in b.runs:
            b.add(_short(spec), 1, f"{spec} at {_length(None, default_n)}", spec_type=spec)
    for spec in b.runs:
        if spec.startswith("ngram"):
            b.add(spec, 1, f"{spec} at the build's defaults", spec_type=spec)


def _chain_arms(b: _Builder, knobs: Mapping[str, SpecKnob]) -> None:
    """Tier 2: the n-gram type in front of each model drafter the pair runs."""
    default_n = _default(knobs, "--spec-draft-n-max")
    for model, n in CHAIN_LENGTHS.items():
        if model in b.runs:
            tail = f"{n}" if n is not None else ""
            b.add(
                f"{CHAIN_NGRAM}+{_short(model)}{tail}",
                2,
                f"chain {CHAIN_NGRAM},{model} at {_length(n, default_n)}: {CHAIN_NGRAM} drafts "
                "where the context repeats, the model elsewhere (raced against both parts)",
                spec_type=f"{CHAIN_NGRAM},{model}",
                draft_n_max=n,
            )


def _p_min_arms(b: _Builder, knobs: Mapping[str, SpecKnob]) -> None:
    """Tier 3: p-min for each model drafter, at the length of one of its tier-1 arms (so the
    two differ in p-min only); out, with the reason, where the build does not read it."""
    p_default = _default(knobs, "--spec-draft-p-min")
    default_n = _default(knobs, "--spec-draft-n-max")
    for model, n in P_MIN_LENGTHS.items():
        method = b.runs.get(model)
        if method is None:
            continue
        out = method.p_min_out
        if "--spec-draft-p-min" not in knobs:
            out = "this build's --help lists no --spec-draft-p-min"
        for p in P_MIN_VALUES:
            if _same(p_default, p):
                continue
            b.add(
                f"{_short(model)}{n or ''}-pmin{p:g}",
                3,
                f"{model} at {_length(n, default_n)}, p-min {p:g} (build default {p_default}): "
                + P_MIN_WHY.get(
                    model,
                    "p-min cuts a draft where the drafter doubts; it matters at the longer lengths",
                ),
                out,
                spec_type=model,
                draft_n_max=n,
                draft_p_min=p,
            )


def _size_arms(b: _Builder, knobs: Mapping[str, SpecKnob]) -> None:
    """Tier 3: the n-gram lookup sizes where the defaults are known to starve a type."""
    for spec, knob, value, why in NGRAM_SIZES:
        flag = f"--{knob}"
        if spec in b.runs and flag in knobs and not _same(_default(knobs, flag), value):
            b.add(
                f"{spec}-{knob.rsplit('-', 1)[-1]}{value}",
                3,
                f"{spec} with {knob.removeprefix('spec-')} {value} (build default "
                f"{_default(knobs, flag)}): {why}",
                spec_type=spec,
                spec_knobs={knob: value},
            )


def _same(default: str, value: float) -> bool:
    try:
        return float(default) == float(value)
    except ValueError:
        return False


def _cap(arms: list[PlannedArm], max_arms: int) -> list[PlannedArm]:
    """Keep the first `max_arms` raceable arms by tier (stable within a tier); the rest are
    listed, out. An arm already out keeps its own reason and takes no place."""
    order = sorted((i for i, a in enumerate(arms) if a.included), key=lambda i: (arms[i].tier, i))
    kept = set(order[:max_arms])
    return [
        a
        if i in kept or not a.included
        else PlannedArm(
            a.name,
            a.profile,
            a.tier,
            a.why,
            False,
            f"over --max-arms {max_arms} (tier {a.tier}; each arm costs its share of round 1)",
        )
        for i, a in enumerate(arms)
    ]
