"""The verification price and its break-even acceptance (analysis/verify_price.py) on seeded
synthetic passes (simulation/verify_price.py): the CI holds the true break-even at its level,
a break-even beyond the measured acceptances is said as "above 73%", never extrapolated,
"no acceptance pays" where even 100% cannot, and the pairing reads the server's own counts;
the sweep report's "What acceptance pays here" (publish/verify_price_section.py) on the
synthetic bench result."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.sweepview import sweep_view as _view

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.verify_price import (
    VerifyPrice,
    cost_check,
    fit,
    round_points,
    synth_length,
)
from watchkeeper.load.records import RequestSample
from watchkeeper.publish.sweep_report import render_sweep_sections
from watchkeeper.publish.sweep_view import SweepView
from watchkeeper.publish.verify_price_section import (
    VERIFY_PRICE_FILE,
    read_verify_price,
    verify_price_section,
)
from watchkeeper.simulation.verify_price import coverage, passes, true_break_even


def test_the_break_even_is_bracketed_where_the_arms_measured_around_it() -> None:
    vp = fit(passes(1, cost=1 / 3), 4)  # a* = 0.5
    be = vp.break_even
    assert be.kind == "bracketed" and be.low is not None and be.high is not None
    assert be.low <= 0.5 <= be.high and be.measured_low <= be.low and be.high <= be.measured_high
    assert be.text() == f"{be.estimate:.0%} (95% CI {be.low * 100:.0f}-{be.high * 100:.0f}%)"
    assert vp.cost_low is not None and vp.cost_low < vp.cost < (vp.cost_high or 0)
    assert "spread" in cost_check(vp)


def test_the_ci_holds_the_true_break_even_at_its_level() -> None:
    """400 passes of 3 rounds at c = 1/3 (a* = 50%): 382 covered (95.5%) when written."""
    cov = coverage(400, cost=1 / 3, seed=100)
    assert 0.92 <= cov.rate <= 0.98, cov
    assert cov.wrong_bracket <= 0.08 * cov.runs, cov


def test_a_break_even_beyond_every_measured_rate_is_above_the_highest_not_a_figure() -> None:
    vp = fit(passes(2, cost=0.2), 4)  # a* = 100%: no arm reaches it
    be = vp.break_even
    assert be.kind == "above" and be.low is not None and be.low > be.measured_high
    assert be.text() == f"above {be.measured_high:.0%}"
    assert true_break_even(0.2) > be.measured_high


def test_one_end_beyond_the_measured_rates_is_left_open() -> None:
    vp = fit(passes(3, cost=0.25), 4)  # a* = 75%, the top arm's neighbourhood
    be = vp.break_even
    assert be.kind == "partly", be
    assert f"to above {be.measured_high:.0%}" in be.text()


def test_below_and_none_pays() -> None:
    low = fit(passes(4, cost=0.9), 4).break_even
    assert low.kind == "below" and low.text() == f"below {low.measured_low:.0%}"
    none = fit(passes(5, cost=0.15), 4).break_even  # 5 tokens a step at 0.15: 0.75x
    assert none.kind == "none-pays" and "no acceptance pays" in none.text()


def test_one_round_has_no_ci_and_says_so() -> None:
    be = fit(passes(6, cost=0.4, rounds=1), 4).break_even
    assert be.kind == "no-ci" and be.low is None and be.text().endswith("(no CI: 1 round)")
    none = fit(passes(6, cost=0.15, rounds=1), 4).break_even
    assert none.kind == "no-ci" and none.text().startswith("no acceptance pays at the estimate")


def test_needed_adds_the_drafters_own_cost() -> None:
    vp = fit(passes(7, cost=1 / 3), 4)
    assert vp.needed(0.0) == pytest.approx(vp.break_even.estimate)
    # A draft token costing a tenth of a target step adds n x 0.1 plain steps: 0.1 more.
    assert vp.needed(0.1) == pytest.approx(vp.break_even.estimate + 0.1)
    low, high = vp.needed_span(0.1)
    assert low is not None and high is not None and low < vp.needed(0.1) < high


def test_json_round_trip_keeps_the_statement() -> None:
    vp = fit(passes(8, cost=0.3), 4, about={"target": "qwen"})
    data = vp.to_json()
    assert data["break_even"]["text"] == vp.break_even.text()
    back = VerifyPrice.from_json(data)
    assert back == vp


def test_synth_length_is_one_plus_n_times_the_acceptance() -> None:
    assert synth_length(4, 0.5) == 3.0 and synth_length(4, 0.0) == 1.0
    with pytest.raises(ValueError, match="within"):
        synth_length(4, 1.5)


def _req(
    task: str, tps: float, drafted: int | None = None, accepted: int | None = None
) -> RequestSample:
    return RequestSample(
        task_id=task, category="prose", seq=0, started_at=datetime(2026, 12, 7, tzinfo=UTC),
        decode_tps_server=tps, draft_n=drafted, draft_n_accepted=accepted,
    )  # fmt: skip


def test_round_points_pair_by_round_and_read_the_servers_counts() -> None:
    cells = {
        ("base", 1): {"a": _req("a", 10.0), "b": _req("b", 20.0)},
        ("s50", 1): {"a": _req("a", 15.0, 40, 20), "b": _req("b", 20.0, 40, 22)},
        ("base", 2): {"a": _req("a", 12.0)},
        ("s50", 2): {"a": _req("a", 12.0, 40, 18), "b": _req("b", 30.0, 40, 40)},
        ("s00", 2): {"a": _req("a", 6.0, 0, 0)},  # drafted nothing: prices nothing
    }
    pts = round_points(cells, "base", {"s50": 0.5, "s00": 0.0})
    assert [(p.arm, p.round) for p in pts] == [("s50", 1), ("s50", 2)]
    first, second = pts
    assert first.speedup == pytest.approx(math.sqrt(1.5 * 1.0)) and first.tasks == 2
    assert (first.drafted, first.accepted) == (80, 42)
    # Round 2's task b has no baseline request: it neither pairs nor counts.
    assert (second.drafted, second.accepted, second.tasks) == (40, 18, 1)


def _priced(result: BenchResult, cost: float, **about: str) -> SweepView:
    vp = fit(passes(9, cost=cost), 4, about={"host": result.host.fingerprint, **about})
    return replace(_view(result, None), verify_price=vp)


def test_the_report_sets_each_arms_acceptance_against_what_it_needs(result: BenchResult) -> None:
    """The fixture: draft4 accepts 65% at a drafter cost of 0.18 target steps, ngram 40% for
    free but drafting 2.5 tokens a step. At c = 1/3 (break-even 50%) draft4 needs ~68%."""
    v = _priced(result, 1 / 3, build=result.build_version)
    text = "\n".join(verify_price_section(v))
    assert text.startswith("## What acceptance pays here")
    assert f"**break-even acceptance {v.verify_price.break_even.text()}**" in text  # type: ignore[union-attr]
    assert "Measured on" not in text
    rows = {line.split(" | ")[0].strip("| "): line for line in text.splitlines() if "|" in line}
    assert "65.0% (520/800)" in rows["draft4"] and "0.18" in rows["draft4"]
    assert "within the CI of what it needs" in rows["draft4"] or "below" in rows["draft4"]
    assert "below what it needs: cannot pay here" in rows["ngram"]
    assert "drafts 2.5 a step, priced at 4: indicative" in rows["ngram"]
    assert "baseline" not in rows
    assert text in render_sweep_sections(v)


def test_a_cheap_verification_lets_free_lookup_pay_and_names_another_hosts_pass(
    result: BenchResult,
) -> None:
    v = _priced(result, 0.6, build="b0001")  # break-even 17%: below every measured rate
    text = "\n".join(verify_price_section(v))
    assert "break-even acceptance below" in text
    assert "**Measured on build b0001, not this sweep's**" in text
    ngram = next(line for line in text.splitlines() if line.startswith("| ngram"))
    assert "above what it needs" in ngram


def test_no_pass_no_section_and_an_unreadable_one_says_so(
    result: BenchResult, tmp_path: Path
) -> None:
    assert verify_price_section(_view(result, None)) == []
    assert "What acceptance pays here" not in render_sweep_sections(_view(result, None))
    assert read_verify_price(tmp_path) is None
    vp = fit(passes(10, cost=0.4), 4)
    (tmp_path / VERIFY_PRICE_FILE).write_text(json.dumps(vp.to_json()))
    assert read_verify_price(tmp_path) == vp
    (tmp_path / VERIFY_PRICE_FILE).write_text("{}")
    why = read_verify_price(tmp_path)
    assert isinstance(why, str) and "could not be read" in why
    section = verify_price_section(replace(_view(result, None), verify_price=why))
    assert section[2] == why
