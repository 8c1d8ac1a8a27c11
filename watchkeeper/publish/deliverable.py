"""The sweep's answer as a file a team can act on: `reports/speculative_recommendation.json`.

The report is for reading; this record is what the installing host renders its unit from
(`watchkeeper unit`) and what the soak takes its arms from (`soak --recommendation`). It holds
no path of the machine that ran the sweep: server flags keep only the GGUF file names (the
installing host says where they live, [service] model_dir) and no binary, host or port.

It also carries the plain-words reading of the answer ("on 2 CPU cores a draft step costs
0.55 of a target step: no draft length won here"), so a unit that keeps the baseline can say
which setting came closest and what would change the answer, and the report can open with it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, TypedDict, cast

from watchkeeper.analysis.benchmark import ALL, ArmSpec, BenchResult
from watchkeeper.analysis.identity_gate import identity_status
from watchkeeper.analysis.racing_types import RaceState
from watchkeeper.analysis.recommend import Recommendation
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.config import ProfileConfig
from watchkeeper.config.inputs import regular_file
from watchkeeper.errors import ConfigError
from watchkeeper.format import ci as ci_text
from watchkeeper.host.info import HostInfo
from watchkeeper.publish.arm_recipe import DROPPED_FLAGS, ArmRecipe, arm_recipe, portable_flags
from watchkeeper.publish.workload_record import WorkloadRecord, workload_record
from watchkeeper.server.spec_knobs import has_lookup

__all__ = [
    "DROPPED_FLAGS",
    "RECORD_NAME",
    "ArmRecipe",
    "RecommendationRecord",
    "RecordExtra",
    "build_record",
    "portable_flags",
    "read_record",
    "write_record",
]

RECORD_NAME = "speculative_recommendation.json"
VERSION = 1


class RecordExtra(TypedDict, total=False):
    """What the sweep keeps in a record beside its answer (the JSON's `extra`), by key, each
    written once by commands/sweep.py; a record written before a key was kept lacks it, and a
    hand-edited one is read as found (its readers check each value's shape)."""

    unit: str
    """The unit rendered from this record, relative to the checkout (`--service-file`)."""
    served: dict[str, Any]
    """The [service] keys it rendered with: slots, prompt cache, port (publish/served.py)."""
    record: str
    """This record's own path in the checkout: the set it belongs to."""
    digests: dict[str, dict[str, str]]
    """`models`: each measured model file's sha256, checked before each start."""
    served_ladder: dict[str, Any]
    """The pick's speed-up at each load up to the unit's slots (`served-ladder`,
    publish/ladder_claim.py)."""


@dataclass(frozen=True, slots=True)
class RecommendationRecord:
    headline: str
    campaign_id: int
    report: str
    """The report's path in the reports directory (speculative_benchmark.md)."""
    campaign_report: str
    hardware: str
    gpu: bool
    build: str
    sampler: str
    models: str
    chosen: ArmRecipe
    baseline: ArmRecipe
    closest: ArmRecipe | None
    """Keeping the baseline: the speculative arm that came closest (else None)."""
    meaning: str
    would_change: tuple[str, ...] = ()
    load: str = ""
    """The load the arms were measured under ("one request at a time (closed loop)"): a
    speed-up holds for that load, not for every load (docs/load.md). Empty: an older record."""
    workload: WorkloadRecord | None = None
    """Each category's pick, the workload mix and its one setting, the tool-calls-vs-prose
    answer (publish/workload_record.py). None: a record written before they were kept."""
    version: int = VERSION
    extra: RecordExtra = field(default_factory=RecordExtra)

    @property
    def speculates(self) -> bool:
        return self.chosen.speculative

    @property
    def subject(self) -> ArmRecipe | None:
        """The arm the soak and the acceptance criteria look at: the recommended one when it
        speculates, else the closest speculative arm."""
        return self.chosen if self.speculates else self.closest

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RecommendationRecord:
        chosen, baseline = arm_recipe(data["chosen"]), arm_recipe(data["baseline"])
        assert chosen is not None and baseline is not None
        return cls(
            headline=data["headline"],
            campaign_id=int(data["campaign_id"]),
            report=data["report"],
            campaign_report=data.get("campaign_report", ""),
            hardware=data["hardware"],
            gpu=bool(data["gpu"]),
            build=data.get("build", ""),
            sampler=data.get("sampler", ""),
            models=data.get("models", ""),
            chosen=chosen,
            baseline=baseline,
            closest=arm_recipe(data.get("closest")),
            meaning=data.get("meaning", ""),
            would_change=tuple(data.get("would_change", ())),
            load=str(data.get("load", "")),
            workload=WorkloadRecord.from_json(data["workload"]) if data.get("workload") else None,
            version=int(data.get("version", VERSION)),
            extra=cast(RecordExtra, dict(data.get("extra", {}))),
        )


def hardware_text(host: HostInfo) -> str:
    if host.gpu:
        return f"{host.gpu} with {host.cpu_count} CPU cores ({host.cpu_model})"
    return f"{host.cpu_count} CPU cores ({host.cpu_model}), no GPU"


def models_text(result: BenchResult) -> str:
    base = result.baseline
    drafts = sorted({a.draft_model for a in result.arms if a.draft_model})
    draft = f"draft model {', '.join(drafts)}" if drafts else "no draft model"
    return f"target {base.model}, {draft}, n-gram lookup (no model)"


def _ci_text(ci: RatioCI | None) -> str:
    if ci is None:
        return "not measured"
    if not ci.has_ci:
        return f"{ci.estimate:.2f}x (no CI)"
    return f"{ci.estimate:.2f}x ({ci_text(ci.low, ci.high)}, {ci.verdict})"


def settle_text(ci: RatioCI | None) -> str:
    """What would settle an inconclusive speed-up, in plain words; empty otherwise."""
    if ci is None or not ci.has_ci or ci.verdict != "inconclusive":
        return ""
    if ci.rounds_needed:
        return f"about {ci.rounds_needed} measured rounds (`--rounds {ci.rounds_needed}`)"
    if ci.settle is not None and ci.settle.add_tasks:
        n = f"about {ci.settle.tasks} tasks" if ci.settle.tasks else "more tasks"
        return f"{n} per run (more rounds alone would not: the tasks differ too much)"
    return ""


def closest_arm(result: BenchResult, chosen: str, prefer: str | None = None) -> str | None:
    """``prefer`` where it is a speculative arm (the mix's closest, when the mix is the
    answer), else the speculative arm with the best overall estimate that was probed (else
    measured)."""
    spec = [a.name for a in result.arms if a.role == "candidate" and a.speculative]
    if chosen in spec:
        return None
    if prefer in spec:
        return prefer

    def est(name: str) -> float:
        s = result.stats(name, ALL)
        return s.speedup.estimate if s is not None and s.speedup is not None else 0.0

    probed = [a for a in spec if identity_status(result, a).compared > 0]
    measured = [a for a in spec if est(a) > 0]
    pool = probed or measured
    return max(pool, key=lambda a: (est(a), a)) if pool else None


def mix_speedup_text(rec: Recommendation, arm: str) -> str:
    """``arm``'s speed-up for the mix, where the mix is the answer and ``arm`` is its pick or
    closest setting: what the headline quotes for it. Empty otherwise."""
    best = rec.workload.best if rec.answers_mix and rec.workload is not None else None
    if best is None or best.arm != arm or best.estimate is None:
        return ""
    return f"{best.text} for {rec.mix_words}"


def _mix_closest(rec: Recommendation) -> str | None:
    """Keeping the baseline for the mix: the arm that came closest for it."""
    if not rec.answers_mix or rec.setting is not None or rec.workload is None:
        return None
    return rec.workload.best.arm if rec.workload.best is not None else None


def draft_cost(result: BenchResult) -> float | None:
    costs = [a.cost_ratio for a in result.arms if a.draft_model and a.cost_ratio]
    return max(costs) if costs else None


def reading(
    result: BenchResult, rec: Recommendation, chosen: str, closest: str | None
) -> tuple[str, tuple[str, ...]]:
    """What the answer means on this hardware, and what would change it."""
    hw = hardware_text(result.host)
    if chosen != result.baseline.name:
        return (
            f"on {hw}, {chosen} decodes faster than the baseline with its output checked "
            "against it; the figure is this hardware's and this workload's, so rerun the sweep "
            "on the hardware that will serve",
            (),
        )
    parts: list[str] = []
    change: list[str] = []
    cost = draft_cost(result)
    drafts = [a for a in result.arms if a.draft_model]
    if cost is not None and drafts:
        slower = all(_slower_or_dropped(result, a) for a in drafts)
        verdict = "no draft length can win here" if slower else "no draft length won here"
        gpu = (
            ""
            if result.host.gpu
            else "; on a GPU, where a small draft costs a small fraction of a target step, the "
            "same pair can win"
        )
        parts.append(
            f"on {hw}, a draft step ({drafts[0].draft_model}) costs {cost:.2f} of a target "
            f"step: {verdict}{gpu}"
        )
        if not result.host.gpu:
            change.append(
                f"hardware where a draft step is cheap next to a target step (a GPU; here it "
                f"costs {cost:.2f}): rerun `watchkeeper sweep` there"
            )
        accepted = [
            s.overall.acceptance_rate
            for s in result.arm_stats
            if s.arm in {a.name for a in drafts} and s.overall.acceptance_rate is not None
        ]
        if accepted:
            change.append(
                f"a better-matched draft model (acceptance here at most {max(accepted):.0%})"
            )
    else:
        parts.append(f"on {hw} no speculative setting beat the baseline with confidence")
    if rec.answers_mix and rec.overall.profile is not None and rec.mix is not None:
        parts.append(
            f"across all tasks pooled {rec.overall.profile} is faster, but not with confidence "
            f"for the stated mix ({rec.mix.text})"
        )
    if closest is not None:
        s = result.stats(closest, ALL)
        ci = s.speedup if s is not None else None
        mixed = mix_speedup_text(rec, closest)
        parts.append(f"the closest setting, {closest}, measured {mixed or _ci_text(ci)}")
        best = rec.workload.best if mixed and rec.workload is not None else None
        settle = best.settle if best is not None else settle_text(ci)
        if settle:
            change.append(f"for {closest}: {settle} would tell whether its gain is real")
        if has_lookup(_spec_type(result, closest)):
            change.append(
                "a workload whose answers repeat their context (code edits, long structured "
                "output), where n-gram lookup drafts for free: measure with your own task set "
                "(`--taskset`)"
            )
    parts.append(
        "keeping the baseline is the answer for this hardware, not a verdict on "
        "speculative decoding"
    )
    return "; ".join(parts), tuple(change)


def _spec_type(result: BenchResult, arm: str) -> str | None:
    return next((a.spec_type for a in result.arms if a.name == arm), None)


def _slower_or_dropped(result: BenchResult, arm: ArmSpec) -> bool:
    s = result.stats(arm.name, ALL)
    if s is None or s.speedup is None:
        return True  # dropped before it was measured (the ceiling rule) or never ran
    # Without a CI (one round) low and high are the estimate itself: nothing is concluded.
    return s.speedup.verdict == "slower" or (s.speedup.has_ci and s.speedup.high < 1.0)


def recipe(result: BenchResult, name: str, profiles: Mapping[str, ProfileConfig]) -> ArmRecipe:
    arm = next(a for a in result.arms if a.name == name)
    profile = profiles.get(name)
    s = result.stats(name, ALL)
    speculative = arm.role == "candidate" and arm.speculative
    return ArmRecipe(
        name,
        profile.model_dump(exclude_none=True) if profile is not None else {"model": arm.model},
        portable_flags(arm.argv),
        speculative,
        _ci_text(s.speedup if s is not None else None) if speculative else "",
        identity_status(result, name).text if speculative else "",
    )


def answer_recipe(
    result: BenchResult, rec: Recommendation, name: str, profiles: Mapping[str, ProfileConfig]
) -> ArmRecipe:
    """An arm's recipe quoting the speed-up the headline quotes: for the mix, where the mix is
    the answer and the arm its pick or closest setting; else all categories pooled."""
    found = recipe(result, name, profiles)
    mixed = mix_speedup_text(rec, name)
    return replace(found, speedup=mixed) if mixed and found.speculative else found


def build_record(
    result: BenchResult,
    rec: Recommendation,
    *,
    chosen: str,
    profiles: Mapping[str, ProfileConfig],
    report: str,
    campaign_report: str,
    race: RaceState | None = None,
    load: str = "",
    also_change: Sequence[str] = (),
) -> RecommendationRecord:
    """``also_change``: what else would change the answer, from outside the result (the
    sweep's racer: a budget that would have reached a CI)."""
    del race  # reserved: per-category picks
    closest = closest_arm(result, chosen, _mix_closest(rec))
    meaning, change = reading(result, rec, chosen, closest)
    change = (*change, *also_change)
    return RecommendationRecord(
        headline=rec.headline,
        campaign_id=result.campaign_id,
        report=report,
        campaign_report=campaign_report,
        hardware=hardware_text(result.host),
        gpu=bool(result.host.gpu),
        build=f"{result.build_version} ({result.build_variant})",
        sampler=result.method.sampling,
        models=models_text(result),
        chosen=answer_recipe(result, rec, chosen, profiles),
        baseline=recipe(result, result.baseline.name, profiles),
        closest=answer_recipe(result, rec, closest, profiles) if closest else None,
        meaning=meaning,
        would_change=change,
        load=load,
        workload=workload_record(result, rec, lambda name: recipe(result, name, profiles)),
    )


def write_record(path: Path, record: RecommendationRecord) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(record.to_json(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def read_record(path: Path) -> RecommendationRecord:
    if path.exists():  # a FIFO or a device would hang the read or never end
        regular_file(path, "recommendation record", ConfigError)
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(
            f"no recommendation at {path}",
            hint="run `watchkeeper sweep` (it writes reports/" + RECORD_NAME + ") or pass "
            "--recommendation with the committed file",
        ) from None
    except (OSError, ValueError) as exc:  # JSON and UTF-8 errors are ValueErrors
        raise ConfigError(f"cannot read the recommendation {path}: {exc}") from None
    except RecursionError:
        raise ConfigError(f"cannot read the recommendation {path}: nested too deeply") from None
    try:
        return RecommendationRecord.from_json(data)
    except (KeyError, TypeError, ValueError, AssertionError) as exc:
        raise ConfigError(
            f"{path} is not a sweep recommendation (missing {exc})",
            hint="regenerate it with `watchkeeper sweep`",
        ) from None
