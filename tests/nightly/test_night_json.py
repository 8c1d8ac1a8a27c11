"""What `nightly --json` says about a night beside its ratios."""

from __future__ import annotations

from watchkeeper.analysis.acceptance import AcceptanceCurve
from watchkeeper.commands.nightly import NightlyOutcome, PairedNight


def test_a_speculative_night_reports_its_acceptance_curve_in_json() -> None:
    c = AcceptanceCurve("s", 100.0, 400.0, 130.0, (90.0, 40.0), (0.9, 0.4), 4)
    night = PairedNight("s", 7, 3, False, False, (), acceptance_curves=(c.to_json(),))
    (out,) = NightlyOutcome((night,)).to_json()["nights"]
    (curve,) = out["acceptance_curves"]
    assert curve["arm"] == "s" and curve["rates"] == [0.9, 0.4] and curve["n_max"] == 4
    assert AcceptanceCurve.from_json(curve) == c


def test_a_night_without_speculation_reports_no_curve() -> None:
    night = PairedNight("b", 7, 3, True, False, ())
    (out,) = NightlyOutcome((night,)).to_json()["nights"]
    assert out["acceptance_curves"] == []
