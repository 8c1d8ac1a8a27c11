"""A simulated rate as the benchmark tables print it: the share with its Wilson 95% interval.
One printer, so every table's rates read alike (mix_tasks, category_tasks, aa_control)."""

from __future__ import annotations

from watchkeeper.analysis.stats import wilson


def wilson_text(count: int, n: int) -> str:
    """'4.5% (2.4%-8.3%)' for 9 of 200."""
    low, high = wilson(count, n)
    return f"{count / n:.1%} ({low:.1%}-{high:.1%})"
