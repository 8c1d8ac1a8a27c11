"""`watchkeeper run`: one profile, one pass of the task set, every request stored."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchkeeper.analysis.summary import RunSummary, summarize
from watchkeeper.campaign.campaigns import open_campaign, register_profile, run_profile
from watchkeeper.config import Config
from watchkeeper.errors import ServerError
from watchkeeper.load.runner import LoadSettings
from watchkeeper.load.tasks import load_taskset, select
from watchkeeper.server.launch import prepare
from watchkeeper.store.db import masked, open_database
from watchkeeper.store.repository import Repository


@dataclass(frozen=True, slots=True)
class RunCommandResult:
    campaign_id: int
    profile: str
    database: str
    argv: tuple[str, ...]
    summary: RunSummary
    error: str | None

    @property
    def ok(self) -> bool:
        return self.error is None and self.summary.errors == 0

    def to_json(self) -> dict[str, Any]:
        return {
            "campaign_id": self.campaign_id,
            "profile": self.profile,
            "database": self.database,
            "server_argv": list(self.argv),
            "error": self.error,
            **self.summary.to_json(),
        }


def run_command(
    config: Config,
    *,
    profile: str,
    taskset: Path | None,
    limit: int | None,
    concurrency: int | None,
    progress: Callable[[str], None],
) -> RunCommandResult:
    tasks = select(load_taskset(taskset or config.bench.resolved_taskset()), limit=limit)
    prepared = prepare(config, profile, progress=progress)
    url = config.database.resolved_url()
    with open_database(url) as db:
        repo = Repository(db)
        ctx = open_campaign(
            repo,
            kind="run",
            prepared=[prepared],
            params={"profile": profile, "tasks": len(tasks), "limit": limit},
        )
        profile_id = register_profile(repo, prepared)
        settings = LoadSettings(
            concurrency=concurrency or config.bench.concurrency, seed=config.bench.seed
        )
        progress(f"campaign {ctx.campaign_id}: {len(tasks)} tasks through {profile}")
        done = [0]

        def tick(_: object) -> None:
            done[0] += 1
            if done[0] % 10 == 0 or done[0] == len(tasks):
                progress(f"{done[0]}/{len(tasks)} requests")

        try:
            result = run_profile(
                config,
                prepared,
                tasks,
                arm=profile,
                round_index=0,
                is_warmup=False,
                settings=settings,
                log_path=ctx.log_dir / f"{profile}.log",
                on_sample=tick,
            )
        except ServerError as exc:
            repo.finish_campaign(ctx.campaign_id, status="failed", summary={"error": exc.message})
            raise
        repo.save_run(ctx.campaign_id, profile_id, result)
        summary = summarize(result.samples)
        status = "failed" if result.error else "completed"
        repo.finish_campaign(ctx.campaign_id, status=status, summary=summary.to_json())
        return RunCommandResult(
            ctx.campaign_id, profile, masked(url), result.server_argv, summary, result.error
        )
