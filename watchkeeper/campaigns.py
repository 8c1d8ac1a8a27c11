"""Wiring shared by every command that measures: record the context, run a profile, store it.

A campaign is one invocation (`run`, `bench`, ...); a run is one pass of the task set through
one server configuration. Both CLI and daemon call these functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from watchkeeper import hostinfo
from watchkeeper.config import Config
from watchkeeper.load.client import make_http_client
from watchkeeper.load.runner import LoadSettings, run_tasks
from watchkeeper.paths import runs_log_dir
from watchkeeper.records import RequestSample, RunResult, Task
from watchkeeper.server.endpoints import fetch_metrics
from watchkeeper.server.launch import PreparedProfile, RunningServer, serve
from watchkeeper.store.repository import Repository

Progress = Callable[[str], None]
OnSample = Callable[[RequestSample], None]


@dataclass(frozen=True, slots=True)
class CampaignContext:
    """Ids of the rows every run of a campaign points at."""

    campaign_id: int
    host_id: int
    log_dir: Path


def open_campaign(
    repo: Repository,
    *,
    kind: str,
    prepared: Sequence[PreparedProfile],
    params: dict[str, Any],
) -> CampaignContext:
    host_id = repo.ensure_host(hostinfo.collect())
    first = prepared[0]
    build_id = repo.ensure_build(first.binary, external_url=first.external_url)
    campaign_id = repo.create_campaign(kind=kind, host_id=host_id, build_id=build_id, params=params)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return CampaignContext(campaign_id, host_id, runs_log_dir() / f"{stamp}-c{campaign_id}")


def register_profile(repo: Repository, prepared: PreparedProfile) -> int:
    target = repo.ensure_model(prepared.model) if prepared.model else None
    draft = repo.ensure_model(prepared.draft) if prepared.draft else None
    return repo.ensure_profile(
        prepared.name, prepared.profile, target_model_id=target, draft_model_id=draft
    )


def measure_run(
    server: RunningServer,
    config: Config,
    tasks: Sequence[Task],
    *,
    arm: str,
    round_index: int,
    is_warmup: bool,
    settings: LoadSettings,
    on_sample: OnSample | None = None,
) -> RunResult:
    """Send every task once to a running server; a server death becomes `RunResult.error`."""
    started = datetime.now(UTC)
    with make_http_client(server.base_url, request_timeout_s=config.server.request_timeout_s) as c:
        before = fetch_metrics(c)
        samples = run_tasks(c, tasks, settings, on_sample=on_sample)
        after = fetch_metrics(c)
    error = None
    if server.managed is not None:
        failed = any(s.error for s in samples)
        code = server.managed.exit_code(wait_s=2.0 if failed else 0.0)
        if code is not None:
            error = (
                f"llama-server exited with code {code} during the run\n{server.managed.log_tail()}"
            )
    return RunResult(
        arm=arm,
        profile_name=arm,
        round=round_index,
        is_warmup=is_warmup,
        concurrency=settings.concurrency,
        started_at=started,
        finished_at=datetime.now(UTC),
        samples=tuple(samples),
        server_argv=server.argv,
        peak_rss_bytes=server.peak_rss_bytes(),
        metrics_before=before,
        metrics_after=after,
        error=error,
    )


def run_profile(
    config: Config,
    prepared: PreparedProfile,
    tasks: Sequence[Task],
    *,
    arm: str,
    round_index: int,
    is_warmup: bool,
    settings: LoadSettings,
    log_path: Path,
    on_sample: OnSample | None = None,
) -> RunResult:
    """Start the profile's server, send every task once, stop the server."""
    with serve(config, prepared, log_path=log_path) as server:
        return measure_run(
            server,
            config,
            tasks,
            arm=arm,
            round_index=round_index,
            is_warmup=is_warmup,
            settings=settings,
            on_sample=on_sample,
        )
