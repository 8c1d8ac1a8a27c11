"""Wiring shared by every command that measures: record the context, run a profile, store it.

A campaign is one invocation (`run`, `bench`, ...); a run is one pass of the task set through
one server configuration. Both CLI and daemon call these functions.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from watchkeeper.analysis.gpu_cost import samples_cost
from watchkeeper.config import Config
from watchkeeper.config.paths import runs_log_dir
from watchkeeper.host import info as hostinfo
from watchkeeper.load.records import RequestSample, RunPurpose, RunResult, Task
from watchkeeper.load.runner import LoadSettings, run_tasks
from watchkeeper.server.endpoints import fetch_metrics, make_http_client
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
    first = build_arm(prepared)
    build_id = repo.ensure_build(first.binary, external_url=first.external_url)
    campaign_id = repo.create_campaign(kind=kind, host_id=host_id, build_id=build_id, params=params)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    return CampaignContext(campaign_id, host_id, runs_log_dir() / f"{stamp}-c{campaign_id}")


def build_arm(prepared: Sequence[PreparedProfile]) -> PreparedProfile:
    """The arm whose llama-server build names the campaign: the first one watchkeeper starts
    (a url profile's server has no build of ours), else the first."""
    return next((p for p in prepared if p.binary is not None), prepared[0])


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
    purpose: RunPurpose | None = None,
) -> RunResult:
    """Send every task once to a running server; a server death becomes `RunResult.error`.
    `purpose` None: WARMUP or MEASURED, as `is_warmup` says."""
    started = datetime.now(UTC)
    with make_http_client(server.base_url, request_timeout_s=config.server.request_timeout_s) as c:
        before = fetch_metrics(c)
        samples = run_tasks(c, tasks, settings, on_sample=on_sample)
        after = fetch_metrics(c)
    error = _server_death(server, samples)
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
        purpose=purpose,
        gpu=samples_cost(server.gpu, samples),
    )


def _server_death(server: RunningServer, samples: Sequence[RequestSample]) -> str | None:
    if server.managed is None:
        return None
    failed = any(s.error for s in samples)
    code = server.managed.exit_code(wait_s=2.0 if failed else 0.0)
    if code is None:
        return None
    return f"llama-server exited with code {code} during the run\n{server.managed.log_tail()}"


def arm_order(arms: Sequence[str], step: int) -> list[str]:
    """ABC on even steps, CBA on odd ones: every arm takes every position equally often."""
    return list(arms) if step % 2 == 0 else list(reversed(arms))


def measure_round(
    servers: Mapping[str, RunningServer],
    config: Config,
    tasks: Sequence[Task],
    *,
    arms: Sequence[str],
    round_index: int,
    is_warmup: bool,
    settings: LoadSettings,
    arm_settings: Mapping[str, LoadSettings] | None = None,
    on_task: Callable[[int, Task], None] | None = None,
) -> list[RunResult]:
    """One round of a paired comparison, arms back to back per task.

    Each task (a chunk of `concurrency` tasks) goes to every arm in turn before the next task
    starts, and the order alternates from task to task and from round to round (AB, BA, ...).
    The two sides of a pair are then seconds apart, inside the same disturbance: measured on
    this host, a 20-second slowdown that landed on one arm's half of a round-sized block read
    as a 13% "effect" for that round. `arm_settings` gives an arm its own sampler
    (load/sampling.py); the concurrency is `settings`' for all. Counters are read per server
    around the whole round; only that arm's requests move them. One RunResult per arm, as
    `measure_run` gives. ``on_task``: told (tasks done, the last of them) after every arm
    ran a task (a chunk), so a long round shows its progress."""
    started = datetime.now(UTC)
    clients = {
        arm: make_http_client(
            servers[arm].base_url, request_timeout_s=config.server.request_timeout_s
        )
        for arm in arms
    }
    try:
        before = {arm: fetch_metrics(clients[arm]) for arm in arms}
        samples: dict[str, list[RequestSample]] = {arm: [] for arm in arms}
        # Open-loop: each arm gets the round's whole schedule in turn (chunks would break the
        # rate); both arms the same draw, order alternating by round.
        chunk = len(tasks) if settings.arrival else max(1, settings.concurrency)
        for step, first in enumerate(range(0, len(tasks), chunk)):
            part = tasks[first : first + chunk]
            for arm in arm_order(arms, round_index + step):
                own = arm_settings.get(arm, settings) if arm_settings else settings
                got = run_tasks(clients[arm], part, replace(own, stream=round_index))
                samples[arm].extend(replace(s, seq=first + s.seq) for s in got)
            if on_task is not None:
                on_task(first + len(part), part[-1])
        after = {arm: fetch_metrics(clients[arm]) for arm in arms}
    finally:
        for client in clients.values():
            client.close()
    finished = datetime.now(UTC)
    return [
        RunResult(
            arm=arm,
            profile_name=arm,
            round=round_index,
            is_warmup=is_warmup,
            concurrency=settings.concurrency,
            started_at=started,
            finished_at=finished,
            samples=tuple(samples[arm]),
            server_argv=servers[arm].argv,
            peak_rss_bytes=servers[arm].peak_rss_bytes(),
            metrics_before=before[arm],
            metrics_after=after[arm],
            error=_server_death(servers[arm], samples[arm]),
            gpu=samples_cost(servers[arm].gpu, samples[arm]),
        )
        for arm in arms
    ]


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
