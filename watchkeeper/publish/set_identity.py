"""check-set's reading of a sweep report's "Identical output" line against the rule it must
meet now (`publish/identity_claim.py`): "met" only from probes in categories where the arm
drafted, with the counts beside it.

The committed reports were rendered before the rule and cannot be re-rendered from the store,
so the check reads the evidence from the report itself, where it can: the per-category table
(acceptance "—": the arm drafted nothing there; the identical column: the category was probed,
100.0% when every probe there was identical). Where a probed category is below 100% the
verdicts per probe are not in the report and the check says nothing (it cannot tell them).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

from watchkeeper.publish.identity_claim import identity_claim
from watchkeeper.publish.set_check import DeliverableSet, Disagreement

_LINE = re.compile(r"^1\. \*\*Identical output: (?P<label>.+?)\.?\*\*(?P<rest>.*)$", re.MULTILINE)
_TOTAL = re.compile(r"identity verdicts of (\d+) probes")
_COUNTS = re.compile(r"identical (\d+) of (\d+) probes in categories where it drafted")
_CATEGORY_HEADER = "| category | arm | baseline tok/s | candidate tok/s |"
RULE = "publish/identity_claim.py"


@dataclass(frozen=True, slots=True)
class IdentityReading:
    """What the report says, and what the rule makes of the report's own tables."""

    found_label: str
    found_counts: tuple[int, int] | None
    expected_label: str
    expected_counts: tuple[int, int]


def _category_rows(text: str, arm: str) -> list[tuple[str, str, str]]:
    """(category, acceptance, identical) of ``arm``'s rows in the per-category table."""
    start = text.find(_CATEGORY_HEADER)
    if start < 0:
        return []
    rows = []
    for line in text[start:].splitlines()[2:]:
        if not line.startswith("|"):
            break
        cells = [c.strip() for c in line.strip("|").split("|")]
        if len(cells) >= 7 and cells[1] == arm:
            rows.append((cells[0], cells[5], cells[6]))
    return rows


def read_identity(text: str, arm: str) -> IdentityReading | None:
    """None where the report has no such line, no per-category rows for ``arm``, or a probed
    category below 100% (the per-probe verdicts are not in the report)."""
    line = _LINE.search(text)
    rows = _category_rows(text, arm)
    if line is None or not rows:
        return None
    probed = [(c, acc) for c, acc, ident in rows if ident != "—"]
    if any(ident not in ("—", "100.0%") for _, _, ident in rows):
        return None
    total = _TOTAL.search(line.group("rest"))
    # The sweep probes the first N tasks of each category alike (`--identity-per-category`).
    each = int(total.group(1)) // len(probed) if total and probed else 1
    if total and probed and each * len(probed) != int(total.group(1)):
        return None
    probes = [(c, "identical") for c, _ in probed for _ in range(each)]
    drafted = {c: ((1, 0) if acc not in ("—", "0.0%") else (0, 0)) for c, acc in probed}
    claim = identity_claim(probes, drafted, None, resolved=True)
    used = each * sum(1 for c, _ in probed if drafted[c][0])
    label = line.group("label").removesuffix(" in the exact mode")
    found = _COUNTS.search(line.group("rest"))
    return IdentityReading(
        label,
        (int(found.group(1)), int(found.group(2))) if found else None,
        claim.label,
        (used, used),
    )


def identity_disagreements(name: str, text: str, arm: str) -> list[tuple[str, str, str]]:
    """(field, found, expected) for each way the report's line breaks the rule."""
    reading = read_identity(text, arm)
    if reading is None:
        return []
    out = []
    if reading.found_label != reading.expected_label:
        out.append(("identity claim", reading.found_label, reading.expected_label))
    if reading.found_counts != reading.expected_counts:
        n, m = reading.expected_counts
        out.append(
            (
                "identity counts",
                "(none)" if (got := reading.found_counts) is None else f"{got[0]} of {got[1]}",
                f"identical {n} of {m} probes in categories where it drafted",
            )
        )
    return out


def check_identity(root: Path, s: DeliverableSet) -> list[Disagreement]:
    """The set's sweep report held to the identity rule, from its own tables."""
    subject = s.record.subject
    name = f"{s.folder.as_posix()}/{s.record.report}"
    path = root / name
    if subject is None or not path.is_file():
        return []
    text = path.read_text(encoding="utf-8")
    return [
        Disagreement(name, field, found, expected, RULE)
        for field, found, expected in identity_disagreements(name, text, subject.name)
    ]
