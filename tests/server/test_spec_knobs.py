"""The speculation argv against the real build's --help: every knob flag the code can emit is
one the build lists (the corrected table: ngram-map-k4v's length is
--spec-ngram-map-k4v-size-m, not map-k's), chains are checked part by part, draft-mtp runs on
the target's own heads, the trained drafters need their drafter, and the baseline pins
--spec-type none."""

from __future__ import annotations

import pytest
from support.flagkit import argv_for

from watchkeeper.campaign.sweep_arms import NGRAM_SIZES
from watchkeeper.config import ProfileConfig
from watchkeeper.errors import FlagError
from watchkeeper.server.flags import HelpInfo
from watchkeeper.server.spec_knobs import FIELD_KNOBS, owner, spec_knobs


def test_every_field_knob_the_code_can_emit_is_listed_by_the_build(help_info: HelpInfo) -> None:
    emitted = {}
    for fam, fields in FIELD_KNOBS.items():
        for name, spellings in fields.items():
            flag = next((f for f in spellings if f in help_info.flags), None)
            assert flag is not None, (fam, name, spellings)
            assert owner(flag) == ("draft" if fam == "draft" else fam), (fam, flag)
            emitted[(fam, name)] = flag
    assert emitted[("ngram-map-k4v", "draft_n_max")] == "--spec-ngram-map-k4v-size-m"
    assert emitted[("ngram-map-k", "draft_n_max")] == "--spec-ngram-map-k-size-m"
    assert emitted[("ngram-simple", "draft_n_max")] == "--spec-ngram-simple-size-m"
    assert emitted[("ngram-mod", "draft_n_min")] == "--spec-ngram-mod-n-min"


def test_the_builds_spec_knobs_are_parsed_with_their_defaults(help_info: HelpInfo) -> None:
    knobs = spec_knobs(help_info.descriptions)
    ngram = {f for f in knobs if f.startswith("--spec-ngram-")}
    assert ngram == {
        f"--spec-ngram-{t}-{k}"
        for t in ("simple", "map-k", "map-k4v")
        for k in ("size-n", "size-m", "min-hits")
    } | {"--spec-ngram-mod-n-min", "--spec-ngram-mod-n-max", "--spec-ngram-mod-n-match"}
    assert all(knobs[f].default is not None and knobs[f].argument == "N" for f in ngram)
    assert knobs["--spec-draft-p-min"].argument == "P"
    assert float(knobs["--spec-draft-p-min"].default or "nan") >= 0
    assert {"--spec-synth-len", "--spec-synth-rates", "--spec-draft-n-max"} <= set(knobs)
    # The removed spellings are not knobs (--help lists them only to say so).
    assert "--spec-ngram-size-n" not in knobs and "--spec-ngram-size-n" in help_info.removed
    # Every knob the sweep's arms name is one of them.
    assert {f"--{knob}" for _, knob, _, _ in NGRAM_SIZES} <= set(knobs)


def test_ngram_map_k4v_length_goes_to_its_own_flag(help_info: HelpInfo) -> None:
    argv = argv_for(ProfileConfig(model="m", spec_type="ngram-map-k4v", draft_n_max=12), help_info)
    assert argv[argv.index("--spec-ngram-map-k4v-size-m") + 1] == "12"
    assert "--spec-ngram-map-k-size-m" not in argv


def test_the_baseline_pins_no_speculation(help_info: HelpInfo) -> None:
    argv = argv_for(ProfileConfig(model="m"), help_info)
    assert argv[argv.index("--spec-type") + 1] == "none"
    assert argv.count("--spec-type") == 1


def test_a_chain_is_checked_part_by_part_and_its_knobs_go_to_their_parts(
    help_info: HelpInfo,
) -> None:
    chain = ProfileConfig(
        model="m", draft_model="d", spec_type="ngram-mod,draft-simple", draft_n_max=4,
        spec_knobs={"spec-ngram-mod-n-match": 24},
    )  # fmt: skip
    argv = argv_for(chain, help_info, draft=True)
    assert argv[argv.index("--spec-type") + 1] == "ngram-mod,draft-simple"
    assert argv[argv.index("--spec-draft-n-max") + 1] == "4"
    assert argv[argv.index("--spec-ngram-mod-n-match") + 1] == "24"
    with pytest.raises(FlagError, match="spec type 'ngram-fancy' is not supported"):
        argv_for(ProfileConfig(model="m", spec_type="ngram-mod,ngram-fancy"), help_info)
    with pytest.raises(FlagError, match="ambiguous in the chain"):
        argv_for(
            ProfileConfig(model="m", spec_type="ngram-simple,ngram-mod", draft_n_max=8), help_info
        )
    with pytest.raises(FlagError, match="mixes 'none'"):
        argv_for(ProfileConfig(model="m", spec_type="none,ngram-mod"), help_info)
    with pytest.raises(FlagError, match="read by ngram-simple, which the spec type"):
        argv_for(
            ProfileConfig(
                model="m", spec_type="ngram-mod", spec_knobs={"spec-ngram-simple-size-n": 2}
            ),
            help_info,
        )
    with pytest.raises(FlagError, match="not a --spec-\\* knob of this llama-server build"):
        argv_for(
            ProfileConfig(model="m", spec_type="ngram-mod", spec_knobs={"spec-ngram-mod-x": 2}),
            help_info,
        )


def test_draft_mtp_runs_on_the_targets_own_heads_and_trained_drafters_need_theirs(
    help_info: HelpInfo,
) -> None:
    argv = argv_for(ProfileConfig(model="m", spec_type="draft-mtp", draft_n_max=2), help_info)
    assert argv[argv.index("--spec-type") + 1] == "draft-mtp"
    assert argv[argv.index("--spec-draft-n-max") + 1] == "2"
    assert "--spec-draft-model" not in argv
    for spec in ("draft-eagle3", "draft-dflash", "draft-dspark", "draft-simple"):
        with pytest.raises(FlagError, match=f"spec type '{spec}' needs a draft_model"):
            argv_for(ProfileConfig(model="m", spec_type=spec), help_info)
    with pytest.raises(FlagError, match="has 2 model drafters"):
        argv_for(
            ProfileConfig(model="m", draft_model="d", spec_type="draft-simple,draft-eagle3"),
            help_info,
            draft=True,
        )
