"""The sweep report's "What acceptance pays here": the verification-pricing pass's break-even
acceptance (`analysis/verify_price.py`, written by `campaign/verify_price.py` as
`verify_price.json` in the reports directory), and each measured method's counted acceptance
against what it would need on this host.

Why beside the race: the race says which arm won here; this says why, in the one figure a
method's designer can act on. A method's step pays when its tokens per step (1 + n a) outweigh
what the step costs: the target's verification (priced by the pass, apart from any drafter)
plus its own drafting (the bench's measured cost ratio, 0 for n-gram lookup). So the
acceptance a method needs is the break-even plus its drafter's cost per drafted token, and an
acceptance below that cannot pay here whatever else changes. The figures are the pass's: a
pass measured on another host or build is named as such, since the price is this hardware's.
"""

from __future__ import annotations

import json
from pathlib import Path

from watchkeeper.analysis.benchmark import ALL, ArmSpec
from watchkeeper.analysis.verify_price import VerifyPrice, cost_check
from watchkeeper.format import MISSING, ci, share
from watchkeeper.publish import markdown as md
from watchkeeper.publish.sweep_view import SweepView

TITLE = "## What acceptance pays here"
VERIFY_PRICE_FILE = "verify_price.json"
"""Where the pass writes its figures (campaign/verify_price.py) and where the sweep looks for
them: the reports directory."""
LENGTH_SLACK = 1.0
"""A method drafting more than this many tokens a step away from the pass's length is priced
at the pass's length: its reading is marked indicative."""


def _reading(vp: VerifyPrice, acceptance: float, cost_ratio: float) -> str:
    low, high = vp.needed_span(cost_ratio)
    need = vp.needed(cost_ratio)
    if (low if low is not None else need) > 1.0:
        return "no acceptance pays at its drafting cost"
    if low is None or high is None:
        side = "above" if acceptance > need else "below"
        return f"{side} what it needs (no CI: {vp.rounds} round)"
    if acceptance > high:
        return "above what it needs: verification does not stop it paying"
    if acceptance < low:
        return "below what it needs: cannot pay here"
    return "within the CI of what it needs: unresolved"


def _need_text(vp: VerifyPrice, cost_ratio: float) -> str:
    low, high = vp.needed_span(cost_ratio)
    need = vp.needed(cost_ratio)
    if low is None or high is None:
        return share(need, 0)
    return f"{share(need, 0)} ({max(low, 0.0) * 100:.0f}-{min(high, 1.0) * 100:.0f}%)"


def _row(v: SweepView, vp: VerifyPrice, arm: ArmSpec) -> list[str] | None:
    stats = v.result.stats(arm.name, ALL)
    if stats is None or stats.acceptance_rate is None:
        return None
    st = next((s for s in v.result.arm_stats if s.arm == arm.name), None)
    length = st.mean_draft_length if st is not None else None
    cost = arm.cost_ratio
    reading = _reading(vp, stats.acceptance_rate, cost or 0.0)
    if cost is None and arm.draft_model:
        reading += "; its drafter's cost was not measured: it needs more than this"
    if length is not None and abs(length - vp.draft_n) > LENGTH_SLACK:
        reading += f"; drafts {length:.1f} a step, priced at {vp.draft_n}: indicative"
    return [
        arm.name,
        md.text(arm.spec_type),
        f"{share(stats.acceptance_rate)} ({stats.accepted}/{stats.drafted})",
        md.fixed(length, 1),
        MISSING if cost is None else f"{cost:.2f}",
        _need_text(vp, cost or 0.0),
        reading,
    ]


def _elsewhere(v: SweepView, vp: VerifyPrice) -> str:
    about = vp.about or {}
    other = []
    if about.get("host") and about["host"] != v.result.host.fingerprint:
        other.append("another host")
    if about.get("build") and about["build"] != v.result.build_version:
        other.append(f"build {about['build']}")
    if not other:
        return ""
    return (
        f" **Measured on {' and '.join(other)}, not this sweep's**: the price is that "
        "hardware's; rerun the pass here before reading the table."
    )


def verify_price_section(v: SweepView) -> list[str]:
    vp = v.verify_price
    if vp is None:
        return []
    if isinstance(vp, str):
        return [TITLE, "", md.inline(vp), ""]
    about = vp.about or {}
    model = about.get("model", "the target")
    rates = ", ".join(share(a.acceptance, 0) for a in vp.arms)
    cost_ci = (
        f" ({ci(vp.cost_low, vp.cost_high)})"
        if vp.cost_low is not None and vp.cost_high is not None
        else f" (no CI: {vp.rounds} round)"
    )
    out = [
        TITLE,
        "",
        f"Verification priced apart from any drafter: {md.inline(model)} alone against itself "
        f"with synthetic acceptance (`--spec-synth-len`, a tiny random drafter, draft length "
        f"{vp.draft_n}) at counted acceptance {rates}, paired over {vp.rounds} rounds "
        f"(campaign {about.get('campaign', MISSING)}, {about.get('measured_at', MISSING)}, "
        f"build {about.get('build', MISSING)}). "
        f"A plain decode step takes c = {vp.cost:.2f}{cost_ci} "
        f"of a speculative step, so a method drafting {vp.draft_n} tokens a step pays only "
        f"above the **break-even acceptance {vp.break_even.text()}** (accepted / drafted "
        f"tokens, as the server counts them). {cost_check(vp)}.{_elsewhere(v, vp)}",
        "",
    ]
    rows = [r for a in v.result.arms if a.role == "candidate" and (r := _row(v, vp, a))]
    if not rows:
        out += ["No measured arm drafted a token: no method to set against it.", ""]
        return out
    heads = ["arm", "spec type", "acceptance", "draft length", "drafter cost", "needs here"]
    out += [
        md.table([*heads, "reading"], rows, "llrrrrl"),
        "",
        "Needs here: the break-even plus the arm's drafter cost per drafted token (in target "
        "decode steps, as the bench measured it; 0 for n-gram lookup), 95% CI in brackets. "
        "A method below it cannot pay on this host whatever its drafter; above it, "
        "verification is not what stops it.",
        "",
    ]
    return out


def read_verify_price(reports: Path) -> VerifyPrice | str | None:
    """The pass's figures in a reports directory; None where there are none; a line saying
    why where the file cannot be read (the section prints it rather than losing the sweep
    whose report it ends)."""
    path = reports / VERIFY_PRICE_FILE
    if not path.is_file():
        return None
    try:
        return VerifyPrice.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (ValueError, KeyError, TypeError) as exc:
        return f"{path} could not be read ({type(exc).__name__}: {exc}); rerun the pass"
