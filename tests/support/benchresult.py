"""A synthetic BenchResult (the `result` fixture) that the report, recommendation and
PR-comment tests render: every section of a bench report has something in it."""

import shlex
from dataclasses import replace
from datetime import UTC, datetime

import pytest

from watchkeeper.analysis.benchmark import (
    ArmSpec,
    ArmStats,
    BenchMethod,
    BenchResult,
    CategoryStats,
    IdentityRecord,
)
from watchkeeper.analysis.speculation import predicted_speedup
from watchkeeper.analysis.stats import RatioCI, classify
from watchkeeper.checks.guards import GuardFinding
from watchkeeper.host.info import HostInfo

COUNT_ORDER = ("identical", "near_tie", "length_only", "mismatch", "batch_variance", "unverified")
"""Order of the verdict counts `_stats` takes (batch_variance, unverified last: added later)."""
PLOTS = {
    "speedup": "speedup.png",
    "tps": "tps.png",
    "acceptance": "acceptance.png",
    "identity": "identity.png",
}


def _stats(
    arm: str, category: str, tps: float, ci: tuple[float, ...] = (), *counts: int
) -> CategoryStats:
    """counts: drafted, accepted, then verdict counts in COUNT_ORDER."""
    drafted, accepted, *rest = (*counts, 0, 0, 0, 0, 0, 0, 0, 0)[:8]
    verdicts = {v: n for v, n in zip(COUNT_ORDER, rest, strict=False) if n}
    total = sum(verdicts.values())
    return CategoryStats(
        arm, category, requests=24 if category == "all" else 12, errors=0, median_tps=tps,
        median_ttft_ms=41.5, median_completion_tokens=128.0,
        speedup=RatioCI(
            *ci, 48 if category == "all" else 24, 12, 4, verdict=classify(*ci, threshold=0.03)
        )
        if ci
        else None,
        acceptance_rate=accepted / drafted if drafted else None, drafted=drafted,
        accepted=accepted, verdicts=verdicts,
        identical_rate=verdicts.get("identical", 0) / total if total else None,
    )  # fmt: skip


def _arm_stats(overall: CategoryStats, rss: int, mean_len: float | None = None,
               mean_acc: float | None = None, cost: float | None = None) -> ArmStats:  # fmt: skip
    bound = efficiency = None
    if overall.acceptance_rate is not None and cost is not None:
        bound = predicted_speedup(overall.acceptance_rate, mean_len or 1.0, cost)
        if overall.speedup is not None:
            efficiency = overall.speedup.estimate / bound.predicted_speedup
    return ArmStats(overall.arm, overall, rss, mean_len, mean_acc, bound, efficiency)


NOISE_FLOOR = {"state": "measured", "floor": 0.0312, "positions": 240, "min_positions": 200,
               "quantile": 0.99, "disagreements": 1, "disagreement_margins": [0.012],
               "gap_delta_q": 0.0312, "gap_delta_max": 0.04, "exact_positions": 0,
               "replayed": 244, "plan": "24 probes x up to 10 positions",
               "bands": [{"low": 0.0, "high": 0.1, "positions": 30, "flips": 1},
                         {"low": 0.1, "high": 0.25, "positions": 40, "flips": 0},
                         {"low": 0.25, "high": 0.5, "positions": 50, "flips": 0},
                         {"low": 0.5, "high": 1.0, "positions": 44, "flips": 0},
                         {"low": 1.0, "high": 2.0, "positions": 40, "flips": 0},
                         {"low": 2.0, "high": None, "positions": 40, "flips": 0}],
               "key": {"backend": "cuda", "build": "b4500", "model": "a" * 64}}  # fmt: skip
IDENTITY_EXTRAS = {
    "identity_modes": {
        "draft4": {"mode": "batched", "reference": "baseline",
                   "reason": "ubatch 1 did not make the replay reproduce the decode (12 of 244 "
                   "A/A positions differ): judged by replay and noise floor"},
        "ngram": {"mode": "batched", "reference": "baseline",
                  "reason": "ubatch 1 did not make the replay reproduce the decode (12 of 244 "
                  "A/A positions differ): judged by replay and noise floor"},
    },
    "token_scores": {"draft4": {"summary": "1 of 96 scored tokens not the target's pick; "
                                "A/A 1 of 244, one-sided Fisher p 0.48"}},
    "identity_power": {"offline": {"detected": 200, "summary": "offline positive control: the "
                                   "rank-2 token forged at 240 positions is a mismatch at 200 "
                                   "(83%); blind fraction 17%"}},
}  # fmt: skip
MODEL, DRAFT = "Qwen2.5-1.5B-Instruct-Q4_K_M.gguf", "Qwen2.5-0.5B-Instruct-Q8_0.gguf"
SERVER = f"llama-server -m /models/{MODEL}"


@pytest.fixture
def result() -> BenchResult:
    host = HostInfo("0123456789abcdef", "bench-01", "AMD EPYC 9654 96-Core Processor", 16,
                    128 * (1 << 30), "NVIDIA H100 80GB HBM3, 81559 MiB", "Linux 6.8.0")  # fmt: skip
    arms = (
        ArmSpec("baseline", "baseline", None, None, MODEL, "a" * 64, None, None,
                tuple(shlex.split(f"{SERVER} --port 8081"))),
        ArmSpec("draft4", "candidate", "draft-simple", 4, MODEL, "a" * 64, DRAFT, "b" * 64,
                tuple(shlex.split(f"{SERVER} --spec-type draft-simple --spec-draft-model "
                                  f"'/models/My Drafts/{DRAFT}' --spec-draft-n-max 4")),
                cost_ratio=0.18, cost_note="measured on this host"),
        ArmSpec("ngram", "candidate", "ngram-simple", None, MODEL, "a" * 64, None, None,
                tuple(shlex.split(f"{SERVER} --spec-type ngram-simple")), cost_ratio=0.0),
    )  # fmt: skip
    categories = (
        _stats("baseline", "code", 80.25),
        _stats("baseline", "chat", 82.0),
        _stats("draft4", "code", 130.0, (1.62, 1.41, 1.85), 400, 300, 22, 1, 0, 0, 1),
        _stats("draft4", "chat", 96.75, (1.18, 1.02, 1.33), 400, 220, 24),
        _stats("ngram", "code", 84.3, (1.05, 0.93, 1.19), 120, 60, 23, 0, 0, 1),
        _stats("ngram", "chat", 77.1, (0.94, 0.88, 1.01), 80, 20, 24),
    )
    arm_stats = (
        replace(_arm_stats(_stats("baseline", "all", 81.1), 1_610_612_736),
                probe_median_tps=42.3),
        replace(_arm_stats(_stats("draft4", "all", 112.0, (1.38, 1.22, 1.55), 800, 520, 46,
                                  1, 0, 0, 1),
                           2_147_483_648, mean_len=3.6, mean_acc=2.34, cost=0.18),
                probe_median_tps=104.9),
        _arm_stats(_stats("ngram", "all", 80.5, (0.99, 0.92, 1.07), 200, 80, 47, 0, 0, 1),
                   1_650_000_000, mean_len=2.5, mean_acc=1.0, cost=0.0),
    )  # fmt: skip
    identity = (
        IdentityRecord("draft4", "code-03", "code", 2, "near_tie", 57, 0.0041,
                       "return a + b⟦\n\n```\n⟧", "return a + b⟦```\n\n⟧"),
        IdentityRecord("ngram", "code-05", "code", 1, "mismatch", 12, 1.73,
                       "for i in range(n):⟦ total += i⟧", "for i in range(n):⟦ total -= i⟧",
                       replay={"target_token": {"id": 488, "text": " +=", "logprob": -0.02},
                               "candidate_token": {"id": 593, "text": " -=", "logprob": -3.1},
                               "baseline_token": {"id": 488, "text": " +=", "logprob": -0.02},
                               "margin": 3.08, "floor": 0.0312}, compared="mismatch"),
        IdentityRecord("draft4", "code-07", "code", 5, "batch_variance", 31, 0.21,
                       "x = [⟦i for i in⟧", "x = [⟦ i for i⟧",
                       replay={"target_token": {"id": 72, "text": " i", "logprob": -0.6},
                               "candidate_token": {"id": 72, "text": " i", "logprob": -0.81},
                               "baseline_token": {"id": 17, "text": "i", "logprob": -0.6},
                               "margin": 0.21, "floor": 0.0312}, compared="mismatch"),
    )  # fmt: skip
    finding = GuardFinding(
        kind="length_parity", profile="ngram", severity="medium", category="chat",
        title="ngram/chat: median output length differs from baseline by -21% (101 vs 128 "
        "tokens); tok/s is not comparable",
        evidence={"baseline_median_tokens": 128.0, "candidate_median_tokens": 101.0,
                  "tolerance": 0.15},
    )  # fmt: skip
    method = BenchMethod(rounds=4, warmup_rounds=1, warmup_tasks=2, concurrency=1, tasks=6,
                         categories=("code", "chat"), temperature=0.0, seed=1234,
                         near_tie_threshold=0.05, resamples=2000)  # fmt: skip
    tps = {"baseline": [80.1, 81.0, 82.4, 79.8], "draft4": [101.0, 118.5, 131.2, 96.4],
           "ngram": [78.0, 80.2, 84.9, 83.1]}  # fmt: skip
    return BenchResult(
        campaign_id=7, kind="bench", host=host, build_version="b4567 (abc1234)",
        build_variant="cuda", started_at=datetime(2025, 3, 14, 9, 26, 53, tzinfo=UTC),
        finished_at=datetime(2025, 3, 14, 10, 2, 11, tzinfo=UTC), arms=arms,
        arm_stats=arm_stats, categories=categories,
        control=_stats("control", "all", 81.0, (), 0, 0, 24), identity=identity,
        findings=(finding,), method=method,
        extras={"tps_samples": tps, "noise_floor": NOISE_FLOOR, **IDENTITY_EXTRAS},
    )  # fmt: skip
