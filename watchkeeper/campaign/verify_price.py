"""The verification-pricing pass: the target alone (`--spec-type none`) against the same target
with synthetic acceptance (`--spec-synth-len`) at a few rates and one draft length, paired by
rounds, fitted by `analysis/verify_price.py` into the break-even acceptance, written as
`verify_price.json` for the sweep's report ("What acceptance pays here").

Why synthetic acceptance: what a speculation method must reach on this host depends on what a
speculative step costs here (the target verifying n + 1 tokens) and on nothing about any
drafter. llama.cpp 11434 prices it directly: with `--spec-synth-len L` the server accepts each
drafted token by a coin seeded from the request's `seed` (watchkeeper sends 42), geometric
over positions with a mean accepted length L including the target's token, instead of
comparing it with the target's pick ("benchmarking only": the output is not valid). The flag
needs an initialised speculative context, so a drafter must run: a tiny random-weight LM with
the target's tokenizer (`scripts/tiny_draft_gguf.py`, one block of width 64), at
`--spec-draft-p-min 0` so every step drafts the full n. The counted acceptance (the server's
own `draft_n_accepted / draft_n` per request) is what the fit reads, not the rate asked for:
the build refuses to accept a drafted end-of-generation token, and each request draws its own
coins.

Speed only: no cost calibration, no identity probes (the synthetic arms' output is wrong by
design). The pass is its own bench campaign (`kind` 'verify-price'), its report in `out`.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.verify_price import (
    SYNTH_FLAG,
    VerifyPrice,
    fit,
    round_points,
    synth_length,
)
from watchkeeper.campaign.bench import execute_bench
from watchkeeper.campaign.bench_plan import Progress, plan_bench
from watchkeeper.campaign.bench_report import finish_with_report
from watchkeeper.config import Config, ModelConfig, ProfileConfig
from watchkeeper.errors import BenchError, ConfigError
from watchkeeper.load.records import RequestSample, RunPurpose
from watchkeeper.publish.verify_price_section import VERIFY_PRICE_FILE
from watchkeeper.server.profiles import get_profile
from watchkeeper.store.db import open_database
from watchkeeper.store.repository import Repository
from watchkeeper.store.runs import StoredRun

DRAFTER = "verify-price-drafter"
"""The tiny drafter's [models] name in the pass's config."""


@dataclass(frozen=True, slots=True)
class VerifyPricePlan:
    target: str
    """The profile whose model (and threads, context, GPU layers, ...) is priced; any
    speculation it names is dropped."""
    drafter: Path
    """A tiny random LM sharing the target's tokenizer (scripts/tiny_draft_gguf.py)."""
    draft_n: int = 4
    rates: tuple[float, ...] = (0.25, 0.5, 0.75)
    rounds: int = 3
    per_category: int | None = 1
    max_tokens: int = 64
    taskset: Path | None = None


def arm_names(plan: VerifyPricePlan) -> tuple[str, dict[str, float]]:
    """The baseline's name and each synthetic arm's name with the acceptance it asks for."""
    base = f"{plan.target}-vp-baseline"
    return base, {f"{plan.target}-vp-synth{round(r * 100):02d}": r for r in plan.rates}


def pass_config(config: Config, plan: VerifyPricePlan, out: Path) -> tuple[Config, list[str]]:
    """`config` with the drafter, the baseline and the synthetic arms added, reports in `out`.
    The baseline is the target profile with its speculation removed; each synthetic arm runs
    draft-simple with the drafter at n = `draft_n`, p-min 0 and `--spec-synth-len 1 + n a`."""
    if not plan.rates or any(not 0.0 <= r <= 1.0 for r in plan.rates):
        raise ConfigError(
            f"verify-price rates must lie in [0, 1]: {plan.rates}",
            hint="e.g. 0.25,0.5,0.75: the counted acceptance each synthetic arm asks for",
        )
    if not plan.drafter.is_file():
        raise ConfigError(
            f"verify-price drafter {plan.drafter} is not a file",
            hint="write one with scripts/tiny_draft_gguf.py OUT --tokenizer-from TARGET.gguf",
        )
    target = get_profile(config, plan.target)
    plain = target.model_copy(
        update={
            "spec_type": None, "draft_model": None, "draft_n_max": None, "draft_n_min": None,
            "draft_p_min": None, "spec_knobs": None, "draft_sampling": None,
            "description": f"{plan.target}'s model alone: the verification price's baseline",
        }
    )  # fmt: skip
    base, asked = arm_names(plan)
    profiles: dict[str, ProfileConfig] = {base: plain}
    for name, rate in asked.items():
        profiles[name] = plain.model_copy(
            update={
                "spec_type": "draft-simple", "draft_model": DRAFTER,
                "draft_n_max": plan.draft_n, "draft_p_min": 0.0,
                "spec_knobs": {SYNTH_FLAG: synth_length(plan.draft_n, rate)},
                "description": f"synthetic acceptance {rate:.0%} at n {plan.draft_n}: text invalid",
            }
        )  # fmt: skip
    cfg = config.model_copy(
        update={
            "models": {**config.models, DRAFTER: ModelConfig(path=str(plan.drafter))},
            "profiles": {**config.profiles, **profiles},
            "bench": config.bench.model_copy(update={"reports_dir": str(out)}),
        }
    )
    return cfg, [base, *asked]


def _cells(runs: Sequence[StoredRun]) -> dict[tuple[str, int], dict[str, RequestSample]]:
    """(arm, round) -> task -> request, measured runs only."""
    return {
        (r.arm, r.round): {s.task_id: s for s in r.samples}
        for r in runs
        if r.purpose == RunPurpose.MEASURED
    }


def run_verify_price(
    config: Config, plan: VerifyPricePlan, *, out: Path, progress: Progress
) -> tuple[VerifyPrice, BenchResult]:
    """Measure the pass (one bench campaign, speed only, answers cut at `max_tokens`), fit it,
    write `out/verify_price.json` and the campaign's report under `out`."""
    cfg, names = pass_config(config, plan, out)
    base, asked = arm_names(plan)
    bench = plan_bench(
        cfg, profiles=names, rounds=plan.rounds, taskset=plan.taskset, limit=None,
        per_category=plan.per_category, concurrency=None,
    )  # fmt: skip
    tasks = tuple(replace(t, max_tokens=min(t.max_tokens, plan.max_tokens)) for t in bench.tasks)
    bench = replace(bench, tasks=tasks, speed_only=True, reuse_prompts=True)
    progress(
        f"verify-price: {plan.target} alone and at synthetic acceptance "
        f"{', '.join(f'{r:.0%}' for r in plan.rates)} (n {plan.draft_n}), "
        f"{len(tasks)} tasks x {plan.rounds} rounds"
    )
    with open_database(cfg.database.resolved_url()) as db:
        result = execute_bench(cfg, bench, kind="verify-price", progress=progress, database=db)
        result = finish_with_report(cfg, result, progress=progress, database=db)
        runs = Repository(db).load_runs(result.campaign_id)
    points = round_points(_cells(runs), base, asked)
    if not points:
        raise BenchError(
            "verify-price: no synthetic arm drafted a token in a clean request",
            hint=f"see the campaign's server logs under {out}: the drafter may not have loaded",
        )
    about = {
        "target": plan.target,
        "model": result.baseline.model,
        "build": result.build_version,
        "host": result.host.fingerprint,
        "campaign": str(result.campaign_id),
        "measured_at": result.finished_at.date().isoformat(),
    }
    vp = fit(points, plan.draft_n, about=about)
    out.mkdir(parents=True, exist_ok=True)
    (out / VERIFY_PRICE_FILE).write_text(json.dumps(vp.to_json(), indent=2) + "\n")
    progress(f"verify-price: break-even {vp.break_even.text()}; {out / VERIFY_PRICE_FILE}")
    return vp, result
