"""Which soak belongs to which sweep: the one rule the sweep's stability line and
`watchkeeper check-set` share.

A set's folder keeps one `speculative_soak.json`, and a new sweep into that folder finds the
soak of the sweep before still lying there. On 7 Dec 2026 the code-edit set's sweep (campaign
3) rendered its stability line from the soak of the set before (soak campaign 2, made for sweep
campaign 1): the same arm name, the same unit path, another pick's soak. The arm name alone
cannot tell them apart.

The key is the sweep campaign the soak soaked (`sweep_campaign`: the record's `campaign_id`,
written by `soak --recommendation`), the most specific one the summary carries; the soaked
subject arm and, where both name one, the unit path must agree as well. Campaign ids count per
database, so a fresh database can reuse an id: the subject and the unit narrow such a collision,
and nothing the summary keeps (no date, no digest of the record) narrows it further. A summary
without `sweep_campaign` (none committed) belongs to no sweep.
"""

from __future__ import annotations

from dataclasses import dataclass

from watchkeeper.publish.deliverable import RecommendationRecord
from watchkeeper.publish.soak_summary import SoakSummary


@dataclass(frozen=True, slots=True)
class Pick:
    """What identifies a sweep's pick: its campaign, its subject arm, the unit it renders."""

    campaign_id: int
    subject: str
    unit: str | None = None

    @classmethod
    def of(cls, record: RecommendationRecord) -> Pick | None:
        """The record's pick; None where it names no subject arm (nothing could be soaked)."""
        subject = record.subject
        if subject is None:
            return None
        unit = record.extra.get("unit")
        return cls(record.campaign_id, subject.name, str(unit) if unit else None)


def mismatch(s: SoakSummary, pick: Pick) -> str | None:
    """Why the soak `s` did not soak `pick` (the first field that differs, in words); None
    where it did."""
    if s.sweep_campaign != pick.campaign_id:
        return f"soaked sweep campaign {s.sweep_campaign}, not {pick.campaign_id}"
    if s.subject != pick.subject:
        return f"soaked {s.subject}, not {pick.subject}"
    if pick.unit and s.unit is not None and s.unit.path != pick.unit:
        return f"soaked the unit {s.unit.path}, not {pick.unit}"
    return None


def soaked(s: SoakSummary | None, record: RecommendationRecord) -> SoakSummary | None:
    """`s` where it soaked the record's pick, else None (the report then says "not yet
    measured")."""
    pick = Pick.of(record)
    if s is None or pick is None or mismatch(s, pick) is not None:
        return None
    return s
