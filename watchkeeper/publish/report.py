"""Markdown benchmark report: what was measured, how sure we are, and how to reproduce it.

Rendering is a pure function of the `BenchResult` (no clock, no host lookups) so a stored
result re-renders to the same bytes and the golden test can pin the format. Numbers and
table rows are formatted here so every table uses the same precision and the same escaping;
the template owns the order, the column headers and the prose.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from watchkeeper.analysis.acceptance import explain, result_curves
from watchkeeper.analysis.benchmark import (
    ArmSpec,
    ArmStats,
    BenchResult,
    CategoryStats,
    IdentityRecord,
)
from watchkeeper.analysis.recommend import Choice, Recommendation
from watchkeeper.analysis.speculation import SpeedupBound
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.checks.guards import GuardFinding
from watchkeeper.publish import format as fmt
from watchkeeper.publish import markdown as md
from watchkeeper.publish.format import MISSING
from watchkeeper.publish.plots import atomic_write, make_plots

NONE = MISSING
_fixed = md.fixed
EXCERPT_CHARS = 200
EVIDENCE_CHARS = 600
MAX_EXAMPLES = 5
OVERHEAD_EFFICIENCY = 0.8
"""Below this share of the predicted speed-up, overhead (not acceptance) is what costs."""

PLOT_TITLES = {
    "speedup": "Speed-up per category",
    "tps": "Decode tok/s per request",
    "acceptance": "Acceptance rate vs draft n_max",
    "acceptance_curve": "Acceptance per draft position",
    "identity": "Identical-output rate per category",
}
VERDICTS = ("identical", "near_tie", "batch_variance", "length_only", "mismatch")
_VERDICT_ORDER = {"mismatch": 0, "batch_variance": 1, "near_tie": 2, "length_only": 3}
_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


# -- number formatting ------------------------------------------------------------------------


def _ratio(value: float | None) -> str:
    return _fixed(value, 2, "x")


def _ci(ci: RatioCI | None) -> str:
    """The speed-up with its CI (`format.speedup`), then the report's own notes: the verdict,
    how many rounds would settle it, what the trimmed estimate set aside."""
    if ci is None or not ci.has_ci:
        return fmt.speedup(ci)  # without a CI there is no verdict either
    text = f"{fmt.speedup(ci)} {ci.verdict}"
    if ci.rounds_needed:
        text += f", ~{ci.rounds_needed} rounds to settle"
    elif ci.settle is not None and ci.settle.add_tasks:
        text += f", {ci.settle.describe()}"
    if ci.winsorized_cells:
        text += f", {ci.winsorized_cells} outlier cell(s) winsorized"
    if ci.tail_regression and ci.tail is not None:
        text += f"; suspicious: tail regression ({ci.tail.describe()})"
    return text


def _mib(value: int | None) -> str:
    return NONE if value is None else f"{value / (1 << 20):.0f}"


# -- sections ---------------------------------------------------------------------------------


def _candidates(result: BenchResult) -> list[ArmSpec]:
    return [a for a in result.arms if a.role == "candidate"]


def _arm_stats(result: BenchResult, arm: str) -> ArmStats | None:
    return next((s for s in result.arm_stats if s.arm == arm), None)


def _categories(result: BenchResult) -> list[str]:
    present = {c.category for c in result.categories}
    ordered = [c for c in result.method.categories if c in present]
    return ordered + sorted(present - set(ordered))


def _headline(result: BenchResult, recommendation: Recommendation | None) -> str:
    if recommendation is not None:
        return recommendation.headline
    conf = f"{result.method.confidence:.0%} CI"
    parts = []
    for arm in _candidates(result):
        stats = result.stats(arm.name)
        ci = stats.speedup if stats is not None else None
        parts.append(
            f"{arm.name} {NONE}"
            if ci is None
            else f"{arm.name} {ci.estimate:.2f}x ({conf} {ci.low:.2f}-{ci.high:.2f})"
        )
    return "; ".join(parts) if parts else "no candidate arm was measured"


def _summary_rows(result: BenchResult) -> list[list[str]]:
    rows = []
    for arm in result.arms:
        st = _arm_stats(result, arm.name)
        o = st.overall if st is not None else None
        rows.append(
            [
                arm.name,
                arm.role,
                md.text(arm.spec_type),
                md.text(arm.draft_n_max),
                _fixed(o.median_tps if o else None, 1),
                NONE if arm.role == "baseline" or o is None else _ci(o.speedup),
                fmt.share(o.acceptance_rate if o else None),
                _fixed(st.mean_accepted_per_draft if st else None, 2),
                fmt.share(o.identical_rate if o else None),
                _fixed(o.median_ttft_ms if o else None, 0),
                _mib(st.peak_rss_bytes if st else None),
                NONE if o is None else f"{o.errors}/{o.requests}",
            ]
        )
    return rows


def _category_rows(result: BenchResult) -> list[list[str]]:
    rows = []
    base = result.baseline.name
    for category in _categories(result):
        b = result.stats(base, category)
        for arm in _candidates(result):
            c = result.stats(arm.name, category)
            if c is None:
                continue
            rows.append(
                [
                    category,
                    arm.name,
                    _fixed(b.median_tps if b else None, 1),
                    _fixed(c.median_tps, 1),
                    _ci(c.speedup),
                    fmt.share(c.acceptance_rate),
                    fmt.share(c.identical_rate),
                ]
            )
    return rows


def _reading(
    predicted: float | None, efficiency: float | None, acceptance: float | None = None
) -> str:
    if predicted is None:
        return NONE
    if predicted <= 1.0:
        # With high acceptance a prediction at or below 1 can only come from the draft cost.
        if acceptance is not None and acceptance >= 0.8:
            return "draft cost limits it"
        return "acceptance limits it"
    if efficiency is not None and efficiency < OVERHEAD_EFFICIENCY:
        return "overhead eats the gain"
    return "close to the prediction"


def _verify_cell(arm: ArmSpec, bound: SpeedupBound | None) -> str:
    if arm.verify_cost is None:
        return _fixed(bound.verify_cost if bound else None, 2)
    at = f"{bound.verify_cost:.2f} " if bound else ""
    return f"{at}({arm.verify_cost:.2f} measured for {arm.verify_tokens} tokens)"


def _bound_rows(result: BenchResult) -> list[list[str]]:
    rows = []
    for arm in _candidates(result):
        st = _arm_stats(result, arm.name)
        bound = st.bound if st else None
        o = st.overall if st else None
        cost = _fixed(bound.cost_ratio if bound else arm.cost_ratio, 2)
        if arm.cost_note:
            cost = f"{cost} ({arm.cost_note})"
        measured = o.speedup.estimate if o is not None and o.speedup is not None else None
        predicted = bound.predicted_speedup if bound else None
        rows.append(
            [
                arm.name,
                fmt.share(bound.acceptance if bound else (o.acceptance_rate if o else None)),
                _fixed(bound.draft_length if bound else (st.mean_draft_length if st else None), 2),
                cost,
                _verify_cell(arm, bound),
                _fixed(bound.expected_tokens_per_step if bound else None, 2),
                _ratio(predicted),
                _ratio(measured),
                _fixed(st.efficiency if st else None, 2),
                f"bound beaten: {st.bound_note}"
                if st is not None and st.bound_note
                else _reading(
                    predicted, st.efficiency if st else None, bound.acceptance if bound else None
                ),
            ]
        )
    return rows


def _curve_rows(result: BenchResult) -> list[list[str]]:
    """One row per speculative arm: its acceptance at each draft position, and the reading."""
    rows = []
    for c in result_curves(result):
        shown = ", ".join(f"{r * 100:.0f}" for r in c.rates[:16])
        if len(c.rates) > 16:
            shown += ", ..."
        rows.append(
            [
                c.arm,
                f"{c.drafts:.0f}",
                _fixed(c.mean_accepted, 2),
                shown or NONE,
                "yes" if c.consistent else f"no ({c.position_sum:.0f} vs {c.accepted:.0f})",
                md.inline(explain(c).split(": ", 1)[-1]),
            ]
        )
    return rows


def _distribution_rows(result: BenchResult) -> list[list[str]]:
    """One row per arm of the distribution check (extras["distribution"], issue 30)."""
    rows = []
    for d in result.extras.get("distribution") or []:
        check = d["check"]
        low, high = check["excess_ci"]
        identity = d.get("seeded_identity") or {}
        rows.append(
            [
                md.inline(d["arm"]),
                md.inline(_sampling_text(d["sampling"])),
                md.inline(d["verdict"]),
                str(check["tokens"]),
                f"{check['excess_nats']:+.3f} [{low:+.3f}, {high:+.3f}]",
                f"{check['pit_p']:.3g}",
                f"{check['surprisal_z']:+.2f}",
                md.inline(", ".join(f"{k} {v}" for k, v in identity.items()) or "n/a"),
                f"{d['seconds'] / 60:.1f}",
            ]
        )
    return rows


def _sampling_text(sampling: Mapping[str, Any]) -> str:
    parts = [f"T {sampling['temperature']:g}"]
    parts += [
        f"{k} {sampling[k]:g}" for k in ("top_k", "top_p", "min_p") if sampling.get(k) is not None
    ]
    return ", ".join(parts)


def _verdict_row(label: str, stats: CategoryStats | None) -> list[str]:
    verdicts = stats.verdicts if stats is not None else {}
    counts = [verdicts.get(v, 0) for v in VERDICTS]
    return [
        label,
        str(sum(verdicts.values())),
        *(str(n) for n in counts),
        fmt.share(stats.identical_rate if stats else None),
    ]


def _examples(result: BenchResult) -> list[tuple[IdentityRecord, str, str, str | None]]:
    """Mismatches first: they are the correctness bugs a reader must see."""
    diverging = sorted(
        (r for r in result.identity if r.verdict in _VERDICT_ORDER),
        key=lambda r: _VERDICT_ORDER[r.verdict],
    )
    return [
        (
            r,
            _excerpt_block(r.baseline_excerpt),
            _excerpt_block(r.candidate_excerpt),
            _replay_line(r),
        )
        for r in diverging[:MAX_EXAMPLES]
    ]


def _token(value: object) -> str:
    if not isinstance(value, Mapping):
        return NONE
    text = md.inline(json.dumps(value.get("text", ""), ensure_ascii=False))
    logprob = value.get("logprob")
    lp = f" ({logprob:.3f})" if isinstance(logprob, int | float) else ""
    return f"{text}{lp}"


def _replay_line(record: IdentityRecord) -> str | None:
    """The replay evidence of one divergence, in one line (None when there is none)."""
    ev = record.replay
    if not ev:
        return None
    if ev.get("target_token") is None and ev.get("candidate_token") is None:
        note = ev.get("note") or "nothing replayed"
        return f"replay: {md.inline(str(note))}; noise floor {_fixed(ev.get('floor'), 4)} nats"
    return (
        f"replay: the baseline server, batched, picks {_token(ev.get('target_token'))}; "
        f"baseline {_token(ev.get('baseline_token'))}, candidate "
        f"{_token(ev.get('candidate_token'))}; gap {_fixed(ev.get('margin'), 4)} nats, "
        f"noise floor {_fixed(ev.get('floor'), 4)} nats"
        + (
            f"; replay failed: {md.inline(str(ev['replay_error']))}"
            if ev.get("replay_error")
            else ""
        )
    )


def _noise_floor_line(result: BenchResult) -> str | None:
    floor = result.extras.get("noise_floor")
    if not isinstance(floor, Mapping) or floor.get("floor") is None:
        return None
    quantile = floor.get("quantile")
    q = f"{quantile * 100:g}th percentile" if isinstance(quantile, int | float) else "quantile"
    return (
        f"Noise floor: {_fixed(floor.get('floor'), 4)} nats, measured on the baseline server "
        f"from {floor.get('positions', 0)} positions of its own probe outputs replayed as one "
        f"batched prompt (A/A): {q} of the logprob-gap change {_fixed(floor.get('gap_delta_q'), 4)}"
        f" nats, {floor.get('disagreements', 0)} position(s) where decode and replay picked "
        "different tokens."
    )


def _probe_line(result: BenchResult) -> str | None:
    """The probes' own speed beside the clean median: what logprobs would have cost had they
    been on the measured requests (on an H100, top-2 halved the baseline's decode)."""
    parts = [
        f"{md.inline(s.arm)} {_fixed(s.probe_median_tps, 1)} "
        f"(measured rounds {_fixed(s.overall.median_tps, 1)})"
        for s in result.arm_stats
        if s.probe_median_tps is not None
    ]
    if not parts:
        return None
    return "identity probes' own median decode tok/s, read by no figure: " + "; ".join(parts)


def _excerpt_block(text: str) -> str:
    return md.fenced(md.cap(text, EXCERPT_CHARS), indent=2)


def _findings(result: BenchResult) -> list[tuple[GuardFinding, str]]:
    ordered = sorted(result.findings, key=lambda f: _SEVERITY_ORDER.get(f.severity, 3))
    return [
        (f, md.fenced(md.cap(_json(f.evidence), EVIDENCE_CHARS), "json", indent=2)) for f in ordered
    ]


def _json(value: object) -> str:
    return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)


def _choice_row(choice: Choice) -> list[str]:
    profile = choice.profile or "keep the baseline"
    speedup = _ratio(choice.speedup)
    if choice.speedup is not None:
        speedup += f" ({_fixed(choice.low, 2)}-{_fixed(choice.high, 2)})"
    return [choice.category, profile, speedup, choice.reason]


def _choice_rows(result: BenchResult, recommendation: Recommendation) -> list[list[str]]:
    order = {c: i for i, c in enumerate(_categories(result))}
    ranked = sorted(recommendation.per_category, key=lambda c: order.get(c.category, len(order)))
    return [_choice_row(c) for c in ranked]


def _argv_block(arms: Sequence[ArmSpec]) -> str:
    lines = []
    for arm in arms:
        lines.extend([f"# {md.inline(arm.name)}", shlex.join(arm.argv)])
    return md.fenced("\n".join(lines), "sh")


def _context(
    result: BenchResult,
    plots: Mapping[str, str],
    recommendation: Recommendation | None,
    title: str,
) -> dict[str, Any]:
    m, host = result.method, result.host
    verdict_rows = [_verdict_row(a.name, result.stats(a.name)) for a in _candidates(result)]
    if result.control is not None:
        verdict_rows.append(_verdict_row("control (baseline vs its previous pass)", result.control))
    rec = None
    if recommendation is not None:
        rec = {
            "headline": md.inline(recommendation.headline),
            "reason": md.inline(recommendation.overall.reason),
            "rows": _choice_rows(result, recommendation),
        }
    return {
        "title": md.inline(title),
        "headline": md.inline(_headline(result, recommendation)),
        "kind": md.inline(result.kind),
        "started": result.started_at.isoformat(timespec="seconds"),
        "finished": result.finished_at.isoformat(timespec="seconds"),
        "conf": f"{m.confidence:.0%}",
        "summary_rows": _summary_rows(result),
        "category_rows": _category_rows(result),
        "bound_rows": _bound_rows(result),
        "curve_rows": _curve_rows(result),
        "overhead_efficiency": f"{OVERHEAD_EFFICIENCY:.0%}",
        "verdicts": VERDICTS,
        "verdict_rows": verdict_rows,
        "near_tie": f"{m.near_tie_threshold:g}",
        "noise_floor": _noise_floor_line(result),
        "examples": _examples(result),
        "findings": _findings(result),
        "distribution_rows": _distribution_rows(result),
        "recommendation": rec,
        "plots": [(PLOT_TITLES[k], md.link(plots[k])) for k in PLOT_TITLES if k in plots],
        "host_line": md.inline(
            f"{host.hostname}, {host.cpu_model}, {host.cpu_count} cores, "
            f"{host.memory_bytes / (1 << 30):.1f} GiB memory, GPU: {host.gpu or 'none'}, "
            f"{host.os} (fingerprint {host.fingerprint})"
        ),
        "build": md.inline(f"{result.build_version} ({result.build_variant})"),
        "model_rows": [
            [a.name, a.model, a.model_sha256, md.text(a.draft_model), md.text(a.draft_sha256)]
            for a in result.arms
        ],
        "argv": _argv_block(result.arms),
        "result": result,
        "method": m,
        "probe_line": _probe_line(result),
        "categories": ", ".join(m.categories) or NONE,
    }


def render_bench_report(
    result: BenchResult,
    *,
    plots: Mapping[str, str],
    recommendation: Recommendation | None = None,
    title: str = "Speculative decoding benchmark",
    sections: str = "",
) -> str:
    """Pure so a stored result can be re-rendered; `plots` keys without a file are skipped.
    `sections`: markdown a caller adds after the recommendation (the sweep's race)."""
    template = md.environment().get_template("bench_report.md.j2")
    return template.render(**_context(result, plots, recommendation, title), sections=sections)


def campaign_folder_name(result: BenchResult) -> str:
    kind = re.sub(r"[^A-Za-z0-9_.-]+", "-", result.kind).strip("-.") or "bench"
    return f"{result.started_at:%Y-%m-%d}-{kind}-c{result.campaign_id}"


def _relative(target: Path, start: Path) -> str:
    return Path(os.path.relpath(target.absolute(), start.absolute())).as_posix()


def write_bench_report(
    result: BenchResult,
    reports_dir: Path,
    *,
    recommendation: Recommendation | None = None,
    title: str = "Speculative decoding benchmark",
    extra_copy: Path | None = None,
    sections: str = "",
) -> Path:
    """Each campaign keeps its own folder; `latest.md` and `extra_copy` are re-rendered with
    image links relative to where they live, so every copy shows its plots."""
    folder = reports_dir / campaign_folder_name(result)
    plots = make_plots(result, folder)

    def write(path: Path, relative_to: Path) -> None:
        links = {k: _relative(folder / v, relative_to) for k, v in plots.items()}
        text = render_bench_report(
            result, plots=links, recommendation=recommendation, title=title, sections=sections
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text.encode("utf-8"))

    report = folder / "report.md"
    write(report, folder)
    write(reports_dir / "latest.md", reports_dir)
    if extra_copy is not None:
        write(extra_copy, extra_copy.parent)
    return report
