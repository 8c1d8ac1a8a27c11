"""The real build's --help and a profile's argv against it, for the flag tests (test_flags,
test_spec_knobs): the dialect is read from the installed build, never assumed."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.config import ProfileConfig
from watchkeeper.server.flags import HelpInfo, build_argv, read_help
from watchkeeper.server.install import ServerBinary


@pytest.fixture(scope="module")
def help_info(server_binary: ServerBinary, tmp_path_factory: pytest.TempPathFactory) -> HelpInfo:
    return read_help(server_binary, tmp_path_factory.mktemp("cache"))


def argv_for(profile: ProfileConfig, info: HelpInfo, draft: bool = False) -> list[str]:
    return list(
        build_argv(
            profile,
            info=info,
            binary=Path("/bin/llama-server"),
            model_path=Path("/m/target.gguf"),
            draft_path=Path("/m/draft.gguf") if draft else None,
            port=8123,
        ).argv
    )
