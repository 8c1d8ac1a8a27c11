"""A soak summary for a test from the few fields it is about: the rest take an empty soak's
values, so a test states only what it varies (the summary is typed: publish/soak_summary.py)."""

from __future__ import annotations

from typing import Any

from watchkeeper.publish.soak_summary import SoakSummary
from watchkeeper.soak.figures import SoakFigures
from watchkeeper.soak.judgement import OutputRates, ProbeTotals

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


def figures_of(**fields: Any) -> SoakFigures:
    """A verdict's figures (soak/figures.py) with `fields` over an empty soak's."""
    empty: dict[str, Any] = {
        "requests": 0, "load_requests": 0, "probes": 0, "errors": 0, "timeouts": 0,
        "span_s": 0.0, "slice_s": 60.0, "restarts": 0, "crashes": 0, "unresponsive": 0,
        "stuck_slots": 0, "profiles_stopped": (), "db_outages": 0, "incidents": {},
        "rates": OutputRates(None, None), "probe_totals": ProbeTotals(),
        "identical_output": (), "series": (), "reference": (), "paired_drift": (), "rss": (),
        "acceptance_curves": (), "leak_threshold_mb_per_hour": 50.0,
    }  # fmt: skip
    return SoakFigures(**{**empty, **fields})
