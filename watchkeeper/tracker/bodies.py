"""Issue titles, bodies and comments for findings: pure functions returning strings.

Every value that did not come from this file (titles, series names, model output, notes)
passes through `escape` first; the golden test pins the layout.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from watchkeeper.findings.evidence import (
    ChangePointEvidence,
    Evidence,
    NightlyEvidence,
    SeriesEvidence,
    evidence_of,
)
from watchkeeper.format import CI_LABEL, MISSING, fixed
from watchkeeper.store.findings import StoredFinding
from watchkeeper.tracker import escape

QUOTED_FIELDS = ("baseline_excerpt", "candidate_excerpt", "excerpt", "output", "log_tail")
"""Evidence fields that hold model output or logs: quoted as code, never as Markdown."""


@dataclass(frozen=True, slots=True)
class IssueContext:
    marker: str
    key: str
    digest_url: str
    label_prefix: str
    recovery_nights: int
    quote_chars: int


def digest_day(moment: datetime) -> date:
    """The digest that covers a moment: nights run from noon UTC to noon UTC (digest.day_window)."""
    return (moment + timedelta(hours=12)).date()


def _num(value: Any, spec: str) -> str:
    return fixed(value, spec)


def _known(value: Any) -> str:
    return "?" if value is None else str(value)


def _p(e: Evidence) -> str:
    if not isinstance(e, SeriesEvidence) or e.p_value is None:
        return MISSING
    adj = e.p_adjusted
    return f"p = {e.p_value:.2g}" + (f", BH-adjusted {adj:.2g}" if adj is not None else "")


def _table(rows: Sequence[tuple[str, str]]) -> str:
    lines = ["| | |", "|---|---|"]
    lines += [f"| {escape.inline(k)} | {escape.inline(v, 300)} |" for k, v in rows]
    return "\n".join(lines)


def _evidence_rows(f: StoredFinding) -> list[tuple[str, str]]:
    e = evidence_of(f.kind, f.evidence)
    rows: list[tuple[str, str]] = []
    if e.series_title(""):
        rows.append(("series", e.series_title("")))
    rows += [("kind", f.kind), ("severity", f.severity)]
    if isinstance(e, SeriesEvidence):
        rows += [
            ("tonight", _num(e.current, ".4g")),
            (
                f"baseline ({_known(e.baseline_runs)} good runs, "
                f"{_known(e.baseline_trials)} trials, CV {_num(e.baseline_cv, '.1%')})",
                _num(e.baseline, ".4g"),
            ),
            ("change", e.change_text()),
            ("test", f"{e.test or MISSING}, {_p(e)}"),
            ("fence / floor", f"{_num(e.fence, '.4g')} / {_num(e.floor, '.4g')}"),
        ]
    if isinstance(e, NightlyEvidence):
        ref = e.reference or {}
        low, high = e.ci95 or (None, None)
        rows += [
            ("current / reference", _num(e.ratio, ".3f")),
            (CI_LABEL, f"{_num(low, '.3f')} to {_num(high, '.3f')}"),
            ("change", e.change_text()),
            (
                "replicates",
                f"{_known(e.n_pairs)} pairs: {_known(e.n_tasks)} tasks x "
                f"{_known(e.n_rounds)} rounds (rerun campaign {e.rerun_campaign_id})",
            ),
            ("threshold", _num(e.threshold, ".0%")),
            (
                "reference",
                f"#{ref.get('id')} pinned {ref.get('pinned_at', '?')} by {ref.get('pinned_by')}; "
                f"binary {str(ref.get('binary_sha256', ''))[:12]}, model "
                f"{str(ref.get('model_sha256', ''))[:12]}, flags {ref.get('config_hash')}",
            ),
        ]
        also = [a for a in e.also_confirmed or [] if isinstance(a, dict)]
        if also:
            rows.append(
                (
                    "also confirmed in",
                    ", ".join(f"{a.get('category')} {_num(a.get('ratio'), '.3f')}" for a in also),
                )
            )
        if e.report:
            rows.append(("night's report", str(e.report)))
    cp = e.change_point if isinstance(e, SeriesEvidence | ChangePointEvidence) else None
    if cp is not None:
        rows += [
            ("first bad build", f"{cp.first_bad_build} (run {cp.first_bad_run})"),
            ("level", f"{_num(cp.before_median, '.4g')} → {_num(cp.after_median, '.4g')}"),
            ("change-point method", str(cp.method or MISSING)),
        ]
    if e.extra.get("reason"):
        rows.append(("reason", str(e.extra["reason"])))
    seen = f.last_seen_at or f.created_at
    rows += [
        ("finding", f"{f.id}, campaign {f.campaign_id}, run {f.run_id}"),
        ("seen", f"{f.occurrences} time(s), last {seen:%Y-%m-%d %H:%M} UTC"),
    ]
    return rows


def _links(f: StoredFinding, ctx: IssueContext) -> str:
    if not ctx.digest_url:
        return ""
    day = digest_day(f.last_seen_at or f.created_at).isoformat()
    base = ctx.digest_url.rstrip("/")
    return (
        f"Evidence: [digest {day}]({base}/{day}.md) · [plot]({base}/{day}/finding-{f.id}.png)\n\n"
    )


def _quotes(f: StoredFinding, limit: int) -> str:
    parts = []
    # A correctness finding keeps its mismatches under "examples": quote the first one.
    examples = f.evidence.get("examples")
    first = examples[0] if isinstance(examples, list) and examples else {}
    quoted = {**(first if isinstance(first, dict) else {}), **f.evidence}
    for name in QUOTED_FIELDS:
        value = quoted.get(name)
        if isinstance(value, str) and value:
            parts.append(f"{name.replace('_', ' ')}:\n\n{escape.code_block(value, limit)}\n")
    return "\n".join(parts)


def _origin(f: StoredFinding, recovery_nights: int) -> str:
    if f.kind == "correctness" and "distribution" in f.evidence:
        return (
            "Filed by watchkeeper: at temperature > 0 the speculative arm's sampled tokens do "
            "not follow the target's own next-token distribution (the distribution check, "
            "docs/sampling.md; its figures are in the evidence). Each bench that sees it again "
            "adds a comment here; close the issue when it is fixed."
        )
    if f.kind == "correctness":
        return (
            "Filed by watchkeeper: at temperature 0 the speculative output differed from the "
            "baseline's beyond a near-tie (not a statistic: the outputs are quoted above). "
            "Each bench that sees it again adds a comment here; close the issue when it is fixed."
        )
    return (
        "Filed by watchkeeper from a confirmed finding (flagged on two nights, or on a rerun). "
        "A recurrence adds a comment here; after "
        f"{recovery_nights} good night(s) in a row the issue is closed."
    )


def issue_title(f: StoredFinding) -> str:
    return escape.title(f"[watchkeeper] {f.title}")


def issue_body(f: StoredFinding, ctx: IssueContext) -> str:
    e = evidence_of(f.kind, f.evidence)
    params = e.params if isinstance(e, SeriesEvidence) else None
    details = ""
    if params is not None:
        blob = json.dumps(params, indent=2, sort_keys=True, default=str)
        details = (
            "<details><summary>Detector parameters</summary>\n\n"
            f"{escape.code_block(blob, ctx.quote_chars, 'json')}\n\n</details>\n\n"
        )
    quotes = _quotes(f, ctx.quote_chars)
    p = ctx.label_prefix
    text = (
        f"{escape.marker_line(ctx.marker, ctx.key)}\n"
        f"**{escape.inline(f.title, 300)}**\n\n"
        f"{_table(_evidence_rows(f))}\n\n"
        f"{_links(f, ctx)}"
        f"{quotes + chr(10) if quotes else ''}"
        f"{details}"
        "---\n"
        f"{_origin(f, ctx.recovery_nights)}\n"
        f"Maintainers: comment `/watchkeeper ack` (accept the new level as the baseline), "
        f"`/watchkeeper dismiss` (false positive) or `/watchkeeper silence` (stop updates), "
        f"or add the label `{p}ack`, `{p}dismiss` or `{p}silence`.\n"
    )
    return escape.body(text)


def recurrence_comment(f: StoredFinding, occurrences: int | None = None) -> str:
    """`occurrences`: the count the issue should show, where it differs from the finding's own
    (an issue adopted after the database was lost keeps counting from what it already says).
    A finding without a run (a bench's correctness mismatch) names no run."""
    e = evidence_of(f.kind, f.evidence)
    s = e if isinstance(e, SeriesEvidence) else SeriesEvidence()
    seen = f.last_seen_at or f.updated_at
    count = f.occurrences if occurrences is None else occurrences
    run = "" if f.run_id is None else f", run {f.run_id}"
    return escape.body(
        f"Seen again ({count} times now, last {seen:%Y-%m-%d %H:%M} UTC{run}): "
        f"change {escape.inline(e.change_text())}, {escape.inline(_p(e))}, tonight "
        f"{_num(s.current, '.4g')} against a baseline of {_num(s.baseline, '.4g')}.\n"
    )


_SEEN_ROW = re.compile(
    r"^\| seen \| (\d+) time\(s\), last (\d{4}-\d\d-\d\d \d\d:\d\d) UTC \|$", re.M
)
_SEEN_AGAIN = re.compile(r"^Seen again \((\d+) times now, last (\d{4}-\d\d-\d\d \d\d:\d\d) UTC")
_REGRESSED = re.compile(r"^Regressed again: finding \d+")


@dataclass(frozen=True, slots=True)
class Reported:
    """What an issue already tells its readers about its finding's occurrences."""

    count: int | None
    """None after a reopen: the reopen comment starts a new finding without a count."""
    last: datetime
    """The newest occurrence it reports, to the minute (UTC)."""


def _minute(text: str) -> datetime:
    return datetime.strptime(text, "%Y-%m-%d %H:%M").replace(tzinfo=UTC)


def reported(body: str, comments: Sequence[Any], author: str) -> Reported | None:
    """The occurrence state an issue reports, read from what `author` (watchkeeper's user)
    wrote: the body's `seen` row, then each `Seen again` and `Regressed again` comment in
    order (comments oldest first). None when the issue reports nothing readable. This is the
    starting point when the database that filed the issue is gone."""
    state: Reported | None = None
    if m := _SEEN_ROW.search(body):
        state = Reported(int(m.group(1)), _minute(m.group(2)))
    for comment in comments:
        if comment.author != author:
            continue
        if m := _SEEN_AGAIN.match(comment.body):
            state = Reported(int(m.group(1)), _minute(m.group(2)))
        elif _REGRESSED.match(comment.body) and comment.created_at is not None:
            at = comment.created_at.replace(second=0, microsecond=0)
            state = Reported(None, at)
    return state


def reopened_comment(f: StoredFinding, removed: Sequence[str] = ()) -> str:
    cleared = ""
    if removed:
        names = ", ".join(f"`{escape.inline(n, 80)}`" for n in removed)
        cleared = (
            f" Removed the status label(s) {names}: they decided the previous finding; "
            "add one again to decide this one.\n"
        )
    e = evidence_of(f.kind, f.evidence)
    return escape.body(
        f"Regressed again: finding {f.id} ({escape.inline(e.change_text())}, "
        f"{escape.inline(_p(e))}). Reopening.\n{cleared}"
    )


def recovery_comment(f: StoredFinding, nights: int) -> str:
    return escape.body(
        f"Recovered: the series has been back at its baseline level for {nights} good night(s) "
        f"in a row since run {f.run_id}. Closing; finding {f.id} is now `fixed`.\n"
    )


DECISION_MARKER = "<!-- watchkeeper:decision {} -->"
"""Hidden in each status comment: the decision's id, so a retry finds it instead of posting."""


def decision_id(finding_id: int, status: str) -> str:
    return f"f{finding_id}-{status}"


def status_comment(status: str, who: str, via: str, decision: str = "") -> str:
    what = {
        "acknowledged": "acknowledged: the new level is now the series' baseline",
        "dismissed": "dismissed as a false positive; closing",
        "silenced": "silenced: it is still counted, but nothing more is posted here",
        "fixed": "marked fixed; closing",
        "active": "reopened",
    }.get(status, status)
    marker = f"{DECISION_MARKER.format(decision)}\n" if decision else ""
    return escape.body(
        f"Finding {what} (by {escape.inline(who, 80)} via {escape.inline(via, 80)}).\n{marker}"
    )


def last_decision(comments: Sequence[Any], author: str) -> str | None:
    """The id in the newest decision marker `author` posted (comments oldest first)."""
    prefix, suffix = DECISION_MARKER.split("{}")
    found = None
    for comment in comments:
        if comment.author != author:
            continue
        for line in comment.body.splitlines():
            if line.startswith(prefix) and line.endswith(suffix):
                found = line[len(prefix) : -len(suffix)]
    return found
