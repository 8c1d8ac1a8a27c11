"""What the sweep's report is rendered from: `SweepView` (the result, the race, the choice,
the soak and the committed recommendation), and the soak commands the report names. Plain
data, so `publish.sweep_report` stays pure functions of it.
"""

from __future__ import annotations

import shlex
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from watchkeeper import format as fmt
from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.racing_types import RaceArm, RaceSettings, RaceState
from watchkeeper.analysis.recommend import Recommendation
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.analysis.verify_price import VerifyPrice
from watchkeeper.config import ProfileConfig
from watchkeeper.publish import markdown as md
from watchkeeper.publish.deliverable import RECORD_NAME, RecommendationRecord
from watchkeeper.publish.soak_summary import SoakSummary

SOAK_DURATION = "8h"


@dataclass(frozen=True, slots=True)
class SweepView:
    result: BenchResult
    recommendation: Recommendation
    arms: tuple[RaceArm, ...]
    settings: RaceSettings
    race: RaceState | None
    stop_reason: str
    budget_min: float | None
    wall_s: float
    chosen: str
    chosen_profile: ProfileConfig | None
    soak: Mapping[str, Any] | None
    """The stored soak of this sweep's pick (`RacingStore.latest_soak` with its campaign)."""
    soak_command: str
    service_path: Path
    max_tokens: int = 0
    """The cap on every answer (0: the task set's own lengths)."""
    record: RecommendationRecord | None = None
    """The committed recommendation (publish/deliverable.py): the opening lines read it."""
    soak_report: SoakSummary | None = None
    """The committed soak of this sweep's pick, never one of the sweep before that lies in
    the same folder (publish/soak_lineage.py); None: "not yet measured"."""
    profiles: Mapping[str, ProfileConfig] = field(default_factory=dict)
    unprobed: Mapping[str, str] = field(default_factory=dict)
    """Surviving arms the identity probes left out, and why (commands/sweep.Racer)."""
    served_skipped: str = ""
    """Why the as-served identity pass did not run though asked for (the racer priced its
    replays past the identity share of the budget, campaign/served_cost.py); empty: it ran,
    or was not asked for."""
    probe_tasks: tuple[str, ...] = ()
    """The tasks the identity probes ran on, where a subset of the measured ones (the
    sweep's `--identity-per-category`); empty: every measured task."""
    race_plan: str = ""
    """The design the racer chose before round 1, in words (analysis/racing_tasks.plan)."""
    task_cis: str = ""
    """Every racing arm's CI over its tasks where the race stopped short of a CI over rounds
    (analysis/racing_tasks.task_ci_text); empty: none."""
    answer_over_tasks: bool = False
    """The whole race stopped short of a CI over rounds, so the summary table and the
    recommendation read those intervals (analysis/task_pick.py)."""
    categories_over_tasks: str = ""
    """Where the answer reads intervals over tasks: which per-category rows carry one over
    their own category's tasks and which have too few tasks, with what would give them one
    (analysis/category_tasks.category_note); empty: not said."""
    verify_price: VerifyPrice | str | None = None
    """The verification-pricing pass found in the reports directory (campaign/verify_price.py),
    a line saying why it could not be read, or None: no section "What acceptance pays here"."""


def soak_command(profile: str, duration: str = SOAK_DURATION) -> str:
    return f"watchkeeper soak --profiles {shlex.quote(profile)} --duration {duration}"


RECOMMENDATION_SOAK_DURATION = "5h"
"""Depths 1 and 4 in 2-minute blocks: 150 minutes at depth 4, what its drift verdict needs
on this host (docs/soak.md, "Judging depth 4"); jobs/soak.toml runs the same."""


def recommendation_soak_command(
    duration: str = RECOMMENDATION_SOAK_DURATION, record: str = f"reports/{RECORD_NAME}"
) -> str:
    """The soak of the committed recommendation: its subject arm beside the baseline, at
    concurrency 1 and 4, its report written beside this one. `record` is the set's own record
    (a set outside reports/ names its own, or check-set finds the path disagreeing)."""
    return (
        f"watchkeeper soak --recommendation {record} --concurrency 1,4 "
        f"--duration {duration} --block 2m --no-reference"
    )


def ratio_text(ci: RatioCI | None) -> str:
    """A speed-up with its CI, or with the rounds it rests on where there is none yet."""
    if ci is None:
        return md.NONE
    if not ci.has_ci:
        return f"{ci.estimate:.2f}x (no CI: {ci.n_rounds} round(s))"
    if ci.over:  # an interval over tasks (analysis/task_pick.py)
        return f"{ci.estimate:.2f}x ({fmt.ci(ci.low, ci.high, over=ci.over)})"
    return f"{ci.estimate:.2f}x ({ci.low:.2f}-{ci.high:.2f})"
