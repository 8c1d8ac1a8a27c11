"""Identity in both modes where the sweep prints a verdict (issue 53, item 2), and where its
time went (issue 52, item 1): the acceptance line says exact and as-served counts side by side,
the race section splits the wall time."""

from __future__ import annotations

from dataclasses import replace

from support.sweepview import sweep_view as _view

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.checks.classify import IdentityVerdicts
from watchkeeper.checks.identity import IdentityResult
from watchkeeper.checks.served_identity import served_summary, served_text
from watchkeeper.publish.sweep_report import render_sweep_sections


def _verdicts() -> IdentityVerdicts:
    """What the 2026-11-27 soak saw as served for the n-gram arm, in small: every probe a near
    tie (the replay's gap is the one kept), none identical, none a mismatch; a draft arm with
    one identical probe and one mismatch."""
    v = IdentityVerdicts()
    for i, gap in enumerate((0.012, 0.031, 0.004)):
        v.overrides[("ngram", f"t{i}")] = IdentityResult(
            "near_tie", 7, margin=0.5, replay={"margin": gap}
        )
    v.overrides[("draft", "t0")] = IdentityResult("identical")
    v.overrides[("draft", "t1")] = IdentityResult("mismatch", 3, margin=2.0)
    v.modes["ngram"] = {"mode": "batched"}
    return v


def test_the_served_summary_counts_every_verdict_and_keeps_the_largest_near_tie_gap() -> None:
    s = served_summary(_verdicts(), ["ngram", "draft", "unprobed"])
    assert s["ngram"]["probes"] == 3
    assert s["ngram"]["counts"]["near_tie"] == 3 and s["ngram"]["counts"]["identical"] == 0
    assert s["ngram"]["largest_near_tie_gap"] == 0.031
    assert s["draft"]["counts"] == {
        "identical": 1, "near_tie": 0, "batch_variance": 0, "length_only": 0,
        "unverified": 0, "mismatch": 1,
    }  # fmt: skip
    assert s["draft"]["largest_near_tie_gap"] is None
    assert s["unprobed"]["probes"] == 0
    assert served_text(s["ngram"]) == (
        "identical 0 of 3, near ties 3 (largest gap 0.031 nats), mismatches 0"
    )
    assert served_text(s["draft"]) == "identical 1 of 2, near ties 0, mismatches 1"
    assert served_text(None) == ""


def test_the_acceptance_line_says_both_modes_with_counts(result: BenchResult) -> None:
    cand = next(a.name for a in result.arms if a.role == "candidate" and a.speculative)
    served = served_summary(replace(_verdicts(), overrides={
        (cand, k[1]): r for k, r in _verdicts().overrides.items() if k[0] == "ngram"
    }), [cand])  # fmt: skip
    extras = {
        **result.extras,
        "identity_served": served,
        "identity_modes": {cand: {"mode": "exact"}},
    }
    text = render_sweep_sections(_view(replace(result, extras=extras), None))
    line = next(x for x in text.splitlines() if x.startswith("1. **Identical output"))
    # The claim's counts: probes where it drafted, exact and as served.
    assert "as served: identical 0 of 3" in line.split("**")[2], line
    assert (
        "As served (the rounds' own servers, batched prompt processing and draft "
        "verification: what users get): identical 0 of 3, near ties 3" in line
    )
    assert "Exact mode (`--ubatch-size 1` on both sides" in line
    assert "As served (the rounds' own servers" in line and "only a mismatch" in line
    # Without the served pass (a bench, or an old campaign), the line is as before.
    plain = render_sweep_sections(_view(result, None))
    line = next(x for x in plain.splitlines() if x.startswith("1. **Identical output"))
    assert "as served" not in line.lower()


def test_the_race_section_says_where_the_time_went(result: BenchResult) -> None:
    split = {
        "seconds": {
            "server starts": 60.0,
            "cost calibration": 90.0,
            "warm-ups": 30.0,
            "measured rounds": 1200.0,
            "identity, as served": 120.0,
            "identity, exact": 240.0,
        },
        "rounds": [500.0, 400.0, 300.0],
    }
    view = _view(replace(result, extras={**result.extras, "time_split": split}), None)
    text = render_sweep_sections(view)
    line = next(x for x in text.splitlines() if x.startswith("Where the time went"))
    assert "measured rounds 20.0 min (3 round(s): 8.3, 6.7, 5.0 min)" in line, line
    assert "server starts 1.0 min" in line and "identity, exact 4.0 min" in line
    # 1800 s of wall time, 1740 s accounted for: the rest is named, and the identity share.
    assert "the rest (preparing the arms, racing looks, analysis, report) 1.0 min" in line
    assert "The identity pass took 6.0 min, 20% of the wall time." in line
    assert "Where the time went" not in render_sweep_sections(_view(result, None))
