"""What a pair can run, discovered from GGUF metadata, and the arm list the sweep races: every
method in or out with its reason, each arm with why it is there, the cap applied by tier."""

from __future__ import annotations

from pathlib import Path

from support.ggufkit import write_gguf

from watchkeeper.campaign.sweep_arms import TRIM_TIER, plan_arms
from watchkeeper.config import ProfileConfig
from watchkeeper.server.gguf import read_metadata
from watchkeeper.server.spec_discovery import discover, model_facts
from watchkeeper.server.spec_knobs import SpecKnob

BUILD = (
    "none", "draft-simple", "draft-eagle3", "draft-mtp", "draft-dflash", "draft-dspark",
    "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache",
)  # fmt: skip
KNOBS = {
    f: SpecKnob(f, "N", d)
    for f, d in (
        ("--spec-draft-n-max", "3"),
        ("--spec-draft-p-min", "0.00"),
        ("--spec-ngram-mod-n-match", "24"),
        ("--spec-ngram-map-k-size-n", "12"),
        ("--spec-ngram-map-k4v-size-n", "4"),  # already 4: no arm for it
    )
}


def _model(tmp_path: Path, name: str, tensors: tuple[str, ...] = (), **meta: object) -> Path:
    return write_gguf(tmp_path / f"{name}.gguf", {"general.name": name, **meta}, tensors)


def test_metadata_is_read_from_the_header(tmp_path: Path) -> None:
    path = _model(
        tmp_path, "q", **{"general.architecture": "qwen35", "qwen35.nextn_predict_layers": 1,
                          "tokenizer.ggml.tokens": ["a", "b"], "x.flag": True, "x.f": 0.5}
    )  # fmt: skip
    meta = read_metadata(path)
    assert meta["general.architecture"] == "qwen35"
    assert meta["qwen35.nextn_predict_layers"] == 1
    assert meta["x.flag"] is True and meta["x.f"] == 0.5
    assert "tokenizer.ggml.tokens" not in meta  # arrays are skipped


def test_the_qwen_pair_runs_draft_simple_and_ngram_but_not_mtp_or_trained_drafters(
    tmp_path: Path,
) -> None:
    target = model_facts(_model(tmp_path, "t", **{"general.architecture": "qwen2"}), "qwen-1.5b")
    draft = model_facts(_model(tmp_path, "d", **{"general.architecture": "qwen2"}), "qwen-0.5b")
    methods = {m.spec_type: m for m in discover(BUILD, target, draft)}
    assert [s for s, m in methods.items() if m.runs] == [
        "none", "draft-simple", "ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod",
        "ngram-cache",
    ]  # fmt: skip
    assert "qwen2.nextn_predict_layers" in methods["draft-mtp"].why
    assert (
        "needs an eagle3 drafter; qwen-0.5b is a plain qwen2 model" in methods["draft-eagle3"].why
    )


def test_mtp_heads_run_draft_mtp_without_a_draft_model(tmp_path: Path) -> None:
    path = _model(
        tmp_path, "m", **{"general.architecture": "qwen35", "qwen35.nextn_predict_layers": 1}
    )
    methods = {m.spec_type: m for m in discover(BUILD, model_facts(path, "mtp-model"), None)}
    assert methods["draft-mtp"].runs and not methods["draft-mtp"].sidecar
    assert "1 NextN/MTP layer(s)" in methods["draft-mtp"].why
    assert not methods["draft-simple"].runs
    plan = plan_arms("m", ProfileConfig(model="mtp-model"), None, list(methods.values()), KNOBS)
    profiles = plan.profiles
    assert [profiles[f"m-sweep-mtp{n}"].draft_n_max for n in (1, 2, 3)] == [1, 2, 3]
    assert all(p.draft_model is None for p in profiles.values())
    assert profiles["m-sweep-ngram-mod+mtp1"].spec_type == "ngram-mod,draft-mtp"
    lines = "\n".join(plan.lines())
    assert "in  draft-mtp: mtp-model (qwen35) carries 1 NextN/MTP layer(s)" in lines
    assert "out draft-simple: no draft model given" in lines


def test_trained_drafters_are_told_apart_by_architecture(tmp_path: Path) -> None:
    target = model_facts(_model(tmp_path, "t", **{"general.architecture": "llama"}), "t")
    eagle = model_facts(_model(tmp_path, "e", **{"general.architecture": "eagle3"}), "e3")
    spark = model_facts(
        _model(tmp_path, "s", **{"general.architecture": "dflash",
                                 "dflash.sample_from_anchor": True}), "ds"
    )  # fmt: skip
    runs = lambda d: {m.spec_type for m in discover(BUILD, target, d) if m.runs}  # noqa: E731
    assert runs(eagle) - runs(None) == {"draft-eagle3"}
    assert runs(spark) - runs(None) == {"draft-dspark"}
    # A drafter trained on another target (its encoder reads another hidden size) is out.
    small = model_facts(
        _model(tmp_path, "t2", **{"general.architecture": "llama", "llama.embedding_length": 576}),
        "smol",
    )
    other = model_facts(
        _model(
            tmp_path, "e2", **{"general.architecture": "eagle3", "eagle3.target_hidden_size": 4096}
        ),
        "e3-8b",
    )
    fits = model_facts(
        _model(
            tmp_path, "e3", **{"general.architecture": "eagle3", "eagle3.target_hidden_size": 576}
        ),
        "e3-smol",
    )
    why = {m.spec_type: m for m in discover(BUILD, small, other)}
    assert not why["draft-eagle3"].runs
    assert why["draft-eagle3"].why == (
        "e3-8b was trained on a target of hidden size 4096; smol has 576"
    )
    assert {m.spec_type for m in discover(BUILD, small, fits) if m.runs} >= {"draft-eagle3"}
    missing = model_facts(tmp_path / "absent.gguf", "absent")
    why = {m.spec_type: m.why for m in discover(BUILD, target, missing)}
    assert why["draft-eagle3"] == "absent: file not available to read its metadata"


def test_the_qwen_plan_names_every_arm_and_why_and_caps_by_tier(tmp_path: Path) -> None:
    target = model_facts(_model(tmp_path, "t", **{"general.architecture": "qwen2"}), "t")
    draft = model_facts(_model(tmp_path, "d", **{"general.architecture": "qwen2"}), "d")
    methods = discover(BUILD, target, draft)
    full = plan_arms("qwen", ProfileConfig(model="t"), "d", methods, KNOBS, max_arms=100)
    names = [a.name.removeprefix("qwen-") for a in full.arms]
    assert names == [
        "baseline", "sweep-draft4", "sweep-draft8", "sweep-draft16", "sweep-ngram-simple",
        "sweep-ngram-map-k", "sweep-ngram-map-k4v", "sweep-ngram-mod", "sweep-ngram-cache",
        "sweep-ngram-mod+draft4", "sweep-draft8-pmin0.5", "sweep-draft8-pmin0.9",
        "sweep-ngram-map-k-n4", "sweep-ngram-mod-match12",
    ]  # fmt: skip
    profiles = full.profiles
    chain = profiles["qwen-sweep-ngram-mod+draft4"]
    assert (chain.spec_type, chain.draft_model, chain.draft_n_max) == (
        "ngram-mod,draft-simple",
        "d",
        4,
    )
    assert profiles["qwen-sweep-ngram-mod"].draft_model is None
    assert profiles["qwen-sweep-ngram-mod-match12"].spec_knobs == {"spec-ngram-mod-n-match": 12}
    assert "(build default 24)" in next(a.why for a in full.arms if "match12" in a.name)
    assert "build default 0.00" in next(a.why for a in full.arms if "pmin0.9" in a.name)
    capped = plan_arms("qwen", ProfileConfig(model="t"), "d", methods, KNOBS, max_arms=11)
    kept = [a.name for a in capped.arms if a.included]
    assert len(kept) == 11 and "qwen-sweep-ngram-mod+draft4" in kept
    out = [a for a in capped.arms if not a.included]
    assert {a.tier for a in out} == {3} and all("--max-arms 11" in a.left_out for a in out)
    assert "arms: 11 raced of 14 planned" in capped.lines()


def test_the_clis_arm_cap_default_is_the_engines() -> None:
    """The parser carries the default as a literal (building it imports no stage)."""
    from watchkeeper.campaign.sweep_arms import DEFAULT_MAX_ARMS
    from watchkeeper.cli.common import SWEEP_MAX_ARMS
    from watchkeeper.config.requests import SweepRequest

    assert SWEEP_MAX_ARMS == DEFAULT_MAX_ARMS == SweepRequest().max_arms


def test_a_chain_is_priced_and_plotted_by_its_model_drafter_wherever_it_stands() -> None:
    """A reviewer's case: `ngram-mod,draft-simple` was taken for free n-gram lookup (its cost,
    its acceptance curve, whether it rejection-samples) because of its first part."""
    from watchkeeper.analysis.racing_types import arm_cost
    from watchkeeper.checks.distribution import is_sample_and_match
    from watchkeeper.server.spec_knobs import has_lookup, lookup_only, model_drafter

    for chain in ("ngram-mod,draft-simple", "draft-simple,ngram-mod"):
        assert model_drafter(chain) == "draft-simple"
        assert has_lookup(chain) and not lookup_only(chain)
        assert arm_cost(chain, 4, True) == arm_cost("draft-simple", 4, True)
        assert not is_sample_and_match(chain, "probabilistic")
        assert is_sample_and_match(chain, None)
    assert lookup_only("ngram-mod") and model_drafter("ngram-mod") is None
    assert arm_cost("ngram-mod", None, True) == 1.0
    assert not lookup_only(None) and model_drafter(None) is None


def _trained_plan(tmp_path: Path, drafter: Path, name: str) -> tuple[dict[str, object], list[str]]:
    """The full plan of SmolLM2-shaped llama target with this drafter: {arm: the arm}, lines."""
    target = model_facts(
        _model(tmp_path, "t", **{"general.architecture": "llama", "llama.embedding_length": 576}),
        "smol",
    )
    methods = discover(BUILD, target, model_facts(drafter, name))
    plan = plan_arms("smol", ProfileConfig(model="smol"), name, methods, KNOBS, max_arms=100)
    return {a.name.removeprefix("smol-sweep-"): a for a in plan.arms}, plan.lines()


def test_a_trained_drafter_gets_its_chain_and_p_min_arms(tmp_path: Path) -> None:
    """EAGLE-3 (like draft-simple, -mtp, -dflash) stops a draft where its top probability falls
    below p-min (common/speculative.cpp, 11434): both p-min arms race, at the build's default
    length like its tier-1 arm, and the chain puts ngram-mod in front of it."""
    eagle = _model(
        tmp_path, "e", **{"general.architecture": "eagle3", "eagle3.target_hidden_size": 576}
    )
    arms, lines = _trained_plan(tmp_path, eagle, "e3")
    assert [n for n in arms if "eagle3" in n] == [
        "eagle3", "ngram-mod+eagle3", "eagle3-pmin0.5", "eagle3-pmin0.9"
    ]  # fmt: skip
    chain, pmin = arms["ngram-mod+eagle3"], arms["eagle3-pmin0.9"]
    assert (chain.profile.spec_type, chain.profile.draft_model, chain.profile.draft_n_max) == (
        "ngram-mod,draft-eagle3", "e3", None
    )  # fmt: skip
    assert chain.tier == 2 and "the build's default n_max (3)" in chain.why
    assert (pmin.profile.spec_type, pmin.profile.draft_p_min, pmin.included) == (
        "draft-eagle3", 0.9, True
    )  # fmt: skip
    assert "race smol-sweep-eagle3-pmin0.5 (tier 3): draft-eagle3 at the build's default " \
        "n_max (3), p-min 0.5 (build default 0.00)" in "\n".join(lines)  # fmt: skip


def test_dspark_p_min_arms_are_out_where_the_build_ignores_or_refuses_the_knob(
    tmp_path: Path,
) -> None:
    """DSpark reads p-min through its confidence head only (`conf_proj.weight`); without one
    the build ignores it, and it refuses to start where the metadata says there is none."""
    dflash = {"general.architecture": "dflash", "dflash.block_size": 16}
    head = _model(tmp_path, "s1", tensors=("markov_w1.weight", "conf_proj.weight"), **dflash)
    bare = _model(tmp_path, "s2", tensors=("markov_w1.weight",), **dflash)
    said = _model(tmp_path, "s3", **{**dflash, "dflash.has_confidence_head": False})
    plain = _model(tmp_path, "f", tensors=("fc.weight",), **dflash)
    arms, _ = _trained_plan(tmp_path, head, "ds")
    assert arms["ngram-mod+dspark"].profile.spec_type == "ngram-mod,draft-dspark"
    assert arms["dspark-pmin0.5"].included and "confidence head" in arms["dspark-pmin0.5"].why
    arms, lines = _trained_plan(tmp_path, bare, "ds")
    assert not arms["dspark-pmin0.9"].included and arms["ngram-mod+dspark"].included
    assert arms["dspark-pmin0.9"].left_out == (
        "ds has no confidence head (no conf_proj.weight): 11434 cuts a DSpark draft on that "
        "head only, never on the top probability, so the build ignores p-min"
    )
    assert "arms: 10 raced of 12 planned" in lines
    arms, _ = _trained_plan(tmp_path, said, "ds")
    assert "refuses to start" in arms["dspark-pmin0.5"].left_out
    arms, _ = _trained_plan(tmp_path, plain, "df")
    assert [n for n in arms if "dflash" in n] == [
        "dflash", "ngram-mod+dflash", "dflash-pmin0.5", "dflash-pmin0.9"
    ]  # fmt: skip
    assert all(a.included for a in arms.values())


def test_p_min_arms_are_out_on_a_build_without_the_knob_and_take_no_cap_place(
    tmp_path: Path,
) -> None:
    target = model_facts(_model(tmp_path, "t", **{"general.architecture": "qwen2"}), "t")
    draft = model_facts(_model(tmp_path, "d", **{"general.architecture": "qwen2"}), "d")
    knobs = {f: k for f, k in KNOBS.items() if f != "--spec-draft-p-min"}
    plan = plan_arms(
        "q", ProfileConfig(model="t"), "d", discover(BUILD, target, draft), knobs, max_arms=11
    )
    out = {a.name: a.left_out for a in plan.arms if not a.included}
    assert out["q-sweep-draft8-pmin0.5"] == "this build's --help lists no --spec-draft-p-min"
    # The cap counts raceable arms only: 11 race, the rest (size arms) over the cap.
    assert sum(a.included for a in plan.arms) == 11
    assert "over --max-arms 11" in out["q-sweep-ngram-mod-match12"]


def test_the_budgets_trim_order_is_the_knob_settings_last_planned_first(tmp_path: Path) -> None:
    """What the racer may drop before round 1 to fit its budget (campaign/budget_trim.py):
    the tier-3 knob settings only, never the baseline, the A/A control, the request's draft
    lengths, a method at its default or the chain."""
    target = model_facts(_model(tmp_path, "t", **{"general.architecture": "qwen2"}), "qwen-1.5b")
    draft = model_facts(_model(tmp_path, "d", **{"general.architecture": "qwen2"}), "qwen-0.5b")
    methods = list(discover(BUILD, target, draft))
    plan = plan_arms("q", ProfileConfig(model="t"), "d", methods, KNOBS, control=True)
    tiers = {a.name: a.tier for a in plan.arms if a.included}
    trim = plan.trim_order
    assert set(trim) == {a for a, t in tiers.items() if t >= TRIM_TIER} != set()
    assert list(trim) == [a.name for a in reversed(plan.arms) if a.name in trim]
    assert not {"q-baseline", "q-aa-control", "q-sweep-draft4", "q-sweep-ngram-mod"} & set(trim)
