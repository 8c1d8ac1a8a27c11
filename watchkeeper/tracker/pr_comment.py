"""The sticky PR review comment: a pure function of the PR and the paired bench results.

Each reviewed profile is one paired bench: the base's definition of the profile is the
baseline arm, the head's the candidate. The comment leads with one verdict line, then the
speed-up table (geometric mean of paired ratios with a 95% cluster-bootstrap CI), the
identical-output table (verdict counts with a Wilson 95% interval on the identical rate) and
the method, so a reviewer can judge how sure the numbers are without leaving the PR.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from watchkeeper.analysis.benchmark import BenchResult, CategoryStats
from watchkeeper.analysis.stats import RatioCI, wilson
from watchkeeper.format import MISSING, fixed, speedup
from watchkeeper.tracker import escape
from watchkeeper.tracker.forge import PullRequest

VERDICTS = ("identical", "near_tie", "batch_variance", "length_only", "unverified", "mismatch")


@dataclass(frozen=True, slots=True)
class ProfileReview:
    profile: str
    result: BenchResult | None
    note: str = ""
    """Why there is no result (profile unchanged, only on one side, ...)."""


def review_marker(number: int) -> str:
    return escape.marker_token(f"review:{number}")


def _ci(ci: RatioCI | None) -> str:
    """The speed-up with its CI (`format.speedup`), and how many rounds would settle it."""
    text = speedup(ci)
    if ci is not None and ci.has_ci and ci.rounds_needed:
        text += f", ~{ci.rounds_needed} rounds would settle it"
    elif ci is not None and ci.settle is not None and ci.settle.add_tasks:
        text += f", {ci.settle.describe()}"
    return text


def _num(value: float | None, spec: str) -> str:
    return fixed(value, spec)


def _speed_word(ci: RatioCI | None) -> str:
    """Only a CI that excludes 1 with an effect beyond the threshold names a direction: two
    reviews of identical code once read 0.91x "regresses" and 1.22x "faster"."""
    if ci is None or not ci.has_ci:
        return "not measurable"
    if ci.verdict in ("faster", "slower"):
        return ci.verdict
    if ci.verdict == "inconclusive":
        return "inconclusive"
    return "no clear difference"


def _mismatches(stats: CategoryStats | None) -> int:
    return stats.verdicts.get("mismatch", 0) if stats else 0


def _heads(reviews: Sequence[ProfileReview]) -> list[tuple[ProfileReview, str, str]]:
    """(review, candidate arm, display name) for every measured candidate arm."""
    out = []
    for r in reviews:
        if r.result is None:
            continue
        heads = [a.name for a in r.result.arms if a.role == "candidate"]
        for head in heads:
            label = r.profile if len(heads) == 1 else f"{r.profile} ({head})"
            out.append((r, head, escape.inline(label, 80)))
    return out


def verdict(reviews: Sequence[ProfileReview]) -> str:
    """One line: the worst news first."""
    parts, worst = [], 0
    for r, head, name in _heads(reviews):
        assert r.result is not None
        stats = r.result.stats(head)
        ci = stats.speedup if stats else None
        word = _speed_word(ci)
        mism = _mismatches(stats)
        worst = max(worst, 2 if word == "slower" or mism else 1 if word == "faster" else 0)
        extra = f", {mism} output mismatch(es)" if mism else ""
        parts.append(f"{name}: {word}, {_ci(ci)}{extra}")
    if not parts:
        return "nothing to measure: no profile differs between base and head"
    label = {0: "no clear change", 1: "head is faster", 2: "⚠️ head regresses"}[worst]
    return f"**{label}** — " + "; ".join(parts)


def _rows(reviews: Sequence[ProfileReview]) -> tuple[list[str], list[str]]:
    speed, ident = [], []
    for r, head, name in _heads(reviews):
        res = r.result
        assert res is not None
        base = res.baseline.name
        cats = ["all", *sorted({c.category for c in res.categories if c.arm == head})]
        for cat in cats:
            b, h = res.stats(base, cat), res.stats(head, cat)
            if h is None:
                continue
            speed.append(
                f"| {name} | {escape.inline(cat, 40)} | {_num(b.median_tps if b else None, '.1f')} "
                f"| {_num(h.median_tps, '.1f')} | {_ci(h.speedup)} "
                f"| {_num(h.acceptance_rate, '.1%')} | {h.errors}/{h.requests} |"
            )
            n = sum(h.verdicts.values())
            same = h.verdicts.get("identical", 0)
            low, high = wilson(same, n)
            rate = f"{same / n:.0%} ({low:.0%}-{high:.0%})" if n else MISSING
            counts = " | ".join(str(h.verdicts.get(v, 0)) for v in VERDICTS)
            ident.append(f"| {name} | {escape.inline(cat, 40)} | {counts} | {rate} |")
    return speed, ident


def _method(reviews: Sequence[ProfileReview]) -> list[str]:
    done = [r for r in reviews if r.result is not None]
    if not done:
        return []
    res = done[0].result
    assert res is not None
    m = res.method
    lines = [
        f"- {m.tasks} tasks ({', '.join(escape.inline(c, 40) for c in m.categories)}), "
        f"{m.rounds} measured round(s) after {m.warmup_rounds} warm-up round(s), concurrency "
        f"{m.concurrency}, temperature {m.temperature:g}, seed {m.seed}.",
        f"- Order: {m.order}; {m.processes}. Metric: {m.metric}.",
        f"- Speed-up: head / base, {m.ci_method}, {m.confidence:.0%} CI, {m.resamples} resamples.",
        "- Identity: each head output against the base output of the same task and round; "
        f"`near_tie` = diverged where the base's top-2 logprob margin was below "
        f"{m.near_tie_threshold:g} nats; `batch-variance` = the base server, fed the shared "
        "prefix as one batched prompt, picks the head's token (or it is within the measured "
        "noise floor); only `mismatch` is a correctness bug. Identical rate with a Wilson 95% "
        "interval.",
        f"- Host {escape.inline(res.host.cpu_model, 80)} ({res.host.cpu_count} CPUs"
        f"{', ' + escape.inline(res.host.gpu, 80) if res.host.gpu else ''}); llama-server "
        f"{escape.inline(res.build_version, 60)} ({escape.inline(res.build_variant, 20)}).",
    ]
    for r in done:
        assert r.result is not None
        sizing = r.result.extras.get("sizing")
        sized = f" Rounds: {escape.inline(str(sizing), 200)}." if sizing else ""
        lines.append(f"- {escape.inline(r.profile, 60)}: campaign {r.result.campaign_id}.{sized}")
    return lines


def review_comment(
    pr: PullRequest, reviews: Sequence[ProfileReview], matched: Sequence[str]
) -> str:
    marker = escape.marker_line(review_marker(pr.number), f"review:{pr.number}")
    speed, ident = _rows(reviews)
    out = [
        marker,
        f"### watchkeeper: paired A/B of head `{pr.head_sha[:10]}` against base "
        f"`{pr.base_sha[:10]}`",
        "",
        verdict(reviews),
        "",
    ]
    if speed:
        out += [
            "#### Speed-up (decode tok/s, head / base)",
            "",
            "| profile | category | base tok/s | head tok/s | speed-up (95% CI) "
            "| head acceptance | head errors |",
            "|---|---|---:|---:|---:|---:|---:|",
            *speed,
            "",
            "#### Identical output (head vs base, temperature 0)",
            "",
            "| profile | category | "
            + " | ".join(v.replace("_", "-") for v in VERDICTS)
            + " | identical rate (95% CI) |",
            "|---|---|" + "---:|" * (len(VERDICTS) + 1),
            *ident,
            "",
        ]
    notes = [
        f"- {escape.inline(r.profile, 60)}: {escape.inline(r.note)}" for r in reviews if r.note
    ]
    if notes:
        out += ["#### Not measured", "", *notes, ""]
    method = _method(reviews)
    if method:
        out += ["#### Method", "", *method, ""]
    files = ", ".join(f"`{escape.inline(f, 120)}`" for f in matched[:10])
    more = f" and {len(matched) - 10} more" if len(matched) > 10 else ""
    out += [
        f"<sub>Reviewed because this PR changes {files}{more}. This comment is edited in place; "
        "a new push re-runs the review.</sub>",
        "",
    ]
    return escape.body("\n".join(out))
