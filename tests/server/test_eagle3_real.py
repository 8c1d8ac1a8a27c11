"""`draft-eagle3` on the real llama-server through watchkeeper's own path: SmolLM2-135M with
an EAGLE-3 drafter (`--spec-draft-model`, `--spec-type draft-eagle3`), started by ManagedServer from a
profile, measured by a paired bench that stores every request, its acceptance read per draft
position from /metrics, its outputs judged for identity, its unit rendered.

The drafter is `scripts/tiny_eagle3_gguf.py`'s: architecture eagle3, one decoder block of
width 64 fed the target's hidden states at layers 2, 15 and 27 (its `fc` fuses 3 x 576),
RANDOM weights, SmolLM2's tokenizer. Its speed and acceptance figures mean nothing (random
weights guess next to nothing right); what the test holds is that the build loads the pair
and drafts with it, and that watchkeeper's flags, counters, identity and unit carry it.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.tinymodels import bench_pair, measured_draft_n, rendered_exec_start, write_model

from watchkeeper.analysis.acceptance import result_curves
from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2

BASE, EAGLE = "smol-baseline", "smol-eagle3"
KNOWN_VERDICTS = {"identical", "near_tie", "length_only", "mismatch", "batch_variance"}


@pytest.fixture(scope="module")
def eagle_bench(
    real_server: tuple[ServerBinary, ModelFile], tmp_path_factory: pytest.TempPathFactory
) -> tuple[BenchResult, str, Path]:
    """SmolLM2 alone against SmolLM2 with the tiny EAGLE-3 drafter at n_max 3
    (support/tinymodels.bench_pair: 2 prose tasks of 16 tokens, 2 rounds)."""
    root = tmp_path_factory.mktemp("eagle3")
    drafter = write_model("tiny_eagle3_gguf.py", root / "tiny-eagle3.gguf", *real_server,
                          "--target")  # fmt: skip
    profiles = (
        f'[profiles.{BASE}]\nmodel = "{SMOLLM2}"\nctx_size = 1024\n'
        f'[profiles.{EAGLE}]\nmodel = "{SMOLLM2}"\ndraft_model = "eagle"\nctx_size = 1024\n'
        'spec_type = "draft-eagle3"\ndraft_n_max = 3\n'
    )
    return bench_pair(root, {"eagle": drafter}, profiles, (BASE, EAGLE))


def test_draft_eagle3_starts_with_its_drafter_and_drafts(
    eagle_bench: tuple[BenchResult, str, Path],
) -> None:
    result, url, _ = eagle_bench
    arm = next(a for a in result.arms if a.name == EAGLE)
    argv = " ".join(arm.argv)
    assert "--spec-type draft-eagle3" in argv and "--spec-draft-n-max 3" in argv, argv
    assert arm.argv[arm.argv.index("--spec-draft-model") + 1].endswith("tiny-eagle3.gguf"), argv
    stats = result.stats(EAGLE)
    assert stats is not None and stats.drafted > 0 and stats.errors == 0, stats
    rows = measured_draft_n(url)
    assert [n for a, n in rows if a == EAGLE and n] and len(rows) == 8, rows
    # Started alone, the drafter is no language model: its cost is not measured that way.
    assert "runs only beside its target" in arm.cost_note, arm.cost_note
    print("FIGURES argv", argv, "| drafted per request", [n for a, n in rows if a == EAGLE])


def test_draft_eagle3_acceptance_per_position_and_identity(
    eagle_bench: tuple[BenchResult, str, Path],
) -> None:
    result, _, _ = eagle_bench
    (curve,) = [c for c in result_curves(result) if c.arm == EAGLE]
    assert curve.drafts > 0 and len(curve.rates) == 3 and curve.consistent, curve
    mine = [r for r in result.identity if r.arm == EAGLE]
    assert len(mine) == 2 and {r.verdict for r in mine} <= KNOWN_VERDICTS, mine
    print("FIGURES per position", curve.rates, "drafts", curve.drafts, "drafted", curve.drafted)
    print("FIGURES identity", [(r.task_id, r.verdict) for r in mine])


def test_the_unit_renders_the_eagle3_arm(eagle_bench: tuple[BenchResult, str, Path]) -> None:
    result, _, config = eagle_bench
    start = rendered_exec_start(result, config, EAGLE)
    assert "--spec-type draft-eagle3" in start, start
    assert "--spec-draft-model /srv/models/tiny-eagle3.gguf" in start, start
