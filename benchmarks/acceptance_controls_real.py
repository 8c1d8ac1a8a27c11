"""The acceptance alarms' real controls, counted over runs (issue 70): SmolLM2-135M on the real
llama-server, drafting with a draft model at n_max 4, soaked (`commands/soak.py`, temperature
0, each soak its own seed) in one SQLite database:

- `--fit` soaks with the drafter that fits (SmolLM2 itself) on four prose prompts;
- `--misfit` soaks with the drafter swapped for `scripts/misfit_drafter_gguf.py`'s (SmolLM2's
  vocabulary, its blocks reversed: it no longer fits), same prompts;
- `--loop` soaks of SmolLM2 drafting for itself on the loop prompts (tests/support/taskfiles.py
  LOOP_PROMPTS: three of six answers repeat a phrase).

Then the alarms (checks/acceptance_alarm.py) on each soak's stored requests: collapse A/A is
each fitting soak judged against the other fitting soaks (leave one out: the order of a history
does not enter the test), the collapse control is each misfit soak judged against every fitting
soak; the loop control is each loop soak, the loop A/A every prose soak (fitting and misfit).
Prints one line per soak and the counts. Acceptance, not speed: no timing is quoted.

2026-12-07 (`--fit 5 --misfit 3 --loop 2 --soak 75s --loop-soak 75s`, 22 min at load 5-9; at
20-45 s most soaks drafted under the 64 tokens a run needs): fitting soaks 94.8-100%, collapse
A/A 0 of 5 fired (p 0.45-0.99); misfit soaks 1 of 174-238 accepted (0.4-0.6%), 3 of 3 caught
(p 7.5e-08); loop A/A 0 of 8 prose soaks; loop control 1 of 2: the second soak served 5 of the
6 prompts before its end, 2 looped, under the alarm's 3-request floor.

    .venv/bin/python benchmarks/acceptance_controls_real.py [--fit 6] [--misfit 4] [--loop 4] \
        [--soak 20s] [--loop-soak 40s]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

from watchkeeper.checks.acceptance_alarm import (
    RunAcceptance,
    judge_collapse,
    judge_loop,
    run_acceptance,
)
from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.commands.soak import soak_command
from watchkeeper.config import Config, ServerConfig, SoakConfig
from watchkeeper.config.requests import SoakRequest
from watchkeeper.server.install import ensure_binary
from watchkeeper.server.models import ModelStore
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.store.acceptance_store import AcceptanceStore
from watchkeeper.store.db import Database

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))
from support.taskfiles import LOOP_PROMPTS, write_taskset  # noqa: E402
from support.tinymodels import DRAFTING, drafting_config, write_model  # noqa: E402

PROSE = (
    "Tell me about the sea in two sentences.",
    "Explain what a compiler does.",
    "Write a short poem about bread.",
    "Why is the sky blue?",
)


SOAK = SoakConfig.model_validate({
    "slice": "5s", "sample_interval_s": 1.0, "probe_interval_s": 600.0,
    "flush_interval_s": 1.0, "ramp_s": 0.5, "request_timeout_s": 120.0,
    "rss_warmup_s": 0.0, "leak_min_span_s": 3600.0, "temperature": 0.0,
})  # fmt: skip


def _run(db: Database, campaign: int) -> RunAcceptance:
    requests = AcceptanceStore(db).campaign_requests(campaign).get(DRAFTING, [])
    return run_acceptance(f"campaign {campaign}", requests)


def _line(kind: str, r: RunAcceptance) -> str:
    return (
        f"{kind:7} {r.label:12} {r.accepted:5}/{r.drafted:<5} {r.rate:6.1%} "
        f"requests {r.requests:3} looped {r.looped}"
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--fit", type=int, default=6)
    ap.add_argument("--misfit", type=int, default=4)
    ap.add_argument("--loop", type=int, default=4)
    ap.add_argument("--soak", default="20s")
    ap.add_argument("--loop-soak", default="40s")
    args = ap.parse_args()
    unwind_on_sigterm()
    binary = ensure_binary(ServerConfig())
    smollm2 = ModelStore(Config()).ensure(SMOLLM2)
    with tempfile.TemporaryDirectory() as tmp_dir:
        tmp = Path(tmp_dir)
        misfit = write_model("misfit_drafter_gguf.py", tmp / "misfit.gguf", binary, smollm2,
                             "--source")  # fmt: skip
        url = f"sqlite:///{tmp / 'wk.db'}"
        (tmp / "prose").mkdir()
        (tmp / "loop").mkdir()
        prose = write_taskset(tmp / "prose", [(f"p{i}", p) for i, p in enumerate(PROSE)], 64)
        loops = write_taskset(tmp / "loop", [(f"l{i}", p) for i, p in enumerate(LOOP_PROMPTS)], 64)
        plan = (
            [("fit", smollm2.path, prose, args.soak)] * args.fit
            + [("misfit", misfit, prose, args.soak)] * args.misfit
            + [("loop", smollm2.path, loops, args.loop_soak)] * args.loop
        )
        done: list[tuple[str, int]] = []
        for seed, (kind, drafter, tasks, length) in enumerate(plan):
            request = SoakRequest(
                duration=length, block=length, profiles=[DRAFTING], taskset=tasks, seed=seed
            )
            result = soak_command(drafting_config(url, drafter, SOAK), request)
            done.append((kind, result.campaign_id))
            db = Database(url)
            print(_line(kind, _run(db, result.campaign_id)), result.status, flush=True)
            db.close()
        db = Database(url)
        runs = [(kind, _run(db, cid)) for kind, cid in done]
        db.close()
    fits = [r for k, r in runs if k == "fit"]
    aa = [judge_collapse([h for h in fits if h is not r], r) for r in fits]
    caught = [judge_collapse(fits, r) for k, r in runs if k == "misfit"]
    loop_pos = [judge_loop(r) for k, r in runs if k == "loop"]
    loop_aa = [judge_loop(r) for k, r in runs if k != "loop"]
    for label, verdicts in (("collapse A/A", aa), ("collapse control", caught)):
        words = ", ".join(f"{v.verdict} ({v.current:.1%} vs {v.history_median or 0:.1%}, p {v.p_value})"
                          for v in verdicts)  # fmt: skip
        print(f"{label}: {sum(v.fired for v in verdicts)} of {len(verdicts)} fired: {words}")
    print(f"loop A/A: {sum(v.fired for v in loop_aa)} of {len(loop_aa)} fired")
    print(f"loop control: {sum(v.fired for v in loop_pos)} of {len(loop_pos)} fired "
          f"(looped requests: {[v.looped for v in loop_pos]})")  # fmt: skip


if __name__ == "__main__":
    main()
