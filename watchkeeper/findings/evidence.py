"""A finding's evidence, typed: one dataclass per kind of finding, each printing its own change.

The `finding.evidence` column is JSON, written by four producers (the absolute detector, its
change-point pass, the paired nightly, the soak) and read by the digest, the tracker's issue
bodies, the lifecycle and the headline. As a bare dict its keys were a convention each reader
re-learned with `.get()`, and two readers printed the same delta two ways. Here each kind names
its fields once and says how its delta and its interval read (`delta_text`, `ci_text`).

The JSON is the one the database holds (no discriminator key is added, so rows written before
this module load unchanged): `evidence_of(kind, data)` picks the class from the finding's kind
and the keys its producer always writes, keys a class does not name ride along in `extra`, and
`to_json()` gives back the same dict.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, ClassVar, Self

from watchkeeper.format import MISSING, ci, interval, pct, points

Printer = Callable[[float | None], str]

_OWN = ("extra", "keys")


def _split(cls: type, data: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(the keys `cls` names as fields, everything else)."""
    names = {f.name for f in dataclasses.fields(cls) if f.name not in _OWN}
    known = {k: v for k, v in data.items() if k in names}
    return known, {k: v for k, v in data.items() if k not in names}


@dataclass(frozen=True, slots=True)
class _Evidence:
    extra: dict[str, Any] = field(default_factory=dict, kw_only=True)
    """Keys this kind does not name (older or newer writers, annotations): kept, written back."""
    keys: tuple[str, ...] = field(default=(), kw_only=True, compare=False, repr=False)
    """The keys as loaded, in order: a row read and written back keeps its exact JSON (a key
    its writer left out stays out)."""

    NESTED: ClassVar[dict[str, Any]] = {}
    """Fields that hold a nested evidence class (loaded with its `from_json`)."""
    OPTIONAL: ClassVar[tuple[str, ...]] = ()
    """Fields a writer leaves out of the JSON while they are None (added later by others)."""

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Self:
        known, extra = _split(cls, data)
        for name, nested in cls.NESTED.items():
            if isinstance(known.get(name), dict):
                known[name] = nested.from_json(known[name])
        return cls(**known, extra=extra, keys=tuple(data))

    def to_json(self) -> dict[str, Any]:
        fields: dict[str, Any] = {}
        for f in dataclasses.fields(self):
            if f.name in _OWN:
                continue
            value = getattr(self, f.name)
            absent = f.name not in self.keys if self.keys else f.name in self.OPTIONAL
            if value is not None or not absent:
                fields[f.name] = value.to_json() if isinstance(value, _Evidence) else value
        ordered = {
            k: fields.pop(k) if k in fields else self.extra[k]
            for k in self.keys
            if k in fields or k in self.extra
        }
        return {**ordered, **fields, **{k: v for k, v in self.extra.items() if k not in ordered}}

    def delta_text(self) -> str:
        return MISSING

    def ci_ends(self) -> tuple[float | None, float | None, Printer]:
        """The delta's interval: its ends (None: not known) and how each prints."""
        return None, None, pct

    def ci_text(self) -> str:
        """The interval's ends, '-21.4% to -15.1%' (a table cell under a '95% CI' header)."""
        return interval(*self.ci_ends())

    def labelled_ci_text(self) -> str:
        """The interval labelled: '95% CI -21.4% to -15.1%', or '95% CI —'."""
        low, high, printer = self.ci_ends()
        return ci(low, high, printer, " to ")

    def change_text(self) -> str:
        """The delta with its interval, in one phrase: '-18.2% (95% CI -21.4% to -15.1%)'."""
        delta = self.delta_text()
        if delta == MISSING:
            return MISSING
        return delta if self.ci_text() == MISSING else f"{delta} ({self.labelled_ci_text()})"

    def series_title(self, default: str) -> str:
        """The series the finding is about, by name ('decode_tps · code · c1 · 3f2a9c1e')."""
        name = getattr(self, "series_name", None) or self.extra.get("series_name")
        return str(name) if name else default

    @property
    def reference_id(self) -> int | None:
        """The pinned reference a paired finding was measured against (ack/fix retires it)."""
        ref = getattr(self, "reference", None) or self.extra.get("reference")
        return int(ref["id"]) if isinstance(ref, dict) and "id" in ref else None


@dataclass(frozen=True, slots=True)
class LevelShift(_Evidence):
    """Where a series' level changed, as the change-point pass named it."""

    first_bad_build: str | None = None
    first_bad_run: int | None = None
    first_bad_campaign: int | None = None
    before_median: float | None = None
    after_median: float | None = None
    relative_change: float | None = None
    points: int | None = None
    min_segment: int | None = None
    method: str | None = None


@dataclass(frozen=True, slots=True)
class SeriesEvidence(_Evidence):
    """The absolute detector's verdict on one series (kinds `regression`, `improvement`)."""

    series: dict[str, Any] | None = None
    series_name: str | None = None
    label: str | None = None
    note: str | None = None
    run: str | None = None
    side: str | None = None
    delta: float | None = None
    delta_ci: list[float | None] | None = None
    delta_unit: str = "relative"
    """'relative' (a fraction of the baseline) or 'absolute' (a proportion's difference)."""
    test: str | None = None
    p_value: float | None = None
    p_adjusted: float | None = None
    current: float | None = None
    baseline: float | None = None
    baseline_runs: int | None = None
    baseline_trials: int | None = None
    baseline_cv: float | None = None
    fence: float | None = None
    floor: float | None = None
    params: dict[str, Any] | None = None
    change_point: LevelShift | None = None
    """Set when the change-point pass named this regression's first bad build."""

    NESTED: ClassVar[dict[str, Any]] = {"change_point": LevelShift}
    OPTIONAL: ClassVar[tuple[str, ...]] = ("change_point",)

    def _fmt(self, value: float | None) -> str:
        return points(value) if self.delta_unit == "absolute" else pct(value)

    def delta_text(self) -> str:
        return self._fmt(self.delta)

    def ci_ends(self) -> tuple[float | None, float | None, Printer]:
        low, high = self.delta_ci or (None, None)
        return low, high, self._fmt


@dataclass(frozen=True, slots=True)
class ChangePointEvidence(_Evidence):
    """A level shift with its first bad build, filed on its own (kind `change_point`)."""

    series: dict[str, Any] | None = None
    series_name: str | None = None
    change_point: LevelShift = field(default_factory=LevelShift)

    NESTED: ClassVar[dict[str, Any]] = {"change_point": LevelShift}

    def delta_text(self) -> str:
        return pct(self.change_point.relative_change)


@dataclass(frozen=True, slots=True)
class NightlyEvidence(_Evidence):
    """The paired nightly: tonight's current/reference ratio inside one run (kind `regression`)."""

    series_name: str | None = None
    metric: str | None = None
    ratio: float | None = None
    ci95: list[float | None] | None = None
    delta: float | None = None
    delta_ci: list[float | None] | None = None
    n_pairs: int | None = None
    n_tasks: int | None = None
    n_rounds: int | None = None
    threshold: float | None = None
    method: str | None = None
    reference: dict[str, Any] | None = None
    campaign_id: int | None = None
    rerun_campaign_id: int | None = None
    report: str | None = None
    also_confirmed: list[dict[str, Any]] | None = None
    checks: dict[str, Any] | None = None
    """The series' verdict checks (failed requests, clipped cells: nightly/ratios.py), when
    the night ran them."""
    current_build: str | None = None
    """The current arm's build, as its identity line ('llama.cpp 11440.0.0 (cpu, gcc 12.2.0)'):
    with the reference's `binary_version` it names the release range a bisect searches. The
    campaign row records one build only (the reference arm's, the first prepared)."""

    OPTIONAL: ClassVar[tuple[str, ...]] = ("checks", "current_build")

    def delta_text(self) -> str:
        return pct(self.delta)

    def ci_ends(self) -> tuple[float | None, float | None, Printer]:
        low, high = self.delta_ci or (None, None)
        return low, high, pct


@dataclass(frozen=True, slots=True)
class SoakRatioEvidence(_Evidence):
    """The soak's paired ratio over its cycles (kind `regression`): the verdict's entry."""

    profile: str | None = None
    concurrency: int | None = None
    estimate: float | None = None
    ci95: list[float | None] | None = None
    verdict: str | None = None
    reference: dict[str, Any] | None = None

    @classmethod
    def from_verdict(cls, entry: dict[str, Any]) -> Self:
        """The soak verdict's entry for one (profile, concurrency), with `reference.id` added:
        a maintainer's ack/fix retires the reference, as for a nightly."""
        return cls.from_json({**entry, "reference": {"id": entry["reference_id"]}})

    def delta_text(self) -> str:
        return pct(None if self.estimate is None else self.estimate - 1.0)

    def ci_ends(self) -> tuple[float | None, float | None, Printer]:
        low, high = self.ci95 or (None, None)
        return None if low is None else low - 1.0, None if high is None else high - 1.0, pct


@dataclass(frozen=True, slots=True)
class PlainEvidence(_Evidence):
    """A finding that is a fact, not a change (output mismatches, a leak, a stopped profile,
    environment noise): no delta; its keys stay as written (`extra`)."""


Evidence = (
    SeriesEvidence | ChangePointEvidence | NightlyEvidence | SoakRatioEvidence | PlainEvidence
)


def evidence_of(kind: str, data: dict[str, Any]) -> Evidence:
    """The typed evidence of a finding of `kind`, from the JSON its producer wrote."""
    if kind == "change_point":
        return ChangePointEvidence.from_json(data)
    if kind in ("regression", "improvement"):
        if "ratio" in data:
            return NightlyEvidence.from_json(data)
        if "estimate" in data and "cycles" in data:
            return SoakRatioEvidence.from_json(data)
        if "delta_unit" in data or "current" in data or "baseline" in data:
            return SeriesEvidence.from_json(data)
    return PlainEvidence.from_json(data)
