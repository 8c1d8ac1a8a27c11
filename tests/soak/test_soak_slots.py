"""A soak's servers get a slot for every request its deepest level sends at once.

A block at concurrency 2 on a one-slot server would queue its second request inside the server
instead of decoding both in one batch: the soak would call depth 1 with a queue "depth 2". The
bench matches slots to the load (campaign/load_shape.with_slots); the soak must too. A real
llama-server, its command line read from the live process while the soak runs.

They also run with the host prompt cache off (`soak.cache_ram_mib`, default 0): its growth
toward its limit is RSS the leak test would read as a leak (campaign/soak_campaign.py)."""

from __future__ import annotations

import contextlib
from collections import Counter
from datetime import datetime, timedelta
from pathlib import Path

import psutil
from support.soakkit import live_llama_servers, soak_settings, write_taskset

from watchkeeper.campaign.soak_campaign import (
    plan_signature,
    soak_cache_ram,
    soak_servers,
    with_cache_ram,
)
from watchkeeper.commands.soak import soak_command
from watchkeeper.config import Config, DatabaseConfig, ProfileConfig, ServerConfig
from watchkeeper.config.requests import SoakRequest
from watchkeeper.config.service import ServiceConfig
from watchkeeper.load.records import RequestSample, RunPurpose, Task
from watchkeeper.load.sampling import SamplingSettings
from watchkeeper.server.flags import HelpInfo
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import PreparedProfile
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.soak.records import RunKey
from watchkeeper.store.db import Database
from watchkeeper.store.soak_store import SoakStore


def live_server_argvs() -> list[list[str]]:
    argvs = []
    for server in live_llama_servers():
        with contextlib.suppress(psutil.NoSuchProcess):
            argvs.append(server.cmdline())
    return argvs


def flag(argv: list[str], name: str) -> str:
    return argv[argv.index(name) + 1]


def test_a_soak_at_concurrency_1_and_2_runs_servers_with_two_slots_each_keeping_its_context(
    real_server: tuple[ServerBinary, ModelFile], sqlite_url: str, tmp_path: Path
) -> None:
    config = Config(
        database=DatabaseConfig(url=sqlite_url),
        server=ServerConfig(startup_timeout_s=120),
        profiles={"s": ProfileConfig(model=SMOLLM2, ctx_size=1024, threads=1)},
        soak=soak_settings(),
    )
    seen: list[list[str]] = []
    levels: Counter[int] = Counter()
    requests: list[tuple[RunKey, RequestSample]] = []

    def on_sample(key: RunKey, sample: RequestSample) -> None:
        levels[key.concurrency] += sample.ok
        requests.append((key, sample))
        if not seen:
            seen.extend(live_server_argvs())

    result = soak_command(
        config,
        SoakRequest(
            duration="16s",
            block="8s",
            profiles=["s"],
            concurrency=[1, 2],
            taskset=write_taskset(tmp_path),
            seed=1,
        ),
        on_sample=on_sample,
    )
    assert result.status == "completed"
    assert seen, "no llama-server was running while the soak sent its requests"
    for argv in seen:
        assert flag(argv, "--parallel") == "2", argv
        assert flag(argv, "--ctx-size") == "2048", argv  # 1024 per slot, as the profile asks
        assert flag(argv, "--cache-ram") == "0", argv
    assert levels[1] > 0 and levels[2] > 0, levels

    # Each level's probe went alone: no load request was in flight while it ran.
    def span(sample: RequestSample) -> tuple[datetime, datetime]:
        return sample.started_at, sample.started_at + timedelta(seconds=sample.latency_s or 0)

    probes = [span(r) for k, r in requests if k.purpose == RunPurpose.PROBE]
    load = [span(r) for k, r in requests if k.purpose != RunPurpose.PROBE]
    assert len(probes) == 2, probes  # one per concurrency level
    for start, end in probes:
        assert not [(a, b) for a, b in load if a < end and b > start], (start, end)

    # The resource sampler put the host's CPU outside the servers on every stored point after
    # its first (soak/hostcpu.py; what may explain a dip, soak/dips.py).
    db = Database(sqlite_url)
    try:
        resources = SoakStore(db).load(result.campaign_id).resources
    finally:
        db.close()
    shares = [r.host_other_cpu for r in resources[1:]]
    assert shares and all(v is not None and 0.0 <= v <= 1.0 for v in shares), shares


def prepared(name: str, extra: list[str], flags: frozenset[str]) -> PreparedProfile:
    profile = ProfileConfig(model=SMOLLM2, extra_args=extra)
    return PreparedProfile(name, profile, None, None, None, HelpInfo(flags, ()))


def test_the_prompt_cache_setting_reaches_every_server_that_has_one_and_no_profile_that_chose() -> (
    None
):
    both = frozenset({"--cache-ram", "--port"})
    arms = [
        prepared("plain", [], both),
        prepared("own", ["--cache-ram", "512"], both),
        prepared("short", ["-cram=256"], both),
        prepared("old build", [], frozenset({"--port"})),
    ]
    out = {p.name: p.profile.extra_args for p in with_cache_ram(arms, 0)}
    assert out == {
        "plain": ["--cache-ram", "0"],
        "own": ["--cache-ram", "512"],
        "short": ["-cram=256"],
        "old build": [],
    }
    assert [p.profile.extra_args for p in with_cache_ram(arms, None)] == [
        [], ["--cache-ram", "512"], ["-cram=256"], []
    ]  # fmt: skip


def test_the_resume_signature_follows_the_prompt_cache_the_servers_run_with() -> None:
    """A recommendation's servers run [service]'s cache (`soak_cache_ram`), any other soak's
    [soak]'s: the signature changes with that one and not with the other, so a resumed soak
    never mixes runs under two caches."""
    tasks = [
        Task(id="t", category="prose", messages=({"role": "user", "content": "hi"},), max_tokens=8)
    ]

    def signature(soak_mib: int, service_mib: int, *, shipped: bool) -> str:
        config = Config(
            soak=soak_settings(cache_ram_mib=soak_mib),
            service=ServiceConfig(cache_ram_mib=service_mib),
        )
        return plan_signature(
            config,
            ("a",),
            (1,),
            60.0,
            30.0,
            tasks,
            {},
            shipped=shipped,
            sampling=SamplingSettings(),
        )

    assert signature(0, 0, shipped=True) != signature(0, 256, shipped=True)
    assert signature(0, 0, shipped=True) == signature(256, 0, shipped=True)
    assert signature(0, 0, shipped=False) != signature(256, 0, shipped=False)
    assert signature(0, 0, shipped=False) == signature(0, 256, shipped=False)
    both = frozenset({"--cache-ram", "--port"})
    for shipped in (True, False):
        config = Config(
            soak=soak_settings(cache_ram_mib=0), service=ServiceConfig(cache_ram_mib=256)
        )
        (served,) = soak_servers(config, [prepared("plain", [], both)], 1, shipped=shipped)
        args = served.profile.extra_args
        assert args[args.index("--cache-ram") + 1] == str(soak_cache_ram(config, shipped=shipped))
