"""The report's per-request acceptance: per arm and category, the drafted and accepted tokens
with their percentage, the mean over requests, deciles and a text histogram of the requests'
own acceptance (`analysis/request_acceptance.py` computes it into the result's extras).

A text histogram, not a plot: ten counts (0-10%, ..., 90-100%) and a bar of block characters,
readable in a diff and a terminal alike.
"""

from __future__ import annotations

from typing import Any

from watchkeeper.analysis.bench_types import BenchResult
from watchkeeper.publish import markdown as md

_BLOCKS = " ▁▂▃▄▅▆▇█"

HEADERS = [
    "arm",
    "category",
    "requests",
    "drafted",
    "accepted",
    "mean per request",
    "p10 / p50 / p90",
    "requests per 10% bin (0-10 … 90-100%)",
    "histogram",
]


def _bar(bins: list[int]) -> str:
    top = max(bins) or 1
    return "".join(_BLOCKS[round(n / top * (len(_BLOCKS) - 1))] for n in bins).replace(" ", "·")


def counts_text(drafted: int, accepted: int) -> str:
    """ "accepted (pct)" the way every acceptance figure of the report reads."""
    pct = f"{accepted / drafted:.1%}" if drafted else "-"
    return f"{accepted} ({pct})"


def _row(arm: str, category: str, s: dict[str, Any]) -> list[str]:
    d = s["deciles"]
    return [
        md.inline(arm),
        md.inline(category),
        str(s["requests"]),
        str(s["drafted"]),
        counts_text(s["drafted"], s["accepted"]),
        f"{s['mean']:.1%}",
        f"{d[0]:.0%} / {d[4]:.0%} / {d[8]:.0%}",
        " ".join(str(n) for n in s["bins"]),
        f"`{_bar(s['bins'])}`",
    ]


def request_acceptance_rows(result: BenchResult) -> list[list[str]]:
    """One row per arm and category (its "all" first) that drafted."""
    found: dict[str, dict[str, dict[str, Any]]] = result.extras.get("request_acceptance") or {}
    rows: list[list[str]] = []
    for arm in sorted(found):
        cats = found[arm]
        order = sorted(cats, key=lambda c: (c != "all", c))
        rows.extend(_row(arm, c, cats[c]) for c in order)
    return rows
