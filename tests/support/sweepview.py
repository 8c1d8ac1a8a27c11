"""A sweep view over a synthetic result, for the tests of the sweep's report sections: one
place, so the candidate tests and the identity-mode tests render the same view."""

from __future__ import annotations

from pathlib import Path

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.racing_types import RaceArm, RaceSettings, RaceState
from watchkeeper.analysis.recommend import MIX, recommend
from watchkeeper.analysis.workload_mix import Mix
from watchkeeper.config import ProfileConfig
from watchkeeper.publish.sweep_view import SweepView, soak_command


def sweep_view(result: BenchResult, race: RaceState | None, mix: Mix | None = None) -> SweepView:
    """The view a 40-minute sweep that decided every category after round 3 would render: its
    answer the mix's pick (the task set's own proportions unless `mix` is given), as the
    sweep's is."""
    cand = [a.name for a in result.arms if a.role == "candidate"]
    arms = tuple(
        [RaceArm(result.baseline.name, 0.0, True)]
        + [RaceArm(n, 2.0 + i) for i, n in enumerate(cand)]
    )
    rec = recommend(result, mix=mix, answer=MIX)
    chosen = rec.setting or result.baseline.name
    return SweepView(
        result=result,
        recommendation=rec,
        arms=arms,
        settings=RaceSettings(),
        race=race,
        stop_reason="every category decided after round 3",
        budget_min=40.0,
        wall_s=1800.0,
        chosen=chosen,
        chosen_profile=ProfileConfig(model="m", spec_type="ngram-simple"),
        soak=None,
        soak_command=soak_command(chosen),
        service_path=Path("systemd/llama-server-speculative.service"),
    )
