"""`watchkeeper deliver-set` on the real llama-server and SmolLM2 with a budget of minutes: the
whole chain (sweep, served ladder, soak of that unit at depth 1 and its slots, the nightly's
first A/A pair, the set page, check-set) into one folder, which check-set then passes; a rerun
of the same command continues from the state file and measures nothing again; a stage left
unfinished is the only one a rerun runs; another plan on the same folder is refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import func, select
from support.soakkit import soak_settings
from support.taskfiles import copy_task

from watchkeeper.cli.app import main
from watchkeeper.commands.check_set import check_set_command
from watchkeeper.config import load_config
from watchkeeper.errors import ConfigError
from watchkeeper.publish.deliverable import RECORD_NAME, read_record
from watchkeeper.publish.ladder_claim import served_ladder
from watchkeeper.publish.set_state import MANIFEST_NAME, STATE_NAME
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.sets.deliver_set import SetPlan, deliver_set_command
from watchkeeper.store.db import open_database
from watchkeeper.store.schema import Campaign

BUDGET_MIN = 6.0


def _config(tmp_path: Path) -> Path:
    tasks = tmp_path / "tasks.jsonl"
    rows = [copy_task(f"copy-{i}", "code_edit", 24) for i in (1, 2, 3)]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    soak = {
        k: v
        for k, v in soak_settings().model_dump(exclude_defaults=True).items()
        if not isinstance(v, list)
    }
    soak_lines = "".join(
        f"{k} = {json.dumps(v)}\n" for k, v in soak.items() if isinstance(v, (int, float, str))
    )
    path = tmp_path / "watchkeeper.toml"
    path.write_text(
        f'[database]\nurl = "sqlite:///{tmp_path / "wk.db"}"\n'
        '[bench]\nreports_dir = "reports/set"\ntaskset = "tasks.jsonl"\n'
        "[nightly]\nrounds = 3\nper_category = 3\n"
        "[service]\nslots = 2\nport = 8099\n"
        f"[soak]\n{soak_lines}",
        encoding="utf-8",
    )
    return path


def _plan(tmp_path: Path, budget: float = BUDGET_MIN) -> SetPlan:
    return SetPlan(
        out=Path("reports/set"),
        budget_min=budget,
        service_file=Path("systemd/llama-server-set.service"),
        root=Path("."),
        profile="smollm2-baseline",
        max_tokens=24,
        sweep_rounds=3,
        max_arms=3,  # the baseline, its A/A control and one candidate
        ladder_rounds=2,
    )


def _campaigns(tmp_path: Path) -> int:
    with open_database(f"sqlite:///{tmp_path / 'wk.db'}") as db, db.session() as s:
        return int(s.scalar(select(func.count()).select_from(Campaign)) or 0)


def test_one_command_makes_a_set_that_check_set_passes_and_a_rerun_resumes(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # the set's paths as a repository names them, relative
    config = load_config(_config(tmp_path))
    plan = _plan(tmp_path)
    said: list[str] = []
    result = deliver_set_command(config, plan, command="deliver-set (test)", progress=said.append)
    stages = {s.name: s for s in result.state.stages}
    assert list(stages) == ["sweep", "ladder", "soak", "nightly", "reports", "check"]
    # The plan, each stage's budget, came first.
    assert said[0] == f"deliver-set: budget {BUDGET_MIN:g} min, stages in order:"
    assert said[1].startswith("  sweep: 2.7 min")
    assert result.ok, [(s.name, s.status, s.detail, s.facts) for s in result.state.stages]
    assert stages["check"].detail == "1 set(s): all agree"
    # Each stage was offered no more than what the stages before it had left (a stage that
    # used less, or was skipped, leaves its time to the later ones, so the offers may add up to
    # more than the budget; what was offered never exceeds what remained).
    spent = 0.0
    for stage in result.state.stages:
        assert stage.budget_s <= BUDGET_MIN * 60 - spent + 1e-6, stage
        spent += stage.wall_s
    record = read_record(plan.out / RECORD_NAME)
    if record.speculates:  # the ladder ran on the unit's 2 slots, and the unit says so
        ladder = served_ladder(record.extra)
        assert ladder is not None and [c.level for c in ladder.levels] == [1, 2]
        assert "Measured as this unit serves it (2 slots" in plan.service_file.read_text()
    else:
        assert stages["ladder"].detail == "the set keeps the baseline"
    soaked = json.loads((plan.out / "speculative_soak.json").read_text())
    assert soaked["campaign_id"] == stages["soak"].facts["campaign_id"]
    assert "depths 1,2" in stages["soak"].detail
    assert "A/A" in stages["nightly"].detail
    assert check_set_command(tmp_path, [plan.out]).ok
    assert (plan.out / MANIFEST_NAME).read_text().startswith("# How this set was made")

    # The same command again: every stage is finished, nothing is measured again.
    before = _campaigns(tmp_path)
    again = deliver_set_command(config, plan, command="deliver-set (test)", progress=said.append)
    assert _campaigns(tmp_path) == before and again.state == result.state

    # A stage left unfinished (here the check, as a crash would leave it): only it runs.
    state = json.loads((plan.out / STATE_NAME).read_text())
    state["stages"][-1]["status"] = "failed"
    (plan.out / STATE_NAME).write_text(json.dumps(state))
    said.clear()
    resumed = deliver_set_command(config, plan, command="deliver-set (test)", progress=said.append)
    assert _campaigns(tmp_path) == before
    assert [m for m in said if m.startswith("stage ")] == [
        f"stage check: budget {resumed.state.stage('check').budget_s / 60:.1f} min",
        "stage check: done in 0.0 min: 1 set(s): all agree",
    ]

    # Another plan on the same folder is refused before anything runs.
    with pytest.raises(ConfigError, match="was started by another plan"):
        deliver_set_command(config, _plan(tmp_path, 9.0), command="other", progress=said.append)


def test_a_set_without_budget_is_refused_in_one_line(tmp_path: Path) -> None:
    config = _config(tmp_path)
    # --budget takes the request bounds' Minutes (above 0): argparse refuses it and exits 2.
    with pytest.raises(SystemExit) as refused:
        main(["deliver-set", "--config", str(config), "--budget", "0", "--out", "x"])
    assert refused.value.code == 2 and not (tmp_path / "x").exists()


def test_the_default_folder_is_reports_not_the_working_directory(tmp_path: Path) -> None:
    """With `bench.reports_dir` unset (the default), the set goes to reports/, never to the
    directory the command runs in; --out and a configured folder win, in that order."""
    from watchkeeper.cli.deliver_set import set_folder

    bare = tmp_path / "bare.toml"
    bare.write_text(f'[database]\nurl = "sqlite:///{tmp_path / "wk.db"}"\n', encoding="utf-8")
    assert set_folder(None, load_config(bare)) == Path("reports")
    configured = load_config(_config(tmp_path))
    assert set_folder(None, configured) == Path("reports/set")
    assert set_folder("elsewhere", configured) == Path("elsewhere")
