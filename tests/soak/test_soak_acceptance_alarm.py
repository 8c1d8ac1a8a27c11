"""The soak files the acceptance alarms (campaign/acceptance_findings.py through
commands/soak.py): a real soak of SmolLM2 drafting for itself on prompts that make it repeat a
phrase (three of six loop: 50 of 50 drafted tokens accepted, 88-93% of their word 6-grams
repeated) leaves an `acceptance_loop` finding with the counts in its title (44 s on a quiet
host, 2026-12-06)."""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select
from support.soakkit import soak_settings
from support.taskfiles import LOOP_PROMPTS, write_taskset

from watchkeeper.commands.soak import soak_command
from watchkeeper.config import Config, DatabaseConfig, ProfileConfig, ServerConfig
from watchkeeper.config.requests import SoakRequest
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.store.db import Database
from watchkeeper.store.schema import Finding


def test_a_soak_whose_server_loops_files_the_loop_alarm(
    real_server: tuple[ServerBinary, ModelFile], sqlite_url: str, tmp_path: Path
) -> None:
    config = Config(
        database=DatabaseConfig(url=sqlite_url),
        server=ServerConfig(startup_timeout_s=120),
        profiles={
            "sd": ProfileConfig(
                model=SMOLLM2,
                draft_model=SMOLLM2,
                spec_type="draft-simple",
                draft_n_max=4,
                ctx_size=1024,
            )
        },
        soak=soak_settings(temperature=0.0, probe_interval_s=600.0),
    )
    tasks = write_taskset(tmp_path, [(f"loop-{i}", p) for i, p in enumerate(LOOP_PROMPTS)], 64)
    result = soak_command(
        config,
        SoakRequest(duration="40s", block="40s", profiles=["sd"], taskset=tasks),
    )
    assert result.status == "completed"
    db = Database(sqlite_url)
    with db.session() as s:
        found = s.scalars(select(Finding).filter_by(campaign_id=result.campaign_id)).all()
    db.close()
    loops = [f for f in found if f.kind == "acceptance_loop"]
    assert len(loops) == 1, [(f.kind, f.title) for f in found]
    assert loops[0].fingerprint == "soak-acceptance-loop:sd"
    assert "requests loop" in loops[0].title and "drafted tokens accepted" in loops[0].title
    assert not [f for f in found if f.kind == "acceptance_collapse"]
