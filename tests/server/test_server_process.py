"""The real llama-server under our control: start, health, RSS, stop, and its failures."""

from __future__ import annotations

import socket
from pathlib import Path

import httpx
import pytest

from watchkeeper.config import Config, ModelConfig, ProfileConfig, ServerConfig
from watchkeeper.errors import ServerError
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import prepare, serve
from watchkeeper.server.models import ModelFile


def config_with(profile: ProfileConfig, **server: object) -> Config:
    return Config(profiles={"p": profile}, server=ServerConfig(startup_timeout_s=60, **server))  # type: ignore[arg-type]


def test_server_starts_answers_health_reports_rss_and_stops(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    config = config_with(ProfileConfig(model="smollm2-135m-instruct-q4_1", ctx_size=1024))
    prepared = prepare(config, "p")
    log = tmp_path / "server.log"
    with serve(config, prepared, log_path=log) as server:
        assert server.base_url.startswith("http://127.0.0.1:")
        assert httpx.get(server.base_url + "/health", timeout=5).status_code == 200
        assert server.managed is not None
        assert server.managed.rss_bytes() > 50 * 1024 * 1024
        pid_alive = server.managed.exit_code() is None
    assert pid_alive
    assert server.managed.exit_code() is not None
    assert "llama-server" in log.read_text()


def test_a_server_that_dies_at_start_reports_exit_code_and_log_tail(
    server_binary: ServerBinary, tmp_path: Path
) -> None:
    bogus = tmp_path / "broken.gguf"
    bogus.write_bytes(b"GGUF" + b"\x00" * 64)
    config = Config(
        models={"broken": ModelConfig(path=str(bogus))},
        profiles={"p": ProfileConfig(model="broken")},
        server=ServerConfig(startup_timeout_s=60),
    )
    prepared = prepare(config, "p")
    with (
        pytest.raises(ServerError, match="exited with code") as info,
        serve(config, prepared, log_path=tmp_path / "s.log"),
    ):
        pass
    assert info.value.exit_code not in (None, 0)
    assert "broken.gguf" in info.value.log_tail


def test_an_explicit_port_in_use_is_a_clear_error(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        port = holder.getsockname()[1]
        config = config_with(ProfileConfig(model="smollm2-135m-instruct-q4_1"), port=port)
        prepared = prepare(config, "p")
        with (
            pytest.raises(ServerError, match=f"port {port} on 127.0.0.1 is already in use"),
            serve(config, prepared, log_path=tmp_path / "s.log"),
        ):
            pass


def test_a_picked_port_taken_before_the_server_binds_is_replaced_by_another(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With server.port = 0 the port is ours to choose: one that something else takes between
    the pick and the start (an outgoing connection given it as its ephemeral port, as in a CI
    night) is no reason to fail a night."""
    from watchkeeper.server import launch

    picks: list[int] = []
    real_free_port = launch.free_port
    with socket.socket() as holder:
        holder.bind(("127.0.0.1", 0))
        holder.listen(1)
        taken = holder.getsockname()[1]

        def pick() -> int:
            picks.append(taken if not picks else real_free_port())
            return picks[-1]

        monkeypatch.setattr(launch, "free_port", pick)
        config = config_with(ProfileConfig(model="smollm2-135m-instruct-q4_1", ctx_size=1024))
        with serve(config, prepare(config, "p"), log_path=tmp_path / "s.log") as server:
            assert server.base_url == f"http://127.0.0.1:{picks[1]}"
            assert httpx.get(server.base_url + "/health", timeout=5).status_code == 200
    assert picks[0] == taken and picks[1] != taken


def test_a_missing_user_model_is_named(server_binary: ServerBinary, tmp_path: Path) -> None:
    from watchkeeper.errors import ModelError

    config = Config(
        models={"mine": ModelConfig(path=str(tmp_path / "nope.gguf"))},
        profiles={"p": ProfileConfig(model="mine")},
    )
    with pytest.raises(ModelError, match=r"model mine: file not found: .*nope\.gguf"):
        prepare(config, "p")


def test_an_external_server_is_used_without_start_or_stop(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    owner_config = config_with(ProfileConfig(model="smollm2-135m-instruct-q4_1", ctx_size=1024))
    with serve(owner_config, prepare(owner_config, "p"), log_path=tmp_path / "o.log") as owned:
        external = config_with(
            ProfileConfig(model="smollm2-135m-instruct-q4_1"), external_url=owned.base_url
        )
        prepared = prepare(external, "p")
        assert prepared.binary is None
        with serve(external, prepared, log_path=tmp_path / "e.log") as server:
            assert server.managed is None
            assert server.base_url == owned.base_url
        assert owned.managed is not None and owned.managed.exit_code() is None


def test_an_unreachable_external_server_is_a_clear_error(tmp_path: Path) -> None:
    config = config_with(ProfileConfig(model="x"), external_url="http://127.0.0.1:9")
    with (
        pytest.raises(ServerError, match=r"external server http://127\.0\.0\.1:9 is not reachable"),
        serve(config, prepare(config, "p"), log_path=tmp_path / "e.log"),
    ):
        pass


def test_a_server_crash_mid_run_is_recorded_and_loses_no_completed_request(
    real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    import os
    import signal

    import psutil

    from watchkeeper.campaign.campaigns import run_profile
    from watchkeeper.load.records import RequestSample, Task
    from watchkeeper.load.runner import LoadSettings

    config = config_with(ProfileConfig(model="smollm2-135m-instruct-q4_1", ctx_size=1024))
    prepared = prepare(config, "p")
    tasks = [
        Task(
            id=f"t{i}",
            category="prose",
            max_tokens=16,
            messages=({"role": "user", "content": f"Count to {i + 3}."},),
        )
        for i in range(4)
    ]
    completed: list[RequestSample] = []

    def kill_after_first(sample: RequestSample) -> None:
        completed.append(sample)
        if len(completed) == 1:
            for child in psutil.Process().children(recursive=True):
                if "llama-server" in child.name():
                    os.kill(child.pid, signal.SIGKILL)

    result = run_profile(
        config,
        prepared,
        tasks,
        arm="p",
        round_index=0,
        is_warmup=False,
        settings=LoadSettings(),
        log_path=tmp_path / "s.log",
        on_sample=kill_after_first,
    )
    assert result.error is not None and "exited with code -9" in result.error
    assert len(result.samples) == 4
    assert result.samples[0].error is None and result.samples[0].completion_tokens
    assert all(s.error and s.error.startswith("transport error") for s in result.samples[1:])
