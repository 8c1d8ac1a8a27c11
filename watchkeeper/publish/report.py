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

from watchkeeper import format as fmt
from watchkeeper.analysis.benchmark import (
    ArmSpec,
    BenchResult,
    CategoryStats,
    IdentityRecord,
)
from watchkeeper.analysis.recommend import Choice, Recommendation
from watchkeeper.checks.guards import GuardFinding
from watchkeeper.format import MISSING
from watchkeeper.publish import markdown as md
from watchkeeper.publish.acceptance_section import HEADERS as ACCEPTANCE_HEADERS
from watchkeeper.publish.acceptance_section import request_acceptance_rows
from watchkeeper.publish.gpu_rows import gpu_measured, gpu_rows
from watchkeeper.publish.identity_lines import identity_section
from watchkeeper.publish.plots import atomic_write, make_plots
from watchkeeper.publish.report_rows import (
    OVERHEAD_EFFICIENCY,
    bound_rows,
    candidate_arms,
    category_rows,
    curve_rows,
    distribution_rows,
    ordered_categories,
    ratio_text,
    summary_rows,
)
from watchkeeper.redaction import redact_url

NONE = MISSING
_fixed = md.fixed
EXCERPT_CHARS = 200
EVIDENCE_CHARS = 600
MAX_EXAMPLES = 5

PLOT_TITLES = {
    "speedup": "Speed-up per category",
    "tps": "Decode tok/s per request",
    "acceptance": "Acceptance rate vs draft n_max",
    "acceptance_curve": "Acceptance per draft position",
    "identity": "Identical-output rate per category",
}
VERDICTS = ("identical", "near_tie", "batch_variance", "length_only", "unverified", "mismatch")
_VERDICT_ORDER = {
    "mismatch": 0,
    "unverified": 1,
    "batch_variance": 2,
    "near_tie": 3,
    "length_only": 4,
}
_SEVERITY_ORDER = {"high": 0, "medium": 1, "low": 2}


def _headline(result: BenchResult, recommendation: Recommendation | None) -> str:
    if recommendation is not None:
        return recommendation.headline
    conf = f"{result.method.confidence:.0%} CI"
    parts = []
    for arm in candidate_arms(result):
        stats = result.stats(arm.name)
        ci = stats.speedup if stats is not None else None
        parts.append(
            f"{arm.name} {NONE}"
            if ci is None
            else f"{arm.name} {ci.estimate:.2f}x ({conf} {ci.low:.2f}-{ci.high:.2f})"
        )
    return "; ".join(parts) if parts else "no candidate arm was measured"


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
    """Modes, noise floor, token scores and power (`publish.identity_lines`)."""
    return identity_section(result.extras)


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
    """A pick with its CI; keeping the baseline, the arm that came closest with its CI (or
    why there is none) and the rounds that would settle it."""
    profile = choice.profile or "keep the baseline"
    speedup = ratio_text(choice.speedup)
    if choice.speedup is not None:
        speedup += f" ({_fixed(choice.low, 2)}-{_fixed(choice.high, 2)})"
    elif choice.best is not None:
        speedup = f"best: {choice.best} {choice.best_text}"
    settle = md.inline(choice.settle) if choice.settle else md.NONE
    return [choice.category, profile, speedup, settle, choice.reason]


def _choice_rows(result: BenchResult, recommendation: Recommendation) -> list[list[str]]:
    order = {c: i for i, c in enumerate(ordered_categories(result))}
    ranked = sorted(recommendation.per_category, key=lambda c: order.get(c.category, len(order)))
    return [_choice_row(c) for c in ranked]


def _argv_block(arms: Sequence[ArmSpec]) -> str:
    lines = []
    for arm in arms:
        if arm.external is not None:
            lines.append(f"# {md.inline(arm.name)}: not started by watchkeeper, see above")
            continue
        lines.extend([f"# {md.inline(arm.name)}", shlex.join(arm.argv)])
    return md.fenced("\n".join(lines), "sh")


def _external_lines(arms: Sequence[ArmSpec]) -> list[str]:
    """What each server watchkeeper did not start said about itself ("unknown" where not)."""
    lines = []
    for arm in arms:
        ext = arm.external
        if ext is None:
            continue
        said = ext.get("speculative")
        spec = "speculation unknown" if said is None else ("" if said else "not ") + "speculative"
        models = ", ".join(ext.get("models") or []) or "unknown"
        lines.append(
            md.inline(
                f"{arm.name}: {redact_url(str(ext.get('url')))}: build {ext.get('build_info')}, "
                f"model "
                f"{ext.get('model_path')}, n_ctx {ext.get('n_ctx') or 'unknown'}, slots "
                f"{ext.get('total_slots') or 'unknown'}, {spec}; "
                f"/v1/models: {models}"
            )
        )
    return lines


def _context(
    result: BenchResult,
    plots: Mapping[str, str],
    recommendation: Recommendation | None,
    title: str,
) -> dict[str, Any]:
    m, host = result.method, result.host
    verdict_rows = [_verdict_row(a.name, result.stats(a.name)) for a in candidate_arms(result)]
    if result.control is not None:
        verdict_rows.append(_verdict_row("control (baseline vs its previous pass)", result.control))
    rec = None
    if recommendation is not None:
        rec = {
            "headline": md.inline(recommendation.headline),
            "label": md.inline(
                f"For {recommendation.mix_words}" if recommendation.answers_mix else "Overall"
            ),
            "reason": md.inline(recommendation.reason),
            "rows": _choice_rows(result, recommendation),
        }
    return {
        "title": md.inline(title),
        "headline": md.inline(_headline(result, recommendation)),
        "kind": md.inline(result.kind),
        "started": result.started_at.isoformat(timespec="seconds"),
        "finished": result.finished_at.isoformat(timespec="seconds"),
        "conf": f"{m.confidence:.0%}",
        "summary_rows": summary_rows(result),
        "gpu_measured": gpu_measured(result),
        "gpu_rows": gpu_rows(result),
        "category_rows": category_rows(result),
        "bound_rows": bound_rows(result),
        "curve_rows": curve_rows(result),
        "request_acceptance_headers": ACCEPTANCE_HEADERS,
        "request_acceptance_rows": request_acceptance_rows(result),
        "overhead_efficiency": f"{OVERHEAD_EFFICIENCY:.0%}",
        "verdicts": VERDICTS,
        "verdict_rows": verdict_rows,
        "near_tie": f"{m.near_tie_threshold:g}",
        "noise_floor": _noise_floor_line(result),
        "examples": _examples(result),
        "findings": _findings(result),
        "distribution_rows": distribution_rows(result),
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
        "external_lines": _external_lines(result.arms),
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
    preface: str = "",
) -> str:
    """Pure so a stored result can be re-rendered; `plots` keys without a file are skipped.
    `sections`: markdown a caller adds after the recommendation (the sweep's race);
    `preface`: markdown right under the headline (the sweep's hardware and what it means)."""
    template = md.environment().get_template("bench_report.md.j2")
    return template.render(
        **_context(result, plots, recommendation, title), sections=sections, preface=preface
    )


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
    preface: str = "",
) -> Path:
    """Each campaign keeps its own folder; `latest.md` and `extra_copy` are re-rendered with
    image links relative to where they live, so every copy shows its plots."""
    folder = reports_dir / campaign_folder_name(result)
    plots = make_plots(result, folder)

    def write(path: Path, relative_to: Path) -> None:
        links = {k: _relative(folder / v, relative_to) for k, v in plots.items()}
        text = render_bench_report(
            result,
            plots=links,
            recommendation=recommendation,
            title=title,
            sections=sections,
            preface=preface,
        )
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, text.encode("utf-8"))

    report = folder / "report.md"
    write(report, folder)
    if writes_latest(result, reports_dir):
        write(reports_dir / "latest.md", reports_dir)
    if extra_copy is not None:
        write(extra_copy, extra_copy.parent)
    return report


def writes_latest(result: BenchResult, reports_dir: Path) -> bool:
    """`latest.md` is the last campaign's report, except in a deliverable set's folder (one
    holding a sweep's recommendation), where it stays the set's answer, its sweep: the
    code-edit set's read as a nightly while the default set's read as a sweep
    (`watchkeeper check-set` holds every set to this)."""
    return result.kind == "sweep" or not (reports_dir / "speculative_recommendation.json").is_file()
