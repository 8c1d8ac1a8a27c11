"""`watchkeeper report --campaign N` re-renders a stored soak's report with today's renderer,
from a real SQLite database holding a soak campaign written by the soak's own store writer
(`SoakStore.write`, what the spooling writer calls), to the reports directory or `--out`."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from watchkeeper.campaign.soak_deliverable import soaked_unit
from watchkeeper.cli.app import main
from watchkeeper.commands.report import _shown, report_command
from watchkeeper.config import BenchConfig, Config, DatabaseConfig, ProfileConfig
from watchkeeper.config.service import ServiceConfig
from watchkeeper.errors import PublishError
from watchkeeper.host.info import collect
from watchkeeper.load.records import RequestSample
from watchkeeper.publish.deliverable import RECORD_NAME, read_record
from watchkeeper.publish.soak_report import BEGIN, END, SOAK_REPORT, SOAK_SUMMARY
from watchkeeper.soak.records import RunClose, RunKey, RunOpen, SampleRecord
from watchkeeper.store.db import Database
from watchkeeper.store.repository import Repository
from watchkeeper.store.soak_store import SoakStore

ROOT = Path(__file__).resolve().parents[2]
T0 = datetime(2026, 11, 27, 1, 0, tzinfo=UTC)
ARMS = ("qwen-sweep-ngram-simple", "qwen-baseline")
OLD_RECORD = "record_2026-11-27.json"


def config_for(tmp_path: Path, url: str) -> Config:
    reports = tmp_path / "reports"
    reports.mkdir()
    # The 27 Nov record (ngram-simple closest), frozen: the soak below soaked its arms.
    (reports / RECORD_NAME).write_text((ROOT / "tests" / "golden" / OLD_RECORD).read_text())
    sweep = f"# sweep\n{BEGIN}\n3. **Stable under sustained load: not yet measured.**\n{END}\n"
    (reports / "speculative_benchmark.md").write_text(sweep)
    (reports / "latest.md").write_text(sweep)  # the last campaign's report: the sweep's
    return Config(
        bench=BenchConfig(reports_dir=str(reports)),
        database=DatabaseConfig(url=url),
        service=ServiceConfig(cache_ram_mib=0),
    )


def stored_soak(
    config: Config, db: Database, *, kind: str = "soak", sweep: int | None = None
) -> int:
    """Six 1-minute blocks per arm at concurrency 1, 8 requests each, as the soak stores them;
    `sweep`: the sweep campaign it soaked, as `soak --recommendation` keeps it (none before)."""
    repo = Repository(db)
    record = read_record(config.bench.resolved_reports_dir() / RECORD_NAME)
    params: dict[str, object] = {
        "duration": "12m",
        "duration_s": 720.0,
        "block_s": 60.0,
        "profiles": list(ARMS),
        "concurrency": [1],
        "slots": 1,
        "cache_ram_mib": 0,
        "unit": soaked_unit(config, record, ARMS),
    }
    if sweep is not None:
        params["sweep_campaign"] = sweep
    campaign = repo.create_campaign(
        kind=kind, host_id=repo.ensure_host(collect()), build_id=None, params=params
    )
    store = SoakStore(db)
    ids = {
        a: repo.ensure_profile(
            a, ProfileConfig(model="m"), target_model_id=None, draft_model_id=None
        )
        for a in ARMS
    }
    for block in range(6):
        for i, arm in enumerate(ARMS):
            start = T0 + timedelta(minutes=2 * block + i)
            key = RunKey(arm, block, 1, ids[arm])
            samples = [
                SampleRecord(
                    key,
                    RequestSample(
                        f"t{n}",
                        "prose",
                        n,
                        start + timedelta(seconds=7 * n),
                        0.1,
                        6.0,
                        40,
                        128,
                        100.0,
                        5000.0,
                        25.0 + 0.1 * n,
                        24.0,
                    ),
                )
                for n in range(8)
            ]
            store.write(
                campaign,
                [
                    RunOpen(key, start, ("llama-server", "--cache-ram", "0")),
                    *samples,
                    RunClose(key, start + timedelta(minutes=1), "completed"),
                ],
            )
    repo.finish_campaign(campaign, status="completed", summary={"verdict": "old"})
    return campaign


def test_a_stored_soak_is_rerendered_where_it_was_written_with_todays_renderer(
    sqlite_url: str, tmp_path: Path
) -> None:
    config = config_for(tmp_path, sqlite_url)
    db = Database(sqlite_url)
    try:
        campaign = stored_soak(config, db)
    finally:
        db.close()
    reports = config.bench.resolved_reports_dir()
    # An old report with the doubled verdict is replaced, not appended to.
    (reports / SOAK_REPORT).write_text("# Soak\n\n**stable**: stable: 1317 requests\n")
    seen: list[str] = []
    result = report_command(config, campaign_id=campaign, progress=seen.append)
    assert result.path == reports / SOAK_REPORT and result.kind == "soak"
    text = result.path.read_text()
    summary = json.loads((reports / SOAK_SUMMARY).read_text())
    assert summary["campaign_id"] == campaign and summary["verdict"] == result.verdict
    assert summary["requests"] == 96  # 6 blocks x 2 arms x 8 requests, read back from SQLite
    assert f"**{result.verdict}**" in text and f"{result.verdict}: {result.verdict}" not in text
    assert "stable: 1317" not in text
    assert "Unit soaked: `systemd/llama-server-speculative.service`" in text
    assert "--spec-type ngram-simple --cache-ram 0`" in text
    # Its command is rebuilt from the plan (the store keeps no command line).
    assert "--concurrency 1 --duration 12m --block 60s" in text
    # ... naming the recommendation as the reader can reuse it, never by this machine's path
    # when it lies under the working directory.
    shown = text.split("--recommendation ", 1)[1].split(" ", 1)[0]
    rec = Path(shown)
    assert not rec.is_absolute() or not rec.resolve().is_relative_to(Path.cwd().resolve())
    # The sweep's stability criterion reads the re-rendered soak.
    sweep = (reports / "speculative_benchmark.md").read_text()
    assert "not yet measured" not in sweep and f"Soak campaign {campaign}" in sweep
    assert (reports / "latest.md").read_text() == sweep  # its copy reads the same line
    # Again, into another directory: the same report, the original untouched.
    out = tmp_path / "elsewhere"
    again = report_command(config, campaign_id=campaign, out=out)
    assert again.path == out / SOAK_REPORT and again.path.read_text() == text
    assert (reports / SOAK_REPORT).read_text() == text


def test_the_cli_rerenders_a_soak_and_refuses_what_the_store_cannot_rebuild(
    sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = config_for(tmp_path, sqlite_url)
    db = Database(sqlite_url)
    try:
        soak = stored_soak(config, db)
        sweep = stored_soak(config, db, kind="sweep")
    finally:
        db.close()
    toml = tmp_path / "wk.toml"
    toml.write_text(
        f'[bench]\nreports_dir = "{config.bench.resolved_reports_dir()}"\n'
        f'[database]\nurl = "{sqlite_url}"\n'
    )
    out = tmp_path / "out"
    assert main(["report", "--config", str(toml), "--campaign", str(soak), "--out", str(out),
                 "--json"]) == 0  # fmt: skip
    printed = json.loads(capsys.readouterr().out)
    assert printed["path"] == str(out / SOAK_REPORT) and printed["kind"] == "soak"
    assert main(["report", "--config", str(toml), "--campaign", str(sweep)]) == 2
    err = capsys.readouterr().err
    assert "a sweep campaign's report cannot be rebuilt from the store" in err
    assert main(["report", "--config", str(toml), "--campaign", "999"]) == 2
    assert "no such campaign" in capsys.readouterr().err
    with pytest.raises(PublishError):
        report_command(config, campaign_id=sweep)


def test_a_soak_of_another_sweeps_pick_is_not_rerendered_as_this_records(
    sqlite_url: str, tmp_path: Path
) -> None:
    """A soak that kept the sweep it soaked is re-rendered only against that sweep's record:
    against another, its summary would claim the record's campaign and its line would go into
    that sweep's report (the stability line of another pick)."""
    config = config_for(tmp_path, sqlite_url)
    reports = config.bench.resolved_reports_dir()
    sweep = read_record(reports / RECORD_NAME).campaign_id
    db = Database(sqlite_url)
    try:
        other = stored_soak(config, db, sweep=sweep + 1)
        own = stored_soak(config, db, sweep=sweep)
    finally:
        db.close()
    before = (reports / "speculative_benchmark.md").read_text()
    with pytest.raises(PublishError, match=f"soaked sweep campaign {sweep + 1}'s pick"):
        report_command(config, campaign_id=other)
    assert (reports / "speculative_benchmark.md").read_text() == before
    assert not (reports / SOAK_SUMMARY).exists()
    report_command(config, campaign_id=own)
    assert json.loads((reports / SOAK_SUMMARY).read_text())["sweep_campaign"] == sweep


def test_a_rebuilt_command_names_the_recommendation_relative_to_the_working_directory() -> None:
    """The committed soak's Reproduce line once read `--recommendation /work/main/reports/...`:
    a path of the machine that rendered it, useless to a reader."""
    inside = Path.cwd() / "reports" / "speculative_recommendation.json"
    assert _shown(inside) == "reports/speculative_recommendation.json"
    assert _shown(Path("/elsewhere/rec.json")) == "/elsewhere/rec.json"
