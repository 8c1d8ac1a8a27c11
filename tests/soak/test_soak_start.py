"""The soak starts its server the way the bench and the nightly do (`server.launch.start`), so
it refuses a server that got less GPU offload than its profile asked for, instead of soaking a
CPU/GPU split nobody configured."""

from __future__ import annotations

import threading
from pathlib import Path

import psutil
import pytest
from support.soakkit import soak_settings

from watchkeeper.config import Config, ProfileConfig, ServerConfig
from watchkeeper.errors import ServerError
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import prepare
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.soak.records import Item
from watchkeeper.soak.supervisor import ServerSupervisor


def _running_llama_servers() -> list[int]:
    found = []
    for child in psutil.Process().children(recursive=True):
        try:
            if "llama-server" in child.name() and child.status() != psutil.STATUS_ZOMBIE:
                found.append(child.pid)
        except psutil.NoSuchProcess:
            continue
    return found


def _supervisor(config: Config, tmp_path: Path, emitted: list[Item]) -> ServerSupervisor:
    return ServerSupervisor(
        config,
        prepare(config, "s"),
        log_path=tmp_path / "server.log",
        emit=emitted.append,
        stop=threading.Event(),
    )


def test_the_soak_refuses_a_server_without_the_gpu_offload_its_profile_asked_for(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    """A CPU build asked for `gpu_layers = "all"`: the bench and the nightly refuse it, and
    now so does the soak's first start, leaving no server behind."""
    config = Config(
        server=ServerConfig(startup_timeout_s=120),
        profiles={"s": ProfileConfig(model=SMOLLM2, ctx_size=512, threads=1, gpu_layers="all")},
        soak=soak_settings(),
    )
    emitted: list[Item] = []
    supervisor = _supervisor(config, tmp_path, emitted)
    try:
        with pytest.raises(ServerError, match="asked for all target layers on the GPU"):
            supervisor.start()
        assert supervisor.pid is None and supervisor.generation == 0
        assert _running_llama_servers() == []
    finally:
        supervisor.close()


def test_the_soak_starts_a_profile_that_asks_for_no_offload(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    config = Config(
        server=ServerConfig(startup_timeout_s=120),
        profiles={"s": ProfileConfig(model=SMOLLM2, ctx_size=512, threads=1)},
        soak=soak_settings(),
    )
    emitted: list[Item] = []
    supervisor = _supervisor(config, tmp_path, emitted)
    try:
        supervisor.start()
        assert supervisor.generation == 1 and supervisor.pid in _running_llama_servers()
        assert supervisor.base_url.startswith("http://127.0.0.1:")
    finally:
        supervisor.close()
    assert _running_llama_servers() == []
