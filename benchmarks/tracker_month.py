"""A scripted month of triage against the fake forge: does every issue end where it should?

Runs `triage_command` (what `watchkeeper triage` runs) 20 times over 30 days of findings on a
fresh SQLite database and the fake GitHub/Gitea of the tests (tests/support/fakeforge.py), served
in-process on 127.0.0.1. Everything runs on an injected clock: findings, nights, the forge's
issue/comment/label timestamps and triage's `now`. The month has new regressions, recurrences,
a recovery after `tracker.recovery_nights` good nights (comment + close) and its return
(reopen), maintainers dismissing / acking / silencing by label and by `/watchkeeper` comment,
closing an issue and reopening it, and the database wiped on day 15 (a new empty database that
must adopt the existing issues by their marker, silently, news or not).

It prints the event log and every issue's final state, then checks: each issue ends in the
state the last decision on it implies (with the matching status label), no issue is filed twice,
and watchkeeper posted exactly one comment per event that calls for one (no double recurrence,
no repeated decision comment, nothing on a silenced issue or on a silent adoption).

    .venv/bin/python benchmarks/tracker_month.py [--forge github|gitea|both] [--json]

Exit status 1 when a check fails.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from support import fakeforge
from support.fakeforge import FakeForge, serve
from support.nights import Nights

from watchkeeper.commands.triage import triage_command
from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.config.tracker import TrackerConfig
from watchkeeper.nightly.series import fingerprint, series_history
from watchkeeper.store.db import Database
from watchkeeper.store.findings import NewFinding
from watchkeeper.store.history import History

TOKEN_ENV = "WK_TRACKER_MONTH_TOKEN"
MONTH = datetime(2026, 11, 1, tzinfo=UTC)
WIPE_DAY = 15
TRIAGE_DAYS = [*range(1, 14), 15, 16, 17, 18, 20, 21, 22]
RECOVERY_NIGHTS = 3
STATUS = {"ack": "acknowledged", "dismiss": "dismissed", "silence": "silenced"}
MARKER = re.compile(r"<!-- watchkeeper:(wk[0-9a-f]+) key=([^ ]+) -->")


# What happens each day before that day's triage run: nights end at 03:00, maintainers act at
# 09:00, triage runs at noon. A is a real series (runs in the database, so its recovery is
# counted from real good nights); the others are findings with fixed fingerprints.
SCRIPT: dict[int, list[tuple[Any, ...]]] = {
    1: [("regress", "B"), ("regress", "C")],
    2: [("regress", "A", True), ("regress", "D")],
    3: [("recur", "A"), ("regress", "E")],
    4: [("good", "A"), ("label", "B", "dismiss"), ("regress", "F")],
    5: [("good", "A"), ("command", "C", "ack")],
    6: [("good", "A"), ("recovered", "A"), ("label", "D", "silence")],
    7: [("command", "E", "silence")],
    8: [("close", "F"), ("recur", "C")],
    9: [("recur", "D"), ("recur", "E")],
    10: [("recur", "D")],
    11: [("regress", "A", True)],
    12: [("recur", "A")],
    13: [("reopen", "F")],
    WIPE_DAY: [("wipe", "*", {"A": WIPE_DAY, "C": 8, "D": 10, "E": 9})],
    16: [("good", "A")],
    17: [("good", "A"), ("recur", "D"), ("recur", "E")],
    18: [("good", "A"), ("recovered", "A")],
    20: [("regress", "G"), ("recur", "C")],
    21: [("recur", "G")],
    22: [("command", "G", "dismiss")],
}


class Clock:
    """The injected clock: a day of the month and an hour; the fake forge reads it too."""

    def __init__(self) -> None:
        self.moment = MONTH

    def at(self, day: int, hour: int) -> datetime:
        self.moment = MONTH + timedelta(days=day - 1, hours=hour)
        return self.moment

    def time(self) -> float:
        return self.moment.timestamp()

    def __getattr__(self, name: str) -> Any:  # strftime, gmtime, sleep: the real module's
        return getattr(time, name)


@contextmanager
def forge_clock(clock: Clock) -> Iterator[None]:
    """The fake forge stamps issues, comments and label events with `clock`, not the wall
    clock, and answers without Nagle delays."""
    saved = fakeforge.time, fakeforge.Handler.disable_nagle_algorithm
    fakeforge.time = clock  # type: ignore[assignment]
    # The handler writes headers and body separately: with Nagle's algorithm each answer
    # waits out the client's delayed ACK (40 ms), which made the month 16 s instead of ~2 s.
    fakeforge.Handler.disable_nagle_algorithm = True
    try:
        yield
    finally:
        fakeforge.time, fakeforge.Handler.disable_nagle_algorithm = saved


@dataclass
class Series:
    """One thing that goes wrong, its finding in the current database, and what is expected."""

    name: str
    fp: str
    nights_backed: bool = False
    finding: int | None = None
    expected_state: str = "open"
    expected_label: str | None = None
    expected_comments: list[tuple[int, str]] = field(default_factory=list)
    last_decision: str = "filed"


def _classify(body: str) -> str:
    if body.startswith("Seen again"):
        return "recurrence"
    if body.startswith("Recovered"):
        return "recovered"
    if body.startswith("Regressed again"):
        return "reopened"
    for status in ("acknowledged", "dismissed", "silenced", "marked fixed", "reopened"):
        if body.startswith(f"Finding {status}"):
            return f"decision:{status.removeprefix('marked ')}"
    return "other"


class Month:
    def __init__(self, dialect: str, tmp: Path) -> None:
        self.dialect = dialect
        self.tmp = tmp
        self.clock = Clock()
        self.forge = FakeForge(dialect)
        self.series: dict[str, Series] = {}
        self.events: list[dict[str, Any]] = []
        self.day_events: list[str] = []
        self.comment_day: dict[int, int] = {}
        self.db_index = 0
        self.db: Database | None = None
        self.history: History | None = None
        self.nights: Nights | None = None
        self.config: Config | None = None
        self.last_run = 0

    # -- the database --------------------------------------------------------------------------

    def open_db(self) -> None:
        if self.db is not None:
            self.db.close()
        self.db_index += 1
        url = f"sqlite:///{self.tmp / f'{self.dialect}-{self.db_index}.db'}"
        self.db = Database(url)
        self.history = History(self.db)
        self.nights = Nights(self.db, seed=self.db_index)
        tracker = TrackerConfig.model_validate(
            {
                "kind": self.forge.dialect,
                "api_url": self.forge.api_url,
                "allow_http": True,  # the fake forge: plain http on 127.0.0.1
                "repository": self.forge.repository,
                "token_env": TOKEN_ENV,
                "backoff_s": 0.0,
                "max_attempts": 2,
                "page_size": 20,
                "request_timeout_s": 10.0,
                "recovery_nights": RECOVERY_NIGHTS,
                # Claims are stamped by the database's wall clock, not the injected one (see
                # the report): a cap per night would count the whole month as one night.
                "max_new_issues_per_night": 100,
            }
        )
        self.config = Config(database=DatabaseConfig(url=url), tracker=tracker)
        for s in self.series.values():
            s.finding = None

    # -- nights and findings -----------------------------------------------------------------

    def night(self, day: int, *, slow: bool) -> int:
        """A real night of runs for the night-backed series (category `code`): its run id."""
        assert self.nights is not None and self.history is not None
        self.nights.night = day - 1  # Nights dates its campaigns START + night days
        campaign = self.nights.add("b2" if slow else "b1", slow_category="code" if slow else None)
        (record,) = self.history.run_records(campaigns=[campaign])
        return record.run_id

    def code_fingerprint(self) -> str:
        assert self.history is not None
        for key in series_history(self.history.run_records()):
            if key.metric == "decode_tps" and key.category == "code":
                return fingerprint(key)
        raise AssertionError("no decode_tps series for `code`")

    def evidence(self, current: float) -> dict[str, Any]:
        return {
            "series_name": "decode_tps · code · c1",
            "label": "regression",
            "delta": current / 100.0 - 1,
            "delta_ci": [-0.23, -0.17],
            "delta_unit": "relative",
            "test": "one-sided t prediction test on run medians (one value per run)",
            "p_value": 0.0002,
            "p_adjusted": 0.0004,
            "current": current,
            "baseline": 100.0,
            "baseline_runs": 10,
        }

    def new_finding(self, s: Series, day: int, *, run_id: int | None, seen: datetime) -> None:
        assert self.history is not None
        s.finding = self.history.create_finding(
            NewFinding(
                fingerprint=s.fp,
                kind="regression",
                label="regression",
                status="active",
                severity="medium",
                title=f"decode_tps regression in {s.name} (profile smollm2-baseline): -20.0%",
                evidence=self.evidence(80.0),
                series_key={"metric": "decode_tps", "category": s.name},
                side="worse",
                run_id=run_id,
                confirmed_at=seen,
                last_seen_at=seen,
                occurrences=2,
            )
        )

    # -- the script's verbs ------------------------------------------------------------------

    def note(self, day: int, series: str, text: str, expect: str | None) -> None:
        self.day_events.append(f"{series}: {text}")
        if expect is not None:
            self.series[series].expected_comments.append((day, expect))

    def regress(self, day: int, name: str, backed: bool = False) -> None:
        """A confirmed regression: a new finding (a new issue, or its closed issue reopened)."""
        seen = self.clock.at(day, 3)
        s = self.series.get(name)
        if s is None:
            fp = self.code_fingerprint_after(day) if backed else f"{ord(name):016x}"
            s = self.series[name] = Series(name, fp, nights_backed=backed)
            run_id = self.last_run if backed else None
            self.new_finding(s, day, run_id=run_id, seen=seen)
            self.note(day, name, "new confirmed regression", None)
            s.last_decision, s.expected_state, s.expected_label = "filed", "open", None
            return
        run_id = self.night(day, slow=True) if backed else None
        self.new_finding(s, day, run_id=run_id, seen=seen)
        self.note(day, name, "regressed again (a new finding)", "reopened")
        s.last_decision, s.expected_state, s.expected_label = "regressed again", "open", None

    def code_fingerprint_after(self, day: int) -> str:
        self.last_run = self.night(day, slow=True)
        return self.code_fingerprint()

    def recur(self, day: int, name: str, *, news: bool = True) -> None:
        """The same finding seen again (one more occurrence)."""
        assert self.history is not None
        s = self.series[name]
        assert s.finding is not None
        f = self.history.finding(s.finding)
        assert f is not None
        run_id = self.night(day, slow=True) if s.nights_backed else f.run_id
        self.history.update_finding(
            f.id,
            occurrences=f.occurrences + 1,
            last_seen_at=self.clock.at(day, 3),
            run_id=run_id,
        )
        quiet = s.expected_label == "silence" or s.expected_state != "open"
        expect = None if quiet or not news else "recurrence"
        self.note(day, name, f"seen again ({f.occurrences + 1} times)", expect)

    def good(self, day: int, name: str) -> None:
        self.night(day, slow=False)
        self.day_events.append(f"{name}: good night")

    def recovered(self, day: int, name: str) -> None:
        s = self.series[name]
        self.note(day, name, f"expect recovery after {RECOVERY_NIGHTS} good nights", "recovered")
        s.last_decision, s.expected_state, s.expected_label = "recovered", "closed", None

    def number(self, name: str) -> int:
        fp = self.series[name].fp
        for number, issue in self.forge.issues.items():
            found = MARKER.search(issue["body"])
            if found and found.group(2).startswith(fp):
                return int(number)
        raise AssertionError(f"series {name} has no issue")

    def label(self, day: int, name: str, action: str) -> None:
        self.clock.at(day, 9)
        self.forge.add_label_by_user(self.number(name), f"watchkeeper/{action}")
        self.decided(day, name, action, f"alice labels watchkeeper/{action}")

    def command(self, day: int, name: str, action: str) -> None:
        self.clock.at(day, 9)
        self.forge.add_comment(self.number(name), f"Looked at it.\n/watchkeeper {action}", "alice")
        self.decided(day, name, action, f"alice comments /watchkeeper {action}")

    def decided(self, day: int, name: str, action: str, text: str) -> None:
        s = self.series[name]
        self.note(day, name, text, f"decision:{STATUS[action]}")
        s.last_decision = action
        s.expected_state = "closed" if action == "dismiss" else "open"
        s.expected_label = action

    def close(self, day: int, name: str) -> None:
        self.clock.at(day, 9)
        self.forge.set_state_by_user(self.number(name), "closed")
        s = self.series[name]
        self.note(day, name, "alice closes the issue (fixed)", None)
        s.last_decision, s.expected_state = "closed by maintainer", "closed"

    def reopen(self, day: int, name: str) -> None:
        self.clock.at(day, 9)
        self.forge.set_state_by_user(self.number(name), "open")
        s = self.series[name]
        self.note(day, name, "alice reopens the closed issue", None)
        s.last_decision, s.expected_state = "reopened by maintainer", "open"

    def wipe(self, day: int, _: str, carry: dict[str, int]) -> None:
        """A new empty database; the series still live are found again by the nightly, with
        the day each was last seen (`carry`): their issues must be adopted by marker."""
        self.open_db()
        assert self.history is not None
        self.day_events.append("database wiped: a new empty database")
        for name, last_seen in carry.items():
            s = self.series[name]
            run_id = self.night(last_seen, slow=True) if s.nights_backed else None
            self.new_finding(s, day, run_id=run_id, seen=self.clock.at(last_seen, 3))
            # Adoption posts nothing, news or not: a search that lags behind the issues once
            # drew a false `Seen again` from it. The next recurrence's comment counts it.
            what = (
                "found again on the wipe night (adopted silently)"
                if last_seen == day
                else f"re-created (last seen day {last_seen})"
            )
            self.note(day, name, what, None)

    # -- triage ---------------------------------------------------------------------------------

    def triage(self, day: int) -> None:
        assert self.config is not None
        moment = self.clock.at(day, 12)
        before = set(self.forge.comments)
        notes: list[str] = []
        outcome = triage_command(
            self.config, progress=notes.append, sleep=lambda _: None, now=moment
        )
        for cid in set(self.forge.comments) - before:
            self.comment_day[cid] = day
        by_number = {self.number(n): n for n in self.series if self._has_issue(n)}

        def names(numbers: list[int]) -> list[str]:
            return [f"{by_number.get(n, '?')}#{n}" for n in numbers]

        did = {
            "filed": names(outcome.filed),
            "adopted": names(outcome.adopted),
            "commented": names(outcome.commented),
            "reopened": names(outcome.reopened),
            "closed": names(outcome.closed),
            "decisions": list(outcome.decisions),
            "errors": list(outcome.errors),
            "capped": list(outcome.capped),
            "skipped": list(outcome.skipped),
        }
        self.events.append(
            {"day": day, "events": self.day_events, "triage": {k: v for k, v in did.items() if v}}
        )
        self.day_events = []

    def _has_issue(self, name: str) -> bool:
        try:
            self.number(name)
        except AssertionError:
            return False
        return True

    # -- the month --------------------------------------------------------------------------------

    def do(self, day: int, verb: str, series: str, *args: Any) -> None:
        """One scripted step: `verb` is a method of this class, called as (day, series, ...)."""
        step: Callable[..., None] = getattr(self, verb)
        step(day, series, *args)

    def run(self) -> None:
        self.open_db()
        assert sorted(SCRIPT) == TRIAGE_DAYS, "every scripted day ends with a triage run"
        for day in TRIAGE_DAYS:
            for verb, series, *args in SCRIPT[day]:
                self.do(day, verb, series, *args)
            self.triage(day)
        assert self.db is not None
        self.db.close()

    # -- the verdict ------------------------------------------------------------------------------

    def issues(self) -> list[dict[str, Any]]:
        out = []
        for name, s in sorted(self.series.items()):
            matches = [
                n
                for n, i in self.forge.issues.items()
                if (m := MARKER.search(i["body"])) and m.group(2).startswith(s.fp)
            ]
            number = matches[0] if matches else None
            issue = self.forge.issues.get(number) if number is not None else None
            comments = self.forge.comments_on(number) if number is not None else []
            mine = [
                {"day": self.comment_day.get(c["id"]), "kind": _classify(c["body"])}
                for c in comments
                if c["user"] == self.forge.bot
            ]
            out.append(
                {
                    "series": name,
                    "numbers": matches,
                    "number": number,
                    "state": issue["state"] if issue else None,
                    "labels": list(issue["labels"]) if issue else [],
                    "comments": len(comments),
                    "watchkeeper_comments": mine,
                    "last_decision": s.last_decision,
                    "expected_state": s.expected_state,
                    "expected_status_label": s.expected_label,
                    "expected_comments": [{"day": d, "kind": k} for d, k in s.expected_comments],
                }
            )
        return out

    def check(self, issues: list[dict[str, Any]]) -> list[str]:
        problems = []
        markers = [m.group(1) for i in self.forge.all_issues() if (m := MARKER.search(i["body"]))]
        if len(markers) != len(set(markers)) or len(markers) != len(self.forge.all_issues()):
            problems.append(f"duplicate issues: markers {sorted(markers)}")
        for i in issues:
            where = f"{self.dialect} series {i['series']} (#{i['number']})"
            if len(i["numbers"]) != 1:
                problems.append(f"{where}: {len(i['numbers'])} issues, want exactly 1")
                continue
            if i["state"] != i["expected_state"]:
                problems.append(
                    f"{where}: {i['state']}, but its last decision ({i['last_decision']}) "
                    f"implies {i['expected_state']}"
                )
            status_labels = sorted(x for x in i["labels"] if x.startswith("watchkeeper/"))
            want = (
                [f"watchkeeper/{i['expected_status_label']}"] if i["expected_status_label"] else []
            )
            if status_labels != want:
                problems.append(f"{where}: status labels {status_labels}, want {want}")
            got = [(c["day"], c["kind"]) for c in i["watchkeeper_comments"]]
            expected = [(c["day"], c["kind"]) for c in i["expected_comments"]]
            if got != expected:
                problems.append(
                    f"{where}: watchkeeper's comments (day, kind) {got}, want one per event "
                    f"{expected}"
                )
        for e in self.events:
            if e["triage"].get("errors"):
                problems.append(f"{self.dialect} day {e['day']}: errors {e['triage']['errors']}")
        return problems


def run_month(dialect: str) -> dict[str, Any]:
    """One month on one forge dialect: its events, final issues and problems found."""
    with tempfile.TemporaryDirectory() as tmp:
        month = Month(dialect, Path(tmp))
        saved = os.environ.get(TOKEN_ENV)
        os.environ[TOKEN_ENV] = month.forge.token
        try:
            with forge_clock(month.clock), serve(month.forge):
                started = time.perf_counter()
                month.run()
                elapsed = time.perf_counter() - started
                issues = month.issues()
                problems = month.check(issues)
        finally:
            if saved is None:
                os.environ.pop(TOKEN_ENV, None)
            else:
                os.environ[TOKEN_ENV] = saved
    return {
        "forge": dialect,
        "events": month.events,
        "issues": issues,
        "problems": problems,
        "seconds": round(elapsed, 2),
        "ok": not problems,
    }


def render(result: dict[str, Any]) -> str:
    lines = [f"== {result['forge']}: {len(result['events'])} triage runs in {result['seconds']} s"]
    for e in result["events"]:
        did = (
            "; ".join(f"{k} {', '.join(map(str, v))}" for k, v in e["triage"].items()) or "nothing"
        )
        happened = "; ".join(e["events"]) or "-"
        lines.append(f"day {e['day']:>2}  {happened}")
        lines.append(f"        triage: {did}")
    lines.append("")
    lines.append(
        f"{'series':<6} {'issue':>5} {'state':<7} {'comments':>8}  labels / watchkeeper's comments"
    )
    for i in result["issues"]:
        said = ", ".join(f"d{c['day']} {c['kind']}" for c in i["watchkeeper_comments"]) or "-"
        lines.append(
            f"{i['series']:<6} {('#' + str(i['number'])) if i['number'] else '-':>5} "
            f"{i['state']!s:<7} {i['comments']:>8}  {', '.join(i['labels'])}"
        )
        lines.append(f"{'':<31}last decision: {i['last_decision']}; said: {said}")
    for p in result["problems"]:
        lines.append(f"PROBLEM {p}")
    lines.append(f"{result['forge']}: {'ok' if result['ok'] else 'FAILED'}")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--forge", choices=["github", "gitea", "both"], default="both")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    dialects = ["github", "gitea"] if args.forge == "both" else [args.forge]
    results = [run_month(d) for d in dialects]
    summary = {
        "events": [{"forge": r["forge"], **e} for r in results for e in r["events"]],
        "issues": [{"forge": r["forge"], **i} for r in results for i in r["issues"]],
        "problems": [p for r in results for p in r["problems"]],
        "ok": all(r["ok"] for r in results),
    }
    if args.json:
        print(json.dumps(summary, indent=2, default=str))
    else:
        for r in results:
            print(render(r))
            print()
    return summary


if __name__ == "__main__":
    sys.exit(0 if main()["ok"] else 1)
