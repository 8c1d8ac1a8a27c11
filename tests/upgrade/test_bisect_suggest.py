"""From a confirmed nightly regression to its bisect: the digest prints the command when the
reference and the current system run different releases, and with `bisect.auto` the daemon's
job picks it (once per finding, bounded). Stored findings and references on SQLite; the clock
is injected; nothing is built."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from support.references import pin_reference

from watchkeeper.commands.bisect import next_auto_bisect, state_dir
from watchkeeper.config import Config, DatabaseConfig
from watchkeeper.config.model import BisectConfig
from watchkeeper.config.requests import BisectRequest
from watchkeeper.daemon.jobs import JobContext, bisect_job
from watchkeeper.nightly.digest import gather
from watchkeeper.publish.digest import render_digest
from watchkeeper.store.db import Database
from watchkeeper.store.findings import FindingStore, NewFinding
from watchkeeper.store.history import History
from watchkeeper.upgrade.bisect_state import recorded_findings
from watchkeeper.upgrade.suggest import release_of

DAY = datetime(2026, 11, 3, tzinfo=UTC).date()
NIGHT = datetime(2026, 11, 3, 1, 0, tzinfo=UTC)
MORNING = NIGHT + timedelta(hours=8)
HOST = "f" * 16


def build_line(release: str) -> str:
    return f"llama.cpp {release} (cpu, gcc 12.2.0)"


def pin(db: Database, release: str, *, profile: str = "smollm2-ngram", host: str = HOST) -> int:
    return pin_reference(
        db,
        profile=profile,
        host=host,
        release_line=build_line(release),
        pinned_at=NIGHT - timedelta(days=5),
        config={"model": "smollm2-135m-instruct-q4_1"},
    ).id


def regression(
    db: Database,
    ref_id: int,
    current_build: str | None,
    *,
    n: int = 0,
    confirmed_at: datetime | None = NIGHT,
    **values: Any,
) -> int:
    evidence: dict[str, Any] = {
        "series_name": f"{HOST}:smollm2-ngram:all{n}",
        "metric": "decode_tps",
        "ratio": 0.81,
        "ci95": [0.78, 0.84],
        "delta": -0.19,
        "delta_ci": [-0.22, -0.16],
        "threshold": 0.03,
        "reference": {"id": ref_id},
    }
    if current_build is not None:
        evidence["current_build"] = current_build
    row: dict[str, Any] = {
        "fingerprint": f"nightly:series{n}",
        "kind": "regression",
        "label": "regression",
        "severity": "high",
        "title": f"smollm2-ngram · all{n}: decode tok/s -19.0% against the reference",
        "evidence": evidence,
        "confirmed_at": confirmed_at,
        "last_seen_at": NIGHT,
        "created_at": NIGHT,
        "updated_at": NIGHT,
        **values,
    }
    return FindingStore(db).add(NewFinding(**row))


@pytest.fixture
def db(tmp_path: Path) -> Any:
    database = Database(f"sqlite:///{tmp_path / 'wk.db'}")
    yield database
    database.close()


def test_a_build_line_names_its_release_and_a_user_binary_none() -> None:
    assert release_of(build_line("11434.0.0")) == "11434.0.0"
    assert release_of("llama-server 11434 (user binary, sha256 0123456789ab)") is None
    assert release_of(None) is None


def test_the_digest_prints_the_bisect_command_when_the_releases_differ(db: Database) -> None:
    ref = pin(db, "11434.0.0")
    differs = regression(db, ref, build_line("11440.0.0"), n=0)
    same = regression(db, pin(db, "11434.0.0", profile="other"), build_line("11434.0.0"), n=1)
    candidate = regression(db, ref, build_line("11440.0.0"), n=2, confirmed_at=None)
    digest = gather(History(db), day=DAY, now=MORNING)
    assert {f.id for f in digest.regressions} == {differs, same, candidate}
    assert [b.finding_id for b in digest.bisects] == [differs]
    text = render_digest(digest, plots={})
    command = "watchkeeper bisect --good 11434.0.0 --bad 11440.0.0 --profile smollm2-ngram"
    assert f"- #{differs} (smollm2-ngram: reference on 11434.0.0, tonight on 11440.0.0): " in text
    assert f"`{command}`" in text
    assert text.count("watchkeeper bisect --good") == 1  # same release, unconfirmed: none
    assert "with `bisect.auto = true`" in text
    auto = render_digest(gather(History(db), day=DAY, now=MORNING, bisect_auto=True), plots={})
    assert "which the daemon's bisect job runs (`bisect.auto`)" in auto and command in auto


def test_a_finding_stored_before_current_build_existed_gets_no_suggestion(db: Database) -> None:
    regression(db, pin(db, "11434.0.0"), None)
    digest = gather(History(db), day=DAY, now=MORNING)
    assert len(digest.regressions) == 1 and digest.bisects == ()
    assert "watchkeeper bisect" not in render_digest(digest, plots={})


def _config(db: Database, *, auto: bool) -> Config:
    return Config(database=DatabaseConfig(url=db.url), bisect=BisectConfig(auto=auto))


def test_with_bisect_auto_the_jobs_decision_picks_the_newest_fresh_finding_of_this_host(
    db: Database,
) -> None:
    ref = pin(db, "11434.0.0")
    older = regression(db, ref, build_line("11440.0.0"), n=0, confirmed_at=NIGHT - timedelta(1))
    newer = regression(db, ref, build_line("11441.0.0"), n=1)
    config = _config(db, auto=True)

    def pick(**kw: Any) -> int | None:
        args: dict[str, Any] = {"host_fingerprint": HOST, "attempted": set(), "now": MORNING}
        args.update(kw)
        found = next_auto_bisect(config, db, **args)
        return found.finding_id if found is not None else None

    chosen = next_auto_bisect(config, db, host_fingerprint=HOST, attempted=set(), now=MORNING)
    assert chosen is not None and chosen.finding_id == newer
    assert (chosen.good, chosen.bad, chosen.profile) == ("11434.0.0", "11441.0.0", "smollm2-ngram")
    assert pick(attempted={newer}) == older  # once per finding
    assert pick(attempted={newer, older}) is None
    assert pick(host_fingerprint="e" * 16) is None  # measured on another host
    assert pick(now=NIGHT + timedelta(days=8)) is None  # confirmed too long ago
    assert (
        next_auto_bisect(
            _config(db, auto=False), db, host_fingerprint=HOST, attempted=set(), now=MORNING
        )
        is None
    )  # the default: the digest only suggests


def test_the_decision_skips_ranges_too_wide_and_findings_no_longer_open(db: Database) -> None:
    ref = pin(db, "11434.0.0")
    regression(db, ref, build_line("11700.0.0"), n=0)  # 266 upstream builds: left to a person
    regression(db, ref, build_line("11440.0.0"), n=1, status="dismissed")
    config = _config(db, auto=True)
    assert next_auto_bisect(config, db, host_fingerprint=HOST, attempted=(), now=MORNING) is None


def test_the_state_files_record_the_findings_a_bisect_ran_for() -> None:
    folder = state_dir()
    folder.mkdir(parents=True)
    (folder / "p-1.0.0-2.0.0.json").write_text(json.dumps({"findings": [4, 9]}))
    (folder / "q-1.0.0-2.0.0.json").write_text(json.dumps({"good": "1.0.0"}))  # before: none
    (folder / "broken.json").write_text("{")
    assert recorded_findings(folder) == {4, 9}
    assert recorded_findings(folder / "missing") == set()


def test_the_bisect_job_does_nothing_while_bisect_auto_is_off(db: Database) -> None:
    regression(db, pin(db, "11434.0.0"), build_line("11440.0.0"))
    result = bisect_job(_config(db, auto=False), BisectRequest(), JobContext(db=db))
    assert result.summary == "nothing to do: bisect.auto is off" and result.samples == 0
