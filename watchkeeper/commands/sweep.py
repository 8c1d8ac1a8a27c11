"""`watchkeeper sweep`: spec types x draft lengths on the paired design, then a recommendation.

The candidate list comes from the installed build: draft-simple at n_max 4, 8 and 16 and
every n-gram spec type its `--help` lists. The recommendation never picks a profile whose
speed-up CI reaches below 1.0, and says "keep the baseline" plainly when nothing qualifies —
on a 2-core CPU box that is the expected, honest answer.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.recommend import Recommendation, recommend
from watchkeeper.commands.bench import execute_bench, finish_with_report, plan_bench
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.errors import ConfigError
from watchkeeper.publish.systemd import current_user, render_service, write_service
from watchkeeper.server.flags import read_help
from watchkeeper.server.install import ensure_binary
from watchkeeper.server.profiles import QWEN_DRAFT, QWEN_TARGET, SMOLLM2

Progress = Callable[[str], None]
DRAFT_LENGTHS = (4, 8, 16)
FAMILIES = {"qwen": (QWEN_TARGET, QWEN_DRAFT), "smollm2": (SMOLLM2, SMOLLM2)}
SPECULATIVE_REPORT = "speculative_benchmark.md"


@dataclass(frozen=True, slots=True)
class SweepResult:
    bench: BenchResult
    recommendation: Recommendation
    service_path: Path

    def to_json(self) -> dict[str, Any]:
        return {
            "bench": self.bench.to_json(),
            "recommendation": asdict(self.recommendation),
            "headline": self.recommendation.headline,
            "service_path": str(self.service_path),
        }


def sweep_profiles(family: str, spec_types: tuple[str, ...]) -> dict[str, ProfileConfig]:
    """Baseline first, then draft-simple lengths, then the build's n-gram types."""
    if family not in FAMILIES:
        raise ConfigError(f"unknown sweep family {family!r}; known: {', '.join(FAMILIES)}")
    target, draft = FAMILIES[family]
    profiles = {f"{family}-baseline": ProfileConfig(model=target)}
    if "draft-simple" in spec_types:
        for n in DRAFT_LENGTHS:
            profiles[f"{family}-sweep-draft{n}"] = ProfileConfig(
                model=target, draft_model=draft, spec_type="draft-simple", draft_n_max=n
            )
    for spec in spec_types:
        if spec.startswith("ngram"):
            profiles[f"{family}-sweep-{spec}"] = ProfileConfig(model=target, spec_type=spec)
    return profiles


def sweep_command(
    config: Config,
    *,
    family: str,
    rounds: int | None,
    taskset: Path | None,
    per_category: int | None,
    service_path: Path,
    progress: Progress,
) -> SweepResult:
    binary = ensure_binary(config.server, progress=progress)
    info = read_help(binary, config.server.resolved_cache_dir())
    generated = sweep_profiles(family, info.spec_types)
    # User profiles of the same name win, as everywhere else.
    config = config.model_copy(update={"profiles": {**generated, **config.profiles}})
    plan = plan_bench(
        config,
        profiles=list(generated),
        rounds=rounds,
        taskset=taskset,
        limit=None,
        per_category=per_category,
        concurrency=None,
    )
    progress(
        f"sweep: {len(plan.profiles)} profiles x {len(plan.tasks)} tasks x {plan.rounds} rounds"
    )
    result = execute_bench(config, plan, kind="sweep", progress=progress)
    rec = recommend(result)
    reports = config.bench.resolved_reports_dir()
    result = finish_with_report(
        config,
        result,
        progress=progress,
        recommendation=rec,
        extra_copy=reports / SPECULATIVE_REPORT,
    )
    chosen = rec.overall.profile or result.baseline.name
    arm = next(a for a in result.arms if a.name == chosen)
    text = render_service(
        arm,
        headline=f"Recommendation: {rec.headline}",
        campaign_id=result.campaign_id,
        report=Path(result.report_path or reports / SPECULATIVE_REPORT),
        filename=service_path.name,
        user=current_user(),
        gpu=bool(result.host.gpu),
    )
    write_service(service_path, text)
    progress(f"service file: {service_path} (profile {chosen})")
    return SweepResult(result, rec, service_path)
