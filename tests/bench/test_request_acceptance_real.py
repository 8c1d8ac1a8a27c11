"""Per-request acceptance on the real server (SmolLM2 drafting for itself, `watchkeeper run`):
each request's drafted and accepted counts and its output's repetition stored, a real A/A of
four runs quiet on both alarms (acceptance near 1 on ordinary text is not a loop), and a real
loop, prompts that make the model repeat one phrase, caught by the loop alarm."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import select
from support.taskfiles import LOOP_PROMPTS

from watchkeeper.campaign.acceptance_findings import judge_campaign
from watchkeeper.cli.app import main
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import open_database
from watchkeeper.store.schema import RequestSampleRow

PROFILE = "smollm2-selfdraft"


def _standard(path: Path) -> Path:
    lines = Path("jobs/tasksets/standard.jsonl").read_text().splitlines()
    path.write_text("".join(json.dumps({**json.loads(x), "max_tokens": 32}) + "\n" for x in lines))
    return path


def _looping(path: Path) -> Path:
    path.write_text(
        "".join(
            json.dumps(
                {
                    "id": f"loop-{i}",
                    "category": "prose",
                    "max_tokens": 64,
                    "messages": [{"role": "user", "content": text}],
                }
            )
            + "\n"
            for i, text in enumerate(LOOP_PROMPTS)
        )
    )
    return path


def _run(capsys: pytest.CaptureFixture[str], tasks: Path) -> int:
    code = main(["run", "--profile", PROFILE, "--taskset", str(tasks), "--limit", "6", "--json"])
    out = json.loads(capsys.readouterr().out)
    assert code == 0, out
    return int(out["campaign_id"])


def test_per_request_acceptance_is_stored_an_aa_stays_quiet_and_a_loop_is_caught(
    real_server: tuple[ServerBinary, ModelFile],
    db_url: str,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
) -> None:
    monkeypatch.setenv("WATCHKEEPER_DATABASE_URL", db_url)
    standard = _standard(tmp_path / "standard.jsonl")
    runs = [_run(capsys, standard) for _ in range(4)]
    looping = _run(capsys, _looping(tmp_path / "loop.jsonl"))
    with open_database(db_url) as db:
        with db.session() as s:
            rows = s.scalars(select(RequestSampleRow)).all()
        assert len(rows) == 30
        assert all(r.draft_n and r.draft_n_accepted is not None for r in rows)
        # Repetition is judged on 12 words and more; shorter answers have none (NULL).
        assert all((r.repeat_share is None) == (len(r.output_text.split()) < 12) for r in rows)
        assert sum(r.repeat_share is not None for r in rows) >= 24
        (aa,) = judge_campaign(db, runs[-1], kinds=("run",))
        assert aa.collapse.verdict == "no change" and aa.collapse.history_runs == 3
        assert aa.collapse.current > 0.8  # near 1, on text that does not repeat itself
        assert not aa.loop.fired and aa.loop.looped == 0
        (loop,) = judge_campaign(db, looping, kinds=("run",))
        assert loop.loop.fired and loop.loop.looped >= 3, loop.loop.reason
        assert not loop.collapse.fired
