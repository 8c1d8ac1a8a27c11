"""The verification-pricing pass on the real llama-server (campaign/verify_price.py): SmolLM2
alone (`--spec-type none`) against SmolLM2 with synthetic acceptance at 20% and 90%
(`--spec-synth-len` 1.8 and 4.6 at draft length 4), the drafter `scripts/tiny_draft_gguf.py`'s
(one block of width 64, RANDOM weights, SmolLM2's tokenizer). 2 prose tasks of 16 tokens,
2 rounds, SQLite.

What it holds: the synthetic flags reach the argv with the draft length and p-min 0, the build
starts with them (a drafter is loaded, drafts are accepted by the coin, not by the target), and
the counted acceptance (the server's own drafted / accepted per request) moves with the rate
asked; the pass writes `verify_price.json`. Its speed figures, the price c and the break-even
mean nothing: 16-token answers of a 135M model on a shared, loaded host, niced.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from support.tinymodels import write_model, write_prose_tasks

from watchkeeper.analysis.verify_price import VerifyPrice
from watchkeeper.campaign.verify_price import VerifyPricePlan, run_verify_price
from watchkeeper.config import BenchConfig, Config, DatabaseConfig
from watchkeeper.publish.verify_price_section import VERIFY_PRICE_FILE
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.models import ModelFile

RATES = (0.2, 0.9)


@pytest.fixture(scope="module")
def priced(
    real_server: tuple[ServerBinary, ModelFile], tmp_path_factory: pytest.TempPathFactory
) -> tuple[VerifyPrice, dict[str, tuple[str, ...]], Path]:
    root = tmp_path_factory.mktemp("verify-price")
    drafter = write_model(
        "tiny_draft_gguf.py", root / "tiny-draft.gguf", *real_server, "--tokenizer-from"
    )
    tasks = write_prose_tasks(root / "tasks.jsonl")
    config = Config(
        database=DatabaseConfig(url=f"sqlite:///{root / 'wk.db'}"),
        bench=BenchConfig(rounds=2, restart_every=0),
    )
    plan = VerifyPricePlan(
        target="smollm2-baseline", drafter=drafter, draft_n=4, rates=RATES, rounds=2,
        per_category=None, max_tokens=16, taskset=tasks,
    )  # fmt: skip
    out = root / "out"
    vp, result = run_verify_price(config, plan, out=out, progress=lambda _m: None)
    return vp, {a.name: a.argv for a in result.arms}, out


def test_the_synthetic_flags_reach_the_argv(
    priced: tuple[VerifyPrice, dict[str, tuple[str, ...]], Path],
) -> None:
    _, argvs, _ = priced
    base = argvs["smollm2-baseline-vp-baseline"]
    assert base[base.index("--spec-type") + 1] == "none" and "--spec-synth-len" not in base
    for rate, length in zip(RATES, ("1.8", "4.6"), strict=True):
        argv = argvs[f"smollm2-baseline-vp-synth{round(rate * 100):02d}"]
        assert argv[argv.index("--spec-synth-len") + 1] == length, argv
        assert argv[argv.index("--spec-type") + 1] == "draft-simple", argv
        assert argv[argv.index("--spec-draft-n-max") + 1] == "4", argv
        assert float(argv[argv.index("--spec-draft-p-min") + 1]) == 0.0, argv
        assert argv[argv.index("--spec-draft-model") + 1].endswith("tiny-draft.gguf"), argv
    print("FIGURES argv", " ".join(argvs["smollm2-baseline-vp-synth90"]))


def test_the_counted_acceptance_moves_with_the_rate(
    priced: tuple[VerifyPrice, dict[str, tuple[str, ...]], Path],
) -> None:
    """A random drafter accepts next to nothing by itself (test_eagle3_real: 0 of 39): here
    the coin decides, so the counts follow the rate asked for."""
    vp, _, out = priced
    low, high = sorted(vp.arms, key=lambda a: a.asked)
    assert low.drafted > 0 and high.drafted > 0, vp.arms
    assert high.acceptance > low.acceptance + 0.3, vp.arms
    assert high.acceptance > 0.6 and low.acceptance < 0.45, vp.arms
    assert vp.rounds == 2 and {p.round for p in vp.points} == {1, 2}
    written = json.loads((out / VERIFY_PRICE_FILE).read_text())
    assert written["break_even"]["text"] == vp.break_even.text()
    print("FIGURES counted", [(a.asked, a.accepted, a.drafted) for a in vp.arms],
          "c", round(vp.cost, 3), "break-even", vp.break_even.text())  # fmt: skip
