"""The distribution pass of a bench at temperature > 0: wiring only (checks/distribution.py
has the probe, checks/distribution_stats.py the statistics).

After the measured rounds and the temperature-0 identity probes, every speculative arm is
probed against the baseline server with the bench's own sampler. The results go into the
result's `extras["distribution"]` (report section and `--json`) and its findings: a
`distorted` arm, an arm whose sampling is ignored, and a seeded-identity mismatch are
correctness findings, filed and deduplicated as a temperature-0 `mismatch` is.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from watchkeeper.analysis.bench_types import BenchExtras
from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.checks.distribution import (
    SEEDS_PER_PREFIX,
    ArmDistribution,
    ProbeSettings,
    findings,
    is_sample_and_match,
    probe_arm,
)
from watchkeeper.config import Config
from watchkeeper.load.records import Task
from watchkeeper.load.sampling import SamplingSettings
from watchkeeper.server.endpoints import TransportError, make_http_client
from watchkeeper.server.launch import PreparedProfile, RunningServer

Progress = Callable[[str], None]


def distribution_pass(
    config: Config,
    servers: Mapping[str, RunningServer],
    prepared: Sequence[PreparedProfile],
    tasks: Sequence[Task],
    sampling: SamplingSettings,
    progress: Progress,
) -> list[ArmDistribution] | None:
    """Probe every speculative arm; None when there is nothing to check (greedy, or off)."""
    sequences = config.bench.distribution_sequences
    if sampling.greedy or sequences <= 0 or len(prepared) < 2:
        return None
    baseline = prepared[0]
    settings = ProbeSettings(
        sampling=sampling.with_profile(baseline.profile),
        prefixes=max(1, sequences // SEEDS_PER_PREFIX),
        seeds=SEEDS_PER_PREFIX,
        tokens=config.bench.distribution_tokens,
    )
    timeout = config.server.request_timeout_s
    results: list[ArmDistribution] = []
    target = make_http_client(servers[baseline.name].base_url, request_timeout_s=timeout)
    try:
        for p in prepared[1:]:
            if not p.speculative:
                continue
            own = sampling.with_profile(p.profile)
            progress(
                f"distribution check: {p.name} at {own.label()}, {settings.prefixes} prefixes x "
                f"{settings.seeds} seeds x {settings.tokens} tokens against {baseline.name}"
            )
            arm = make_http_client(servers[p.name].base_url, request_timeout_s=timeout)
            try:
                result = probe_arm(
                    p.name,
                    arm,
                    target,
                    tasks,
                    settings,
                    sample_and_match=is_sample_and_match(p.spec_type, p.profile.draft_sampling),
                    arm_sampling=own if own != settings.sampling else None,
                )
            except TransportError as exc:
                progress(f"distribution check of {p.name} failed: {exc}")
                continue
            finally:
                arm.close()
            progress(
                f"distribution: {p.name}: {result.verdict} ({result.check.reason}; "
                f"{result.requests} requests, {result.seconds:.0f} s)"
            )
            results.append(result)
    finally:
        target.close()
    return results


def with_distribution(result: BenchResult, checks: Sequence[ArmDistribution] | None) -> BenchResult:
    """The bench result with the distribution verdicts in extras and their findings added."""
    if checks is None:
        return result
    extras: BenchExtras = {**result.extras, "distribution": [c.to_json() for c in checks]}
    return replace(result, findings=(*result.findings, *findings(checks)), extras=extras)
