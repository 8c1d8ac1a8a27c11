"""Where a sweep's arms come from (--family, --target/--draft, --profile), its --help, and the
sweep's report sections on a synthetic result."""

from __future__ import annotations

import argparse
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest
from support.sweepview import sweep_view as _view

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.racing import start
from watchkeeper.analysis.racing_gates import ceiling_drops
from watchkeeper.analysis.racing_types import (
    CategoryDecision,
    Ceiling,
    Cell,
    Drop,
    RaceArm,
    RaceSettings,
    RaceState,
)
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.campaign.calibration import Calibration, DraftCost, VerifyCost, arm_ceiling
from watchkeeper.campaign.race_runs import cells_of
from watchkeeper.campaign.racer import (
    EXACT_PROBE_SHARE,
    PROBE_SHARE,
    Racer,
    probe_share,
    race_arms,
)
from watchkeeper.campaign.sweep_plan import candidate_profiles, resolve_candidates, sweep_profiles
from watchkeeper.cli.app import build_parser
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.errors import ConfigError
from watchkeeper.load.records import RequestSample, RunResult
from watchkeeper.publish.sweep_report import render_sweep_sections

SPECS = ("none", "draft-simple", "ngram-simple", "ngram-mod")


def test_a_users_own_target_and_draft_paths_make_the_same_candidate_list(tmp_path: Path) -> None:
    target, draft = tmp_path / "Hermes-4-14B.Q4_K_M.gguf", tmp_path / "qwen-0.5b.gguf"
    config, source = resolve_candidates(
        Config(), family=None, target=str(target), draft=str(draft), profile=None
    )
    assert config.models["Hermes-4-14B.Q4_K_M"].path == str(target)
    assert config.models["qwen-0.5b"].path == str(draft)
    names = list(candidate_profiles(source, SPECS))
    assert names == [
        "Hermes-4-14B-baseline",
        "Hermes-4-14B-sweep-draft4",
        "Hermes-4-14B-sweep-draft8",
        "Hermes-4-14B-sweep-draft16",
        "Hermes-4-14B-sweep-ngram-simple",
        "Hermes-4-14B-sweep-ngram-mod",
    ]
    assert [n.replace("Hermes-4-14B", "qwen") for n in names] == list(sweep_profiles("qwen", SPECS))


def test_a_profile_sweep_keeps_the_profiles_other_settings() -> None:
    config = Config(
        profiles={
            "prod": ProfileConfig(
                model="qwen2.5-coder-1.5b-instruct-q4_k_m",
                draft_model="qwen2.5-coder-0.5b-instruct-q4_k_m",
                spec_type="draft-simple",
                draft_n_max=6,
                threads=2,
                ctx_size=8192,
            )
        }
    )
    _, source = resolve_candidates(config, family=None, target=None, draft=None, profile="prod")
    profiles = candidate_profiles(source, SPECS)
    base = profiles["prod-baseline"]
    assert base.draft_model is None and base.spec_type is None and base.threads == 2
    assert profiles["prod-sweep-draft8"].ctx_size == 8192
    assert profiles["prod-sweep-draft8"].draft_model == "qwen2.5-coder-0.5b-instruct-q4_k_m"
    costs = {a.name: a.cost for a in race_arms(profiles)}
    assert costs["prod-baseline"] < costs["prod-sweep-ngram-mod"] < costs["prod-sweep-draft4"]
    assert race_arms(profiles)[0].baseline


def test_a_target_without_draft_sweeps_only_ngram_types() -> None:
    _, source = resolve_candidates(
        Config(),
        family=None,
        target="qwen2.5-coder-1.5b-instruct-q4_k_m",
        draft=None,
        profile=None,
    )
    names = list(candidate_profiles(source, SPECS))
    assert [n for n in names if "draft" in n] == []
    assert names[0] == "qwen2.5-coder-1.5b-instruct-q4_k_m-baseline"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"family": "qwen", "target": "x.gguf"}, "one of --family"),
        ({"draft": "x.gguf"}, "--draft needs --target"),
        ({"target": "no-such-model"}, "unknown model 'no-such-model'"),
    ],
)
def test_contradictory_or_unknown_sources_are_clear_errors(
    kwargs: dict[str, str], message: str
) -> None:
    args = {"family": None, "target": None, "draft": None, "profile": None, **kwargs}
    with pytest.raises(ConfigError, match=message):
        resolve_candidates(Config(), **args)


def _sweep_parser() -> argparse.ArgumentParser:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["sweep"]


def test_every_sweep_option_has_help_text() -> None:
    sweep = _sweep_parser()
    options = [a for a in sweep._actions if a.option_strings and a.dest != "help"]
    assert {"--budget", "--target", "--draft", "--profile", "--no-race"} <= {
        o for a in options for o in a.option_strings
    }
    missing = [a.option_strings for a in options if not a.help]
    assert missing == []
    assert sweep.parse_args([]).budget == 40.0
    assert sweep.parse_args([]).max_tokens == 64


def test_the_sweep_sections_name_drops_winners_criteria_and_the_soak_command(
    result: BenchResult,
) -> None:
    cand = [a.name for a in result.arms if a.role == "candidate"]
    ci = RatioCI(1.2, 1.1, 1.3, 30, 3, 3, verdict="faster")
    race = RaceState(
        3,
        (result.baseline.name, cand[0]),
        (Drop(cand[-1], 1, "early", "slower than the baseline on every task", 1e-6),),
        (
            CategoryDecision(
                "prose",
                "decided",
                result.baseline.name,
                result.baseline.name,
                cand[0],
                ci,
                None,
                "no arm within reach",
            ),
            CategoryDecision(
                "code_edit",
                "unresolved",
                None,
                cand[0],
                result.baseline.name,
                ci,
                ci,
                "not yet shown within 3%",
                7,
                result.baseline.name,
                cand[0],
            ),
        ),
        {a.name: 3 for a in result.arms},
    )
    text = render_sweep_sections(_view(result, race))
    assert "## Racing sweep" in text and "dropped after round 1 (early)" in text
    assert "Bonferroni split of alpha 0.05 over 3 planned look(s)" in text
    assert (
        "Unresolved: code_edit." in text
        and "More rounds would settle code_edit (~7 rounds)" in text
    )
    # Decided: the runner-up against the winner; open: the comparison that blocks, by name.
    assert f"| prose | decided | {result.baseline.name} |" in text
    assert text.count(f"{cand[0]} / {result.baseline.name}") == 2
    assert "## The request's acceptance criteria" in text and "seed" not in text
    assert "Speed-up of 1.5x" in text
    # No soak yet: the exact command that soaks this recommendation at depth 1 and 4.
    assert "watchkeeper soak --recommendation reports/speculative_recommendation.json" in text
    assert "--concurrency 1,4 --duration 5h --block 2m" in text
    assert "<!-- soak:begin -->" in text and "<!-- soak:end -->" in text
    assert "## One setting for the whole workload" in text
    assert "systemd/llama-server-speculative.service" in text


def test_a_speed_up_without_a_ci_is_not_labelled_with_one(result: BenchResult) -> None:
    """Two rounds give no CI: the criterion says so, without a "(95% CI)" it does not have."""
    once = RatioCI(1.07, 1.07, 1.07, 36, 18, 2)
    stats = tuple(replace(s, overall=replace(s.overall, speedup=once)) for s in result.arm_stats)
    text = render_sweep_sections(_view(replace(result, arm_stats=stats), None))
    line = next(x for x in text.splitlines() if "Speed-up of 1.5x" in x)
    assert "not shown (no CI)" in line and "no CI: 2 round(s)" in line, line
    assert "95% CI" not in line, line


def test_the_control_rows_unverified_divergences_are_explained_too(result: BenchResult) -> None:
    """The baseline against its own previous round: 2 of 20 diverged, `unverified` (no
    logprobs on measured requests); the report says what they are, not only mismatches."""
    base = result.control or next(c for c in result.categories if c.arm != "control")
    for verdicts, said in (({"identical": 18, "unverified": 2}, True), ({"identical": 20}, False)):
        control = replace(base, arm="control", verdicts=verdicts)
        text = render_sweep_sections(_view(replace(result, control=control), None))
        assert ("The control row's 2 divergence(s) (unverified 2)" in text) is said
        assert ("not speculation" in text) is said


def test_a_full_sweep_says_it_was_not_raced(result: BenchResult) -> None:
    text = render_sweep_sections(replace(_view(result, None), stop_reason="every arm ran"))
    assert "Not raced: every arm ran every round." in text


def _run(arm: str, rnd: int, tps: float, latency: float = 2.0) -> RunResult:
    """A measured round of `arm`; a speculative arm drafts (else the idle rule drops it)."""
    t0 = datetime(2026, 11, 25, tzinfo=UTC)
    drafted = None if arm == "base" else 4
    samples = tuple(
        RequestSample(
            f"{cat}-{i}",
            cat,
            i,
            t0,
            latency_s=latency,
            decode_tps_server=tps * (1 + i / 50),
            draft_n=drafted,
        )
        for cat in ("prose", "code_edit")
        for i in range(3)
    )
    return RunResult(arm, arm, rnd, False, 1, t0, t0, samples, ())


def test_the_racer_drops_a_slow_arm_and_stops_before_a_round_that_would_not_fit() -> None:
    arms = [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0), RaceArm("draft16", 18.0)]
    clock = iter([0.0, 100.0, 1500.0, 1790.0]).__next__
    seen: list[str] = []
    racer = Racer(arms, RaceSettings(), budget_s=1800.0, clock=clock, progress=seen.append)
    runs = [_run("base", 1, 20.0), _run("ngram", 1, 20.5), _run("draft16", 1, 8.0, 5.0)]
    keep, go = racer(runs)
    assert list(keep) == ["base", "ngram"] and go
    assert any("dropped draft16 after round 1 (early)" in m for m in seen)
    runs += [_run("base", 2, 20.0), _run("ngram", 2, 20.4)]
    keep, go = racer(runs)  # 1500 s spent; a round of 2 arms (12 s) + probes fits 1800 s
    assert go
    runs += [_run("base", 3, 20.0), _run("ngram", 3, 26.0)]
    keep, go = racer(runs)  # 1790 s spent: the next round would pass the budget
    assert not go and racer.stop_reason.startswith("budget")
    assert racer.budget_hint == ""  # three rounds: the CIs exist
    assert list(keep) == ["base", "ngram"]  # every survivor a recommendation could name
    assert cells_of(runs)[0] == Cell("base", "prose-0", "prose", 1, 20.0)


def test_exact_identity_probes_are_priced_at_their_measured_cost_before_another_round() -> None:
    """Round 1 cost two arms 6 x 60 s each (720 s); 5500 s spent of an 8000 s budget (its
    quarter, 2000 s, holds either mode's probes). Batched probes (1.2x round 1, 864 s) leave
    room for a round of 720 s; exact ones (--ubatch-size 1 prefills a token at a time: 2.6x,
    1872 s) do not, and the stop says what they cost."""
    arms = [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0)]
    runs = [_run("base", 1, 20.0, 60.0), _run("ngram", 1, 21.2, 60.0)]
    decisions = {}
    for mode in ("batched", "exact"):
        racer = Racer(
            arms, RaceSettings(), budget_s=8000.0, clock=iter([0.0, 5500.0]).__next__,
            progress=lambda _m: None, probe_share=probe_share(mode),
        )  # fmt: skip
        decisions[mode] = (racer(runs)[1], racer.stop_reason)
    assert decisions["batched"] == (True, "")
    go, why = decisions["exact"]
    assert not go and "the probes (~31.2 min)" in why, why
    # Stopped after round 1 of the 3 a CI needs: 5500 + 2 x 720 + 1872 s = 147 min reaches it.
    assert "2 round(s) short of the 3 a CI needs" in why, why
    assert racer.budget_hint.endswith("`--budget 150` would reach them at this pace")
    assert probe_share("exact") == EXACT_PROBE_SHARE > probe_share("batched") == PROBE_SHARE


def test_probing_a_third_of_the_tasks_reserves_a_third_of_the_probes_cost() -> None:
    """The same round 1 (720 s, 5500 s spent of 8000 s): exact probes on every task (1872 s)
    leave no room for round 2; on one task of three per category (624 s) they do."""
    arms = [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0)]
    runs = [_run("base", 1, 20.0, 60.0), _run("ngram", 1, 21.2, 60.0)]
    go = {}
    for fraction in (1.0, 1 / 3):
        racer = Racer(
            arms, RaceSettings(), budget_s=8000.0, clock=iter([0.0, 5500.0]).__next__,
            progress=lambda _m: None, probe_share=probe_share("exact"), probe_fraction=fraction,
        )  # fmt: skip
        go[fraction] = racer(runs)[1]
    assert go == {1.0: False, 1 / 3: True}


def test_the_probes_cover_the_arms_a_recommendation_could_name_and_the_closest() -> None:
    """Only an arm called faster is ever named, and "faster" needs an estimate beyond
    1 + min_effect (3%): ngram (1.05x) is probed, ngram2 (1.015x) and draft16 (0.6x) are not.
    The closest setting, the best overall estimate, is probed even when nothing reaches the
    band (the report checks the request's criteria on it)."""
    arms = [RaceArm("base", 0.0, True), RaceArm("ngram", 1.0), RaceArm("ngram2", 1.1),
            RaceArm("draft16", 18.0)]  # fmt: skip
    racer = Racer(arms, RaceSettings(), budget_s=1e9, clock=lambda: 0.0, progress=lambda _m: None)
    runs = [
        _run(arm, rnd, tps * (1 + 0.01 * rnd))
        for rnd in (1, 2, 3)
        for arm, tps in (("base", 20.0), ("ngram", 21.0), ("ngram2", 20.3), ("draft16", 12.0))
    ]
    assert racer.probe_arms(runs) == ["base", "ngram"]
    assert "no recommendation can name it" in racer.unprobed["draft16"]
    assert (
        "(best: " in racer.unprobed["ngram2"]
        and "x): no recommendation" in racer.unprobed["ngram2"]
    )
    # Nothing beyond the band: the closest (ngram2 at 1.015x) is still probed.
    rest = [a for a in arms if a.name != "ngram"]
    racer = Racer(rest, RaceSettings(), budget_s=1e9, clock=lambda: 0.0, progress=lambda _m: None)
    assert racer.probe_arms([r for r in runs if r.arm != "ngram"]) == ["base", "ngram2"]


def test_an_arm_faster_in_one_category_only_is_probed() -> None:
    """Per-category picks name arms slower overall: one that doubles code_edit and loses a
    tenth on prose (overall about 1.3x by the geometric mean, but the point is the category)
    is probed, where the old rule (CI slower overall) would have skipped an arm like it."""
    arms = [RaceArm("base", 0.0, True), RaceArm("lookup", 1.0)]
    racer = Racer(arms, RaceSettings(), budget_s=1e9, clock=lambda: 0.0, progress=lambda _m: None)
    runs = []
    for rnd in (1, 2, 3):
        runs.append(_run("base", rnd, 20.0))
        lookup = _run("lookup", rnd, 20.0)
        samples = tuple(
            replace(
                x,
                decode_tps_server=x.decode_tps_server * (1.4 if x.category == "code_edit" else 0.8),
            )
            for x in lookup.samples
        )
        runs.append(replace(lookup, samples=samples))
    assert racer.probe_arms(runs) == ["base", "lookup"]


def test_the_identity_pass_is_held_to_a_quarter_of_the_budget_best_estimates_first() -> None:
    """Round 1 cost each arm 6 x 60 s = 360 s; exact probes on every task cost 2.6 x that
    (936 s) per arm. A budget of 4000 s allows 1000 s of identity: the baseline fits, the
    other arms do not, and the one left out says why. With 8000 s (2000 s) the baseline and
    the best candidate fit, the second is left out."""
    arms = [RaceArm("base", 0.0, True), RaceArm("a", 1.0), RaceArm("b", 1.1)]
    runs = [
        _run(arm, rnd, tps, 60.0)
        for rnd in (1, 2, 3)
        for arm, tps in (("base", 20.0), ("a", 24.0), ("b", 22.0))
    ]
    picked = {}
    for budget in (4000.0, 8000.0):
        racer = Racer(
            arms, RaceSettings(), budget_s=budget, clock=lambda: 0.0, progress=lambda _m: None,
            probe_share=probe_share("exact"),
        )  # fmt: skip
        picked[budget] = (racer.probe_arms(runs), dict(racer.unprobed))
    assert picked[4000.0][0] == ["base"]
    assert "held to 25% of the budget" in picked[4000.0][1]["a"]
    assert picked[8000.0][0] == ["base", "a"]
    assert "held to 25%" in picked[8000.0][1]["b"]


def test_the_race_section_says_answers_were_cut_and_what_that_understates(
    result: BenchResult,
) -> None:
    cut = render_sweep_sections(replace(_view(result, None), max_tokens=64))
    assert "Every answer was cut at 64 tokens" in cut and "understated" in cut
    full = render_sweep_sections(_view(result, None))
    assert "was cut at" not in full


def test_a_draft_setting_that_cannot_tie_even_at_perfect_acceptance_is_never_measured() -> None:
    """The Qwen pair on two cores: the 0.5B draft costs 0.69 of a target step and verifying 5
    tokens 3.53 steps, so n 4 peaks at 5 / (4 x 0.69 + 3.53) = 0.79x; a cheap draft (0.05)
    could still win and is measured; n-gram arms (cost 0) are never priced by the rule."""
    arms = [
        RaceArm("base", 0.0, True),
        RaceArm("ngram", 1.0),
        RaceArm("draft4", 6.0),
        RaceArm("cheap4", 6.5),
    ]
    costs = Calibration(
        draft={
            "ngram": DraftCost(0.0, "n-gram"),
            "draft4": DraftCost(0.69, "measured"),
            "cheap4": DraftCost(0.05, "measured"),
        },
        verify={n: VerifyCost(5, 3.53) for n in ("ngram", "draft4", "cheap4")},
    )
    seen: list[str] = []
    racer = Racer(
        arms,
        RaceSettings(),
        budget_s=1800.0,
        clock=lambda: 0.0,
        progress=seen.append,
        draft_lengths={"draft4": 4, "cheap4": 4},
    )
    assert arm_ceiling("ngram", 4, costs) is None
    ceiling = arm_ceiling("draft4", 4, costs)
    assert ceiling is not None and ceiling.bound == pytest.approx(5 / (4 * 0.69 + 3.53))
    assert list(racer.ceiling(costs)) == ["base", "ngram", "cheap4"]
    (drop,) = racer.state.drops
    assert (drop.arm, drop.round, drop.rule) == ("draft4", 0, "ceiling")
    assert "0.79x" in drop.reason and "draft 0.69" in drop.reason
    assert any("dropped draft4 before round 1 (ceiling)" in m for m in seen)
    # The first round then races only what is left; the dropped arm reads 0 rounds.
    runs = [_run("base", 1, 20.0), _run("ngram", 1, 20.5), _run("cheap4", 1, 24.0)]
    keep, go = racer(runs)
    assert "draft4" not in keep and go and racer.state.rounds_by_arm["draft4"] == 0


def test_the_ceiling_rule_allows_for_the_calibrations_error() -> None:
    """Just under the threshold is not enough: the bound must clear the slack too."""
    s = RaceSettings(min_effect=0.03, ceiling_slack=0.10)
    state = start([RaceArm("base", 0.0, True), RaceArm("a", 6.0), RaceArm("b", 6.0)])
    near = 1 / 1.03 * 0.99  # below the threshold, inside the slack: measured
    far = 1 / 1.03 / 1.10 * 0.99  # below both: dropped
    out = ceiling_drops(state, [Ceiling("a", near, ""), Ceiling("b", far, "")], s)
    assert out.active == ("base", "a") and [d.arm for d in out.drops] == ["b"]
    assert "ceiling rule before round 1" in s.method


def test_a_ceiling_drop_reads_as_unmeasured_in_the_report(result: BenchResult) -> None:
    cand = [a.name for a in result.arms if a.role == "candidate"]
    race = RaceState(
        1,
        (result.baseline.name,),
        (Drop(cand[-1], 0, "ceiling", "speed-up at perfect acceptance 0.79x"),),
        (),
        {result.baseline.name: 1, cand[-1]: 0},
    )
    text = render_sweep_sections(_view(result, race))
    assert "dropped before round 1, unmeasured (ceiling)" in text
