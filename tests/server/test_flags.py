"""Profile -> argv against the real build's --help: the dialect is read, never assumed."""

from __future__ import annotations

from pathlib import Path

import pytest
from support.flagkit import argv_for

from watchkeeper.config import ProfileConfig
from watchkeeper.errors import FlagError
from watchkeeper.server.flags import HelpInfo, build_argv, parse_help
from watchkeeper.server.profiles import BUILTIN_PROFILES


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


# --- explicit offload, KV cache types and flash attention ---


def test_offload_and_kv_cache_keys_map_to_this_builds_flags(help_info: HelpInfo) -> None:
    profile = ProfileConfig(
        model="m",
        draft_model="d",
        spec_type="draft-simple",
        gpu_layers="all",
        draft_gpu_layers=12,
        cache_type_k="q8_0",
        cache_type_v="q8_0",
        draft_cache_type_k="f16",
        draft_cache_type_v="q4_0",
        flash_attn="on",
    )
    argv = argv_for(profile, help_info, draft=True)
    assert argv[argv.index("--gpu-layers") + 1] == "all"
    assert argv[argv.index("--spec-draft-ngl") + 1] == "12"
    assert argv[argv.index("--cache-type-k") + 1] == "q8_0"
    assert argv[argv.index("--cache-type-v") + 1] == "q8_0"
    assert argv[argv.index("--spec-draft-type-k") + 1] == "f16"
    assert argv[argv.index("--spec-draft-type-v") + 1] == "q4_0"
    assert argv[argv.index("--flash-attn") + 1] == "on"


def test_gpu_layers_default_to_all_on_a_cuda_build_and_to_nothing_on_cpu(
    help_info: HelpInfo,
) -> None:
    profile = BUILTIN_PROFILES["smollm2-selfdraft"]
    kwargs = {
        "info": help_info,
        "binary": Path("/b"),
        "model_path": Path("/m"),
        "draft_path": Path("/d"),
        "port": 1,
    }
    cpu = list(build_argv(profile, **kwargs).argv)  # type: ignore[arg-type]
    assert "--gpu-layers" not in cpu and "--spec-draft-ngl" not in cpu
    cuda = list(build_argv(profile, cuda=True, **kwargs).argv)  # type: ignore[arg-type]
    assert cuda[cuda.index("--gpu-layers") + 1] == "all"
    assert cuda[cuda.index("--spec-draft-ngl") + 1] == "all"
    zero = ProfileConfig(model="m", gpu_layers=0)
    assert argv_for(zero, help_info)[-2:] == ["--gpu-layers", "0"]


def test_a_kv_cache_type_the_build_does_not_list_is_refused(help_info: HelpInfo) -> None:
    with pytest.raises(FlagError, match=r"KV cache type 'q3_k' .*allowed: f32, f16, bf16, q8_0"):
        argv_for(ProfileConfig(model="m", cache_type_k="q3_k"), help_info)


def test_draft_offload_without_a_draft_model_is_refused(help_info: HelpInfo) -> None:
    with pytest.raises(FlagError, match="'draft_gpu_layers' is set but the profile has no"):
        argv_for(ProfileConfig(model="m", draft_gpu_layers="all"), help_info)


def test_gpu_layers_and_flash_attn_are_validated_by_the_config() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError):
        ProfileConfig(model="m", gpu_layers=-1)
    with pytest.raises(ValidationError):
        ProfileConfig(model="m", gpu_layers="most")  # type: ignore[arg-type]
    with pytest.raises(ValidationError):
        ProfileConfig(model="m", flash_attn="yes")  # type: ignore[arg-type]


def test_new_keys_leave_the_hash_of_existing_profiles_alone() -> None:
    assert ProfileConfig(model="m").config_hash() == "88177f65ff1b1e78"
    assert ProfileConfig(model="m", gpu_layers="all").config_hash() != "88177f65ff1b1e78"


def test_old_dialect_offload_flags_without_all_and_a_bare_flash_attn_switch() -> None:
    old = parse_help(
        "-m,    --model FNAME     model\n--port PORT  port\n--host HOST  host\n"
        "-c,    --ctx-size N   ctx\n-np,   --parallel N  slots\n--metrics  metrics\n"
        "-ngl,  --gpu-layers N   number of layers to store in VRAM\n"
        "-fa,   --flash-attn     enable Flash Attention (default: disabled)\n"
    )
    argv = argv_for(ProfileConfig(model="m", gpu_layers="all", flash_attn="on"), old)
    assert argv[argv.index("--gpu-layers") + 1] == "999"
    assert argv[-1] == "--flash-attn"
    with pytest.raises(FlagError, match="'auto' is not supported"):
        argv_for(ProfileConfig(model="m", flash_attn="auto"), old)


# --- draft sampling (issue 30) ---


def test_draft_sampling_maps_to_this_builds_flag(help_info: HelpInfo) -> None:
    assert "--spec-draft-sampling" in help_info.flags
    profile = BUILTIN_PROFILES["smollm2-selfdraft"].model_copy(
        update={"draft_sampling": "probabilistic"}
    )
    argv = argv_for(profile, help_info, draft=True)
    assert argv[argv.index("--spec-draft-sampling") + 1] == "probabilistic"
    assert "--spec-draft-sampling" not in argv_for(
        BUILTIN_PROFILES["smollm2-selfdraft"], help_info, draft=True
    )


def test_draft_sampling_needs_a_draft_model_and_a_build_that_has_the_flag() -> None:
    old = parse_help(
        "-m,    --model FNAME     model\n--port PORT  port\n--host HOST  host\n"
        "-c,    --ctx-size N   ctx\n-np,   --parallel N  slots\n--metrics  metrics\n"
        "-md,   --model-draft FNAME  draft\n--spec-type {none,draft-simple,ngram-simple}  t\n"
    )

    def argv(profile: ProfileConfig) -> list[str]:
        return list(
            build_argv(
                profile,
                info=old,
                binary=Path("/b"),
                model_path=Path("/m"),
                draft_path=Path("/d") if profile.draft_model else None,
                port=1,
            ).argv
        )

    drafted = ProfileConfig(
        model="m", draft_model="d", spec_type="draft-simple", draft_sampling="probabilistic"
    )
    with pytest.raises(FlagError, match="no --spec-draft-sampling flag"):
        argv(drafted)
    with pytest.raises(FlagError, match="needs a draft-\\* spec type"):
        argv(ProfileConfig(model="m", spec_type="ngram-simple", draft_sampling="greedy"))
    with pytest.raises(FlagError, match="does not speculate"):
        argv(ProfileConfig(model="m", draft_sampling="greedy"))


def test_sampling_keys_leave_the_hash_of_existing_profiles_alone() -> None:
    assert ProfileConfig(model="m", temperature=None, top_k=None).config_hash() == (
        "88177f65ff1b1e78"
    )
    assert ProfileConfig(model="m", temperature=0.7).config_hash() != "88177f65ff1b1e78"
    assert ProfileConfig(model="m", draft_sampling="greedy").config_hash() != "88177f65ff1b1e78"
