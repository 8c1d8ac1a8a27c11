"""The soak's acceptance curve: per arm, from the speculative counters its resource samples
kept, one delta per server process (a restart starts the counters again)."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

from watchkeeper.analysis.acceptance import AcceptanceCurve
from watchkeeper.config import SoakConfig
from watchkeeper.server.endpoints import (
    PER_POSITION,
    SPEC_ACCEPTED_TOKENS,
    SPEC_DRAFT_TOKENS,
    SPEC_DRAFTS,
)
from watchkeeper.soak.verdicts import acceptance_curves, judge
from watchkeeper.soak.views import ResourceView, SoakData, SoakSampleView

T0 = datetime(2026, 11, 25, 2, 0, tzinfo=UTC)


def counters(drafts: float, per_position: list[float], drafted: float) -> dict[str, float]:
    out = {
        SPEC_DRAFTS: drafts,
        SPEC_DRAFT_TOKENS: drafted,
        SPEC_ACCEPTED_TOKENS: sum(per_position),
    }
    out.update({f'{PER_POSITION}{{position="{i}"}}': v for i, v in enumerate(per_position)})
    return out


def view(seconds: int, profile: str | None, pid: int, c: dict[str, float]) -> ResourceView:
    return ResourceView(T0 + timedelta(seconds=seconds), profile, 100 * 2**20, pid, c)


def data(resources: list[ResourceView]) -> SoakData:
    sample = SoakSampleView(
        "spec", 1, False, "t", T0, 1.0, 64, 50.0, 10, 6, None, "ok", 0
    )  # fmt: skip
    return SoakData(1, {}, "completed", (), (sample,), tuple(resources), ())


def test_each_process_counts_from_its_first_sample_and_a_restart_adds_a_new_span() -> None:
    first = [
        view(0, "spec", 11, counters(10, [8, 5], 40)),
        view(10, "spec", 11, counters(30, [24, 15], 120)),
    ]
    # After a restart the counters start again near zero: a delta across the two processes
    # would be negative, one per process is not.
    second = [
        view(20, "spec", 12, counters(2, [2, 1], 8)),
        view(30, "spec", 12, counters(22, [18, 11], 88)),
    ]
    plain = [view(5, "base", 13, {}), view(15, "base", 13, {})]
    (c,) = acceptance_curves(data(first + second + plain))
    assert c.arm == "spec"
    assert c.drafts == 20 + 20
    assert c.per_position == (16.0 + 16, 10.0 + 10)
    assert c.rates == (32 / 40, 20 / 40)
    assert c.consistent


def test_a_process_sampled_once_or_an_arm_that_never_drafted_gives_no_curve() -> None:
    once = [view(0, "spec", 11, counters(10, [8], 40))]
    idle = [view(0, "spec", 12, counters(5, [4], 20)), view(9, "spec", 12, counters(5, [4], 20))]
    assert acceptance_curves(data(once + idle)) == []


def test_the_verdict_carries_the_curve_in_its_figures_and_reads_it_in_a_note() -> None:
    points = [
        view(0, "spec", 11, counters(0, [], 0)),
        view(60, "spec", 11, counters(100, [90, 40, 10, 2], 400)),
    ]
    verdict = judge(data(points), SoakConfig())
    assert verdict.figures is not None
    (figure,) = verdict.figures.acceptance_curves
    assert figure.arm == "spec" and figure.rates == (0.9, 0.4, 0.1, 0.02)
    assert figure.consistent
    assert any("positions 3-4 accept under 20%" in n for n in verdict.notes)


def test_the_figures_write_the_curve_as_the_json_they_always_held_and_read_it_back() -> None:
    """Typed in the figures, the curve is written key for key as `soak --json` and the stored
    summary held it as a dict (issue 71), and `AcceptanceCurve.from_json` reads that JSON
    back to the same curve, whose JSON is byte-identical."""
    points = [
        view(0, "spec", 11, counters(0, [], 0)),
        view(60, "spec", 11, counters(100, [90, 40, 10, 2], 400)),
    ]
    verdict = judge(data(points), SoakConfig())
    assert verdict.figures is not None
    written = verdict.to_json()["figures"]["acceptance_curves"]
    assert written == [
        {
            "arm": "spec",
            "drafts": 100.0,
            "drafted": 400.0,
            "accepted": 142.0,
            "per_position": [90.0, 40.0, 10.0, 2.0],
            "rates": [0.9, 0.4, 0.1, 0.02],
            "n_max": None,
            "consistent": True,
        }
    ]
    text = json.dumps(written, sort_keys=False)
    read = tuple(AcceptanceCurve.from_json(c) for c in json.loads(text))
    assert read == verdict.figures.acceptance_curves
    assert json.dumps([c.to_json() for c in read], sort_keys=False) == text
