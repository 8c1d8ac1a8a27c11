"""A soak's servers get a slot for every request its deepest level sends at once.

A block at concurrency 2 on a one-slot server would queue its second request inside the server
instead of decoding both in one batch: the soak would call depth 1 with a queue "depth 2". The
bench matches slots to the load (campaign/load_shape.with_slots); the soak must too. A real
llama-server, its command line read from the live process while the soak runs."""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path

import psutil
from support.soakkit import live_llama_servers, soak_settings, write_taskset

from watchkeeper.commands.soak import soak_command
from watchkeeper.config import Config, DatabaseConfig, ProfileConfig, ServerConfig
from watchkeeper.load.records import RequestSample
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.soak.records import RunKey


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

    def on_sample(key: RunKey, sample: RequestSample) -> None:
        levels[key.concurrency] += sample.ok
        if not seen:
            seen.extend(live_server_argvs())

    result = soak_command(
        config,
        duration="16s",
        block="8s",
        profiles=["s"],
        concurrency=[1, 2],
        taskset=write_taskset(tmp_path),
        seed=1,
        on_sample=on_sample,
    )
    assert result.status == "completed"
    assert seen, "no llama-server was running while the soak sent its requests"
    for argv in seen:
        assert flag(argv, "--parallel") == "2", argv
        assert flag(argv, "--ctx-size") == "2048", argv  # 1024 per slot, as the profile asks
    assert levels[1] > 0 and levels[2] > 0, levels
