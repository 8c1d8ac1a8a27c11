"""Costs the speed-up bound needs, measured on the bench's own servers before the rounds.

Two numbers per candidate: what one draft step costs in target steps (`DraftCost`, the draft
model run alone against the baseline) and what verifying a draft costs in target decode steps
(`VerifyCost`, one batch on the baseline server). Both are measured, never assumed, because a
bound priced with a guessed cost can sit below the measurement it is meant to bound. They live
apart from the bench's orchestration so the bench reads as steps and `Calibration` is one
value it passes on. `arm_ceiling` reads the two as a draft setting's bound at perfect
acceptance (the sweep's ceiling rule before round 1, campaign/racer.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from watchkeeper.analysis import aa_control
from watchkeeper.analysis.bench_bound import perfect_acceptance_bound
from watchkeeper.analysis.benchmark import ArmSpec
from watchkeeper.analysis.racing_types import Ceiling
from watchkeeper.analysis.stats import median
from watchkeeper.campaign.campaigns import measure_run
from watchkeeper.config import Config, ProfileConfig
from watchkeeper.load.records import Task
from watchkeeper.load.runner import LoadSettings
from watchkeeper.server.endpoints import TransportError, complete, make_http_client, tokenize
from watchkeeper.server.launch import PreparedProfile, RunningServer, serve
from watchkeeper.server.spec_knobs import lookup_only, model_drafter

Progress = Callable[[str], None]
CALIBRATION_TASKS = 3
TRAINED_DRAFTERS = ("draft-eagle3", "draft-dflash", "draft-dspark")
VERIFY_REPEATS = 3
"""Verification-cost calibration: median of this many batches and of this many decodes."""
VERIFY_DEFAULT_N = 48
"""Draft length measured where a profile sets no n_max (ngram-simple drafts up to 48 tokens)."""
VERIFY_MAX_N = 64
VERIFY_PREFIX_TOKENS = 48
VERIFY_DECODE_TOKENS = 16
VERIFY_TEXT = (
    "The keeper climbed the spiral stairs at dusk, trimmed the wick, polished the great lens "
    "and wrote the weather into the log: wind from the north-west, a falling glass, three "
    "fishing boats running for the harbour before the squall. "
)


@dataclass(frozen=True, slots=True)
class DraftCost:
    """One draft step in target steps (0 for n-gram lookup; None: not measured), and how."""

    ratio: float | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class VerifyCost:
    """Evaluating `tokens` (draft n + 1) in one target batch, in target decode steps."""

    tokens: int | None = None
    cost: float | None = None
    note: str = ""


@dataclass(frozen=True, slots=True)
class Calibration:
    """Every candidate's measured costs, by arm name (the baseline has none)."""

    draft: dict[str, DraftCost] = field(default_factory=dict)
    verify: dict[str, VerifyCost] = field(default_factory=dict)

    def draft_cost(self, arm: str) -> DraftCost:
        return self.draft.get(arm, DraftCost())

    def verify_cost(self, arm: str) -> VerifyCost:
        return self.verify.get(arm, VerifyCost())


def calibrate(
    config: Config,
    prepared: Sequence[PreparedProfile],
    baseline: RunningServer,
    tasks: Sequence[Task],
    settings: LoadSettings,
    log_dir: Path,
    progress: Progress,
) -> Calibration:
    """Both costs for every candidate (`prepared[1:]`): one draft-cost measurement per
    target/draft pair and one verification measurement per draft length, shared by the arms
    that have them in common."""
    draft: dict[str, DraftCost] = {}
    by_pair: dict[tuple[str, str], DraftCost] = {}
    for p in prepared[1:]:
        if aa_control.is_control(p.name):
            continue  # the baseline's twin: nothing drafts, nothing to price
        key = (p.model.sha256 if p.model else "", p.draft.sha256 if p.draft else p.name)
        if key not in by_pair:
            by_pair[key] = measure_draft_cost(
                config, p, baseline, tasks, settings, log_dir, progress
            )
        draft[p.name] = by_pair[key]
    verify: dict[str, VerifyCost] = {}
    by_length: dict[int, VerifyCost] = {}
    for p in prepared[1:]:
        if not p.spec_type:
            continue
        n = p.profile.draft_n_max or VERIFY_DEFAULT_N
        if n not in by_length:
            by_length[n] = measure_verify_cost(config, baseline, n, progress)
        verify[p.name] = by_length[n]
    return Calibration(draft, verify)


def measure_draft_cost(
    config: Config,
    prepared: PreparedProfile,
    baseline: RunningServer,
    tasks: Sequence[Task],
    settings: LoadSettings,
    log_dir: Path,
    progress: Progress,
) -> DraftCost:
    """Draft step cost in target steps: measured by running the draft model alone."""
    spec = prepared.spec_type or ""
    if lookup_only(spec):
        return DraftCost(0.0, "n-gram lookup: no draft model, cost taken as 0")
    drafter = model_drafter(spec)
    if drafter is None or prepared.draft is None or prepared.model is None:
        return DraftCost(None, "unknown drafter cost")
    if drafter in TRAINED_DRAFTERS:
        # Its graph reads the target's hidden states: started alone it is no language model.
        return DraftCost(None, f"{drafter}: its drafter runs only beside its target, not alone")
    if prepared.draft.sha256 == prepared.model.sha256:
        return DraftCost(1.0, "draft model is the target model")
    draft_profile = ProfileConfig(
        model=prepared.profile.draft_model or "",
        ctx_size=prepared.profile.ctx_size,
        threads=prepared.profile.threads,
    )
    alone = PreparedProfile(
        f"{prepared.name}-draft-alone",
        draft_profile,
        prepared.binary,
        prepared.draft,
        None,
        prepared.help,
    )
    sample_tasks = list(tasks[:CALIBRATION_TASKS])
    progress(
        f"calibrating draft cost for {prepared.name}: the draft model alone on "
        f"{len(sample_tasks)} tasks"
    )
    with serve(config, alone, log_path=log_dir / f"{alone.name}.log") as server:
        draft_run = measure_run(
            server,
            config,
            sample_tasks,
            arm=alone.name,
            round_index=0,
            is_warmup=True,
            settings=settings,
        )
    target_run = measure_run(
        baseline,
        config,
        sample_tasks,
        arm="calibration",
        round_index=0,
        is_warmup=True,
        settings=settings,
    )
    draft_tps = median([s.decode_tps_server for s in draft_run.samples if s.ok])
    target_tps = median([s.decode_tps_server for s in target_run.samples if s.ok])
    if not draft_tps or not target_tps:
        return DraftCost(None, "draft cost calibration failed")
    return DraftCost(
        target_tps / draft_tps,
        f"measured: target alone {target_tps:.1f} tok/s, draft alone {draft_tps:.1f} tok/s",
    )


def measure_verify_cost(
    config: Config, baseline: RunningServer, draft_n: int, progress: Progress
) -> VerifyCost:
    """Cost of verifying a draft of `draft_n` tokens: one target batch of draft_n + 1 tokens,
    in target decode steps, on the baseline server.

    A shared prefix is cached first (`cache_prompt`), then each batch is the prefix plus
    draft_n + 1 fresh tokens, so the server evaluates exactly those (timings.prompt_n, with
    cache_n the reused prefix; answers that evaluated anything else are dropped). Its
    prompt_ms is set against the per-token time of a plain decode (predicted_ms / predicted_n)
    on the same prefix; both are the median of `VERIFY_REPEATS`. The prompt batch computes
    logits for its last token only, so it prices verification slightly low: the bound stays
    a bound."""
    k = min(draft_n, VERIFY_MAX_N) + 1
    client = make_http_client(baseline.base_url, request_timeout_s=config.server.request_timeout_s)
    try:
        pool: list[int] = []
        text = VERIFY_TEXT
        while len(pool) < VERIFY_PREFIX_TOKENS + VERIFY_REPEATS * (k + 1) + 1:
            pool = tokenize(client, text)
            text += VERIFY_TEXT
        prefix = pool[:VERIFY_PREFIX_TOKENS]
        base = {"cache_prompt": True, "temperature": 0.0, "samplers": ["top_k"], "top_k": 1}
        complete(client, {**base, "prompt": prefix, "n_predict": 1})
        batch_ms: list[float] = []
        step_ms: list[float] = []
        for i in range(VERIFY_REPEATS):
            start = VERIFY_PREFIX_TOKENS + i * (k + 1)
            timings = complete(
                client, {**base, "prompt": prefix + pool[start : start + k], "n_predict": 1}
            ).get("timings", {})
            if timings.get("prompt_n") == k and timings.get("prompt_ms"):
                batch_ms.append(float(timings["prompt_ms"]))
            timings = complete(
                client,
                {
                    **base,
                    "prompt": prefix + pool[start + k : start + k + 1],
                    "n_predict": VERIFY_DECODE_TOKENS,
                    "ignore_eos": True,
                },
            ).get("timings", {})
            if timings.get("predicted_n", 0) > 1 and timings.get("predicted_ms"):
                step_ms.append(float(timings["predicted_ms"]) / float(timings["predicted_n"]))
    except TransportError as exc:
        return VerifyCost(None, None, f"verification cost not measured: {exc}"[:300])
    finally:
        client.close()
    batch, step = median(batch_ms), median(step_ms)
    if not batch or not step:
        return VerifyCost(
            None, None, "verification cost not measured: no clean batch or decode timing"
        )
    note = (
        f"measured on the baseline: a batch of {k} tokens after a cached prefix "
        f"{batch:.2f} ms, one decode step {step:.2f} ms (medians of {len(batch_ms)} and "
        f"{len(step_ms)})"
    )
    progress(f"verification cost: {k} tokens in one batch = {batch / step:.2f} decode steps")
    return VerifyCost(k, batch / step, note)


def _arm_spec(
    prepared: PreparedProfile,
    role: str,
    argv: tuple[str, ...],
    cost: DraftCost,
    *,
    drift_only: bool = False,
    verify: VerifyCost | None = None,
) -> ArmSpec:
    verify = verify or VerifyCost()
    return ArmSpec(
        name=prepared.name,
        role=role,
        spec_type=prepared.spec_type,
        draft_n_max=prepared.profile.draft_n_max,
        model=_model_name(prepared),
        model_sha256=prepared.model.sha256 if prepared.model else "",
        draft_model=prepared.draft.name if prepared.draft else None,
        draft_sha256=prepared.draft.sha256 if prepared.draft else None,
        argv=argv,
        cost_ratio=cost.ratio,
        cost_note=cost.note,
        verify_tokens=verify.tokens,
        verify_cost=verify.cost,
        verify_note=verify.note,
        speculative=prepared.speculative and not drift_only,
        external=prepared.identity.to_json() if prepared.identity else None,
    )


def _model_name(prepared: PreparedProfile) -> str:
    """The model file's name; for a server we did not start, what it says it serves."""
    if prepared.model:
        return prepared.model.name
    if prepared.identity:
        return prepared.identity.model_name
    return prepared.profile.model


def arm_specs(
    prepared: Sequence[PreparedProfile],
    argvs: Mapping[str, tuple[str, ...]],
    calibration: Calibration,
    *,
    drift_only: bool,
) -> list[ArmSpec]:
    """The arms as the analysis sees them: the baseline first, then every candidate with its
    measured costs (`argvs`: each arm's server command line); the race's A/A control has the
    role `control` (paired like a candidate, never one: analysis/aa_control.py)."""
    first = prepared[0]
    arms = [_arm_spec(first, "baseline", argvs[first.name], DraftCost())]
    arms += [
        _arm_spec(
            p,
            aa_control.ROLE if aa_control.is_control(p.name) else "candidate",
            argvs[p.name],
            calibration.draft_cost(p.name),
            drift_only=drift_only,
            verify=calibration.verify_cost(p.name),
        )
        for p in prepared[1:]
    ]
    return arms


def arm_ceiling(arm: str, draft_length: int, costs: Calibration) -> Ceiling | None:
    """The arm's bound at perfect acceptance, where both its costs were measured."""
    draft = costs.draft_cost(arm)
    verify = costs.verify_cost(arm)
    if draft.ratio is None or draft.ratio <= 0 or verify.cost is None:
        return None
    bound = perfect_acceptance_bound(draft_length, draft.ratio, verify.tokens, verify.cost)
    how = (
        f"n {draft_length}: ({draft_length} + 1) / ({draft_length} x draft {draft.ratio:.2f} "
        f"+ verify {bound.verify_cost:.2f}) target steps"
    )
    return Ceiling(arm, bound.predicted_speedup, how)
