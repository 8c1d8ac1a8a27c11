"""The sweep's own parts of `reports/speculative_benchmark.md`: the opening lines (hardware,
models, sampler and what the answer means there), the race, why draft lengths win or lose (the
acceptance curve against the bound) and the service file; the answer per workload
(`publish.sweep_workload`) and the request's acceptance criteria (`publish.sweep_criteria`)
have modules of their own. Pure functions of a `SweepView` (`publish.sweep_view`): no clock,
no database.

The request behind the sweep asked three things of a recommendation: identical output, a
measured speed-up (1.5x or better), and a server that stays up under sustained load overnight.
Each is answered from the campaign's own evidence (the soak's, for stability), or with the
exact command that would produce it; none is assumed.
"""

from __future__ import annotations

from pathlib import Path

from watchkeeper.analysis.aa_control import control_reading
from watchkeeper.analysis.acceptance import explain, result_curves
from watchkeeper.analysis.racing_types import Drop
from watchkeeper.publish import markdown as md
from watchkeeper.publish.deliverable import RECORD_NAME
from watchkeeper.publish.sweep_criteria import criteria_section
from watchkeeper.publish.sweep_forecast import forecast_section, latency_section, ttft_note
from watchkeeper.publish.sweep_view import SweepView
from watchkeeper.publish.sweep_view import ratio_text as _ci
from watchkeeper.publish.sweep_workload import winner_section, workload_section
from watchkeeper.publish.verify_price_section import verify_price_section


def preface(v: SweepView) -> str:
    """The report's first lines: where the pooled pick differs from the answer (the mix's, the
    headline's), one line saying so; where it was measured, with what, and what the answer
    means there, so "keep the baseline" is not read as "speculation does not work"; and where
    the race ran its A/A control, what that control read (analysis/aa_control.py): the first
    thing to check before believing any ratio below."""
    r = v.record
    pooled = v.recommendation.pooled_note
    if r is None:
        return md.inline(pooled)
    cut = f", answers cut at {v.max_tokens} tokens" if v.max_tokens > 0 else ""
    tasks = v.result.method.tasks
    cats = len(v.result.method.categories)
    load = f"; load: {md.inline(r.load)}" if r.load else ""
    control = control_reading(v.result)
    return "\n".join(
        ([md.inline(pooled), ""] if pooled else [])
        + [
            f"Measured on {md.inline(r.hardware)}, build {md.inline(r.build)}; "
            f"{md.inline(r.models)}; sampler {md.inline(r.sampler)}; {tasks} tasks in {cats} "
            f"{'category' if cats == 1 else 'categories'}{cut}{load}.",
            "",
        ]
        + ([f"{md.inline(control.line())}.", ""] if control is not None else [])
        + [
            f"What it means: {md.inline(r.meaning)}.",
        ]
        + (
            [
                "",
                "What would change the answer: "
                + "; ".join(md.inline(c) for c in r.would_change)
                + ".",
            ]
            if r.would_change
            else []
        )
    )


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
    if v.race_plan:
        out += [f"Planned before round 1: {md.inline(v.race_plan)}.", ""]
    if v.task_cis:
        read = (
            "The summary table and the recommendation (pooled and for the mix) read these "
            "intervals, each named '95% CI over N tasks'"
            + (
                f". {md.inline(v.categories_over_tasks)}."
                if v.categories_over_tasks
                else "; the per-category tables carry none (an interval over tasks is over the "
                "whole set)."
            )
            if v.answer_over_tasks
            else "The tables above carry no CI from rounds this few; the recommendation reads "
            "those tables, so it names no arm on these intervals."
        )
        out += [
            f"Every racing arm short of a CI over rounds has one over its tasks: "
            f"{md.inline(v.task_cis)}. {read}",
            "",
        ]
    if v.max_tokens > 0:
        out.append(
            f"Every answer was cut at {v.max_tokens} tokens (`--max-tokens`; 0 keeps the task "
            "set's own lengths). Decode speed shows in those tokens already; n-gram drafting "
            "that pays only late in a long, repetitive answer is understated."
        )
        out.append("")
    out += time_split_lines(v)
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
    probed = [a.name for a in v.arms if a.name in v.race.active and a.name not in v.unprobed]
    both = (
        "as served on the rounds' own servers, then in the exact mode on fresh "
        "`--ubatch-size 1` servers; "
        if v.result.extras.get("identity_served")
        else ""
    )
    out.append(
        f"Identity probes (temperature 0, {both}every divergence replayed on the baseline) ran "
        "on every arm a recommendation could name (an estimate beyond the threshold, overall or "
        "in a category, or the closest setting), best estimate first within a quarter of the "
        f"budget: {', '.join(probed) or 'none'}."
        + "".join(f" Not on {arm}: {md.inline(why)}." for arm, why in v.unprobed.items())
        + (
            f" The as-served pass (`--identity-as-served`) was skipped: "
            f"{md.inline(v.served_skipped)}."
            if v.served_skipped
            else ""
        )
        + _probe_tasks_text(v)
    )
    out.append("")
    return out


def time_split_lines(v: SweepView) -> list[str]:
    """Where the wall time went, so the next budget can be planned: the rounds a CI needs are
    bought by shrinking the rest."""
    split = v.result.extras.get("time_split") or {}
    seconds: dict[str, float] = split.get("seconds") or {}
    if not seconds:
        return []
    rounds = split.get("rounds") or []
    parts = []
    for name, s in seconds.items():
        text = f"{name} {s / 60:.1f} min"
        if name == "measured rounds" and rounds:
            each = ", ".join(f"{r / 60:.1f}" for r in rounds)
            text += f" ({len(rounds)} round(s): {each} min)"
        parts.append(text)
    other = v.wall_s - sum(seconds.values())
    if other > 0:
        parts.append(
            f"the rest (preparing the arms, racing looks, analysis, report) {other / 60:.1f} min"
        )
    identity = sum(seconds.get(k, 0.0) for k in ("identity, as served", "identity, exact"))
    share = (
        f" The identity pass took {identity / 60:.1f} min, {identity / v.wall_s:.0%} of the wall "
        "time."
        if v.wall_s > 0 and identity > 0
        else ""
    )
    return [f"Where the time went: {'; '.join(parts)}.{share}", ""]


def _probe_tasks_text(v: SweepView) -> str:
    """Which tasks the probes covered, where fewer than were measured: the identity counts
    below are counts of those probes."""
    if not v.probe_tasks:
        return ""
    measured = v.result.method.tasks
    return (
        f" They ran on {len(v.probe_tasks)} of the {measured} measured tasks "
        f"({', '.join(md.inline(t) for t in v.probe_tasks)}: the first of each category "
        "by `--identity-per-category`): in the exact identity mode each probe prefills its prompt "
        "one token at a time, several times a measured request's cost on a CPU."
    )


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


def render_sweep_sections(v: SweepView) -> str:
    parts = [
        *_race_section(v),
        *winner_section(v),
        *workload_section(v),
        *_curve_section(v),
        *verify_price_section(v),
        *ttft_note(v),
        *latency_section(v),
        *forecast_section(v),
        *criteria_section(v),
        *service_file_section(v),
    ]
    return "\n".join(parts).rstrip() + "\n"


def service_file_section(v: SweepView) -> list[str]:
    """How to render this set's own unit elsewhere: its own record and unit name (the
    code-edit set's report told the reader to render the default set's unit)."""
    extra = v.record.extra if v.record is not None else {}
    record = str(extra.get("record") or f"reports/{RECORD_NAME}")
    name = Path(v.service_path).name
    port = (extra.get("served") or {}).get("port", 8080)
    return [
        "## Service file",
        "",
        f"`{v.service_path}` runs {v.chosen} (campaign {v.result.campaign_id}), rendered with "
        "this host's [service] keys; its header says what came closest and what would change "
        "the answer. For another host, render it from the committed recommendation "
        f"(`{RECORD_NAME}` beside this report) with that host's paths: `watchkeeper unit "
        f"--recommendation {record} --binary /opt/llama.cpp/bin/llama-server "
        f"--model-dir /srv/models --user llama --port {port} --output "
        f"/etc/systemd/system/{name}`.",
    ]
