"""Render the morning digest to Markdown (pure) and lay out its files for writing or committing.

`render_digest` takes no clock and reads nothing: the same `Digest` gives the same bytes, which
is what lets a second run on the same night leave the reports repository untouched.
"""

from __future__ import annotations

from typing import Any

from watchkeeper.findings.evidence import (
    ChangePointEvidence,
    LevelShift,
    SeriesEvidence,
    evidence_of,
)
from watchkeeper.format import fixed, span
from watchkeeper.nightly.digest import Digest, NightlyRow
from watchkeeper.nightly.ratios import FalseAlarms
from watchkeeper.publish import markdown as md
from watchkeeper.publish.plots import history_png, ratio_png
from watchkeeper.store.findings import StoredFinding

EXCERPT_CHARS = 200
MAX_ROWS = 50


def _p(value: float | None) -> str:
    return fixed(value, ".2g")


def _series_row(f: StoredFinding, plots: dict[int, str]) -> list[str]:
    e = evidence_of(f.kind, f.evidence)
    s = e if isinstance(e, SeriesEvidence) else SeriesEvidence()
    state = "confirmed" if f.confirmed_at else "candidate"
    cv = s.baseline_cv
    runs = md.NONE if s.baseline_runs is None else str(s.baseline_runs)
    plot = f"[plot]({md.link(plots[f.id])})" if f.id in plots else md.NONE
    first_bad = s.change_point.first_bad_build if s.change_point else None
    return [
        f"#{f.id}",
        e.series_title(f.title),
        str(first_bad) if first_bad else "not yet named",
        e.delta_text(),
        e.ci_text(),
        f"{_p(s.p_adjusted)} ({s.test or md.NONE})",
        f"{runs} runs, CV {cv * 100:.1f}%" if cv is not None else runs,
        state,
        str(f.occurrences),
        plot,
    ]


SERIES_HEADERS = (
    "finding",
    "series",
    "first bad build",
    "delta",
    "95% CI",
    "p (BH) and test",
    "baseline",
    "state",
    "nights",
    "history",
)


def _change_row(f: StoredFinding, plots: dict[int, str]) -> list[str]:
    e = evidence_of(f.kind, f.evidence)
    cp = e.change_point if isinstance(e, ChangePointEvidence) else LevelShift()
    plot = f"[plot]({md.link(plots[f.id])})" if f.id in plots else md.NONE
    return [
        f"#{f.id}",
        e.series_title(f.title),
        str(cp.first_bad_build or md.NONE),
        f"run {cp.first_bad_run} (campaign {cp.first_bad_campaign})",
        f"{cp.before_median or 0:.4g} → {cp.after_median or 0:.4g}",
        e.delta_text(),
        plot,
    ]


def _soak_row(c: dict[str, Any]) -> list[str]:
    s = c["summary"]
    verdict = s.get("verdict") or (s.get("soak") or {}).get("verdict") or c["status"]
    reasons = s.get("reasons") or (s.get("soak") or {}).get("reasons") or []
    return [f"{c['id']}", str(verdict), "; ".join(str(r) for r in reasons) or md.NONE]


def _excerpt(text: str) -> str:
    return md.fenced(md.cap(text, EXCERPT_CHARS), indent=2)


def plot_name(day: str, finding_id: int) -> str:
    return f"{day}/finding-{finding_id}.png"


def ratio_plot_name(day: str, series: str) -> str:
    safe = "".join(ch if ch.isalnum() or ch in "-_." else "-" for ch in series)
    return f"{day}/ratio-{safe}.png"


def _nightly_row(row: NightlyRow, links: dict[str, str]) -> list[str]:
    r, ref = row.ratio, row.reference
    pinned = md.NONE
    if ref is not None:
        draft = f", draft {ref.draft_sha256[:12]}" if ref.draft_sha256 else ""
        pinned = (
            f"#{ref.id} {ref.pinned_at:%Y-%m-%d} by {ref.pinned_by}: {ref.binary_version}, "
            f"binary {ref.binary_sha256[:12]}, model {ref.model_sha256[:12]}{draft}, flags "
            f"{ref.config_hash}"
        )
    plot = f"[plot]({md.link(links[r.series])})" if r.series in links else md.NONE
    verdict = r.verdict + (" (confirmed)" if r.confirmed else "")
    # The tail series read higher = better like the rest: p90 TTFT as reference over current.
    metric = {"ttft_p90": " · p90 TTFT (ref/cur)", "goodput": " · goodput"}.get(r.metric, "")
    return [
        f"{r.profile} · {r.category}{metric}",
        f"{r.estimate:.3f}",
        span(r.low, r.high, ".3f"),
        f"{r.threshold:.0%}",
        verdict,
        f"{r.n_tasks} x {r.n_rounds}",
        "A/A" if r.aa else "current vs reference",
        pinned,
        plot,
    ]


NIGHTLY_HEADERS = (
    "series",
    "current / reference",
    "95% CI",
    "threshold",
    "verdict",
    "tasks x rounds",
    "night",
    "reference (pinned)",
    "history",
)


def render_digest(
    digest: Digest, *, plots: dict[int, str], ratio_links: dict[str, str] | None = None
) -> str:
    """``plots`` maps finding id → link relative to the Markdown file (``ratio_links``:
    nightly series → its ratio plot)."""
    template = md.environment().get_template("digest.md.j2")
    return template.render(
        d=digest,
        day=digest.day.isoformat(),
        **_finding_tables(digest, plots),
        soak_table=md.table(
            ("campaign", "verdict", "reasons"), [_soak_row(c) for c in digest.soaks]
        ),
        bisect_lines=[
            f"#{b.finding_id} ({b.profile}: reference on {b.good}, tonight on {b.bad}): "
            f"`{b.command}`"
            for b in digest.bisects[:MAX_ROWS]
        ],
        campaign_list=", ".join(f"{c['id']} ({c['kind']})" for c in digest.campaigns) or md.NONE,
        labels=", ".join(f"{k}: {v}" for k, v in sorted(digest.labels.items())) or md.NONE,
        excerpt=_excerpt,
        nightly_table=md.table(
            NIGHTLY_HEADERS,
            [_nightly_row(row, ratio_links or {}) for row in digest.nightly[:MAX_ROWS]],
            "lrrrllll",
        ),
        false_alarm_lines=[_false_alarm_line(host, fa) for host, fa in digest.false_alarms],
    )


def _finding_tables(digest: Digest, plots: dict[int, str]) -> dict[str, str]:
    """The tables of findings, each cut at MAX_ROWS: tonight's regressions, improvements and
    change points (linked to their plots), the suspicious series not flagged, and every
    finding still open."""
    return {
        "regression_table": md.table(
            SERIES_HEADERS,
            [_series_row(f, plots) for f in digest.regressions[:MAX_ROWS]],
            "lllrrlllrl",
        ),
        "improvement_table": md.table(
            SERIES_HEADERS,
            [_series_row(f, plots) for f in digest.improvements[:MAX_ROWS]],
            "lllrrlllrl",
        ),
        "change_table": md.table(
            (
                "finding",
                "series",
                "first bad build",
                "first bad run",
                "level (before → after)",
                "change",
                "history",
            ),
            [_change_row(f, plots) for f in digest.change_points[:MAX_ROWS]],
        ),
        "suspicious_table": md.table(
            ("campaign", "series", "delta", "p (BH)", "why not flagged"),
            [
                [
                    str(v["campaign_id"]),
                    v["series_name"],
                    SeriesEvidence.from_json(v).delta_text(),
                    _p(v.get("p_adjusted")),
                    v["note"],
                ]
                for v in digest.suspicious[:MAX_ROWS]
            ],
            "llrrl",
        ),
        "open_table": md.table(
            ("finding", "kind", "status", "age (days)", "title"),
            [
                [f"#{f.id}", f.kind, f.status, str(age), f.title]
                for f, age in digest.open_findings[:MAX_ROWS]
            ],
            "lllrl",
        ),
    }


def _false_alarm_line(host: str, fa: FalseAlarms) -> str:
    """One host's A/A false-alarm rate: per series-night (a flag is only a candidate), and
    per profile-night (what a night's filing rate against the 1% target is)."""
    return (
        f"host {host[:12]}: {fa.flagged} flag(s) in {fa.series_nights} A/A series-nights"
        + (
            f" ({fa.rate:.1%}, 95% Wilson CI {fa.low:.1%}-{fa.high:.1%}); {fa.confirmed} "
            f"confirmed (Wilson CI {fa.confirmed_low:.1%}-{fa.confirmed_high:.1%}): a single "
            "flag is a candidate, only a confirmed one is filed"
            if fa.rate is not None
            else ""
        )
        + (
            f"; per profile-night: {fa.family_flagged} of {fa.nights} A/A nights with a "
            f"confirmed flag in any series ({fa.family_rate:.1%}, Wilson CI "
            f"{fa.family_low:.1%}-{fa.family_high:.1%}; target <= 1%)"
            if fa.family_rate is not None
            else ""
        )
    )


def digest_files(digest: Digest) -> dict[str, bytes]:
    """The digest's files, relative to the digests folder: ``DATE.md`` and its plots."""
    day = digest.day.isoformat()
    files = {plot_name(day, p.finding_id): history_png(p) for p in digest.plots}
    plots = {p.finding_id: plot_name(day, p.finding_id) for p in digest.plots}
    ratio_links = {r.series: ratio_plot_name(day, r.series) for r in digest.ratio_plots}
    for r in digest.ratio_plots:
        files[ratio_links[r.series]] = ratio_png(r)
    files[f"{day}.md"] = render_digest(digest, plots=plots, ratio_links=ratio_links).encode("utf-8")
    return files
