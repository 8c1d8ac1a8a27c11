"""`draft-mtp` on the real llama-server through watchkeeper's own path: a profile naming a
model with NextN/MTP heads and `spec_type = "draft-mtp"` becomes an argv without `-md`
(server/flags.py), a ManagedServer starts it, a paired bench sends its requests and stores
them, the /metrics counters give acceptance per draft position, the identity pass judges its
outputs against the baseline's, and the recommendation's unit renders for the arm.

The model is `scripts/tiny_mtp_gguf.py`'s (architecture mimo2, 2 blocks + 1 NextN block,
RANDOM weights, SmolLM2's tokenizer), so its speed and acceptance figures mean nothing: random
heads accept next to nothing and the tiny model decodes faster than any real one. What the
test holds is the plumbing: flags, drafting, counters, identity, the unit.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import select
from support.tinymodels import bench_pair, measured_draft_n, rendered_exec_start, write_model

from watchkeeper.analysis.acceptance import result_curves
from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile
from watchkeeper.store.db import Database
from watchkeeper.store.schema import OutputCheck

BASE, MTP = "tiny-baseline", "tiny-mtp2"
KNOWN_VERDICTS = {"identical", "near_tie", "length_only", "mismatch", "batch_variance"}


@pytest.fixture(scope="module")
def mtp_bench(
    real_server: tuple[ServerBinary, ModelFile], tmp_path_factory: pytest.TempPathFactory
) -> tuple[BenchResult, str, Path]:
    """Baseline against draft-mtp at n_max 2 on the tiny model (support/tinymodels.bench_pair:
    2 prose tasks of 16 tokens, 2 rounds)."""
    root = tmp_path_factory.mktemp("mtp")
    model = write_model("tiny_mtp_gguf.py", root / "tiny-mimo2.gguf", *real_server,
                        "--tokenizer-from")  # fmt: skip
    profiles = (
        f'[profiles.{BASE}]\nmodel = "tiny"\nctx_size = 1024\n'
        f'[profiles.{MTP}]\nmodel = "tiny"\nctx_size = 1024\n'
        'spec_type = "draft-mtp"\ndraft_n_max = 2\n'
    )
    return bench_pair(root, {"tiny": model}, profiles, (BASE, MTP))


def test_draft_mtp_runs_without_a_draft_model_and_drafts(
    mtp_bench: tuple[BenchResult, str, Path],
) -> None:
    result, url, _ = mtp_bench
    arms = {a.name: a for a in result.arms}
    mtp, base = arms[MTP], arms[BASE]
    argv = " ".join(mtp.argv)
    assert "--spec-type draft-mtp" in argv and "--spec-draft-n-max 2" in argv, argv
    assert not {"-md", "--model-draft", "--spec-draft-model"} & set(mtp.argv), argv
    assert mtp.draft_model is None and mtp.speculative
    assert base.argv[base.argv.index("--spec-type") + 1] == "none"
    stats = result.stats(MTP)
    assert stats is not None and stats.drafted > 0, stats
    rows = measured_draft_n(url)
    drafted = [n for arm, n in rows if arm == MTP]
    assert len(drafted) == 4 and all(n and n > 0 for n in drafted), rows
    assert all(not n for arm, n in rows if arm == BASE), rows
    print("FIGURES argv", argv, "| drafted per request", drafted)


def test_draft_mtp_acceptance_is_read_per_position_from_metrics(
    mtp_bench: tuple[BenchResult, str, Path],
) -> None:
    result, _, _ = mtp_bench
    (curve,) = [c for c in result_curves(result) if c.arm == MTP]
    assert curve.drafts > 0 and curve.drafted >= curve.drafts
    # 11434 keeps a counter for each draft position up to n_max: 2 here.
    assert len(curve.per_position) == 2 and len(curve.rates) == 2, curve
    assert curve.consistent, curve
    assert all(0.0 <= r <= 1.0 for r in curve.rates)
    print("FIGURES per position", curve.rates, "drafts", curve.drafts, "drafted", curve.drafted)


def test_draft_mtp_outputs_are_judged_for_identity(
    mtp_bench: tuple[BenchResult, str, Path],
) -> None:
    result, url, _ = mtp_bench
    mine = [r for r in result.identity if r.arm == MTP]
    assert len(mine) == 2 and {r.verdict for r in mine} <= KNOWN_VERDICTS, mine
    db = Database(url)
    with db.session() as s:
        stored = s.scalars(select(OutputCheck).filter_by(arm=MTP)).all()
    db.close()
    assert len(stored) == len(mine)
    print("FIGURES identity", [(r.task_id, r.verdict) for r in mine])


def test_the_unit_renders_the_mtp_arm(mtp_bench: tuple[BenchResult, str, Path]) -> None:
    result, _, config = mtp_bench
    start = rendered_exec_start(result, config, MTP)
    assert "--spec-type draft-mtp" in start and "--spec-draft-n-max 2" in start, start
    assert "--spec-draft-model" not in start and "/srv/models/tiny-mimo2.gguf" in start, start
