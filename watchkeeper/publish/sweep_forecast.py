"""The sweep report's answers that travel to other hardware, and what its TTFT column means.

A sweep on two CPU cores finds no draft length that wins (a draft step costs 0.73 of a target
step there), but the acceptance it measured does not depend on the hardware: on a GPU, where a
small draft costs a few hundredths of a target step, the same acceptance gives another answer.
This section turns each measured draft arm's mean accepted length into a **forecast** of the
speed-up at other draft-to-target cost ratios, with the bound `analysis/speculation.py` uses
(DESIGN.md: the measured mean accepted length, verification of n+1 tokens at its measured batch
cost), checked against the measured speed-up at this host's ratio; it says what each arm adds
in memory, and names the arms the ceiling dropped, which have no acceptance here.

The TTFT column compares servers in different cache states when some arms get a fresh process
every round (their n-gram state outlives requests) while the baseline keeps one process and
restores cached prompts: `ttft_note` says so instead of letting 55 ms sit beside 2250 ms, and
`latency_section` sets the end-to-end and TTFT latency ratios (with CIs) beside the decode
speed-up for the arms that ran in the baseline's cache state.
"""

from __future__ import annotations

from pathlib import Path

from watchkeeper.analysis.benchmark import ALL, ArmSpec
from watchkeeper.analysis.latency import Estimate, ratio_over_rounds, result_latency
from watchkeeper.analysis.speculation import measured_bound
from watchkeeper.publish import markdown as md
from watchkeeper.publish.sweep_view import SweepView

RATIOS = (0.02, 0.05, 0.1, 0.25, 0.5)
"""Draft-to-target cost ratios to forecast at: a small draft on a GPU (0.02-0.1) to a CPU."""
MIB = 1 << 20


def _forecast(st_mean_acc: float, length: float, c: float, vt: float, vc: float) -> float:
    b = measured_bound(
        mean_accepted=st_mean_acc,
        draft_length=length,
        cost_ratio=c,
        verify_tokens=round(vt),
        verify_cost=vc,
        acceptance=0.0,
    )
    return b.predicted_speedup


def _draft_arms(v: SweepView) -> list[ArmSpec]:
    return [a for a in v.result.arms if a.role == "candidate" and a.draft_model]


def forecast_rows(v: SweepView) -> list[list[str]]:
    rows: list[list[str]] = []
    for arm in _draft_arms(v):
        st = next((s for s in v.result.arm_stats if s.arm == arm.name), None)
        b = st.bound if st is not None else None
        o = v.result.stats(arm.name, ALL)
        if st is None or b is None or st.mean_accepted_per_draft is None or o is None:
            why = "not measured (dropped before its first round, or no drafts)"
            rows.append([arm.name, md.text(arm.draft_n_max), "—", *["—"] * len(RATIOS), "—", why])
            continue
        length = st.mean_draft_length or float(arm.draft_n_max or 1)
        acc = st.mean_accepted_per_draft
        fc = [_forecast(acc, length, c, b.verify_tokens, b.verify_cost) for c in RATIOS]
        here = _forecast(acc, length, b.cost_ratio, b.verify_tokens, b.verify_cost)
        ci = o.speedup
        rows.append(
            [
                arm.name,
                md.text(arm.draft_n_max),
                f"{st.mean_accepted_per_draft:.2f} ({o.accepted}/{o.drafted} tokens)",
                *[f"{x:.2f}x" for x in fc],
                f"{here:.2f}x at {b.cost_ratio:.2f}",
                _check(here, ci.estimate if ci else None, ci.low if ci and ci.has_ci else None),
            ]
        )
    return rows


def _check(forecast: float, estimate: float | None, low: float | None) -> str:
    """The forecast at this host's ratio is a bound: a measured speed-up above it (its CI's
    low end above) means an input is wrong; below it, the costs it leaves out (sampling,
    batching, the server's own work) took the rest."""
    if estimate is None:
        return "no measured speed-up to check against"
    if low is not None and low > forecast:
        return f"measured {estimate:.2f}x, CI above the forecast: an input is wrong"
    if estimate > forecast:
        return f"measured {estimate:.2f}x, above the forecast but its CI reaches below it"
    return f"measured {estimate:.2f}x: at or below the forecast, as a bound must be"


def memory_rows(v: SweepView) -> list[list[str]]:
    """What each draft arm adds: its peak RSS over the baseline's, and the draft's file."""
    base = next((s for s in v.result.arm_stats if s.arm == v.result.baseline.name), None)
    rows = []
    for arm in _draft_arms(v):
        st = next((s for s in v.result.arm_stats if s.arm == arm.name), None)
        added = (
            f"{(st.peak_rss_bytes - base.peak_rss_bytes) / MIB:+.0f} MiB"
            if st is not None and base is not None and st.peak_rss_bytes and base.peak_rss_bytes
            else "not measured"
        )
        path = _draft_path(arm)
        size = f"{path.stat().st_size / MIB:.0f} MiB" if path and path.is_file() else "—"
        rows.append([arm.name, md.text(arm.draft_model), size, added])
    return rows


_DRAFT_FLAGS = ("--spec-draft-model", "--model-draft", "-md")


def _draft_path(arm: ArmSpec) -> Path | None:
    words = list(arm.argv)
    return next((Path(words[i + 1]) for i, w in enumerate(words[:-1]) if w in _DRAFT_FLAGS), None)


def forecast_section(v: SweepView) -> list[str]:
    if not _draft_arms(v):
        return []
    heads = [f"c={c:g}" for c in RATIOS]
    return [
        "## Forecast at other draft-to-target cost ratios",
        "",
        "**A forecast, not a measurement**: each measured draft arm's mean accepted length per "
        "draft, priced with this host's verification cost, at cost ratios c (one draft step as "
        "a share of one target step; a small draft on a GPU costs 0.02-0.1). Verification on a "
        "GPU is nearly flat in its tokens, so there verification is priced high; but the forecast "
        "leaves out sampling, batching and the server's own work, so it is an upper bound "
        "everywhere, not a promise. At this host's own ratio it is checked against the "
        "measured speed-up.",
        "",
        md.table(
            ["arm", "n_max", "accepted per draft (accepted/drafted)", *heads, "here", "check"],
            forecast_rows(v),
            "lrl" + "r" * len(RATIOS) + "rl",
        ),
        "",
        "What a draft arm adds in memory (peak RSS over the baseline's, as measured; the "
        "draft's weights as a file):",
        "",
        md.table(["arm", "draft model", "draft file", "added peak RSS"], memory_rows(v), "llrr"),
        "",
    ]


def ttft_note(v: SweepView) -> list[str]:
    """TTFT in equal cache states only: which arms' TTFTs compare, and why the rest do not."""
    renewed = set(v.result.method.renewed)
    if not renewed:
        return []
    kept = [a.name for a in v.result.arms if a.name not in renewed]
    fresh = [a.name for a in v.result.arms if a.name in renewed]
    return [
        f"TTFT is not comparable between {', '.join(kept)} and {', '.join(fresh)}: the latter "
        "got a fresh process every round (their n-gram state outlives requests), so every "
        "prompt was prefilled afresh, while the former kept one process whose prompt cache "
        "restored prompts it had seen. Compare TTFT within each group only (the latency "
        "table below compares only arms in the baseline's state).",
        "",
    ]


def _ratio_text(e: Estimate | None) -> str:
    if e is None:
        return "—"
    if not e.has_ci:
        return f"{e.estimate:.2f}x (no CI)"
    return f"{e.estimate:.2f}x ({e.low:.2f}-{e.high:.2f})"


def latency_rows(v: SweepView) -> list[list[str]]:
    """Per candidate: the decode speed-up beside its end-to-end and TTFT p90 latency ratios
    (candidate over baseline, paired by round, 95% CI; below 1 is faster), where the two ran in
    the same cache state; else why not."""
    table = {s.arm: s for s in result_latency(v.result)}
    base_name = v.result.baseline.name
    base = table.get(base_name)
    renewed = set(v.result.method.renewed)
    rows = []
    for arm in v.result.arms:
        if arm.role != "candidate" or (st := v.result.stats(arm.name, ALL)) is None:
            continue
        cand = table.get(arm.name)
        decode = _ratio_text(
            Estimate(st.speedup.estimate, st.speedup.low, st.speedup.high, 2)
            if st.speedup and st.speedup.has_ci
            else None
        )
        if (arm.name in renewed) != (base_name in renewed):
            why = "not comparable: a fresh process every round on one side only (cache states)"
            rows.append([arm.name, decode, "—", "—", why])
            continue
        if base is None or cand is None:
            rows.append([arm.name, decode, "—", "—", "no latency recorded"])
            continue
        e2e = ratio_over_rounds(base.by_round.get("e2e_p90", {}), cand.by_round.get("e2e_p90", {}))
        ttft = ratio_over_rounds(
            base.by_round.get("ttft_p90", {}), cand.by_round.get("ttft_p90", {})
        )
        costs = e2e is not None and e2e.has_ci and e2e.low > 1.0
        faster = st.speedup is not None and st.speedup.verdict == "faster"
        reading = (
            "decodes faster but costs end-to-end latency: not to be recommended on decode speed "
            "alone"
            if costs and faster
            else "same cache state"
        )
        rows.append([arm.name, decode, _ratio_text(e2e), _ratio_text(ttft), reading])
    return rows


def latency_section(v: SweepView) -> list[str]:
    rows = latency_rows(v)
    if not rows:
        return []
    return [
        "## What users feel: end-to-end latency beside decode speed",
        "",
        "Candidate over baseline, paired by round, geometric mean with a 95% CI over rounds: "
        "decode tok/s (above 1 is faster), p90 end-to-end and p90 TTFT latency (below 1 is "
        "faster). Only arms that ran in the baseline's cache state are compared.",
        "",
        md.table(
            ["arm", "decode speed-up", "e2e p90 ratio", "TTFT p90 ratio", "reading"],
            rows,
            "lrrrl",
        ),
        "",
    ]
