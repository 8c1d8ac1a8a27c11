"""An arm's speed-up bound and how much of it the measurement reached.

The bound is priced from the counters (/metrics) and the costs the bench measured
(`campaign.calibration`); a measured speed-up whose CI lies above it means an input of the
bound is wrong, and `judge_efficiency` names which, instead of reporting an efficiency over 100%.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from watchkeeper.analysis.bench_types import ArmSpec
from watchkeeper.analysis.speculation import SpeedupBound, judge_efficiency, measured_bound
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.load.records import RequestSample


@dataclass(frozen=True, slots=True)
class ArmBound:
    bound: SpeedupBound | None = None
    efficiency: float | None = None
    length_source: str = "metrics"
    note: str | None = None


def arm_bound(
    arm: ArmSpec,
    acceptance: float | None,
    speedup: RatioCI | None,
    samples: Sequence[RequestSample],
    *,
    mean_len: float | None,
    mean_acc: float | None,
    drafts: float | None,
) -> ArmBound:
    """The bound of a candidate with a measured acceptance and draft cost; the efficiency
    (measured / bound) only where the bound holds."""
    if arm.role == "baseline" or acceptance is None:
        return ArmBound()
    length = mean_len or float(arm.draft_n_max or 1)
    length_source = "metrics" if mean_len else "n_max"
    if arm.cost_ratio is None:
        return ArmBound(length_source=length_source)
    decoded = sum(max((x.completion_tokens or 0) - 1, 0) for x in samples if x.ok)
    bound = _bound(
        arm,
        acceptance,
        length,
        mean_len,
        mean_acc,
        decoded_tokens=float(decoded) if mean_len else None,
        drafts=drafts if mean_len else None,
    )
    if speedup is None:
        return ArmBound(bound, None, length_source)
    efficiency, note = judge_bound(arm, bound, speedup)
    return ArmBound(bound, efficiency, length_source, note)


def judge_bound(
    arm: ArmSpec, bound: SpeedupBound, speedup: RatioCI
) -> tuple[float | None, str | None]:
    """(efficiency, note) of ``speedup`` against ``bound``: the CI's low where it has one
    (over rounds, or over tasks where a one-round sweep answers from them:
    analysis/task_pick.py re-judges with that interval), the estimate, named as one, where
    it has none."""
    if bound.predicted_speedup <= 0:
        return None, None
    measured_verify = (
        (arm.verify_tokens, arm.verify_cost)
        if arm.verify_tokens is not None and arm.verify_cost is not None
        else None
    )
    return judge_efficiency(
        bound,
        speedup.estimate,
        speedup.low,
        measured_verify=measured_verify,
        has_ci=speedup.has_ci,
    )


def _bound(
    arm: ArmSpec,
    acceptance: float,
    length: float,
    mean_len: float | None,
    mean_acc: float | None,
    *,
    decoded_tokens: float | None = None,
    drafts: float | None = None,
) -> SpeedupBound:
    """The speed-up bound from the counters and the measured costs (`measured_bound`).

    Without /metrics counters the accepted length falls back to acceptance x n_max (an upper
    bound on accepted per draft) and the drafting to that many tokens (a lower bound on it)."""
    cost = arm.cost_ratio or 0.0
    sources = [f"draft cost {cost:.2f} steps per drafted token: {arm.cost_note or 'given'}"]
    if mean_acc is not None and mean_len:
        accepted, drafted = mean_acc, mean_len
        sources.append(
            f"accepted {mean_acc:.2f} and drafted {mean_len:.2f} per draft: /metrics counters"
        )
    else:
        accepted = drafted = acceptance * length
        sources.append(
            f"no /metrics counters: accepted per draft taken as acceptance x n_max "
            f"({acceptance:.1%} x {length:g}), drafted as the same (upper bound)"
        )
    if arm.verify_cost is not None:
        sources.append(
            f"verification: {arm.verify_cost:.2f} decode steps for a batch of "
            f"{arm.verify_tokens} tokens ({arm.verify_note or 'measured'}), chord to 1 step at 1"
        )
    return measured_bound(
        mean_accepted=accepted,
        draft_length=drafted,
        cost_ratio=cost,
        verify_tokens=arm.verify_tokens,
        verify_cost=arm.verify_cost,
        acceptance=acceptance,
        sources=tuple(sources),
        decoded_tokens=decoded_tokens,
        drafts=drafts,
    )


def perfect_acceptance_bound(
    draft_length: int,
    cost_ratio: float,
    verify_tokens: int | None,
    verify_cost: float | None,
) -> SpeedupBound:
    """The speed-up if every drafted token were accepted: n drafted, n + 1 emitted per step,
    at the calibrated draft and verification costs. No acceptance can beat it, so a setting
    whose ceiling cannot tie the baseline is decided before it is measured (the sweep)."""
    n = float(draft_length)
    return measured_bound(
        mean_accepted=n,
        draft_length=n,
        cost_ratio=cost_ratio,
        verify_tokens=verify_tokens,
        verify_cost=verify_cost,
        acceptance=1.0,
        sources=(f"every one of {draft_length} drafted tokens accepted",),
    )
