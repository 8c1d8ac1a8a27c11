"""The checks beside a night's ratio: what the median ratio of decode speeds cannot see.

Failed requests (Fisher's exact test between the arms: a significant excess on the current arm
is a regression whatever the ratio says), the cells the estimate winsorized (their balance
between the arms), and the requests one arm lost big in latency (a build that stalls now and
then: analysis.tails). The last two make a series `suspicious: tail regression`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from watchkeeper.analysis.benchmark import ALL, BenchResult
from watchkeeper.analysis.failures import FailureCheck, failure_check
from watchkeeper.analysis.tails import LatencyLosses, TailCheck
from watchkeeper.store.references import RatioRecord

TAIL_VERDICT = "suspicious: tail regression"


@dataclass(frozen=True, slots=True)
class SeriesCheck:
    """What a series' ratio alone does not show: clipped cells that lean one way (a build
    that stalls) and failed requests (a build that times out)."""

    category: str
    tail: TailCheck | None
    failures: FailureCheck | None
    latency_ms: dict[str, tuple[float | None, float | None]] | None = None
    """p95 and p99 request latency per arm ("current", "reference"), beside the median ratio."""
    losses: LatencyLosses | None = None
    """Pairs one arm lost by `LOSS_FACTOR` x in latency, by arm (analysis.tails): stalls."""

    @property
    def verdict(self) -> str | None:
        """The verdict these checks impose, or None to keep the ratio's."""
        if self.failures is not None and self.failures.regression:
            return "regression"
        if (self.tail is not None and self.tail.regression) or (
            self.losses is not None and self.losses.regression
        ):
            return TAIL_VERDICT
        return None

    def describe(self) -> str:
        parts = []
        if self.failures is not None and (
            self.failures.current_failed or self.failures.reference_failed
        ):
            parts.append(self.failures.describe())
        if self.tail is not None and self.tail.cells:
            parts.append(f"tail: {self.tail.describe()}")
        if self.losses is not None and self.losses.slow:
            parts.append(f"stalls: {self.losses.describe()}")
        if self.latency_ms and self.tail_latency_grew:
            parts.append(f"latency p95/p99: {self.latency_text()}")
        return "; ".join(parts)

    @property
    def tail_latency_grew(self) -> bool:
        """The current arm's p99 latency beyond 1.5x the reference's."""
        if not self.latency_ms:
            return False
        cur = self.latency_ms.get("current", (None, None))[1]
        ref = self.latency_ms.get("reference", (None, None))[1]
        return cur is not None and ref is not None and ref > 0 and cur > 1.5 * ref

    def latency_text(self) -> str:
        def ms(v: float | None) -> str:
            return "n/a" if v is None else f"{v:.0f}"

        return ", ".join(
            f"{arm} {ms(p95)}/{ms(p99)} ms" for arm, (p95, p99) in (self.latency_ms or {}).items()
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "verdict": self.verdict,
            "latency_ms_p95_p99": self.latency_ms,
            "latency_losses": None
            if self.losses is None
            else {
                "regression": self.losses.regression,
                "sign_p": self.losses.sign_p,
                "slow": [list(c) for c in self.losses.slow],
                "fast": self.losses.fast,
                "pairs": self.losses.pairs,
            },
            "failures": None
            if self.failures is None
            else {
                "current": [self.failures.current_failed, self.failures.current_requests],
                "reference": [self.failures.reference_failed, self.failures.reference_requests],
                "p_value": self.failures.p_value,
                "regression": self.failures.regression,
            },
            "tail": None
            if self.tail is None
            else {
                "regression": self.tail.regression,
                "sign_p": self.tail.sign_p,
                "slow": self.tail.slow,
                "fast": self.tail.fast,
                "raw": [self.tail.raw_estimate, self.tail.raw_low, self.tail.raw_high],
                "raw_verdict": self.tail.raw_verdict,
                "cells": [[c.task_id, c.round, math.exp(c.residual)] for c in self.tail.cells],
            },
        }


def series_checks(result: BenchResult, *, current_arm: str) -> dict[str, SeriesCheck]:
    """Per category (and ALL): the tail check of the current arm's ratio and Fisher's exact
    test of its failed requests against the reference's."""
    reference = result.baseline.name
    out: dict[str, SeriesCheck] = {}
    current_rows = [result.stats(current_arm, ALL)] + [
        c for c in result.categories if c.arm == current_arm
    ]
    for cur in current_rows:
        if cur is None:
            continue
        ref = result.stats(reference, cur.category)
        failures = (
            failure_check(
                cur.errors + cur.no_speed, cur.requests, ref.errors + ref.no_speed, ref.requests
            )
            if ref is not None
            else None
        )
        tail = cur.speedup.tail if cur.speedup is not None else None
        latency = {"current": (cur.latency_ms_p95, cur.latency_ms_p99)}
        if ref is not None:
            latency["reference"] = (ref.latency_ms_p95, ref.latency_ms_p99)
        out[cur.category] = SeriesCheck(cur.category, tail, failures, latency, cur.latency_losses)
    return out


def apply_checks(record: RatioRecord, check: SeriesCheck | None) -> RatioRecord:
    """The record with the verdict a check imposes: failures make a regression whatever the
    ratio says; a tail regression turns anything but a regression into `suspicious: tail
    regression`."""
    if check is None or check.verdict is None or record.verdict == "regression":
        return record
    return replace(record, verdict=check.verdict)
