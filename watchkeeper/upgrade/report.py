"""The bisect's and the upgrade check's reports as Markdown (pure: results in, text out)."""

from __future__ import annotations

from collections.abc import Sequence

from watchkeeper.upgrade.bisect import BisectResult, StepResult
from watchkeeper.upgrade.releases import tag


def _ratio(step: StepResult) -> str:
    if step.estimate is None:
        return "—"
    if step.low is None or step.high is None:
        return f"{step.estimate:.3f} (no CI)"
    return f"{step.estimate:.3f} (95% CI {step.low:.3f} to {step.high:.3f})"


def _build_time(builds: dict[str, dict[str, object]], version: str) -> str:
    seconds = builds.get(version, {}).get("build_seconds")
    return f"{float(seconds):.0f} s" if isinstance(seconds, (int, float)) else "cached"


def bisect_markdown(
    result: BisectResult, *, profile: str, good: str, bad: str, threshold: float, releases: int
) -> str:
    lines = [f"# Bisect of {profile}: {good} ({tag(good)}) .. {bad} ({tag(bad)})", ""]
    if result.status == "found" and result.against_predecessor is not None:
        final = result.against_predecessor
        lines.append(
            f"**First bad release: {result.first_bad} ({result.tag})**: decode tok/s ratio "
            f"{_ratio(final)} against its predecessor {result.last_good} "
            f"({tag(result.last_good or '')}), {final.rounds} rounds."
        )
    elif result.status == "no difference":
        lines.append(
            f"No release differs beyond the threshold: {bad} against {good} is within "
            f"{threshold:.0%} (see the first step)."
        )
    else:
        lo, hi = result.unresolved or (good, bad)
        lines.append(
            f"Inconclusive: a step between {lo} and {hi} stayed undecided at the most rounds "
            "allowed; rerun with more --max-rounds (the state file keeps what was measured)."
        )
        last = result.steps[-1] if result.steps else None
        if last is not None and last.low is not None and last.high is not None:
            lines.append(
                f"What it does bound: {last.candidate} against {last.baseline} is "
                f"{last.estimate:.3f}, and its 95% CI ({last.low:.3f} to {last.high:.3f}) rules "
                f"out a slowdown beyond {1 - last.low:.1%}, not one within the {threshold:.0%} "
                "threshold."
                if last.low < 1
                else f"What it does bound: {last.candidate} is no slower than {last.baseline}."
            )
    lines += [
        "",
        f"{releases} releases in the range; threshold {threshold:.0%}; a step is bad when the "
        "whole 95% CI of its ratio lies beyond the threshold, good when the CI rules that out, "
        "and gets more rounds otherwise.",
        "",
        "| step | candidate | against | ratio (candidate / baseline) | rounds | decision | build |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, step in enumerate(result.steps, 1):
        lines.append(
            f"| {i} | {step.candidate} ({tag(step.candidate)}) | {step.baseline} | "
            f"{_ratio(step)} | {step.rounds} | {step.decision} | "
            f"{_build_time(result.builds, step.candidate)} |"
        )
    return "\n".join(lines) + "\n"


def steps_text(steps: Sequence[StepResult]) -> list[str]:
    return [f"{s.candidate} vs {s.baseline}: {s.decision} {_ratio(s)}" for s in steps]
