"""The bench report's table rows (publish/report.py renders them through its template): the
summary, per-category, bound, acceptance-curve and distribution-check tables, with the number
formatting they share. Pure functions of the `BenchResult`, like the report itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from watchkeeper import format as fmt
from watchkeeper.analysis.acceptance import explain, result_curves
from watchkeeper.analysis.bench_types import CategoryStats
from watchkeeper.analysis.benchmark import ArmSpec, ArmStats, BenchResult
from watchkeeper.analysis.speculation import SpeedupBound
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.format import MISSING
from watchkeeper.publish import markdown as md

NONE = MISSING
_fixed = md.fixed

OVERHEAD_EFFICIENCY = 0.8
"""Below this share of the predicted speed-up, overhead (not acceptance) is what costs."""


# -- number formatting ------------------------------------------------------------------------


def ratio_text(value: float | None) -> str:
    """A ratio as the report prints it (2 decimals, "x"); the recommendation table uses it too."""
    return _fixed(value, 2, "x")


def _ci(ci: RatioCI | None) -> str:
    """The speed-up with its CI (`format.speedup`), then the report's own notes: the verdict,
    how many rounds would settle it, what the trimmed estimate set aside."""
    if ci is None or not ci.has_ci:
        return fmt.speedup(ci)  # without a CI there is no verdict either
    text = f"{fmt.speedup(ci)} {ci.verdict}"
    if ci.rounds_needed:
        text += f", ~{ci.rounds_needed} rounds to settle"
    elif ci.settle is not None and ci.settle.add_tasks:
        text += f", {ci.settle.describe()}"
    if ci.winsorized_cells:
        text += f", {ci.winsorized_cells} outlier cell(s) winsorized"
    if ci.tail_regression and ci.tail is not None:
        text += f"; suspicious: tail regression ({ci.tail.describe()})"
    return text


def _mib(value: int | None) -> str:
    return NONE if value is None else f"{value / (1 << 20):.0f}"


# -- sections ---------------------------------------------------------------------------------


def candidate_arms(result: BenchResult) -> list[ArmSpec]:
    """The arms compared with the baseline, in the bench's order."""
    return [a for a in result.arms if a.role == "candidate"]


def _arm_stats(result: BenchResult, arm: str) -> ArmStats | None:
    return next((s for s in result.arm_stats if s.arm == arm), None)


def ordered_categories(result: BenchResult) -> list[str]:
    """Measured categories in the method's order, any others after it sorted."""
    present = {c.category for c in result.categories}
    ordered = [c for c in result.method.categories if c in present]
    return ordered + sorted(present - set(ordered))


def summary_rows(result: BenchResult) -> list[list[str]]:
    rows = []
    for arm in result.arms:
        st = _arm_stats(result, arm.name)
        o = st.overall if st is not None else None
        rows.append(
            [
                arm.name,
                arm.role,
                md.text(arm.spec_type),
                md.text(arm.draft_n_max),
                _fixed(o.median_tps if o else None, 1),
                NONE if arm.role == "baseline" or o is None else _ci(o.speedup),
                acceptance_cell(o),
                _fixed(st.mean_accepted_per_draft if st else None, 2),
                fmt.share(o.identical_rate if o else None),
                _fixed(o.median_ttft_ms if o else None, 0),
                _mib(st.peak_rss_bytes if st else None),
                NONE if o is None else f"{o.errors}/{o.requests}",
            ]
        )
    return rows


def category_rows(result: BenchResult) -> list[list[str]]:
    rows = []
    base = result.baseline.name
    for category in ordered_categories(result):
        b = result.stats(base, category)
        for arm in candidate_arms(result):
            c = result.stats(arm.name, category)
            if c is None:
                continue
            rows.append(
                [
                    category,
                    arm.name,
                    _fixed(b.median_tps if b else None, 1),
                    _fixed(c.median_tps, 1),
                    _ci(c.speedup),
                    acceptance_cell(c),
                    fmt.share(c.identical_rate),
                ]
            )
    return rows


def _reading(
    predicted: float | None, efficiency: float | None, acceptance: float | None = None
) -> str:
    if predicted is None:
        return NONE
    if predicted <= 1.0:
        # With high acceptance a prediction at or below 1 can only come from the draft cost.
        if acceptance is not None and acceptance >= 0.8:
            return "draft cost limits it"
        return "acceptance limits it"
    if efficiency is not None and efficiency < OVERHEAD_EFFICIENCY:
        return "overhead eats the gain"
    return "close to the prediction"


def _verify_cell(arm: ArmSpec, bound: SpeedupBound | None) -> str:
    if arm.verify_cost is None:
        return _fixed(bound.verify_cost if bound else None, 2)
    at = f"{bound.verify_cost:.2f} " if bound else ""
    return f"{at}({arm.verify_cost:.2f} measured for {arm.verify_tokens} tokens)"


def bound_rows(result: BenchResult) -> list[list[str]]:
    rows = []
    for arm in candidate_arms(result):
        st = _arm_stats(result, arm.name)
        bound = st.bound if st else None
        o = st.overall if st else None
        cost = _fixed(bound.cost_ratio if bound else arm.cost_ratio, 2)
        if arm.cost_note:
            cost = f"{cost} ({arm.cost_note})"
        measured = o.speedup.estimate if o is not None and o.speedup is not None else None
        predicted = bound.predicted_speedup if bound else None
        rows.append(
            [
                arm.name,
                fmt.share(bound.acceptance if bound else (o.acceptance_rate if o else None)),
                _fixed(bound.draft_length if bound else (st.mean_draft_length if st else None), 2),
                cost,
                _verify_cell(arm, bound),
                _fixed(bound.expected_tokens_per_step if bound else None, 2),
                ratio_text(predicted),
                ratio_text(measured),
                _fixed(st.efficiency if st else None, 2),
                f"bound beaten: {st.bound_note}"
                if st is not None and st.bound_note
                else _reading(
                    predicted, st.efficiency if st else None, bound.acceptance if bound else None
                ),
            ]
        )
    return rows


def curve_rows(result: BenchResult) -> list[list[str]]:
    """One row per speculative arm: its acceptance at each draft position, and the reading."""
    rows = []
    for c in result_curves(result):
        shown = ", ".join(f"{r * 100:.0f}" for r in c.rates[:16])
        if len(c.rates) > 16:
            shown += ", ..."
        rows.append(
            [
                c.arm,
                f"{c.drafts:.0f}",
                _fixed(c.mean_accepted, 2),
                shown or NONE,
                "yes" if c.consistent else f"no ({c.position_sum:.0f} vs {c.accepted:.0f})",
                md.inline(explain(c).split(": ", 1)[-1]),
            ]
        )
    return rows


def distribution_rows(result: BenchResult) -> list[list[str]]:
    """One row per arm of the distribution check (extras["distribution"], issue 30)."""
    rows = []
    for d in result.extras.get("distribution") or []:
        check = d["check"]
        low, high = check["excess_ci"]
        identity = d.get("seeded_identity") or {}
        rows.append(
            [
                md.inline(d["arm"]),
                md.inline(_sampling_text(d["sampling"])),
                md.inline(d["verdict"]),
                str(check["tokens"]),
                f"{check['excess_nats']:+.3f} [{low:+.3f}, {high:+.3f}]",
                f"{check['pit_p']:.3g}",
                f"{check['surprisal_z']:+.2f}",
                md.inline(", ".join(f"{k} {v}" for k, v in identity.items()) or "n/a"),
                f"{d['seconds'] / 60:.1f}",
            ]
        )
    return rows


def _sampling_text(sampling: Mapping[str, Any]) -> str:
    parts = [f"T {sampling['temperature']:g}"]
    parts += [
        f"{k} {sampling[k]:g}" for k in ("top_k", "top_p", "min_p") if sampling.get(k) is not None
    ]
    return ", ".join(parts)


def acceptance_cell(s: CategoryStats | None) -> str:
    """An acceptance rate with its counts, accepted/drafted tokens: a category read 100% from
    a handful of drafts, and 0.0% beside a 1.06x speed-up, with nothing to say how little."""
    if s is None or s.acceptance_rate is None:
        return NONE
    return f"{fmt.share(s.acceptance_rate)} ({s.accepted}/{s.drafted})"
