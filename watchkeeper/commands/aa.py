"""`watchkeeper aa`: the detector's false-positive rate on this host, measured, not assumed.

The same profile runs as two campaigns: the first builds a history (one run per server start,
so run-to-run wobble is real), the second is judged against it exactly as a night is. Nothing
changed between them, so every flag is a false positive; the share of flagged series is the
rate an operator should expect from the nightly detector here.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from watchkeeper.analysis.stats import wilson
from watchkeeper.campaign.campaigns import (
    CampaignContext,
    open_campaign,
    register_profile,
    run_profile,
)
from watchkeeper.campaign.nightly_findings import tracking_params
from watchkeeper.config import Config
from watchkeeper.errors import BenchError
from watchkeeper.load.records import Task
from watchkeeper.load.runner import LoadSettings
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.nightly.findings import TrackingParams, judge_campaign
from watchkeeper.server.launch import PreparedProfile, prepare
from watchkeeper.store.db import open_database
from watchkeeper.store.history import History
from watchkeeper.store.repository import Repository

Progress = Callable[[str], None]


@dataclass(frozen=True, slots=True)
class AAResult:
    profile: str
    history_campaign: int
    test_campaign: int
    history_runs: int
    test_runs: int
    series: int
    tested: int
    """Series with enough history to be judged (not "insufficient data")."""
    labels: dict[str, int]
    flagged: tuple[str, ...]
    environment_noise: str | None

    @property
    def false_positive_rate(self) -> float | None:
        return len(self.flagged) / self.tested if self.tested else None

    def to_json(self) -> dict[str, Any]:
        low, high = wilson(len(self.flagged), self.tested)
        return {
            "profile": self.profile,
            "history_campaign": self.history_campaign,
            "test_campaign": self.test_campaign,
            "history_runs": self.history_runs,
            "test_runs": self.test_runs,
            "series": self.series,
            "tested": self.tested,
            "labels": self.labels,
            "flagged": list(self.flagged),
            "false_positive_rate": self.false_positive_rate,
            "false_positive_rate_ci95": [low, high],
            "environment_noise": self.environment_noise,
        }


def _campaign(
    config: Config,
    repo: Repository,
    prepared: PreparedProfile,
    tasks: Sequence[Task],
    *,
    runs: int,
    warmup: bool,
    role: str,
    progress: Progress,
) -> CampaignContext:
    ctx = open_campaign(repo, kind="aa", prepared=[prepared], params={"role": role, "runs": runs})
    profile_id = register_profile(repo, prepared)
    settings = LoadSettings(concurrency=config.bench.concurrency, seed=config.bench.seed)
    for index in range(0 if warmup else 1, runs + 1):
        is_warmup = index == 0
        progress(
            f"A/A {role} campaign {ctx.campaign_id}: run {index}/{runs}"
            + (" (warm-up)" if is_warmup else "")
        )
        result = run_profile(
            config,
            prepared,
            tasks,
            arm=prepared.name,
            round_index=index,
            is_warmup=is_warmup,
            settings=settings,
            log_path=ctx.log_dir / f"{prepared.name}-r{index}.log",
        )
        repo.save_run(ctx.campaign_id, profile_id, result)
        if result.error:
            repo.finish_campaign(ctx.campaign_id, status="failed", summary={"error": result.error})
            raise BenchError(
                f"A/A run {index} of campaign {ctx.campaign_id} failed: {result.error}"
            )
    repo.finish_campaign(ctx.campaign_id, status="completed")
    return ctx


def _params(config: Config, history_runs: int) -> TrackingParams:
    """The detector's settings, its window cut to the history: the history is exactly the
    first campaign, so the detector may use all of it."""
    params = tracking_params(config)
    return replace(
        params,
        detector=replace(
            params.detector,
            window=min(params.detector.window, history_runs),
            min_good_runs=min(params.detector.min_good_runs, history_runs),
        ),
    )


def aa_command(
    config: Config,
    *,
    profile: str,
    history_runs: int = 10,
    test_runs: int = 3,
    per_category: int | None = 5,
    categories: Sequence[str] | None = None,
    limit: int | None = None,
    progress: Progress,
) -> AAResult:
    if history_runs < 3:
        raise BenchError("an A/A check needs at least 3 history runs")
    tasks = select(
        load_taskset(config.bench.resolved_taskset()),
        per_category=per_category,
        categories=categories,
        limit=limit,
    )
    prepared = prepare(config, profile, progress=progress)
    params = _params(config, history_runs)
    with open_database(config.database.resolved_url()) as db:
        repo = Repository(db)
        first = _campaign(
            config,
            repo,
            prepared,
            tasks,
            runs=history_runs,
            warmup=True,
            role="history",
            progress=progress,
        )
        second = _campaign(
            config,
            repo,
            prepared,
            tasks,
            runs=test_runs,
            warmup=False,
            role="test",
            progress=progress,
        )
        history = History(db)
        judged = judge_campaign(
            history,
            second.campaign_id,
            params,
            history_campaigns=[first.campaign_id],
            record=False,
        )
        flagged = tuple(
            f"{f.key.metric} · {f.key.category}: {f.label.value} ({f.delta:+.3f})"
            for f in judged.night.findings
            if f.flagged and f.delta is not None
        )
        counts = judged.counts()
        result = AAResult(
            profile=profile,
            history_campaign=first.campaign_id,
            test_campaign=second.campaign_id,
            history_runs=history_runs,
            test_runs=test_runs,
            series=len(judged.night.findings),
            tested=len(judged.night.findings) - counts.get("insufficient data", 0),
            labels=counts,
            flagged=flagged,
            environment_noise=judged.night.environment_noise.reason
            if judged.night.environment_noise
            else None,
        )
        history.mark_analysed(second.campaign_id, {"aa": result.to_json()})
        history.mark_analysed(first.campaign_id, {"aa": {"role": "history"}})
        return result
