"""`watchkeeper run` end to end: real llama-server, real SmolLM2, SQLite and Postgres."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select

from watchkeeper.cli.app import main
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import Database
from watchkeeper.store.schema import Campaign, RequestSampleRow, Run

LIMIT = "6"
ANSWER_TOKENS = 32
"""The standard set's answers (128-192 tokens) cut to this: the run's bookkeeping is what these
tests check, and self-drafting's acceptance shows in the first tokens as in the last."""


def short_taskset(path: Path) -> Path:
    """The standard task set with every answer cut to ANSWER_TOKENS (measured 2026-11-28
    quietly: 3.5 s a baseline run, 7.7 s a self-draft run, on a 2-core host)."""
    lines = Path("jobs/tasksets/standard.jsonl").read_text().splitlines()
    path.write_text(
        "".join(json.dumps({**json.loads(x), "max_tokens": ANSWER_TOKENS}) + "\n" for x in lines)
    )
    return path


def run_cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict[str, object]]:
    code = main(["run", *args, "--json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out) if captured.out.strip() else {}


@pytest.mark.parametrize("profile", ["smollm2-baseline", "smollm2-selfdraft"])
def test_run_stores_every_request_in_the_database(
    real_server: tuple[ServerBinary, ModelFile],
    db_url: str,
    profile: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("WATCHKEEPER_DATABASE_URL", db_url)
    tasks = short_taskset(tmp_path / "tasks.jsonl")
    code, summary = run_cli(capsys, "--profile", profile, "--taskset", str(tasks), "--limit", LIMIT)
    assert code == 0, summary
    assert summary["requests"] == int(LIMIT) and summary["errors"] == 0
    db = Database(db_url)
    with db.session() as s:
        campaign = s.get_one(Campaign, summary["campaign_id"])
        assert campaign.status == "completed" and campaign.kind == "run"
        run = s.scalars(select(Run).filter_by(campaign_id=campaign.id)).one()
        rows = s.scalars(select(RequestSampleRow).filter_by(run_id=run.id)).all()
        assert len(rows) == int(LIMIT)
        assert all(r.decode_tps_server and r.completion_tokens for r in rows)
        # Timed requests carry nothing the workload does not: no logprobs, so no token data.
        assert all(r.output_tokens is None for r in rows)
        assert "--metrics" in run.server_argv
        assert run.peak_rss_bytes and run.peak_rss_bytes > 50 * 2**20
        drafted = s.scalar(select(func.sum(RequestSampleRow.draft_n)).filter_by(run_id=run.id))
    db.close()
    if profile == "smollm2-selfdraft":
        assert drafted and drafted > 0
        assert isinstance(summary["acceptance_rate"], float) and summary["acceptance_rate"] > 0.9
    else:
        assert not drafted
        assert summary["acceptance_rate"] is None


def test_ngram_profile_runs_and_drafts_on_copy_heavy_tasks(
    real_server: tuple[ServerBinary, ModelFile],
    sqlite_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: object,
) -> None:
    from watchkeeper.config import BenchConfig
    from watchkeeper.load.tasks import load_taskset

    edits = [
        t for t in load_taskset(BenchConfig().resolved_taskset()) if t.category == "code_edit"
    ][:2]
    path = tmp_path / "edits.jsonl"  # type: ignore[operator]
    path.write_text(
        "\n".join(
            json.dumps(
                {"id": t.id, "category": t.category, "messages": list(t.messages), "max_tokens": 96}
            )
            for t in edits
        )
        + "\n"
    )
    monkeypatch.setenv("WATCHKEEPER_DATABASE_URL", sqlite_url)
    code, summary = run_cli(capsys, "--profile", "smollm2-ngram", "--taskset", str(path))
    assert code == 0
    assert summary["errors"] == 0
    assert "ngram-simple" in summary["server_argv"]  # type: ignore[operator]
    assert isinstance(summary["draft_tokens"], int) and summary["draft_tokens"] > 0


def test_unknown_profile_is_one_clear_line_and_exit_code_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["run", "--profile", "nope"]) == 2
    err = capsys.readouterr().err
    assert "error: unknown profile 'nope'" in err
    assert "Traceback" not in err


def test_bad_config_file_is_one_clear_line(
    tmp_path: object, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "bad.toml"  # type: ignore[operator]
    path.write_text("[bench]\nrounds = 0\n")
    assert main(["run", "--profile", "smollm2-baseline", "--config", str(path)]) == 2
    assert "bench.rounds: Input should be greater than or equal to 1" in capsys.readouterr().err
