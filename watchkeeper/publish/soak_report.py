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
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

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
from watchkeeper.publish.soak_lineage import soaked
from watchkeeper.publish.soak_summary import SoakSummary
from watchkeeper.soak.judgement import (
    OutputRates,
    ProbeTotals,
    SeriesRow,
    SoakUnit,
)

if TYPE_CHECKING:
    from watchkeeper.soak.verdicts import SoakVerdict
    from watchkeeper.soak.views import SoakSampleView

SOAK_REPORT = "speculative_soak.md"
SOAK_SUMMARY = "speculative_soak.json"
BEGIN = "<!-- soak:begin -->"
END = "<!-- soak:end -->"


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
    verdict: SoakVerdict,
    rows: Sequence[SeriesRow],
    *,
    subject: str,
    baseline: str,
    duration: str,
    sweep_campaign: int | None,
    command: str,
    cache_ram_mib: int | None = None,
    drift_threshold: float = 0.10,
    unit: SoakUnit | None = None,
) -> SoakSummary:
    """What the report and the sweep's acceptance section read. `cache_ram_mib`: the
    `--cache-ram` the soak's servers ran with (the campaign's params), None: the build's."""
    f = verdict.figures
    return SoakSummary(
        campaign_id=verdict.campaign_id,
        sweep_campaign=sweep_campaign,
        subject=subject,
        baseline=baseline,
        duration=duration,
        command=command,
        verdict=verdict.verdict,
        headline=verdict.headline,
        reasons=verdict.reasons,
        notes=verdict.notes,
        requests=None if f is None else f.requests,
        errors=None if f is None else f.errors,
        restarts=None if f is None else f.restarts,
        crashes=None if f is None else f.crashes,
        rates=OutputRates(None, None) if f is None else f.rates,
        probe_totals=None if f is None else f.probe_totals,
        identity=() if f is None else f.identity,
        cache_ram_mib=cache_ram_mib,
        series=tuple(rows),
        rss={} if f is None else {e.profile: e.summary() for e in f.rss},
        drift=() if f is None else tuple(drift_entries(f.series)),
        blocks=() if f is None else f.blocks,
        leak_threshold_mb_per_hour=None if f is None else f.leak_threshold_mb_per_hour,
        drift_threshold=drift_threshold,
        unit=unit,
    )


def _aggregate_text(s: SoakSummary) -> str:
    """How depth > 1 was judged, in the words of the soak's own rows: a soak from before 28 Nov
    2026 (rows with a time `window_s`) read each block over a fixed time window."""
    rows = [r for b in s.blocks for r in b.rows]
    if rows and all(r.fixed_work for r in rows):
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
    one_sided = any(d.verdict == "no slowdown" for d in s.drift)
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


def _identity_section(s: SoakSummary) -> list[str]:
    if not s.identity:
        return []
    rows = [
        [
            e.profile,
            str(e.concurrency),
            e.reference_profile or md.NONE,
            *(str(n) for n in e.counts.to_json().values()),
        ]
        for e in s.identity
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


def _memory_intro(s: SoakSummary) -> list[str]:
    mib = s.cache_ram_mib
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


def headline_text(s: SoakSummary) -> str:
    """`**stable**: 1317 requests ...`: the verdict once (the judge's headline opens with it)."""
    verdict, headline = str(s.verdict), s.headline or ""
    rest = headline.removeprefix(f"{verdict}:").strip()
    verdict = {
        "unjudged": "no error, no restart; drift not judged",
        "judged in part": "stable where judged",
    }.get(stability_state(s), verdict)
    return f"**{verdict}**: {md.inline(rest)}" if rest else f"**{verdict}**"


def unit_lines(s: SoakSummary) -> list[str]:
    """The unit the soak soaked: its path and each arm's ExecStart flags (no binary, model
    directory, host or port: the installing host's)."""
    unit = s.unit
    if unit is None:
        return [
            "Unit: not recorded. This soak ran before `soak --recommendation` started its "
            "servers with the unit's flags, so it does not show the unit as shipped "
            '(docs/soak.md, "The soak of a recommendation soaks the unit").',
            "",
        ]
    out = [
        f"Unit soaked: `{unit.path}`, as `watchkeeper unit` renders it from the same "
        "recommendation and [service]; each server ran its ExecStart flags:",
        "",
    ]
    out += [f"- {arm}: `{' '.join(flags)}`" for arm, flags in unit.flags.items()]
    return [*out, ""]


def render(s: SoakSummary) -> str:
    subject, baseline = s.subject, s.baseline
    out = [
        "# Soak of the recommendation",
        "",
        headline_text(s),
        "",
        *overnight_lines(s),
        f"{subject} and the baseline {baseline}, each under closed-loop load for "
        f"{s.duration} in all, at concurrency "
        + ", ".join(s.levels or ["—"])
        + f" (soak campaign {s.campaign_id}"
        + (f", for sweep campaign {s.sweep_campaign}" if s.sweep_campaign else "")
        + '). The request\'s third criterion, "stable under sustained load overnight", is '
        "judged here: errors, restarts, memory growth and throughput drift.",
        "",
        f"Reproduce: `{s.command}`",
        "",
        *unit_lines(s),
        "## Per arm and concurrency",
        "",
    ]
    rows = []
    drift = {(d.profile, d.concurrency): d for d in s.drift}
    for r in s.series:
        d = drift.get((r.profile, r.concurrency))
        rows.append(
            [
                r.profile + (" (baseline)" if r.profile == baseline else ""),
                str(r.concurrency),
                str(r.requests),
                str(r.errors),
                md.fixed(r.median_tps, 1),
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
    if any(d.estimator == "aggregate" for d in s.drift):
        out += ["", _aggregate_text(s)]
    if (text := unresolved_text(s)) is not None:
        out += ["", f"{text[0].upper()}{text[1:]}."]
    out += _identity_section(s)
    out += ["", "## Memory (RSS slope per server process, pooled)", "", *_memory_intro(s)]
    mem = []
    for profile, e in sorted(s.rss.items()):
        mem.append(
            [
                profile,
                md.fixed(e.slope_mb_per_h, 1, " MB/h"),
                _ci_mb(e.ci95),
                "judged" if e.judged else f"not judged ({e.span_s} s of history)",
            ]
        )
    out.append(md.table(["arm", "RSS slope", "95% CI", "leak test"], mem, "lrrl"))
    out += [
        "",
        f"Whole soak: {s.requests} requests, {s.errors} errors, "
        f"{s.restarts} restarts ({s.crashes} crashes); temperature-0 probes "
        f"consistent with their reference {_share(s.rates.consistent)} of the time "
        f"({_share(s.rates.identical)} token for token). "
        f"A leak is RSS growth above {s.leak_threshold_mb_per_hour} MB/h with its CI "
        "above 0.",
        "",
    ]
    if s.reasons:
        out += ["Why unstable:", "", *[f"- {md.inline(x)}" for x in s.reasons], ""]
    if s.notes:
        out += ["Notes:", "", *[f"- {md.inline(x)}" for x in s.notes], ""]
    return "\n".join(out).rstrip() + "\n"


def _share(rate: float | None) -> str:
    return md.fixed(None if rate is None else rate * 100, 0, "%")


def _ci_mb(ci: Sequence[float] | None) -> str:
    return f"{ci[0]:.1f}..{ci[1]:.1f}" if ci else md.NONE


def stability_line(s: SoakSummary | None, *, fallback: str) -> str:
    """Criterion 3 of the sweep report's acceptance section, from the committed soak."""
    if s is None:
        return fallback
    levels = ", ".join(s.levels)
    errors = sum(r.errors for r in s.series)
    requests = sum(r.requests for r in s.series)
    slopes = "; ".join(
        f"{p} {md.fixed(e.slope_mb_per_h, 1, ' MB/h')}" for p, e in sorted(s.rss.items())
    )
    state = stability_state(s)
    verdict = {
        "judged": "met",
        "unjudged": "not resolved",
        "judged in part": "met where resolved",
    }.get(state, f"not met ({s.verdict})")
    if any(d.recurring_dips for d in unresolved_drift(s)):
        # Blocks that fell off and came back again and again (soak/dips.py): a stability
        # finding in its own right, never "met where resolved".
        verdict = "not met (recurring dips)"
    elif state in ("judged", "judged in part") and (short := hours_shortfall(s)):
        verdict = short  # no drift or leak, but not "met" on less load than the target
    text = unresolved_text(s) if state in ("unjudged", "judged in part") else None
    unresolved = f"; {text}" if text else ""
    cache = " (prompt cache off)" if s.cache_ram_mib == 0 else ""
    probes = s.probe_totals or ProbeTotals()
    consistent = (
        f", temperature-0 probes consistent {_share(s.rates.consistent)} "
        f"({probes.identical} of {probes.compared} identical, "
        f"{probes.mismatch} mismatches)"
        if probes.compared
        else ""
    )
    return (
        f"3. **Stable under sustained load: {verdict}.** Soak campaign {s.campaign_id}: "
        f"{s.subject} beside {s.baseline}, {s.duration} at concurrency {levels}: "
        f"{requests} load requests, {errors} errors, {s.restarts} restarts, RSS slope"
        f"{cache} {slopes or '—'}{consistent}{unresolved}; [the soak report]({SOAK_REPORT})."
    )


def splice(report: str, line: str) -> str:
    """The sweep report with its stability criterion replaced (between the soak markers)."""
    if BEGIN not in report or END not in report:
        return report
    head, rest = report.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{line}\n{END}{tail}"


def read_summary(path: Path) -> SoakSummary | None:
    """The summary at `path`; None where there is none, or what is there is not one."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return SoakSummary.from_json(data) if isinstance(data, dict) else None
    except (OSError, ValueError, RecursionError, KeyError, TypeError, IndexError):
        return None


def summary_for(reports_dir: Path, record: RecommendationRecord) -> SoakSummary | None:
    """The committed soak summary, when it soaked this recommendation's pick: its sweep
    campaign, subject arm and unit (publish/soak_lineage.py). A soak of the set before, still
    in the folder, is another pick's, whatever its arm is called: None, "not yet measured"."""
    return soaked(read_summary(reports_dir / SOAK_SUMMARY), record)


def write_text(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, path)
    return path


def write_summary(path: Path, data: SoakSummary) -> Path:
    return write_text(path, json.dumps(data.to_json(), indent=2, default=str) + "\n")
