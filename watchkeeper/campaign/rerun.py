"""Confirm a candidate by rerunning only its series: same profile, same tasks, same concurrency.

A rerun the same morning is the cheaper of the two confirmations (the other is the next
night). It is a campaign of its own (kind "rerun") so that its numbers join the series'
history like any other night, and it is judged like one: the same flag again confirms the
candidate, no flag expires it as a one-night spike.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from watchkeeper.campaign.campaigns import open_campaign, register_profile, run_profile
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.load.runner import LoadSettings
from watchkeeper.load.tasks import load_taskset
from watchkeeper.nightly.findings import Judgement, TrackingParams, judge_campaign
from watchkeeper.server.launch import prepare
from watchkeeper.store.db import Database
from watchkeeper.store.history import History
from watchkeeper.store.repository import Repository

Progress = Callable[[str], None]


def rerun_candidates(
    config: Config,
    db: Database,
    finding_ids: Sequence[int],
    params: TrackingParams,
    *,
    progress: Progress,
) -> list[Judgement]:
    history = History(db)
    repo = Repository(db)
    tasks_by_id = {t.id: t for t in load_taskset(config.bench.resolved_taskset())}
    judged = []
    for finding_id in finding_ids:
        finding = history.finding(finding_id)
        if finding is None or finding.run_id is None or finding.confirmed_at is not None:
            continue
        if finding.status != "active" or not finding.series_key:
            continue
        name, stored, concurrency = history.run_profile(finding.run_id)
        category = finding.series_key["category"]
        wanted = history.run_task_ids(finding.run_id, None if category == "all" else category)
        tasks = [tasks_by_id[i] for i in wanted if i in tasks_by_id]
        if not tasks:
            progress(f"finding #{finding_id}: its tasks are not in the task set; not rerun")
            continue
        # The profile as it was measured, not as the config says today.
        profiles = {**config.profiles, name: ProfileConfig.model_validate(stored)}
        run_config = config.model_copy(update={"profiles": profiles})
        prepared = prepare(run_config, name, progress=progress)
        ctx = open_campaign(
            repo,
            kind="rerun",
            prepared=[prepared],
            params={"rerun_of": finding_id, "category": category, "tasks": len(tasks)},
        )
        progress(f"finding #{finding_id}: rerunning {name} on {len(tasks)} {category} task(s)")
        result = run_profile(
            run_config,
            prepared,
            tasks,
            arm=name,
            round_index=1,
            is_warmup=False,
            settings=LoadSettings(concurrency=concurrency, seed=config.bench.seed),
            log_path=ctx.log_dir / f"{name}-rerun.log",
        )
        repo.save_run(ctx.campaign_id, register_profile(repo, prepared), result)
        repo.finish_campaign(
            ctx.campaign_id,
            status="failed" if result.error else "completed",
            summary={"rerun_of": finding_id},
        )
        judgement = judge_campaign(history, ctx.campaign_id, params)
        verdict = "confirmed" if finding_id in judgement.confirmed else "not reproduced"
        progress(f"finding #{finding_id}: {verdict} (campaign {ctx.campaign_id})")
        judged.append(judgement)
    return judged
