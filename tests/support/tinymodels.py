"""Models written here, offline, by the repository's own scripts (scripts/*_gguf.py) with the
llama.cpp sdist's `gguf-py` from the cached build: a random-weight model with MTP heads, a
random-weight EAGLE-3 drafter for SmolLM2, a SmolLM2 copy whose blocks are reversed (a
drafter that no longer fits). Each is written once per session into the session's temporary
directory; random weights make their speed and acceptance figures meaningless."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy import select

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.recommend import recommend
from watchkeeper.commands.benchmark import bench_command
from watchkeeper.config import (
    Config,
    DatabaseConfig,
    ModelConfig,
    ProfileConfig,
    ServerConfig,
    SoakConfig,
    load_config,
)
from watchkeeper.config.service import ServiceConfig
from watchkeeper.publish.deliverable import build_record
from watchkeeper.publish.systemd import render_unit
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2, all_profiles
from watchkeeper.store.db import Database
from watchkeeper.store.schema import RequestSampleRow, Run

SCRIPTS = Path(__file__).resolve().parents[2] / "scripts"


def gguf_py(binary: ServerBinary) -> Path:
    """The sdist's gguf-py beside the build the tests run (its source tree is kept)."""
    for parent in binary.path.parents:
        candidate = parent / "src" / "llama.cpp" / "gguf-py"
        if candidate.is_dir():
            return candidate
    raise AssertionError(f"no src/llama.cpp/gguf-py above {binary.path}")


def write_model(
    script: str, out: Path, binary: ServerBinary, smollm2: ModelFile, source_flag: str
) -> Path:
    """Run `scripts/<script>` to write `out` from SmolLM2 (its tokenizer or its weights)."""
    argv = [sys.executable, str(SCRIPTS / script), str(out), "--gguf-py", str(gguf_py(binary))]
    done = subprocess.run(
        [*argv, source_flag, str(smollm2.path)], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return out


DRAFTING = "sd"
"""The profile `drafting_config` names."""


def drafting_config(url: str, drafter: Path, soak: SoakConfig) -> Config:
    """SmolLM2-135M drafting with the model file `drafter` (draft-simple, n_max 4, 1024 of
    context) as profile `sd`, results in `url`: the acceptance alarms' real controls (the
    collapse soak test, benchmarks/acceptance_controls_real.py) swap only the drafter's file
    between a fitting and a misfit soak, so the profile is one and the same."""
    return Config(
        database=DatabaseConfig(url=url),
        server=ServerConfig(startup_timeout_s=120),
        models={"drafter": ModelConfig(path=str(drafter))},
        profiles={
            DRAFTING: ProfileConfig(
                model=SMOLLM2,
                draft_model="drafter",
                spec_type="draft-simple",
                draft_n_max=4,
                ctx_size=1024,
            )
        },
        soak=soak,
    )


PROMPTS = ("Tell me about the sea.", "Write a short poem about bread.")


def write_prose_tasks(path: Path) -> Path:
    """The two PROMPTS as a prose task set of 16-token answers: short enough that a random-weight
    drafter's plumbing runs in seconds, and one category so every arm meets the same tasks."""
    path.write_text(
        "".join(
            json.dumps({"id": f"p{i}", "category": "prose", "max_tokens": 16,
                        "messages": [{"role": "user", "content": p}]}) + "\n"
            for i, p in enumerate(PROMPTS)
        )
    )  # fmt: skip
    return path


def bench_pair(
    root: Path,
    models: dict[str, Path],
    profiles: str,
    arms: tuple[str, ...],
    generated: Mapping[str, ProfileConfig] | None = None,
) -> tuple[BenchResult, str, Path]:
    """A real paired bench of `arms` (baseline first) with [models] and [profiles] as given
    (`profiles`: TOML; `generated`: profiles built in Python, a sweep plan's arms, added as the
    sweep adds them): the two PROMPTS at 16 tokens, 2 rounds, one process per arm, SQLite under
    `root`. Returns the result, the database URL and the config's path."""
    url = f"sqlite:///{root / 'wk.db'}"
    config = root / "watchkeeper.toml"
    config.write_text(
        f'[database]\nurl = "{url}"\n'
        f'[bench]\nreports_dir = "{root / "reports"}"\nrounds = 2\nrestart_every = 0\n'
        + "".join(f'[models.{name}]\npath = "{path}"\n' for name, path in models.items())
        + profiles
    )
    tasks = write_prose_tasks(root / "tasks.jsonl")
    loaded = load_config(config)
    if generated:
        loaded = loaded.model_copy(update={"profiles": {**generated, **loaded.profiles}})
    result = bench_command(
        loaded,
        profiles=list(arms),
        rounds=None,
        taskset=tasks,
        limit=None,
        per_category=None,
        concurrency=None,
        progress=lambda _m: None,
    )
    return result, url, config


def measured_draft_n(url: str) -> list[tuple[str, int | None]]:
    """(arm, draft_n) of every stored measured request."""
    db = Database(url)
    with db.session() as s:
        rows = s.execute(
            select(Run.arm, RequestSampleRow.draft_n)
            .join(RequestSampleRow, RequestSampleRow.run_id == Run.id)
            .where(Run.purpose == "measured")
        ).all()
    db.close()
    return [(arm, n) for arm, n in rows]


def rendered_exec_start(result: BenchResult, config: Path, chosen: str) -> str:
    """The ExecStart= line of the unit the recommendation's record renders for `chosen`."""
    record = build_record(
        result, recommend(result), chosen=chosen, profiles=all_profiles(load_config(config)),
        report="speculative_benchmark.md", campaign_report="campaign.md",
    )  # fmt: skip
    unit = render_unit(record, ServiceConfig())
    return next(line for line in unit.splitlines() if line.startswith("ExecStart="))
