"""check-set holds a sweep report's "Identical output" line to the rule (met only from probes
where the arm drafted, with the counts), reading the evidence from the report's own tables."""

from __future__ import annotations

import re
from pathlib import Path

from watchkeeper.publish.set_identity import identity_disagreements, read_identity

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = (ROOT / "reports" / "speculative_benchmark.md").read_text(encoding="utf-8")
ARM = "qwen-sweep-ngram-simple"


def test_the_committed_default_report_meets_the_rule_with_its_counts() -> None:
    reading = read_identity(DEFAULT, ARM)
    assert reading is not None
    assert (reading.found_label, reading.expected_label) == ("met", "met")
    # 6 probes, one a category; ngram-simple drafted in every category but prose.
    assert reading.found_counts == reading.expected_counts == (5, 5)
    assert identity_disagreements("r.md", DEFAULT, ARM) == []


def test_counts_that_count_probes_where_it_drafted_nothing_are_caught() -> None:
    seeded = DEFAULT.replace("identical 5 of 5 probes", "identical 6 of 6 probes", 1)
    assert identity_disagreements("r.md", seeded, ARM) == [
        ("identity counts", "6 of 6", "identical 5 of 5 probes in categories where it drafted")
    ]


def test_met_where_the_arm_drafted_in_no_probed_category_is_caught() -> None:
    rows = [
        re.sub(r"\| [0-9.]+% \([0-9]+/[0-9]+\) \| 100\.0% \|$", "| — | 100.0% |", line)
        if f"| {ARM} |" in line
        else line
        for line in DEFAULT.splitlines()
    ]
    found = identity_disagreements("r.md", "\n".join(rows), ARM)
    assert found[0] == (
        "identity claim",
        "met",
        "unresolved (it drafted in none of the probed categories)",
    )


def test_a_report_without_the_old_line_counts_is_caught() -> None:
    seeded = DEFAULT.replace(
        DEFAULT[DEFAULT.index("** (exact: identical 5") : DEFAULT.index(". Exact mode (`--ub")],
        "**",
        1,
    )
    assert identity_disagreements("r.md", seeded, ARM)[0][:2] == ("identity counts", "(none)")
