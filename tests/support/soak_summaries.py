"""A soak summary for a test from the few fields it is about: the rest take an empty soak's
values, so a test states only what it varies (the summary is typed: publish/soak_summary.py)."""

from __future__ import annotations

from typing import Any

from watchkeeper.publish.soak_summary import SoakSummary

EMPTY: dict[str, Any] = {
    "campaign_id": 1,
    "subject": "s",
    "baseline": "b",
    "duration": "8h",
    "command": "c",
    "series": [],
}
ROW: dict[str, Any] = {
    "block": 0,
    "t_h": 0.0,
    "requests": 1,
    "tokens": 1,
    "throughput_tps": 1.0,
    "median_decode_tps": None,
}
"""A block row (soak/depth.py) where only the count of rows matters."""


def summary_of(**fields: Any) -> SoakSummary:
    """`SoakSummary.from_json` of `fields` over `EMPTY` (the committed JSON's keys)."""
    return SoakSummary.from_json({**EMPTY, **fields})
