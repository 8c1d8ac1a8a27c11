""" "Stable: met" only when each arm's own time under load reaches the target at depth 1 and at
the unit's slots: the committed 140-minute soak (arms alternating 2-minute blocks, depth 4
only) held 64 minutes of each arm and read "met"."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from watchkeeper.publish.soak_hours import (
    arm_hours,
    block_s,
    hours_shortfall,
    overnight_lines,
    unit_slots,
)
from watchkeeper.publish.soak_report import read_summary, render, stability_line
from watchkeeper.publish.soak_summary import SoakSummary
from watchkeeper.soak.judgement import BlockRow, BlockSeries

ROOT = Path(__file__).resolve().parents[2]


def _committed() -> SoakSummary:
    """The 140-minute depth-4 soak the default set carried until deliver-set remade it."""
    data = read_summary(ROOT / "reports/2026-11-29-soak-c1-140m/speculative_soak.json")
    assert data is not None
    return data


def test_the_committed_default_soak_reads_not_yet_with_its_hours() -> None:
    s = _committed()
    assert block_s(s) == 120.0 and unit_slots(s) == 4
    hours = arm_hours(s)
    assert hours == {
        ("qwen-baseline", 4): 32 * 120 / 3600,
        ("qwen-sweep-ngram-mod", 4): 32 * 120 / 3600,
    }
    assert hours_shortfall(s) == (
        "not yet: 1.1 of 8 hours (qwen-baseline at depth 4, its own time under load; the arms "
        "alternate blocks); depth 1, which the unit serves, not soaked"
    )
    assert stability_line(s, fallback="").startswith(
        "3. **Stable under sustained load: not yet: 1.1"
    )


def test_enough_hours_at_every_served_depth_reads_met_and_one_short_arm_does_not() -> None:
    row = BlockRow(0, 0.0, 1, 1, 1.0, None)
    rows = (row,) * 4  # four two-hour blocks each
    blocks = [
        BlockSeries(p, c, rows) for p in ("qwen-baseline", "qwen-sweep-ngram-mod") for c in (1, 4)
    ]
    s = replace(_committed(), block_s=7200.0, blocks=tuple(blocks))
    assert hours_shortfall(s) == ""
    blocks[-1] = replace(blocks[-1], rows=rows[:3])
    s = replace(s, blocks=tuple(blocks))
    assert hours_shortfall(s).startswith("not yet: 6.0 of 8 hours (qwen-sweep-ngram-mod at depth 4")
    assert hours_shortfall(s, target_h=6.0) == ""


def test_the_soak_page_says_under_a_stable_verdict_that_overnight_is_not_yet_met() -> None:
    s = _committed()
    page = render(s).splitlines()
    assert page[2] == "**stable**: 1505 requests over 2.33h, 0 errors"
    assert page[4] == (
        "The verdict above is on what this soak ran. Stable under sustained load overnight, the "
        "request's criterion: not yet: 1.1 of 8 hours (qwen-baseline at depth 4, its own time "
        "under load; the arms alternate blocks); depth 1, which the unit serves, not soaked."
    )
    row = BlockRow(0, 0.0, 1, 1, 1.0, None)
    blocks = tuple(
        BlockSeries(p, c, (row,)) for p in ("qwen-baseline", "qwen-sweep-ngram-mod") for c in (1, 4)
    )
    s = replace(s, block_s=8 * 3600.0, blocks=blocks)
    assert overnight_lines(s) == [] and "overnight, the request's" not in render(s)


def test_a_soak_that_kept_no_block_rows_is_not_called_unsoaked_at_a_depth_it_ran() -> None:
    """The 27 Nov soak ran depths 1 and 4 but its JSON keeps no block rows: its time under load
    is unknown, which is what the page says (not 'depth 1 not soaked')."""
    s = read_summary(ROOT / "reports/2026-11-27-soak-c1/speculative_soak.json")
    assert s is not None
    assert set(s.levels) == {"1", "4"} and not s.blocks
    assert arm_hours(s) is None
    assert hours_shortfall(s).startswith("not yet: each arm's time under load unknown")
    assert "not soaked" not in " ".join(overnight_lines(s))
