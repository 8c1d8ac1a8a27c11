"""The soak of the recommendation as a committed report beside the sweep's.

`watchkeeper soak --recommendation ...` soaks the recommended arm (or, when the answer keeps
the baseline, the closest speculative arm) beside the baseline at each concurrency and writes
`reports/speculative_soak.md` plus a JSON summary of the same figures. The sweep report's
acceptance section reads that summary: stability is a criterion of the request, answered by
the soak that ran, or by the command that would run it. Pure functions of plain data; the
command writes the files and splices the acceptance line into the sweep report.
"""

from __future__ import annotations

import json
import os
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from watchkeeper.publish import markdown as md
from watchkeeper.publish.deliverable import RecommendationRecord
from watchkeeper.publish.soak_drift import (
    drift_cell,
    drift_entries,
    stability_state,
    unresolved_drift,
    unresolved_text,
)
from watchkeeper.publish.soak_hours import hours_shortfall, overnight_lines
from watchkeeper.soak.verdicts import output_rates

if TYPE_CHECKING:
    from watchkeeper.soak.views import SoakSampleView

SOAK_REPORT = "speculative_soak.md"
SOAK_SUMMARY = "speculative_soak.json"
BEGIN = "<!-- soak:begin -->"
END = "<!-- soak:end -->"


@dataclass(frozen=True, slots=True)
class SeriesRow:
    profile: str
    concurrency: int
    requests: int
    errors: int
    median_tps: float | None


def series_rows(samples: Sequence[SoakSampleView]) -> list[SeriesRow]:
    """Load requests per (profile, concurrency): count, errors, median decode tok/s."""
    groups: dict[tuple[str, int], list[SoakSampleView]] = {}
    for s in samples:
        if not s.is_probe:
            groups.setdefault((s.profile, s.concurrency), []).append(s)
    out = []
    for (profile, conc), rows in sorted(groups.items()):
        tps = [s.decode_tps for s in rows if s.error is None and s.decode_tps]
        out.append(
            SeriesRow(
                profile,
                conc,
                len(rows),
                sum(1 for s in rows if s.error is not None),
                statistics.median(tps) if tps else None,
            )
        )
    return out


def summary(
    verdict: Mapping[str, Any],
    rows: Sequence[SeriesRow],
    *,
    subject: str,
    baseline: str,
    duration: str,
    sweep_campaign: int | None,
    command: str,
    cache_ram_mib: int | None = None,
    drift_threshold: float = 0.10,
    unit: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """What the report and the sweep's acceptance section read (JSON-safe). `cache_ram_mib`:
    the `--cache-ram` the soak's servers ran with (the campaign's params), None: the build's."""
    figures = verdict.get("figures", {})
    rss = {e["profile"]: e for e in figures.get("rss", [])}
    return {
        "campaign_id": verdict.get("campaign_id"),
        "sweep_campaign": sweep_campaign,
        "subject": subject,
        "baseline": baseline,
        "duration": duration,
        "command": command,
        "verdict": verdict.get("verdict"),
        "headline": verdict.get("headline"),
        "reasons": list(verdict.get("reasons", [])),
        "notes": list(verdict.get("notes", [])),
        "requests": figures.get("requests"),
        "errors": figures.get("errors"),
        "restarts": figures.get("restarts"),
        "crashes": figures.get("crashes"),
        "identical_output_rate": output_rates(figures)[0],
        "consistent_output_rate": output_rates(figures)[1],
        "probe_totals": figures.get("probe_totals"),
        "identity": [
            {k: e.get(k) for k in _IDENTITY_KEYS} for e in figures.get("identical_output", [])
        ],
        "cache_ram_mib": cache_ram_mib,
        "series": [asdict(r) for r in rows],
        "rss": {
            p: {
                "slope_mb_per_h": e.get("slope"),
                "ci95": e.get("ci95"),
                "judged": e.get("judged", False),
                "span_s": e.get("span_s"),
            }
            for p, e in rss.items()
        },
        "drift": drift_entries(figures.get("series", [])),
        "blocks": [
            {"profile": e["profile"], "concurrency": e["concurrency"], "rows": e["block_rows"]}
            for e in figures.get("series", [])
            if "block_rows" in e
        ],
        "leak_threshold_mb_per_hour": figures.get("leak_threshold_mb_per_hour"),
        "drift_threshold": drift_threshold,
        "unit": dict(unit) if unit else None,
    }


_IDENTITY_KEYS = (
    "profile",
    "concurrency",
    "reference_profile",
    "compared",
    "identical",
    "near_tie",
    "length_only",
    "unverified",
    "mismatch",
)


def _aggregate_text(s: Mapping[str, Any]) -> str:
    """How depth > 1 was judged, in the words of the soak's own rows: a soak from before 28 Nov
    2026 (rows with a time `window_s`) read each block over a fixed time window."""
    rows = [r for b in s.get("blocks", []) for r in b.get("rows", [])]
    if rows and all("busy_s" in r for r in rows):
        figure = (
            "every block replays one task order, and its first requests, the same number in "
            "every block and all done before its deadline, give the server's throughput by "
            "Little's law (concurrency x tokens / request seconds); the first blocks are "
            "warm-up), a least-squares slope over the rest"
        )
    else:
        figure = (
            "the tokens of all requests in flight per second of each block), a least-squares "
            "slope over all blocks"
        )
    one_sided = any(d.get("verdict") == "no slowdown" for d in s.get("drift", []))
    return (
        f"Above concurrency 1 the drift is the aggregate throughput's ({figure} with an "
        "autocorrelation-aware 95% CI: per-request speeds there scatter with the batch they "
        'shared (docs/soak.md, "Judging depth 4"). `no drift`: the CI lies within the '
        "threshold either way; "
        + (
            "`no slowdown`: its lower end lies within it and only its upper end reaches past "
            "(stability asks whether the server slowed; a rise is not a reason); "
            if one_sided
            else ""
        )
        + "`inconclusive`: it reaches past it"
        + (" on the losing side." if one_sided else ".")
    )


def _identity_section(s: Mapping[str, Any]) -> list[str]:
    entries = s.get("identity") or []
    if not entries:
        return []
    rows = [
        [
            e["profile"],
            str(e["concurrency"]),
            e.get("reference_profile") or md.NONE,
            *(str(e.get(k) or 0) for k in _IDENTITY_KEYS[3:]),
        ]
        for e in entries
    ]
    return [
        "",
        "## Identical output (temperature-0 probes)",
        "",
        "Before a block's load starts (at most once per arm and concurrency every "
        "`soak.probe_interval_s`), the same task goes to the arm's server alone, at "
        "temperature 0. Each probe is compared, token by token, with the first complete probe "
        "of that task at that concurrency: its own arm's, or for a speculating arm, whose "
        "drafted tokens carry no logprobs, the baseline's. A *near tie* is a token where the "
        "reference's two best candidates were within 0.1 nats and the probe took the other "
        "(a speculating arm verifies drafted tokens in a batch, whose floats add in another "
        "order than the baseline's one-token steps). A *mismatch* is any other difference, "
        "and counts against stability.",
        "",
        md.table(
            [
                "arm",
                "concurrency",
                "reference",
                "compared",
                "identical",
                "near ties",
                "cut by length",
                "unverified",
                "mismatches",
            ],
            rows,
            "lrlrrrrrr",
        ),
    ]


def _memory_intro(s: Mapping[str, Any]) -> list[str]:
    mib = s.get("cache_ram_mib")
    if mib == 0:
        return [
            "The servers ran with `--cache-ram 0`: the build's host prompt cache (8192 MiB by "
            "default) keeps the state of every prompt a slot lets go and grows toward its limit "
            "under any load, which a leak test cannot tell from a leak. The growth below is the "
            "process's own. In production the default cache adds up to its limit on top of "
            "it; `--cache-ram` bounds it.",
            "",
        ]
    if mib is None:
        return []
    return [f"The servers ran with `--cache-ram {mib}`.", ""]


def _pct(ci: Sequence[float] | None) -> str:
    return f"{ci[0]:+.0%}..{ci[1]:+.0%}" if ci else md.NONE


def headline_text(s: Mapping[str, Any]) -> str:
    """`**stable**: 1317 requests ...`: the verdict once (the judge's headline opens with it)."""
    verdict, headline = str(s.get("verdict")), str(s.get("headline") or "")
    rest = headline.removeprefix(f"{verdict}:").strip()
    verdict = {
        "unjudged": "no error, no restart; drift not judged",
        "judged in part": "stable where judged",
    }.get(stability_state(s), verdict)
    return f"**{verdict}**: {md.inline(rest)}" if rest else f"**{verdict}**"


def unit_lines(s: Mapping[str, Any]) -> list[str]:
    """The unit the soak soaked: its path and each arm's ExecStart flags (no binary, model
    directory, host or port: the installing host's)."""
    unit = s.get("unit")
    if not unit:
        return [
            "Unit: not recorded. This soak ran before `soak --recommendation` started its "
            "servers with the unit's flags, so it does not show the unit as shipped "
            '(docs/soak.md, "The soak of a recommendation soaks the unit").',
            "",
        ]
    out = [
        f"Unit soaked: `{unit['path']}`, as `watchkeeper unit` renders it from the same "
        "recommendation and [service]; each server ran its ExecStart flags:",
        "",
    ]
    out += [f"- {arm}: `{' '.join(flags)}`" for arm, flags in unit["flags"].items()]
    return [*out, ""]


def render(s: Mapping[str, Any]) -> str:
    subject, baseline = s["subject"], s["baseline"]
    out = [
        "# Soak of the recommendation",
        "",
        headline_text(s),
        "",
        *overnight_lines(s),
        f"{subject} and the baseline {baseline}, each under closed-loop load for "
        f"{s['duration']} in all, at concurrency "
        + ", ".join(sorted({str(r["concurrency"]) for r in s["series"]}) or ["—"])
        + f" (soak campaign {s['campaign_id']}"
        + (f", for sweep campaign {s['sweep_campaign']}" if s.get("sweep_campaign") else "")
        + '). The request\'s third criterion, "stable under sustained load overnight", is '
        "judged here: errors, restarts, memory growth and throughput drift.",
        "",
        f"Reproduce: `{s['command']}`",
        "",
        *unit_lines(s),
        "## Per arm and concurrency",
        "",
    ]
    rows = []
    drift = {(d["profile"], d["concurrency"]): d for d in s.get("drift", [])}
    for r in s["series"]:
        d = drift.get((r["profile"], r["concurrency"]))
        rows.append(
            [
                r["profile"] + (" (baseline)" if r["profile"] == baseline else ""),
                str(r["concurrency"]),
                str(r["requests"]),
                str(r["errors"]),
                md.fixed(r["median_tps"], 1),
                drift_cell(d),
            ]
        )
    out.append(
        md.table(
            [
                "arm",
                "concurrency",
                "requests",
                "errors",
                "median decode tok/s",
                "throughput drift (95% CI)",
            ],
            rows,
            "lrrrrl",
        )
    )
    if any(d.get("estimator") == "aggregate" for d in s.get("drift", [])):
        out += ["", _aggregate_text(s)]
    if (text := unresolved_text(s)) is not None:
        out += ["", f"{text[0].upper()}{text[1:]}."]
    out += _identity_section(s)
    out += ["", "## Memory (RSS slope per server process, pooled)", "", *_memory_intro(s)]
    mem = []
    for profile, e in sorted(s.get("rss", {}).items()):
        slope = e.get("slope_mb_per_h")
        mem.append(
            [
                profile,
                md.fixed(slope, 1, " MB/h"),
                _ci_mb(e.get("ci95")),
                "judged" if e.get("judged") else f"not judged ({e.get('span_s')} s of history)",
            ]
        )
    out.append(md.table(["arm", "RSS slope", "95% CI", "leak test"], mem, "lrrl"))
    out += [
        "",
        f"Whole soak: {s.get('requests')} requests, {s.get('errors')} errors, "
        f"{s.get('restarts')} restarts ({s.get('crashes')} crashes); temperature-0 probes "
        f"consistent with their reference {_share(output_rates(s)[1])} of the time "
        f"({_share(output_rates(s)[0])} token for token). "
        f"A leak is RSS growth above {s.get('leak_threshold_mb_per_hour')} MB/h with its CI "
        "above 0.",
        "",
    ]
    if s.get("reasons"):
        out += ["Why unstable:", "", *[f"- {md.inline(x)}" for x in s["reasons"]], ""]
    if s.get("notes"):
        out += ["Notes:", "", *[f"- {md.inline(x)}" for x in s["notes"]], ""]
    return "\n".join(out).rstrip() + "\n"


def _share(rate: float | None) -> str:
    return md.fixed(None if rate is None else rate * 100, 0, "%")


def _ci_mb(ci: Sequence[float] | None) -> str:
    return f"{ci[0]:.1f}..{ci[1]:.1f}" if ci else md.NONE


def stability_line(s: Mapping[str, Any] | None, *, fallback: str) -> str:
    """Criterion 3 of the sweep report's acceptance section, from the committed soak."""
    if s is None:
        return fallback
    levels = ", ".join(sorted({str(r["concurrency"]) for r in s["series"]}))
    errors = sum(r["errors"] for r in s["series"])
    requests = sum(r["requests"] for r in s["series"])
    slopes = "; ".join(
        f"{p} {md.fixed(e.get('slope_mb_per_h'), 1, ' MB/h')}"
        for p, e in sorted(s.get("rss", {}).items())
    )
    state = stability_state(s)
    verdict = {
        "judged": "met",
        "unjudged": "not resolved",
        "judged in part": "met where resolved",
    }.get(state, f"not met ({s.get('verdict')})")
    if any("slope_verdict" in d for d in unresolved_drift(s)):
        # Blocks that fell off and came back again and again (soak/dips.py): a stability
        # finding in its own right, never "met where resolved".
        verdict = "not met (recurring dips)"
    elif state in ("judged", "judged in part") and (short := hours_shortfall(s)):
        verdict = short  # no drift or leak, but not "met" on less load than the target
    text = unresolved_text(s) if state in ("unjudged", "judged in part") else None
    unresolved = f"; {text}" if text else ""
    cache = " (prompt cache off)" if s.get("cache_ram_mib") == 0 else ""
    probes = s.get("probe_totals") or {}
    consistent = (
        f", temperature-0 probes consistent {_share(output_rates(s)[1])} "
        f"({probes.get('identical', 0)} of {probes.get('compared', 0)} identical, "
        f"{probes.get('mismatch', 0)} mismatches)"
        if probes.get("compared")
        else ""
    )
    return (
        f"3. **Stable under sustained load: {verdict}.** Soak campaign {s['campaign_id']}: "
        f"{s['subject']} beside {s['baseline']}, {s['duration']} at concurrency {levels}: "
        f"{requests} load requests, {errors} errors, {s.get('restarts')} restarts, RSS slope"
        f"{cache} {slopes or '—'}{consistent}{unresolved}; [the soak report]({SOAK_REPORT})."
    )


def splice(report: str, line: str) -> str:
    """The sweep report with its stability criterion replaced (between the soak markers)."""
    if BEGIN not in report or END not in report:
        return report
    head, rest = report.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{line}\n{END}{tail}"


def read_summary(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def summary_for(reports_dir: Path, record: RecommendationRecord) -> dict[str, Any] | None:
    """The committed soak summary, when it soaked this recommendation's subject arm."""
    data = read_summary(reports_dir / SOAK_SUMMARY)
    subject = record.subject
    if data is None or subject is None or data.get("subject") != subject.name:
        return None
    return data


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def write_summary(path: Path, data: Mapping[str, Any]) -> Path:
    return write_text(path, json.dumps(dict(data), indent=2, default=str) + "\n")
