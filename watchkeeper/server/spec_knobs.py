"""The speculation a profile asks for, checked against what the installed build's `--help`
says: spec types (one, or a comma-separated chain), who drafts for each, and every `--spec-*`
knob with its default.

llama.cpp 11434 lists eleven spec types and accepts chains (`--spec-type
draft-simple,ngram-mod`: each step the first type with a draft wins). The knobs that size a
draft differ by type: a draft model's `--spec-draft-n-max` does not reach an n-gram type, which
has its own `--spec-ngram-<type>-size-m` (ngram-mod: `--spec-ngram-mod-n-max`). A profile's
`draft_n_max` goes to the drafting part that owns one; any other knob is named as the build
names it (`spec_knobs`), and refused unless the build lists it and a part of the chain reads it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from watchkeeper.config import ProfileConfig
from watchkeeper.errors import FlagError

NEEDS_DRAFTER = frozenset({"draft-simple", "draft-eagle3", "draft-dflash", "draft-dspark"})
"""Types that draft with a second model (`-md`): a small LM, or an EAGLE-3, DFlash or DSpark
drafter trained against the target."""
OWN_HEADS = frozenset({"draft-mtp"})
"""Types that draft with the target's own NextN/MTP heads (no `-md`; with one, the heads of
that model: common/common.cpp builds an MTP context on the draft's weights)."""

# Profile field -> its flag per drafting family, newest spelling first (the first one the
# build lists is used). Checked against the real --help in tests/server/test_spec_knobs.py.
FIELD_KNOBS: dict[str, dict[str, tuple[str, ...]]] = {
    "draft": {
        "draft_n_max": ("--spec-draft-n-max", "--draft-max", "--draft-n-max"),
        "draft_n_min": ("--spec-draft-n-min", "--draft-min", "--draft-n-min"),
        "draft_p_min": ("--spec-draft-p-min", "--draft-p-min"),
    },
    "ngram-simple": {"draft_n_max": ("--spec-ngram-simple-size-m", "--spec-ngram-size-m")},
    "ngram-map-k": {"draft_n_max": ("--spec-ngram-map-k-size-m",)},
    "ngram-map-k4v": {"draft_n_max": ("--spec-ngram-map-k4v-size-m",)},
    "ngram-mod": {
        "draft_n_max": ("--spec-ngram-mod-n-max",),
        "draft_n_min": ("--spec-ngram-mod-n-min",),
    },
    "ngram-cache": {},
}
FIELDS = ("draft_n_max", "draft_n_min", "draft_p_min")

# Which part of a chain reads a `--spec-*` knob, by the knob's prefix (longest first, so
# `--spec-ngram-map-k4v-` is not read as `--spec-ngram-map-k-`).
_KNOB_OWNER = (
    ("--spec-ngram-map-k4v-", "ngram-map-k4v"),
    ("--spec-ngram-map-k-", "ngram-map-k"),
    ("--spec-ngram-simple-", "ngram-simple"),
    ("--spec-ngram-mod-", "ngram-mod"),
    ("--spec-draft-", "draft"),
    ("--spec-synth-", "any"),
)
_DEFAULT = re.compile(r"\(default:\s*([^)]*)\)")
_RANGE = re.compile(r"between\s+(-?[\d.]+)\s+and\s+(-?[\d.]+)")
_KNOB_HEAD = re.compile(r"^(--spec-[\w-]+)(?:,\s*[-\w]+)*\s+(\S+)")


def family(spec_type: str) -> str:
    """'draft' for every draft-* type (they share the --spec-draft-* knobs), else the type."""
    return "draft" if spec_type.startswith("draft-") else spec_type


def owner(flag: str) -> str | None:
    """The family whose part reads this knob ('any': every speculating chain), or None."""
    return next((fam for prefix, fam in _KNOB_OWNER if flag.startswith(prefix)), None)


@dataclass(frozen=True, slots=True)
class SpecKnob:
    """One `--spec-*` knob as the build's --help lists it."""

    flag: str
    argument: str
    """The value's placeholder ('N': an integer, 'P': a probability, 'L', 'TYPE', ...)."""
    default: str | None
    low: float | None = None
    high: float | None = None
    """The range where the help states one (this build's help states none for the n-gram
    sizes: their 1..1024 lives in the parser's error message only)."""
    owner: str | None = None


def spec_knobs(descriptions: Mapping[str, str]) -> dict[str, SpecKnob]:
    """Every `--spec-*` flag of the help with a value, its default and any stated range."""
    out: dict[str, SpecKnob] = {}
    for flag, entry in descriptions.items():
        if not flag.startswith("--spec-") or flag in out:
            continue
        head = _KNOB_HEAD.match(entry.strip())
        if head is None or head.group(1) != flag or head.group(2).startswith("-"):
            continue
        default = _DEFAULT.search(entry)
        span = _RANGE.search(entry)
        out[flag] = SpecKnob(
            flag,
            head.group(2),
            default.group(1).strip() if default else None,
            float(span.group(1)) if span else None,
            float(span.group(2)) if span else None,
            owner(flag),
        )
    return out


def chain_parts(spec_type: str) -> tuple[str, ...]:
    return tuple(p.strip() for p in spec_type.split(",") if p.strip())


def model_drafter(spec_type: str | None) -> str | None:
    """The chain's model-drafter part (`draft-*`), wherever it stands in the chain; None for
    n-gram lookup alone. Read by what prices, plots or verifies a drafter, so a chain
    `ngram-mod,draft-simple` is not taken for free lookup because of its first part."""
    return next((p for p in chain_parts(spec_type or "") if p.startswith("draft-")), None)


def has_lookup(spec_type: str | None) -> bool:
    """Whether any part of the chain is n-gram lookup (drafts for free on repeated text)."""
    return any(p.startswith("ngram") for p in chain_parts(spec_type or ""))


def lookup_only(spec_type: str | None) -> bool:
    """Every part n-gram lookup: no model drafter to pay for."""
    parts = chain_parts(spec_type or "")
    return bool(parts) and all(p.startswith("ngram") for p in parts)


def check_chain(spec_type: str, supported: tuple[str, ...], *, has_draft: bool) -> tuple[str, ...]:
    """The parts of a spec type or chain, each checked against the build's list, with the
    drafter each needs."""
    parts = chain_parts(spec_type)
    if not parts:
        raise FlagError("spec type is empty")
    for part in parts:
        if supported and part not in supported:
            raise FlagError(
                f"spec type {part!r} is not supported by this llama-server build; "
                f"supported: {', '.join(supported)}",
                hint="a chain names its parts with commas, e.g. 'draft-simple,ngram-mod'",
            )
    if len(set(parts)) != len(parts):
        raise FlagError(f"spec type chain {spec_type!r} names a type twice")
    if len(parts) > 1 and "none" in parts:
        raise FlagError(f"spec type chain {spec_type!r} mixes 'none' with speculation")
    models = [p for p in parts if p.startswith("draft-")]
    if len(models) > 1:
        raise FlagError(
            f"spec type chain {spec_type!r} has {len(models)} model drafters "
            f"({', '.join(models)}); a server loads one draft model, so a chain has at most one"
        )
    for part in models:
        if part in NEEDS_DRAFTER and not has_draft:
            raise FlagError(
                f"spec type {part!r} needs a draft_model in the profile "
                + (
                    "(a small LM of the same tokenizer)"
                    if part == "draft-simple"
                    else f"(a {part.removeprefix('draft-')} drafter trained for the target)"
                ),
                hint="draft-mtp drafts with the target's own NextN/MTP heads and needs none",
            )
    if has_draft and not models:
        raise FlagError(
            f"profile has a draft_model but spec type {spec_type!r} does not use one; "
            "use a draft-* spec type or remove draft_model"
        )
    return parts


def field_flags(
    parts: tuple[str, ...], values: Mapping[str, object | None], flags: frozenset[str]
) -> list[str]:
    """The argv of the profile's draft_n_max/n_min/p_min: each goes to the part of the chain
    that drafts with a model, else to the one part that has the knob."""
    argv: list[str] = []
    for name in FIELDS:
        value = values.get(name)
        if value is None:
            continue
        owners = [p for p in parts if name in FIELD_KNOBS.get(family(p), {})]
        model = [p for p in owners if p.startswith("draft-")]
        chosen = model or owners
        if len(chosen) != 1:
            spec = ",".join(parts)
            if not chosen:
                have = sorted({k for p in parts for k in FIELD_KNOBS.get(family(p), {})})
                raise FlagError(
                    f"profile field {name!r} is not supported for spec type {spec!r}; "
                    f"supported draft fields for it: {', '.join(have) or 'none'}"
                )
            raise FlagError(
                f"profile field {name!r} is ambiguous in the chain {spec!r} "
                f"({', '.join(chosen)} each have one)",
                hint="name each part's knob in spec_knobs, e.g. spec-ngram-mod-n-max = 16",
            )
        spellings = FIELD_KNOBS[family(chosen[0])][name]
        flag = next((f for f in spellings if f in flags), None)
        if flag is None:
            raise FlagError(
                f"profile field {name!r} has no flag in this llama-server build "
                f"(tried {', '.join(spellings)})",
                hint="remove the field from the profile or pass the build's own flag in extra_args",
            )
        argv.extend([flag, str(value)])
    return argv


def knob_flags(
    parts: tuple[str, ...], knobs: Mapping[str, float], flags: frozenset[str], taken: list[str]
) -> list[str]:
    """The argv of `spec_knobs`: each a `--spec-*` flag the build lists, read by a part of the
    chain, not already set by a profile field."""
    families = {family(p) for p in parts}
    argv: list[str] = []
    for key, value in knobs.items():
        flag = "--" + key.lstrip("-")
        reader = owner(flag)
        if flag not in flags or reader is None:
            raise FlagError(
                f"spec_knobs: {flag} is not a --spec-* knob of this llama-server build",
                hint="`llama-server --help` lists them; `watchkeeper sweep --dry-run` shows them",
            )
        if reader != "any" and reader not in families:
            raise FlagError(
                f"spec_knobs: {flag} is read by {reader}, which the spec type "
                f"{','.join(parts)!r} does not use"
            )
        if flag in taken:
            raise FlagError(f"spec_knobs: {flag} is already set by a profile field")
        argv.extend([flag, _number(value)])
    return argv


def _number(value: float) -> str:
    return str(int(value)) if isinstance(value, int) or float(value).is_integer() else str(value)


def speculation_args(
    profile: ProfileConfig, spec_type: str, flags: frozenset[str]
) -> tuple[str, ...]:
    """The --spec-type and knob argv for a speculating profile (without the draft model)."""
    parts = chain_parts(spec_type)
    values = {name: getattr(profile, name) for name in FIELDS}
    argv = ["--spec-type", ",".join(parts), *field_flags(parts, values, flags)]
    argv += knob_flags(parts, profile.spec_knobs or {}, flags, argv)
    return tuple(argv)
