"""`served-ladder` on the real llama-server and SmolLM2: every rung runs on the unit's slots
(the load ladder underneath gives a rung as many slots as requests, so the first run of this
command on the code-edit set started its one-request rung on a server of one slot, not the
unit's four); each rung keeps its slots on the record and the unit's header says "as this unit
serves it" only then."""

from __future__ import annotations

import json
from pathlib import Path

from support.taskfiles import copy_task

from watchkeeper.config import load_config
from watchkeeper.publish.deliverable import read_record
from watchkeeper.publish.ladder_claim import served_ladder
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.sets.served_ladder import served_ladder_command

ROOT = Path(__file__).resolve().parents[2]
CODE_EDIT = ROOT / "reports/code-edit/speculative_recommendation.json"
MODEL = "smollm2-135m-instruct-q4_1"


def _record(tmp_path: Path) -> Path:
    """The committed code-edit record with SmolLM2 in place of Qwen, served on 2 slots."""
    data = json.loads(CODE_EDIT.read_text(encoding="utf-8"))
    for arm in (data["chosen"], data["baseline"], data["workload"]["categories"][0]["recipe"]):
        arm["profile"]["model"] = MODEL
    data["extra"] = {
        "served": {"slots": 2, "cache_ram_mib": 0, "port": 8099},
        "unit": str(tmp_path / "llama-server-set.service"),
        "record": "reports/set/speculative_recommendation.json",
    }
    path = tmp_path / "speculative_recommendation.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_every_rung_runs_on_the_units_slots_and_the_header_says_so(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    tasks = tmp_path / "tasks.jsonl"
    rows = [copy_task(f"copy-{i}", "code_edit", 16) for i in (1, 2)]
    tasks.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    config_path = tmp_path / "watchkeeper.toml"
    config_path.write_text(
        f'[database]\nurl = "sqlite:///{tmp_path / "wk.db"}"\n[bench]\ntaskset = "{tasks}"\n',
        encoding="utf-8",
    )
    said: list[str] = []
    done = served_ladder_command(
        load_config(config_path),
        recommendation=_record(tmp_path),
        rounds=2,
        max_tokens=16,
        level_min_requests=2,
        progress=said.append,
    )
    rungs = [m for m in said if m.startswith("ladder ")]
    assert rungs == [
        "ladder 1/2: c1 (2 requests per arm and round, 2 slot(s) per server)",
        "ladder 2/2: c2 (4 requests per arm and round, 2 slot(s) per server)",
    ]
    ladder = served_ladder(read_record(done.record).extra)
    assert ladder is not None and ladder.slots == 2
    assert [(c.level, c.slots) for c in ladder.levels] == [(1, 2), (2, 2)]
    assert all(c.pairs > 0 for c in ladder.levels)
    assert done.unit is not None
    header = " ".join(
        line[2:] for line in done.unit.read_text().splitlines() if line.startswith("# ")
    )
    assert "Measured as this unit serves it (2 slots, 4096 tokens a slot" in header
    assert "--parallel 2" in done.unit.read_text()
