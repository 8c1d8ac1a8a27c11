"""The bench's identity pass: which mode judges, the probes, and the verdicts.

In the exact mode (`bench.identity_mode = "exact"`, the default) the probes are a separate
correctness pass after the measured rounds: every arm's server is started afresh with
`--ubatch-size 1` (so decode, draft verification and replay all evaluate one token at a
time, with the same kernels), plus a non-speculative twin for each candidate whose other
settings differ from the baseline's. The throughput rounds never see these servers. Where the
exact mode cannot run (an external server, or `identity_mode = "batched"`), the probes run on
the arms' own servers and the replay and noise floor judge.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from watchkeeper.campaign.bench_plan import Progress
from watchkeeper.campaign.campaigns import measure_run
from watchkeeper.checks.classify import IdentityVerdicts, Reference, classify_identity
from watchkeeper.checks.gap_floor import FloorKey, GapFloor
from watchkeeper.checks.like_for_like import settings_differ, twin_profile
from watchkeeper.config import Config
from watchkeeper.load.records import RunPurpose, RunResult, Task
from watchkeeper.load.runner import LoadSettings
from watchkeeper.server.launch import PreparedProfile
from watchkeeper.server.serverset import ServerSet
from watchkeeper.store.bench_rows import BenchRows
from watchkeeper.store.db import Database
from watchkeeper.store.floor_store import FloorStore

UBATCH_ONE = ["--ubatch-size", "1"]
TWIN_SUFFIX = ".twin"


@dataclass(frozen=True, slots=True)
class IdentityPlan:
    exact: bool
    reason: str
    """Why the batched mode judges (empty in the exact mode)."""


def identity_plan(config: Config, prepared: Sequence[PreparedProfile]) -> IdentityPlan:
    if config.bench.identity_mode == "batched":
        return IdentityPlan(False, "bench.identity_mode = batched")
    external = [p.name for p in prepared if p.external_url]
    if external:
        return IdentityPlan(
            False, f"{', '.join(external)}: external server(s), their ubatch size is not ours"
        )
    return IdentityPlan(True, "")


def floor_key(prepared: Sequence[PreparedProfile]) -> FloorKey:
    """What the baseline's floor is valid for: backend, build and model."""
    base = prepared[0]
    binary = base.binary
    return FloorKey(
        binary.variant if binary else "external",
        binary.identity if binary else "external",
        base.model.sha256 if base.model else "external",
    )


def probe_settings(config: Config, settings: LoadSettings) -> LoadSettings:
    """Identity probes: top-k logprobs, unstreamed (every token id), fresh prefill."""
    return replace(
        settings,
        top_logprobs=config.bench.identity_top_k,
        cache_prompt=False,
        streamed=False,
        arrival=None,
    )


def run_probes(
    servers: Mapping[str, object],
    config: Config,
    tasks: Sequence[Task],
    arms: Sequence[str],
    settings: LoadSettings,
    *,
    identity_round: int,
    rows: BenchRows | None,
    progress: Progress,
) -> dict[str, RunResult]:
    """One probe pass per arm, stored as identity runs (twins are kept in memory only)."""
    probes: dict[str, RunResult] = {}
    for arm in arms:
        progress(
            f"identity probes: {arm} ({len(tasks)} tasks, top-{settings.top_logprobs} "
            "logprobs; not part of any throughput figure)"
        )
        probe = measure_run(
            servers[arm],  # type: ignore[arg-type]
            config,
            tasks,
            arm=arm,
            round_index=identity_round,
            is_warmup=True,
            settings=settings,
            purpose=RunPurpose.IDENTITY,
        )
        probes[arm] = (
            rows.save(probe, arm) if rows is not None and not arm.endswith(TWIN_SUFFIX) else probe
        )
    return probes


def twins_for(
    prepared: Sequence[PreparedProfile], speculative: Sequence[str]
) -> dict[str, tuple[PreparedProfile, list[str]]]:
    """Candidate name -> (its non-speculative twin, the settings that differ)."""
    base = prepared[0]
    out: dict[str, tuple[PreparedProfile, list[str]]] = {}
    for p in prepared[1:]:
        if p.name not in speculative or p.external_url:
            continue
        differ = settings_differ(base.profile, p.profile)
        if differ:
            twin = replace(
                p, name=p.name + TWIN_SUFFIX, profile=twin_profile(p.profile), draft=None
            )
            out[p.name] = (twin, differ)
    return out


def exact_pass(
    config: Config,
    prepared: Sequence[PreparedProfile],
    active: Sequence[str],
    speculative: Sequence[str],
    tasks: Sequence[Task],
    settings: LoadSettings,
    rows: BenchRows | None,
    log_dir: Path,
    *,
    identity_round: int,
    live: bool,
    progress: Progress,
) -> IdentityVerdicts:
    """Fresh `--ubatch-size 1` servers for every active arm (and twins), probes, verdicts."""
    started = time.monotonic()
    twins = twins_for(prepared, speculative)
    arms = [p for p in prepared if p.name in active] + [t for t, _ in twins.values()]
    ub1 = [
        replace(
            p,
            profile=p.profile.model_copy(
                update={"extra_args": [*p.profile.extra_args, *UBATCH_ONE]}
            ),
        )
        for p in arms
    ]
    progress(
        f"identity, exact mode: {len(ub1)} server(s) restarted with --ubatch-size 1 for the "
        "probes only"
        + (f" (twins: {', '.join(t.name for t, _ in twins.values())})" if twins else "")
    )
    (log_dir / "exact").mkdir(parents=True, exist_ok=True)
    with ServerSet(config, ub1, log_dir / "exact", progress) as servers:
        probes = run_probes(
            servers,
            config,
            tasks,
            [p.name for p in ub1],
            probe_settings(config, settings),
            identity_round=identity_round,
            rows=rows,
            progress=progress,
        )
        verdicts = classify_identity(
            servers[prepared[0].name].base_url,
            tasks,
            probes,
            baseline=prepared[0].name,
            speculative=speculative,
            top_k=config.bench.identity_top_k,
            near_tie_threshold=config.bench.near_tie_threshold,
            request_timeout_s=config.server.request_timeout_s,
            progress=progress,
            exact=True,
            key=floor_key(prepared),
            live=live,
            twins=[
                Reference(t.name, servers[t.name].base_url, (arm,)) for arm, (t, _) in twins.items()
            ],
        )
    for arm, (twin, differ) in twins.items():
        if arm in verdicts.modes:
            verdicts.modes[arm]["settings_differ"] = differ
            verdicts.modes[arm]["reason"] += (
                f"; judged against {twin.name}, a non-speculative twin with its settings"
            )
    verdicts.power["cost_s"] = time.monotonic() - started
    return verdicts


def label_settings(
    verdicts: IdentityVerdicts, prepared: Sequence[PreparedProfile], speculative: Sequence[str]
) -> IdentityVerdicts:
    """The batched mode runs no twin: an arm whose settings differ has its divergences
    labelled as the settings' (`confounded`: no correctness finding)."""
    base = prepared[0]
    for p in prepared[1:]:
        if p.name not in speculative or p.name not in verdicts.modes:
            continue
        differ = settings_differ(base.profile, p.profile)
        if differ:
            mode = verdicts.modes[p.name]
            mode["settings_differ"] = differ
            mode["confounded"] = True
            mode["reason"] += (
                "; its settings differ from the baseline's and no twin ran: divergences are "
                "labelled as the settings', no correctness finding"
            )
    return verdicts


def store_floors(db: Database, campaign_id: int, verdicts: IdentityVerdicts, baseline: str) -> None:
    """Keep the baseline's floor (and each twin's) under its backend, build and model."""
    store = FloorStore(db)
    mode = verdicts.modes.get(next(iter(verdicts.modes), ""), {}).get("mode", "batched")
    if verdicts.floor is not None:
        store.save(campaign_id, baseline, str(mode), verdicts.floor)
    for name, ref in verdicts.references.items():
        store.save(campaign_id, name, str(mode), GapFloor.from_json(ref["floor"]))
