"""One way to print a share, a change, an interval, a speed-up and a missing value."""

from __future__ import annotations

from watchkeeper import format as fmt
from watchkeeper.analysis.stats import RatioCI


def test_every_kind_of_number_prints_the_one_missing_marker_when_absent() -> None:
    printers = [
        fmt.fixed(None),
        fmt.share(None),
        fmt.pct(None),
        fmt.points(None),
        fmt.change_of_ratio(None),
        fmt.interval(0.1, None, fmt.pct),
        fmt.span(None, 1.2),
        fmt.speedup(None),
    ]
    assert set(printers) == {fmt.MISSING} and fmt.MISSING != "n/a"


def test_a_share_is_unsigned_and_a_change_is_signed_in_its_unit() -> None:
    assert fmt.share(0.652) == "65.2%"
    assert (fmt.pct(0.052), fmt.pct(-0.182)) == ("+5.2%", "-18.2%")
    assert fmt.points(0.05) == "+5.0 pt"
    assert fmt.change_of_ratio(0.89) == "-11.0%"
    assert fmt.interval(-0.214, -0.151, fmt.pct) == "-21.4% to -15.1%"
    assert fmt.span(0.86, 0.92, ".3f") == "0.860-0.920"


def test_a_speedup_shows_its_interval_or_says_why_it_has_none() -> None:
    with_ci = RatioCI(1.38, 1.22, 1.55, n_pairs=24, n_clusters=6, n_rounds=4, verdict="faster")
    assert fmt.speedup(with_ci) == "1.38x (1.22-1.55)"
    one_round = RatioCI(1.38, 1.38, 1.38, n_pairs=6, n_clusters=6, n_rounds=1)
    assert fmt.speedup(one_round) == "1.38x (1 round(s): no CI)"


def test_an_interval_is_labelled_in_one_place_with_a_spec_or_a_printer() -> None:
    assert fmt.ci(1.22, 1.55) == "95% CI 1.22-1.55"
    assert fmt.ci(-0.1, 0.05, "+.0%", "..") == "95% CI -10%..+5%"
    assert fmt.ci(0.01, 0.04, fmt.share) == "95% CI 1.0%-4.0%"
    assert fmt.ci(-0.214, -0.151, fmt.pct, " to ") == "95% CI -21.4% to -15.1%"
    assert fmt.ci(None, 1.2) == fmt.ci(0.9, None, fmt.pct) == f"95% CI {fmt.MISSING}"
