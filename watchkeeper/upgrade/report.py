"""The bisect's and the upgrade check's reports as Markdown (pure: results in, text out)."""

from __future__ import annotations

from collections.abc import Sequence

from watchkeeper.format import ci
from watchkeeper.server.sdist import version_key
from watchkeeper.upgrade.bisect_result import BisectResult, LocatedStep, StepResult
from watchkeeper.upgrade.releases import tag


def _ratio(step: StepResult) -> str:
    return _ci(step.estimate, step.low, step.high)


def _build_time(builds: dict[str, dict[str, object]], version: str) -> str:
    seconds = builds.get(version, {}).get("build_seconds")
    return f"{float(seconds):.0f} s" if isinstance(seconds, (int, float)) else "cached"


def _ci(estimate: float | None, low: float | None, high: float | None) -> str:
    if estimate is None:
        return "—"
    if low is None or high is None:
        return f"{estimate:.3f} (no CI)"
    return f"{estimate:.3f} ({ci(low, high, '.3f', ' to ')})"


def _share(step: StepResult) -> str:
    if step.share is None:
        return ""
    if step.share_low is None or step.share_high is None:
        return f"{step.share:.0%}"
    return f"{step.share:.0%} ({step.share_low:.0%} to {step.share_high:.0%})"


def _located(step: LocatedStep) -> str:
    ratio = _ci(step.estimate, step.low, step.high)
    return (
        f"{step.release} ({step.tag}): {ratio} against {step.predecessor}, "
        f"{step.rounds} rounds, {step.direction}"
    )


def _nearest(result: BisectResult, good: str, bad: str) -> list[str]:
    if not result.nearest:
        return []
    before = [v for v in result.nearest if version_key(v) < version_key(good)]
    after = [v for v in result.nearest if version_key(v) > version_key(bad)]
    lines = ["", "Nearest releases to check:"]
    if before:
        lines.append(
            f"- before {good}: {', '.join(before)} (the slowdown may predate the good end: "
            f"`watchkeeper bisect --good {before[-1]} --bad {good}`)"
        )
    if after:
        lines.append(
            f"- after {bad}: {', '.join(after)} (the system that regressed may run a later "
            f"release: `watchkeeper bisect --good {bad} --bad {after[-1]}`)"
        )
    lines.append(
        "- or the cause is not llama.cpp: the model, the flags or the host changed "
        "(the nightly's finding names both systems)."
    )
    return lines


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
        if len(result.located) > 1:
            lines += ["", "Steps located in this range, largest first:"]
            lines += [f"{i}. {_located(s)}" for i, s in enumerate(result.located, 1)]
    elif result.status == "no difference":
        ends = result.steps[0] if result.steps else None
        measured = f" ({_ratio(ends)}, {ends.rounds} rounds)" if ends is not None else ""
        lines.append(
            f"No change at the ends: {bad} against {good}{measured} rules out a slowdown "
            f"beyond the {threshold:.0%} threshold, so no release between them made one."
        )
        lines += _nearest(result, good, bad)
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
                f"{_ci(last.estimate, last.low, last.high)}, which rules out a slowdown beyond "
                f"{1 - last.low:.1%}, not one within the {threshold:.0%} threshold."
                if last.low < 1
                else f"What it does bound: {last.candidate} is no slower than {last.baseline}."
            )
    if result.notes:
        lines += ["", "On the way:"]
        lines += [f"- {note}" for note in result.notes]
    lines += [
        "",
        f"{releases} releases in the range; threshold {threshold:.0%}. The ends are bad when "
        "the whole 95% CI of their ratio lies beyond the threshold; each candidate is then "
        "placed by the share of the ends' change it carries (its log-ratio against the good "
        "end over the ends' log-ratio, with a Fieller interval that carries both CIs): good "
        "when surely under one half, bad when surely over, more rounds otherwise. A sure "
        "difference beyond the threshold from the end it is placed with is bisected as a "
        "second range; a located release is measured against its predecessor.",
        "",
        "| step | candidate | against | role | ratio (candidate / baseline) | share of the "
        "range's change | rounds | decision | build |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for i, step in enumerate(result.steps, 1):
        lines.append(
            f"| {i} | {step.candidate} ({tag(step.candidate)}) | {step.baseline} | "
            f"{step.role} | {_ratio(step)} | {_share(step)} | {step.rounds} | {step.decision} | "
            f"{_build_time(result.builds, step.candidate)} |"
        )
    return "\n".join(lines) + "\n"


def steps_text(steps: Sequence[StepResult]) -> list[str]:
    return [f"{s.candidate} vs {s.baseline}: {s.decision} {_ratio(s)}" for s in steps]
