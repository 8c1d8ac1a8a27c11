"""The sweep's own sections of `reports/speculative_benchmark.md`: the race, a winner per
category, the one setting for the whole workload and what each category gives up under it, why
draft lengths win or lose (the acceptance curve against the bound), the seed's acceptance
criteria, and the service file. A pure function of a `SweepView`: no clock, no database.

The seed asked three things of a recommendation: identical output, a measured speed-up (1.5x
or better), and a box that stays up overnight. Each is answered from the campaign's own
evidence, or with the exact command that would produce it; none is assumed.
"""

from __future__ import annotations

import math
import shlex
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchkeeper.analysis.acceptance import explain, result_curves
from watchkeeper.analysis.benchmark import ALL, BenchResult
from watchkeeper.analysis.racing_types import Drop, RaceArm, RaceSettings, RaceState
from watchkeeper.analysis.recommend import Recommendation
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.config import ProfileConfig
from watchkeeper.publish import markdown as md

SEED_SPEEDUP = 1.5
"""The speed-up the seed's team expects from speculation ("1.5-3x")."""
VERDICTS = ("identical", "near_tie", "batch_variance", "length_only", "mismatch")
SOAK_DURATION = "8h"


@dataclass(frozen=True, slots=True)
class SweepView:
    result: BenchResult
    recommendation: Recommendation
    arms: tuple[RaceArm, ...]
    settings: RaceSettings
    race: RaceState | None
    stop_reason: str
    budget_min: float | None
    wall_s: float
    chosen: str
    chosen_profile: ProfileConfig | None
    soak: Mapping[str, Any] | None
    soak_command: str
    service_path: Path
    max_tokens: int = 0
    """The cap on every answer (0: the task set's own lengths)."""


def soak_command(profile: str, duration: str = SOAK_DURATION) -> str:
    return f"watchkeeper soak --profiles {shlex.quote(profile)} --duration {duration}"


def _ci(ci: RatioCI | None) -> str:
    if ci is None:
        return md.NONE
    if not ci.has_ci:
        return f"{ci.estimate:.2f}x (no CI: {ci.n_rounds} round(s))"
    return f"{ci.estimate:.2f}x ({ci.low:.2f}-{ci.high:.2f})"


def drop_status(d: Drop | None) -> str:
    """How an arm left the race, in the report's and the CLI's words."""
    if d is None:
        return "raced to the end"
    if d.round == 0:
        return f"dropped before round 1, unmeasured ({d.rule})"
    return f"dropped after round {d.round} ({d.rule})"


def _race_section(v: SweepView) -> list[str]:
    out = ["## Racing sweep", ""]
    budget = f"budget {v.budget_min:g} min, " if v.budget_min is not None else ""
    out.append(
        f"Wall time {v.wall_s / 60:.1f} min ({budget}stopped: {md.inline(v.stop_reason)}). "
        f"Repeated looks: {v.settings.method}. An arm stops when, in every category, its CI "
        f"against the leader lies below 1/(1 + {v.settings.min_effect:g}) and its CI against "
        "the baseline does not lie above 1. Dropped arms keep their rows in the database; "
        "their figures above cover the rounds they ran."
    )
    out.append("")
    if v.max_tokens > 0:
        out.append(
            f"Every answer was cut at {v.max_tokens} tokens (`--max-tokens`; 0 keeps the task "
            "set's own lengths). Decode speed shows in those tokens already; n-gram drafting "
            "that pays only late in a long, repetitive answer is understated."
        )
        out.append("")
    if v.race is None:
        out.append("Not raced: every arm ran every round.")
        return out
    dropped = {d.arm: d for d in v.race.drops}
    rows = []
    for a in v.arms:
        d = dropped.get(a.name)
        rows.append(
            [
                a.name,
                str(v.race.rounds_by_arm.get(a.name, 0)),
                drop_status(d),
                md.NONE if d is None else d.reason,
            ]
        )
    out.append(md.table(["arm", "rounds measured", "status", "reason"], rows, "lrll"))
    out.append("")
    return out


def _winner_section(v: SweepView) -> list[str]:
    out = ["## Winner per category", ""]
    if v.race is None or not v.race.decisions:
        out.append("No race decisions (not raced); see the recommendation table above.")
        out.append("")
        return out
    rows = []
    for d in v.race.decisions:
        if d.status == "decided":
            status = "decided"
            settle = md.NONE
        else:
            status = "unresolved"
            settle = f"~{d.rounds_needed} rounds" if d.rounds_needed else "not within reach"
        # Decided: how far the runner-up is behind the winner. Unresolved: the comparison that
        # is still open, which need not involve the provisional pick at all.
        pair = (d.runner_up, d.pick) if d.status == "decided" else (d.contender, d.runner_up)
        named = pair[0] is not None and pair[1] is not None
        rows.append(
            [
                d.category,
                status,
                d.pick + ("" if d.winner else " (provisional)"),
                _ci(d.versus_baseline),
                f"{pair[0]} / {pair[1]}" if named else md.NONE,
                _ci(d.versus_runner_up) if named else md.NONE,
                settle,
                d.reason,
            ]
        )
    out.append(
        md.table(
            [
                "category",
                "status",
                "pick",
                "pick vs baseline (95% CI)",
                "comparison",
                f"ratio ({v.settings.look_confidence:.2%} CI)",
                "rounds to settle",
                "why",
            ],
            rows,
            "lllrlrrl",
        )
    )
    out.append("")
    unresolved = v.race.unresolved()
    if unresolved:
        names = ", ".join(
            f"{d.category} (~{d.rounds_needed} rounds)" if d.rounds_needed else d.category
            for d in unresolved
        )
        out.append(
            f"Unresolved: {names}. Until then each keeps the provisional pick above: an arm "
            "called faster than the baseline at the look's confidence, else the baseline. "
            f"`watchkeeper sweep --rounds N` with N at least that many would settle them, if "
            "the estimates hold."
        )
        out.append("")
    return out


def _estimate(result: BenchResult, arm: str, category: str) -> float | None:
    if arm == result.baseline.name:
        return 1.0
    s = result.stats(arm, category)
    return s.speedup.estimate if s is not None and s.speedup is not None else None


def _workload_section(v: SweepView) -> list[str]:
    rec = v.recommendation
    out = ["## One setting for the whole workload", ""]
    overall = result_overall(v)
    out.append(
        f"This build takes no per-request speculative parameters, so a per-category optimum is a "
        f"per-server setting. The one setting that serves the whole workload: **{v.chosen}** "
        f"({md.inline(rec.overall.reason)}; all categories: {overall})."
    )
    out.append("")
    if v.race is None or not v.race.decisions:
        return out
    rows = []
    for d in v.race.decisions:
        mine = _estimate(v.result, v.chosen, d.category)
        theirs = _estimate(v.result, d.pick, d.category)
        if d.pick == v.chosen:
            cost = "nothing: it is this category's pick"
        elif mine is None or theirs is None or theirs <= 0:
            cost = md.NONE
        else:
            cost = f"{(mine / theirs - 1) * 100:+.1f}% decode speed against {d.pick}"
        rows.append([d.category, d.pick, cost])
    out.append(md.table(["category", "category's own pick", f"under {v.chosen}"], rows))
    out.append("")
    return out


def result_overall(v: SweepView) -> str:
    if v.chosen == v.result.baseline.name:
        return "1.00x by definition"
    s = v.result.stats(v.chosen, ALL)
    return _ci(s.speedup if s is not None else None)


def _curve_section(v: SweepView) -> list[str]:
    curves = result_curves(v.result)
    out = ["## Why a draft length wins or loses", ""]
    if not curves:
        out.append("No speculative arm reported per-position counters.")
        out.append("")
        return out
    stats = {s.arm: s for s in v.result.arm_stats}
    for c in curves:
        st = stats.get(c.arm)
        bound = st.bound if st is not None else None
        measured = st.overall.speedup if st is not None else None
        tail = []
        if bound is not None:
            tail.append(f"bound {bound.predicted_speedup:.2f}x")
        if measured is not None:
            tail.append(f"measured {_ci(measured)}")
        extra = f" ({', '.join(tail)})" if tail else ""
        out.append(f"- {md.inline(explain(c))}{extra}.")
    out.append("")
    out.append(
        "The bound prices every drafted position (draft cost x drafted tokens plus one target "
        "batch): positions that rarely accept are paid for and thrown away, so a longer draft "
        "wins only while its added positions still accept."
    )
    out.append("")
    return out


def _subject(v: SweepView) -> tuple[str | None, str]:
    """The arm the seed's criteria are checked on: the recommended one when it speculates,
    else the closest speculative contender (for the record)."""
    spec = {a.name for a in v.result.arms if a.role == "candidate" and a.speculative}
    if v.chosen in spec:
        return v.chosen, "the recommended arm"
    probed = {r.arm for r in v.result.identity} & spec
    best = max(probed or spec, key=lambda a: (_estimate(v.result, a, ALL) or 0.0, a), default=None)
    return best, "the baseline is recommended; shown for the fastest probed speculative arm"


def _criteria_section(v: SweepView) -> list[str]:
    out = ["## The seed's acceptance criteria", ""]
    arm, whose = _subject(v)
    if arm is None:
        out.append("No speculative arm was measured.")
        out.append("")
        return out
    out.append(f"Checked on **{arm}** ({whose}).")
    out.append("")
    s = v.result.stats(arm, ALL)
    verdicts = s.verdicts if s is not None else {}
    counts = ", ".join(f"{k} {verdicts.get(k, 0)}" for k in VERDICTS)
    mismatches = [r for r in v.result.identity if r.arm == arm and r.verdict == "mismatch"]
    identical = "met" if verdicts and not mismatches else ("not met" if mismatches else "unknown")
    out.append(
        f"1. **Identical output: {identical}.** Identity verdicts of {sum(verdicts.values())} "
        f"probes: {counts}."
    )
    for r in mismatches[:3]:
        ev = r.replay or {}
        out.append(
            f"   - mismatch on {md.inline(r.task_id)} at token {md.text(r.first_divergence)}: "
            f"replay picks {md.inline(str((ev.get('target_token') or {}).get('text', '—')))}, "
            f"gap {md.fixed(ev.get('margin'), 4)} nats over a noise floor of "
            f"{md.fixed(ev.get('floor'), 4)}"
        )
    ci = s.speedup if s is not None else None
    if ci is None or not ci.has_ci:
        speed = "not shown (no CI)"
    elif ci.low >= SEED_SPEEDUP:
        speed = "met"
    elif ci.high < SEED_SPEEDUP:
        speed = "not met"
    else:
        speed = "not shown (the CI straddles it)"
    out.append(f"2. **Speed-up of {SEED_SPEEDUP:g}x: {speed}.** Measured {_ci(ci)} (95% CI).")
    if v.soak is not None:
        out.append(
            f"3. **Stable overnight: {md.text(v.soak.get('verdict'))}** (latest soak of "
            f"{v.chosen} on this host: campaign {v.soak.get('campaign_id')}, "
            f"{v.soak.get('started_at')}, {md.text(v.soak.get('duration'))}, "
            f"{md.inline(str(v.soak.get('headline') or v.soak.get('status')))})."
        )
    else:
        out.append(
            f"3. **Stable overnight: not yet measured** for {v.chosen} on this host. "
            f"Run `{v.soak_command}` (with the profile below in watchkeeper.toml)."
        )
    out.append("")
    if v.chosen_profile is not None:
        out.append(f"Profile of the recommended setting ({v.chosen}):")
        out.append("")
        out.append(md.fenced(profile_toml(v.chosen, v.chosen_profile), "toml"))
        out.append("")
    return out


def profile_toml(name: str, profile: ProfileConfig) -> str:
    lines = [f"[profiles.{name}]"]
    for key, value in profile.model_dump(exclude_none=True).items():
        if value in ("", [], {}):
            continue
        if isinstance(value, str):
            lines.append(f'{key} = "{value}"')
        elif isinstance(value, bool):
            lines.append(f"{key} = {'true' if value else 'false'}")
        elif isinstance(value, int | float) and math.isfinite(float(value)):
            lines.append(f"{key} = {value}")
    return "\n".join(lines)


def render_sweep_sections(v: SweepView) -> str:
    parts = [
        *_race_section(v),
        *_winner_section(v),
        *_workload_section(v),
        *_curve_section(v),
        *_criteria_section(v),
        "## Service file",
        "",
        f"`{v.service_path}` runs {v.chosen} (campaign {v.result.campaign_id}); its header "
        "names this report.",
    ]
    return "\n".join(parts).rstrip() + "\n"
