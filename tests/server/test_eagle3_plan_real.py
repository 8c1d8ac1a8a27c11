"""The sweep's plan for SmolLM2-135M with an EAGLE-3 drafter, read from the real build and the
drafter's GGUF (`sweep --dry-run --profile smol`), and two of its planned arms run for real on
watchkeeper's own path: the chain `ngram-mod,draft-eagle3` and `draft-eagle3` at p-min 0.5,
each against the baseline and the plain EAGLE-3 arm (p-min 0) in one paired bench (2 prose
tasks of 16 tokens, 2 rounds: support/tinymodels.bench_pair), its requests stored and its
outputs judged for exact identity.

The drafter is `scripts/tiny_eagle3_gguf.py`'s: RANDOM weights (std 0.02, so its next-token
distribution is near uniform over 49152 tokens). Speed and acceptance figures of such a drafter
mean nothing; what the test holds is that the plan names the chain and the p-min arms, that
their flags reach the server's argv, that drafted tokens are counted, and that identity holds.
It also shows p-min reaching EAGLE-3's drafting loop (common/speculative.cpp, 11434): a drafter
never 50% sure of its first token drafts nothing at p-min 0.5, where at p-min 0 it drafts.

2026-12-07 (146 s, load ~10, `-s` prints the figures): the plan raced 13 of 13 arms, the chain
(tier 2) and eagle3-pmin0.5/0.9 (tier 3) among them; the chain ran as `--spec-draft-model
tiny-eagle3.gguf --spec-type ngram-mod,draft-eagle3`, 39 tokens drafted in each of its 4
measured requests (as the plain EAGLE-3 arm), the p-min arm as `... --spec-type draft-eagle3
--spec-draft-p-min 0.5`, no request drafting; every probe of the three arms `identical`.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tinymodels import bench_pair, measured_draft_n, write_model

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.campaign.sweep_arms import ArmPlan
from watchkeeper.campaign.sweep_plan import sweep_arm_plan
from watchkeeper.config import Config, ModelConfig, ProfileConfig
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2

BASE, EAGLE = "smol-baseline", "smol-sweep-eagle3"
CHAIN, PMIN = "smol-sweep-ngram-mod+eagle3", "smol-sweep-eagle3-pmin0.5"


@pytest.fixture(scope="module")
def eagle_plan(
    real_server: tuple[ServerBinary, ModelFile], tmp_path_factory: pytest.TempPathFactory
) -> tuple[ArmPlan, Path]:
    """The dry run's plan for profile `smol` (SmolLM2 drafting with the tiny EAGLE-3)."""
    root = tmp_path_factory.mktemp("eagle3-plan")
    drafter = write_model("tiny_eagle3_gguf.py", root / "tiny-eagle3.gguf", *real_server,
                          "--target")  # fmt: skip
    config = Config(
        models={"eagle": ModelConfig(path=str(drafter))},
        profiles={"smol": ProfileConfig(model=SMOLLM2, draft_model="eagle", ctx_size=1024)},
    )
    _, plan = sweep_arm_plan(
        config,
        family=None,
        target=None,
        draft=None,
        profile="smol",
        progress=lambda _m: None,
        fetch=False,
    )
    return plan, drafter


@pytest.fixture(scope="module")
def eagle_runs(
    eagle_plan: tuple[ArmPlan, Path], tmp_path_factory: pytest.TempPathFactory
) -> tuple[BenchResult, str]:
    plan, drafter = eagle_plan
    arms = (BASE, EAGLE, CHAIN, PMIN)
    root = tmp_path_factory.mktemp("eagle3-arms")
    planned = {n: p for n, p in plan.profiles.items() if n in arms}
    result, url, _ = bench_pair(root, {"eagle": drafter}, "", arms, generated=planned)
    return result, url


def test_the_plan_names_the_eagle3_chain_and_p_min_arms_with_reasons(
    eagle_plan: tuple[ArmPlan, Path],
) -> None:
    plan, _ = eagle_plan
    lines = plan.lines()
    text = "\n".join(lines)
    assert "  in  draft-eagle3: eagle is an eagle3 drafter" in text, text
    assert "  out draft-simple: eagle is an eagle3 drafter, not a language model" in text, text
    for name in (EAGLE, CHAIN, PMIN, "smol-sweep-eagle3-pmin0.9"):
        (line,) = [x for x in lines if f" {name} (tier" in x]
        assert line.startswith("  race ") and "): " in line, line
    assert plan.profiles[CHAIN].spec_type == "ngram-mod,draft-eagle3"
    assert plan.profiles[PMIN].draft_p_min == 0.5
    print("FIGURES plan", *lines, sep="\n")


def test_the_chain_and_a_p_min_arm_run_with_their_flags_counted_and_identical(
    eagle_runs: tuple[BenchResult, str],
) -> None:
    result, url = eagle_runs
    argv = {a.name: " ".join(a.argv) for a in result.arms}
    assert "--spec-type none" in argv[BASE], argv[BASE]
    assert "--spec-type ngram-mod,draft-eagle3" in argv[CHAIN], argv[CHAIN]
    assert "--spec-draft-model" in argv[CHAIN] and "tiny-eagle3.gguf" in argv[CHAIN]
    assert "--spec-type draft-eagle3" in argv[PMIN], argv[PMIN]
    assert "--spec-draft-p-min 0.5" in argv[PMIN], argv[PMIN]
    stats = {n: result.stats(n) for n in (EAGLE, CHAIN, PMIN)}
    assert all(s is not None and s.errors == 0 for s in stats.values()), stats
    drafted = {n: s.drafted for n, s in stats.items() if s is not None}
    assert drafted[EAGLE] > 0 and drafted[CHAIN] > 0, drafted
    # p-min 0.5 cuts every draft of a drafter that is never 50% sure: the knob reached it.
    assert drafted[PMIN] < drafted[EAGLE], drafted
    rows = measured_draft_n(url)
    assert len(rows) == 4 * 4, rows  # 4 arms x 2 tasks x 2 rounds, every request stored
    verdicts = {(r.arm, r.task_id): r.verdict for r in result.identity}
    for arm in (CHAIN, PMIN):
        mine = [v for (a, _), v in verdicts.items() if a == arm]
        assert mine == ["identical", "identical"], verdicts
    print("FIGURES argv", {n: argv[n] for n in (CHAIN, PMIN)})
    print("FIGURES drafted", drafted, "per request", rows)
    print("FIGURES identity", sorted(verdicts.items()))
