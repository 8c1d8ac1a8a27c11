"""The sweep report's check of the request's acceptance criteria (identical output, a
measured speed-up of 1.5x or better, a server stable under sustained load), each answered from
the campaign's own evidence or with the command that would produce it. Pure functions of a
`SweepView`."""

from __future__ import annotations

import math

from watchkeeper.analysis.benchmark import ALL
from watchkeeper.analysis.identity_gate import identity_status
from watchkeeper.checks.served_identity import served_text
from watchkeeper.config import ProfileConfig
from watchkeeper.publish import markdown as md
from watchkeeper.publish.identity_claim import IdentityClaim, identity_claim
from watchkeeper.publish.soak_report import BEGIN, END, SOAK_REPORT, stability_line
from watchkeeper.publish.sweep_view import SweepView, recommendation_soak_command
from watchkeeper.publish.sweep_view import ratio_text as _ci
from watchkeeper.publish.sweep_workload import estimate as _estimate

REQUEST_SPEEDUP = 1.5
"""The speed-up the requesting team expects from speculation ("1.5-3x")."""
VERDICTS = ("identical", "near_tie", "batch_variance", "length_only", "unverified", "mismatch")


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


def not_yet_measured(arm: str, record: str = "") -> str:
    """Criterion 3 where no soak of this sweep's pick exists: the command that soaks `arm`
    from the set's own `record` (its path; empty: the default set's). Its own function so
    the committed campaign reports can be held to it (tests/publish/test_committed_rerender.py)."""
    command = (
        recommendation_soak_command(record=record) if record else recommendation_soak_command()
    )
    return (
        f"3. **Stable under sustained load: not yet measured** for {arm} beside the "
        f"baseline on this host. Run `{command}` with [service] "
        "slots = 4 (it soaks the unit as shipped, and refuses a depth beyond the unit's "
        f"slots): it writes [{SOAK_REPORT}]({SOAK_REPORT}) beside this report and fills in "
        "this line."
    )


def criteria_section(v: SweepView) -> list[str]:
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
    served = (v.result.extras.get("identity_served") or {}).get(arm)
    claim = drafted_claim(v, arm, served, resolved=status.resolved)
    if mismatches:
        identical = "not met"
    elif status.resolved:
        identical = claim.label
    else:
        identical = "unresolved (no recommendation may name this arm)"
    exact = any(
        m.get("mode") == "exact"
        for a, m in (v.result.extras.get("identity_modes") or {}).items()
        if a == arm
    )
    mode = " in the exact mode" if exact and "exact mode" not in identical else ""
    out.append(
        f"1. **Identical output: {identical}{mode}** ({claim.counts}). "
        + (
            "Exact mode (`--ubatch-size 1` on both sides, so any divergence is speculation's): "
            if exact
            else ""
        )
        + f"identity verdicts of {sum(verdicts.values())} probes: {counts}"
        + (
            "."
            if status.resolved and v.result.method.temperature == 0
            else f"; {md.inline(status.text)}."
        )
        + (
            " As served (the rounds' own servers, batched prompt processing and draft "
            f"verification: what users get): {served_text(served)}; a near tie is the "
            "baseline's top two tokens nearly tied where batched verification rounds "
            "differently, only a mismatch is a correctness bug."
            if served
            else ""
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
            f"3. **Stable under sustained load: {md.text(v.soak.get('verdict'))}** (soak "
            f"of this sweep's {v.chosen} on this host: campaign {v.soak.get('campaign_id')}, "
            f"{v.soak.get('started_at')}, {md.text(v.soak.get('duration'))}, "
            f"{md.inline(str(v.soak.get('headline') or v.soak.get('status')))})."
        )
    else:
        record = str((v.record.extra.get("record") if v.record else None) or "")
        fallback = not_yet_measured(arm, record)
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


def drafted_claim(
    v: SweepView, arm: str, served: dict[str, object] | None, *, resolved: bool
) -> IdentityClaim:
    """The identity claim from the probes in categories where ``arm`` drafted."""
    probes: list[tuple[str, str]] = []
    drafted: dict[str, tuple[int, int]] = {}
    for st in v.result.categories:
        if st.arm == arm:
            probes += [(st.category, k) for k, n in st.verdicts.items() for _ in range(n)]
            drafted[st.category] = (st.drafted, st.accepted)
    return identity_claim(probes, drafted, served, resolved=resolved)
