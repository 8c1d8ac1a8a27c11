"""Profile -> argv against the real build's --help: the dialect is read, never assumed."""

from __future__ import annotations

from pathlib import Path

import pytest

from watchkeeper.config import ProfileConfig
from watchkeeper.errors import FlagError
from watchkeeper.server.flags import HelpInfo, build_argv, parse_help, read_help
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.profiles import BUILTIN_PROFILES


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


def test_the_installed_build_lists_the_spec_types_of_design_md(help_info: HelpInfo) -> None:
    assert {"none", "draft-simple", "ngram-simple", "ngram-mod", "ngram-cache"} <= set(
        help_info.spec_types
    )
    assert "--spec-draft-n-max" in help_info.flags
    assert "--draft-max" not in help_info.flags


def test_selfdraft_profile_maps_to_this_builds_flags(help_info: HelpInfo) -> None:
    argv = argv_for(BUILTIN_PROFILES["smollm2-selfdraft"], help_info, draft=True)
    assert argv[argv.index("--spec-type") + 1] == "draft-simple"
    assert argv[argv.index("--spec-draft-n-max") + 1] == "4"
    assert "--spec-draft-model" in argv
    assert "--metrics" in argv
    assert argv[argv.index("--host") + 1] == "127.0.0.1"


def test_ngram_draft_length_uses_the_ngram_flag(help_info: HelpInfo) -> None:
    profile = ProfileConfig(model="m", spec_type="ngram-simple", draft_n_max=12)
    argv = argv_for(profile, help_info)
    assert argv[argv.index("--spec-ngram-simple-size-m") + 1] == "12"


def test_unsupported_spec_type_lists_what_the_build_supports(help_info: HelpInfo) -> None:
    with pytest.raises(
        FlagError,
        match=r"spec type 'medusa' is not supported .*supported: none, draft-simple, draft-eagle3",
    ):
        argv_for(ProfileConfig(model="m", spec_type="medusa"), help_info)


def test_draft_model_without_spec_type_never_silently_skips_speculation(
    help_info: HelpInfo,
) -> None:
    args = build_argv(
        ProfileConfig(model="m", draft_model="d"),
        info=help_info,
        binary=Path("/b"),
        model_path=Path("/m"),
        draft_path=Path("/d"),
        port=1,
    )
    assert args.argv[args.argv.index("--spec-type") + 1] == "draft-simple"
    assert any("does not speculate" in note for note in args.notes)


def test_field_the_spec_type_cannot_use_is_refused(help_info: HelpInfo) -> None:
    profile = ProfileConfig(model="m", spec_type="ngram-simple", draft_p_min=0.5)
    with pytest.raises(
        FlagError, match="'draft_p_min' is not supported for spec type 'ngram-simple'"
    ):
        argv_for(profile, help_info)


def test_unknown_extra_flag_is_refused_with_a_suggestion(help_info: HelpInfo) -> None:
    profile = ProfileConfig(model="m", extra_args=["--draft-max", "8"])
    with pytest.raises(
        FlagError,
        match="flag .--draft-max. in extra_args was removed in this build: use --spec-draft-n-max",
    ):
        argv_for(profile, help_info)
    with pytest.raises(FlagError, match="did you mean --ctx-size"):
        argv_for(ProfileConfig(model="m", extra_args=["--ctx-sizes", "8"]), help_info)


def test_old_dialect_help_uses_the_old_spellings() -> None:
    old = parse_help(
        "-m,    --model FNAME     model\n--port PORT  port\n--host HOST  host\n"
        "-c,    --ctx-size N   ctx\n-np,   --parallel N  slots\n--metrics  metrics\n"
        "-md,   --model-draft FNAME  draft\n--draft-max N  max\n--spec-type {none,draft-simple}  t\n"
    )
    profile = ProfileConfig(model="m", draft_model="d", spec_type="draft-simple", draft_n_max=3)
    argv = list(
        build_argv(
            profile,
            info=old,
            binary=Path("/b"),
            model_path=Path("/m"),
            draft_path=Path("/d"),
            port=1,
        ).argv
    )
    assert argv[argv.index("--draft-max") + 1] == "3"
    assert "--model-draft" in argv
