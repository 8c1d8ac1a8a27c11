"""What the as-served identity pass's replays cost, priced from round 1 before the race spends
the budget on rounds (`sweep --identity-as-served`, `campaign/racer.py`).

As served, every replay asks the baseline what it picks after a shared prefix evaluated as one
batched prompt, with the prompt prefilled afresh (`cache_prompt: false`, checks/replay.py: reusing
the slot's cache would make the replay a decode, the very thing the A/A floor compares it with). So
each replayed position costs a prefill of the task's prompt plus the output up to that position, not
a decode step, and the A/A floor alone replays up to `positions_per_probe` positions of each probe:
on a slow host about an hour for three probes, where a flat share of round 1 (PROBE_SHARE) had
priced it at minutes (the figures: docs/measurements.md#figures-behind-the-code).

The model, per replay: (mean prompt tokens + half the mean output) / the measured prefill
speed; replays: the baseline's A/A floor (probes x min(positions per probe, output tokens)),
and per speculative arm its token scores (half as many positions per probe) plus
DIVERGENCE_REPLAYS per probe for its divergences. The prefill speed is the lower quartile of
the baseline's round-1 requests' prompt tokens over prompt time: a request whose prompt was
partly cached reads faster than the host is, and the reserve errs long, not short.

Pure: runs in, seconds out.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from watchkeeper.checks.gap_floor import positions_per_probe
from watchkeeper.load.records import RunResult

DIVERGENCE_REPLAYS = 2
"""Replays a probe's divergence costs at most: the replay at the divergence, and for a near
tie the same position classified again without the allowance (checks/classify.py)."""


@dataclass(frozen=True, slots=True)
class Prefill:
    """What a replay of a probed task costs, as round 1 measured it."""

    prompt_tokens: float
    """Mean prompt tokens of the baseline's round-1 requests."""
    output_tokens: float
    """Mean output tokens of the same requests (a replayed position lies within them)."""
    tps: float
    """Prefill speed, tokens per second (the lower quartile over those requests)."""

    def replay_s(self) -> float:
        """One replay: the prompt plus half the output on average, prefilled afresh."""
        return (self.prompt_tokens + self.output_tokens / 2) / self.tps


def prefill_of(runs: Sequence[RunResult], arm: str, round_index: int = 1) -> Prefill | None:
    """The arm's round-`round_index` prefill, from its clean requests with prompt timings;
    None where none has them."""
    samples = [
        s
        for r in runs
        if r.arm == arm and r.round == round_index and not r.is_warmup
        for s in r.samples
        if s.ok and s.prompt_tokens and s.prompt_ms and s.prompt_ms > 0
    ]
    if not samples:
        return None
    speeds = sorted((s.prompt_tokens or 0) / (s.prompt_ms or 1.0) * 1000.0 for s in samples)
    prompt = sum(s.prompt_tokens or 0 for s in samples) / len(samples)
    output = sum(s.completion_tokens or 0 for s in samples) / len(samples)
    return Prefill(prompt, output, speeds[len(speeds) // 4])


@dataclass(frozen=True, slots=True)
class ServedCost:
    """The as-served pass's replays: the baseline's A/A floor once, then each probed arm's."""

    probes: int
    prefill: Prefill
    floor_positions: int
    arm_positions: int
    """Per speculative arm: token-score positions plus divergence replays."""

    @property
    def floor_s(self) -> float:
        return self.floor_positions * self.prefill.replay_s()

    @property
    def arm_s(self) -> float:
        return self.arm_positions * self.prefill.replay_s()

    def seconds(self, arms: int, *, floor: bool = True) -> float:
        """The replays of `arms` speculative arms, with the baseline's floor where `floor`."""
        return (self.floor_s if floor else 0.0) + arms * self.arm_s

    @property
    def text(self) -> str:
        p = self.prefill
        return (
            f"its A/A floor replays {self.floor_positions} positions ({self.probes} probe(s)), "
            f"each a ~{p.prompt_tokens + p.output_tokens / 2:.0f}-token prompt prefilled afresh "
            f"at the measured {p.tps:.0f} tok/s ({p.replay_s():.1f} s a position): "
            f"{self.floor_s / 60:.1f} min, and {self.arm_s / 60:.1f} min per probed arm"
        )


def served_cost(probes: int, prefill: Prefill) -> ServedCost:
    """Replays of the as-served pass over `probes` probed tasks (checks/classify.py: the floor
    replays `positions_per_probe` positions of each, capped by its output; each arm's token
    scores half as many; each divergence up to DIVERGENCE_REPLAYS)."""
    per = positions_per_probe(probes)
    out = max(1, math.ceil(prefill.output_tokens))
    floor = probes * min(per, out)
    arm = probes * (min(max(1, per // 2), out) + DIVERGENCE_REPLAYS)
    return ServedCost(probes, prefill, floor, arm)
