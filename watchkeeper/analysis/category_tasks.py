"""The per-category picks' family-wise bound: a category's pick is one choice among every
candidate arm in every category, so its lower bound is taken at 1 - FAMILY_ALPHA / family
(Bonferroni), not at 95% (analysis/recommend.py reads it for every category's pick).
"""

from __future__ import annotations

import math

import numpy as np

from watchkeeper.analysis.floor import two_way_floor
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.analysis.workload_mix import FAMILY_ALPHA


def family_low(ci: RatioCI, family: int) -> float:
    """A category CI's lower bound across the ``family`` of comparisons the per-category picks
    choose among (every candidate arm in every category): Bonferroni, 1 - FAMILY_ALPHA /
    family, on the CI's floor over rounds and tasks (`two_way_floor` from its per-round
    ratios and task log ratios), never above its own 95% bound. With four arms identical to
    the baseline (3 tasks x 5 rounds, 6 categories) some category's pick was named in 15% of
    sweeps on each arm's own CI, 22% with uneven code edits (`benchmarks/mix_shapes.py
    --only-family`). The CI's own bound where the floor cannot be rebuilt or there is one
    comparison."""
    if family <= 1 or len(ci.round_ratios) < 2 or len(ci.task_logs) < 2:
        return ci.low
    floor = two_way_floor(np.log(np.asarray(ci.round_ratios)), np.asarray(ci.task_logs))
    return min(ci.low, ci.estimate * math.exp(-floor.half(1.0 - FAMILY_ALPHA / family)))
