"""A wrapper in `server.binary` that does not pass SIGTERM on never leaves llama-server behind.

Operators put a script in `server.binary` (numactl or taskset in front, an environment set
up first) and write it carelessly: the real binary runs as the script's child, not through
`exec`, and the script either ignores SIGTERM (which its child inherits) or traps it without
forwarding it. Stopping only the script's pid then left llama-server running with its port
held. The server is started in a session of its own and stopped as its whole process group;
each wrapper below must end with no llama-server of its group alive and the port free.
"""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import psutil
import pytest

from watchkeeper.config import Config, ProfileConfig, ServerConfig
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import prepare, serve
from watchkeeper.server.models import ModelFile

WRAPPERS = {
    # SIG_IGN survives fork and exec: llama-server ignores SIGTERM too, so only SIGKILL of
    # the group after the grace period stops it.
    "ignores TERM": 'trap \'\' TERM\n"{binary}" "$@"\necho wrapper done\n',
    # The shell defers its trap until its foreground child ends, and never forwards it.
    "traps TERM, forwards nothing": 'trap \'echo wrapper got TERM\' TERM\n"{binary}" "$@"\n',
    # A subshell in between: llama-server is a grandchild of the wrapper.
    "subshell, no exec": 'trap \'exit 0\' TERM\n( "{binary}" "$@" )\n',
}


def _port_free(port: int) -> bool:
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


@pytest.mark.parametrize("name", sorted(WRAPPERS))
def test_a_wrapper_that_does_not_forward_sigterm_leaves_no_server_running(
    name: str, real_server: tuple[ServerBinary, ModelFile], tmp_path: Path
) -> None:
    binary, _ = real_server
    wrapper = tmp_path / "wrapped-llama-server"
    wrapper.write_text("#!/bin/sh\n" + WRAPPERS[name].format(binary=binary.path))
    wrapper.chmod(0o755)
    config = Config(
        profiles={"p": ProfileConfig(model="smollm2-135m-instruct-q4_1", ctx_size=1024)},
        server=ServerConfig(binary=str(wrapper), startup_timeout_s=60),
    )
    prepared = prepare(config, "p")
    with serve(config, prepared, log_path=tmp_path / "server.log") as server:
        assert server.managed is not None and server.managed.info.pid is not None
        port = urlsplit(server.base_url).port
        assert port is not None and not _port_free(port)
        leader = psutil.Process(server.managed.info.pid)
        servers = [p for p in leader.children(recursive=True) if p.name() == "llama-server"]
        assert servers, "the wrapper runs llama-server as a child (not through exec)"
    gone, alive = psutil.wait_procs(servers, timeout=5)
    assert not [p for p in alive if p.status() != psutil.STATUS_ZOMBIE], alive
    assert len(gone) + len(alive) == len(servers)
    assert _port_free(port)
