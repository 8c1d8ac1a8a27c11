"""The sweep's own parts of `reports/speculative_benchmark.md`: the opening lines (hardware,
models, sampler and what the answer means there), the race, a winner per category, the one
setting for the whole workload and what each category gives up under it, why draft lengths
win or lose (the acceptance curve against the bound), the request's acceptance criteria, and
the service file. Pure functions of a `SweepView` (`publish.sweep_view`): no clock, no database.

The request behind the sweep asked three things of a recommendation: identical output, a
measured speed-up (1.5x or better), and a server that stays up under sustained load overnight.
Each is answered from the campaign's own evidence (the soak's, for stability), or with the
exact command that would produce it; none is assumed.
"""

from __future__ import annotations

import math

from watchkeeper.analysis.acceptance import explain, result_curves
from watchkeeper.analysis.benchmark import ALL, BenchResult
from watchkeeper.analysis.identity_gate import identity_status
from watchkeeper.analysis.racing_types import Drop
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.config import ProfileConfig
from watchkeeper.publish import markdown as md
from watchkeeper.publish.deliverable import RECORD_NAME
from watchkeeper.publish.soak_report import BEGIN, END, SOAK_REPORT, stability_line
from watchkeeper.publish.sweep_view import SweepView, recommendation_soak_command

REQUEST_SPEEDUP = 1.5
"""The speed-up the requesting team expects from speculation ("1.5-3x")."""
VERDICTS = ("identical", "near_tie", "batch_variance", "length_only", "unverified", "mismatch")


def preface(v: SweepView) -> str:
    """The report's first lines: where it was measured, with what, and what the answer means
    there, so "keep the baseline" is not read as "speculation does not work"."""
    r = v.record
    if r is None:
        return ""
    cut = f", answers cut at {v.max_tokens} tokens" if v.max_tokens > 0 else ""
    tasks = v.result.method.tasks
    cats = len(v.result.method.categories)
    load = f"; load: {md.inline(r.load)}" if r.load else ""
    return "\n".join(
        [
            f"Measured on {md.inline(r.hardware)}, build {md.inline(r.build)}; "
            f"{md.inline(r.models)}; sampler {md.inline(r.sampler)}; {tasks} tasks in {cats} "
            f"categories{cut}{load}.",
            "",
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
    probed = [a.name for a in v.arms if a.name in v.race.active and a.name not in v.unprobed]
    out.append(
        "Identity probes (temperature 0, every divergence replayed on the baseline) ran on "
        f"every arm a recommendation could name: {', '.join(probed) or 'none'}."
        + "".join(f" Not on {arm}: {md.inline(why)}." for arm, why in v.unprobed.items())
        + _probe_tasks_text(v)
    )
    out.append("")
    return out


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
            settle = (
                f"~{d.rounds_needed} rounds"
                if d.rounds_needed
                else "more rounds alone would not: the tasks differ too much"
            )
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
    """The arm the request's criteria are checked on: the recommended one when it
    speculates, else the closest speculative setting (for the record)."""
    spec = {a.name for a in v.result.arms if a.role == "candidate" and a.speculative}
    if v.chosen in spec:
        return v.chosen, "the recommended arm"
    if v.record is not None and v.record.closest is not None:
        best: str | None = v.record.closest.name
    else:
        probed = {r.arm for r in v.result.identity} & spec
        best = max(
            probed or spec, key=lambda a: (_estimate(v.result, a, ALL) or 0.0, a), default=None
        )
    return best, "the baseline is recommended; shown for the closest speculative setting"


def control_note(v: SweepView) -> list[str]:
    """What the control row's divergences are: the baseline against itself, not speculation.
    Any that is not `identical` (a mismatch, or `unverified`: nothing to weigh it by)."""
    c = v.result.control
    if c is None:
        return []
    odd = {k: n for k, n in c.verdicts.items() if k != "identical" and n}
    if not odd:
        return []
    labels = ", ".join(f"{k} {n}" for k, n in sorted(odd.items()))
    return [
        f"The control row's {sum(odd.values())} divergence(s) ({labels}) are the baseline "
        "against its own previous measured round: the same server, which drafts nothing, so "
        "they are not speculation. Those requests reuse the server's prompt cache (each round "
        "prefills a different part of the prompt, in a differently sized batch, so the float "
        "sums differ in their last bits) and carry no logprobs, so a divergence there cannot be "
        "replayed or priced. They measure how far one server's greedy output moves between two "
        "passes. The speculative arms are judged on the probe pass instead: every prompt "
        "prefilled afresh, with logprobs, each divergence replayed on the baseline.",
        "",
    ]


def _criteria_section(v: SweepView) -> list[str]:
    out = ["## The request's acceptance criteria", ""]
    out.append(
        "The request asked for three things: identical output, a measurable speed-up "
        f"({REQUEST_SPEEDUP:g}x or better), and a server that stays stable under sustained "
        "load overnight."
    )
    out.append("")
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
    status = identity_status(v.result, arm)
    if mismatches:
        identical = "not met"
    elif status.resolved:
        identical = "met"
    else:
        identical = "unresolved (no recommendation may name this arm)"
    out.append(
        f"1. **Identical output: {identical}.** Identity verdicts of {sum(verdicts.values())} "
        f"probes: {counts}"
        + (
            "."
            if status.resolved and v.result.method.temperature == 0
            else f"; {md.inline(status.text)}."
        )
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
    elif ci.low >= REQUEST_SPEEDUP:
        speed = "met"
    elif ci.high < REQUEST_SPEEDUP:
        speed = "not met"
    else:
        speed = "not shown (the CI straddles it)"
    level = " (95% CI)" if ci is not None and ci.has_ci else ""
    out.append(f"2. **Speed-up of {REQUEST_SPEEDUP:g}x: {speed}.** Measured {_ci(ci)}{level}.")
    if v.soak is not None:
        fallback = (
            f"3. **Stable under sustained load: {md.text(v.soak.get('verdict'))}** (latest "
            f"soak of {v.chosen} on this host: campaign {v.soak.get('campaign_id')}, "
            f"{v.soak.get('started_at')}, {md.text(v.soak.get('duration'))}, "
            f"{md.inline(str(v.soak.get('headline') or v.soak.get('status')))})."
        )
    else:
        fallback = (
            f"3. **Stable under sustained load: not yet measured** for {arm} beside the "
            f"baseline on this host. Run `{recommendation_soak_command()}` with [service] "
            "slots = 4 (it soaks the unit as shipped, and refuses a depth beyond the unit's "
            f"slots): it writes [{SOAK_REPORT}]({SOAK_REPORT}) beside this report and fills in "
            "this line."
        )
    out += [BEGIN, stability_line(v.soak_report, fallback=fallback), END]
    out.append("")
    out += control_note(v)
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
        f"`{v.service_path}` runs {v.chosen} (campaign {v.result.campaign_id}), rendered with "
        "this host's [service] keys; its header says what came closest and what would change "
        "the answer. For another host, render it from the committed recommendation "
        f"(`{RECORD_NAME}` beside this report) with that host's paths: `watchkeeper unit "
        "--recommendation reports/" + RECORD_NAME + " --binary /opt/llama.cpp/bin/llama-server "
        "--model-dir /srv/models --user llama --port 8080 --output "
        "/etc/systemd/system/llama-server-speculative.service`.",
    ]
    return "\n".join(parts).rstrip() + "\n"
