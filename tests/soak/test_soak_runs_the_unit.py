"""`soak --recommendation` soaks the unit as shipped, read from the live processes: a real soak of
a SmolLM2 recommendation whose servers' command lines (binary, model paths and port aside) are
the unit's ExecStart for each arm, with [service]'s slots and prompt cache, and whose report
names that unit and those flags."""

from __future__ import annotations

import contextlib
import shlex
import threading
from dataclasses import replace
from pathlib import Path

import psutil
from support.soakkit import live_llama_servers, soak_settings, write_taskset

from watchkeeper.commands.soak import soak_command
from watchkeeper.config import BenchConfig, Config, DatabaseConfig, ProfileConfig, ServerConfig
from watchkeeper.config.requests import SoakRequest
from watchkeeper.config.service import ServiceConfig
from watchkeeper.load.records import RequestSample
from watchkeeper.publish.deliverable import (
    ArmRecipe,
    RecommendationRecord,
    portable_flags,
    write_record,
)
from watchkeeper.publish.soak_report import SOAK_REPORT
from watchkeeper.publish.systemd import render_unit
from watchkeeper.server.flags import build_argv, read_help
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.soak.records import RunKey
from watchkeeper.store.campaigns import CampaignRows
from watchkeeper.store.db import Database


def arm(
    name: str, profile: ProfileConfig, binary: ServerBinary, model: ModelFile, config: Config
) -> ArmRecipe:
    """The arm as the sweep records it: the measured argv for this build, cut to file names."""
    info = read_help(binary, config.server.resolved_cache_dir())
    argv = build_argv(
        profile, info=info, binary=binary.path, model_path=model.path, draft_path=None, port=1
    ).argv
    return ArmRecipe(
        name, profile.model_dump(exclude_none=True), portable_flags(argv), profile.speculative
    )


def exec_start(unit: str) -> list[str]:
    line = next(x for x in unit.splitlines() if x.startswith("ExecStart="))
    return shlex.split(line.removeprefix("ExecStart=").replace("%%", "%").replace("$$", "$"))


def test_the_soaks_live_servers_run_the_units_execstart_for_each_arm(
    real_server: tuple[ServerBinary, ModelFile], sqlite_url: str, tmp_path: Path
) -> None:
    binary, model = real_server
    service = ServiceConfig(slots=2, cache_ram_mib=256, model_dir="/srv/models")
    config = Config(
        database=DatabaseConfig(url=sqlite_url),
        server=ServerConfig(startup_timeout_s=120),
        bench=BenchConfig(reports_dir=str(tmp_path / "reports")),
        soak=soak_settings(),
        service=service,
    )
    base = ProfileConfig(model=SMOLLM2, ctx_size=1024, threads=1)
    ngram = base.model_copy(update={"spec_type": "ngram-simple"})
    record = RecommendationRecord(
        headline="s-ngram", campaign_id=9, report="speculative_benchmark.md",
        campaign_report="c9/report.md", hardware="2 CPU cores (AMD EPYC), no GPU", gpu=False,
        build="test", sampler="temperature 0 (greedy)", models=SMOLLM2,
        chosen=replace(arm("s-ngram", ngram, binary, model, config), speedup="1.2x"),
        baseline=arm("s-base", base, binary, model, config), closest=None, meaning="a test",
    )  # fmt: skip
    path = write_record(tmp_path / "rec.json", record)
    seen: list[list[str]] = []

    def on_sample(_key: RunKey, _sample: RequestSample) -> None:
        if len(seen) < 2:
            seen.clear()
            for server in live_llama_servers():
                with contextlib.suppress(psutil.NoSuchProcess):
                    seen.append(server.cmdline())

    request = SoakRequest(
        recommendation=path, duration="16s", block="8s", concurrency=[1, 2],
        taskset=write_taskset(tmp_path), seed=1, against_reference=False,
    )  # fmt: skip
    result = soak_command(
        config, request, on_sample=on_sample,
        command_line="watchkeeper soak --recommendation rec.json",
    )  # fmt: skip
    assert result.status == "completed"
    assert len(seen) == 2, seen
    units = {
        a.name: portable_flags(exec_start(render_unit(replace(record, chosen=a), service)))
        for a in (record.chosen, record.baseline)
    }
    live = {
        ("s-base" if argv[argv.index("--spec-type") + 1] == "none" else "s-ngram"): (
            portable_flags(argv)
        )
        for argv in seen
    }
    assert live == units  # binary, model paths, host and port aside: flag for flag
    assert units["s-ngram"][-2:] == ("--cache-ram", "256")
    assert (
        "--parallel" in units["s-base"]
        and units["s-base"][units["s-base"].index("--parallel") + 1] == "2"
    )
    report = (tmp_path / "reports" / SOAK_REPORT).read_text()
    assert "Unit soaked: `systemd/llama-server-speculative.service`" in report
    assert f"- s-ngram: `{' '.join(units['s-ngram'])}`" in report
    # The store keeps the sweep it soaked: a later sweep's report never quotes it as its own.
    db = Database(sqlite_url)
    try:
        stored = CampaignRows(db).read(result.campaign_id)
    finally:
        db.close()
    assert stored is not None and stored.params["sweep_campaign"] == record.campaign_id


def test_a_soak_of_the_unit_under_another_service_cache_is_not_resumed_as_the_same_plan(
    real_server: tuple[ServerBinary, ModelFile], sqlite_url: str, tmp_path: Path
) -> None:
    """A recommendation's servers run [service]'s prompt cache, not [soak]'s: a soak stopped
    under `cache_ram_mib = 256` and rerun under 0 would otherwise resume it, and one campaign
    would mix RSS with and without the cache (the resume signature read only the soak's)."""
    binary, model = real_server

    def config(mib: int) -> Config:
        return Config(
            database=DatabaseConfig(url=sqlite_url),
            server=ServerConfig(startup_timeout_s=120),
            bench=BenchConfig(reports_dir=str(tmp_path / "reports")),
            soak=soak_settings(),
            service=ServiceConfig(slots=1, cache_ram_mib=mib, model_dir="/srv/models"),
        )

    base = ProfileConfig(model=SMOLLM2, ctx_size=1024, threads=1)
    ngram = base.model_copy(update={"spec_type": "ngram-simple"})
    before = config(256)
    record = RecommendationRecord(
        headline="s-ngram", campaign_id=9, report="speculative_benchmark.md",
        campaign_report="c9/report.md", hardware="2 CPU cores (AMD EPYC), no GPU", gpu=False,
        build="test", sampler="temperature 0 (greedy)", models=SMOLLM2,
        chosen=replace(arm("s-ngram", ngram, binary, model, before), speedup="1.2x"),
        baseline=arm("s-base", base, binary, model, before), closest=None, meaning="a test",
    )  # fmt: skip
    request = SoakRequest(
        recommendation=write_record(tmp_path / "rec.json", record), duration="16s", block="8s",
        concurrency=[1], taskset=write_taskset(tmp_path), seed=1, against_reference=False,
    )  # fmt: skip
    stopped = threading.Event()
    stopped.set()  # the servers start, no block runs: an interrupted campaign to resume
    first = soak_command(before, request, stop=stopped)
    assert first.status == "interrupted"
    again = soak_command(config(0), request, stop=stopped)
    assert not again.resumed and again.campaign_id != first.campaign_id
    same = soak_command(before, request, stop=stopped)
    assert same.resumed and same.campaign_id == first.campaign_id
