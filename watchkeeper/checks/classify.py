"""Identity verdicts for a bench's probe pass: the A/A noise floor, then a replay per probe.

`compare_samples` alone calls any divergence at temperature 0 a difference; batched
verification can flip a near-tied token without anything being wrong. This step asks the
baseline server itself (`classify_divergence` with a batched replay) and sets each gap against
the floor the baseline shows against its own replay, so only what survives both is a mismatch.
It talks to the baseline server, so it runs while the bench's servers are up; `analyze` then
takes its verdicts as overrides and stays pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from watchkeeper.checks.identity import IdentityResult, Verdict, classify_divergence
from watchkeeper.checks.replay import NoiseFloor, measure_noise_floor, replayer_for
from watchkeeper.load.records import RequestSample, RunResult, Task
from watchkeeper.server.endpoints import ServerClient, TransportError, make_http_client

Progress = Callable[[str], None]
FLOOR_TASKS = 6
"""The A/A noise floor replays at most this many of the baseline's probes ..."""
FLOOR_POSITIONS = 8
"""... at this many positions each: at most 6 x (2 + 8) requests on the baseline server."""


@dataclass(frozen=True, slots=True)
class IdentityVerdicts:
    """The measured floor (None: not measured, or nothing to judge) and the replayed verdict
    of every (arm, task_id) judged, for `analyze`'s `identity_overrides`."""

    floor: NoiseFloor | None = None
    overrides: dict[tuple[str, str], IdentityResult] = field(default_factory=dict)

    def floor_json(self) -> dict[str, Any] | None:
        return self.floor.to_json() if self.floor is not None else None


def classify_identity(
    base_url: str,
    tasks: Sequence[Task],
    probe_runs: Mapping[str, RunResult],
    *,
    baseline: str,
    speculative: Sequence[str],
    top_k: int,
    near_tie_threshold: float,
    request_timeout_s: float,
    progress: Progress,
) -> IdentityVerdicts:
    """Noise floor and replay verdicts on the baseline server (at `base_url`).

    The A/A floor is measured once on the baseline's own probes. Each speculative probe that
    `compare_samples` does not call identical is classified with a batched replay on the
    baseline server (`classify_divergence`): the target picking the candidate's token, or a
    gap within the floor, is batch variance; only what survives is a mismatch. Near-ties keep
    their verdict but get the same evidence. A replay that fails leaves the floor to decide
    (the error is kept in the evidence); a floor that cannot be measured is taken as 0.
    """
    base_run = probe_runs.get(baseline)
    if base_run is None or not speculative:
        return IdentityVerdicts()
    by_task = {t.id: t for t in tasks}
    base = {s.task_id: s for s in base_run.samples}
    decoded = [
        s
        for s in base_run.samples
        if s.ok and s.tokens and all(t.token_id is not None for t in s.tokens)
    ][:FLOOR_TASKS]
    overrides: dict[tuple[str, str], IdentityResult] = {}
    client = make_http_client(base_url, request_timeout_s=request_timeout_s)
    try:
        floor: NoiseFloor | None = None
        progress(
            f"noise floor: replaying {len(decoded)} baseline probes at {FLOOR_POSITIONS} "
            "positions each as one batched prompt (A/A control)"
        )
        try:
            floor = measure_noise_floor(
                client, tasks, decoded, n_probs=top_k, positions_per_task=FLOOR_POSITIONS
            )
        except TransportError as exc:
            progress(f"noise floor not measured ({exc}); the replay alone decides")
        floor_value = floor.floor if floor is not None else 0.0
        for arm in speculative:
            run = probe_runs.get(arm)
            if run is None:
                continue
            for c in run.samples:
                b = base.get(c.task_id)
                task = by_task.get(c.task_id)
                if b is None or task is None or not b.ok or not c.ok:
                    continue
                overrides[(arm, c.task_id)] = classify_one(
                    client,
                    task,
                    b,
                    c,
                    floor=floor_value,
                    n_probs=top_k,
                    threshold=near_tie_threshold,
                )
        counts: dict[str, int] = {}
        for result in overrides.values():
            counts[result.verdict] = counts.get(result.verdict, 0) + 1
        progress(
            f"identity: noise floor {floor_value:.4f} nats; verdicts "
            + ", ".join(f"{v} {n}" for v, n in sorted(counts.items()))
        )
    finally:
        client.close()
    return IdentityVerdicts(floor, overrides)


def _no_replay(floor: float, note: str) -> dict[str, Any]:
    return {
        "target_token": None,
        "candidate_token": None,
        "baseline_token": None,
        "margin": None,
        "floor": floor,
        "note": note,
    }


def classify_one(
    client: ServerClient,
    task: Task,
    b: RequestSample,
    c: RequestSample,
    *,
    floor: float,
    n_probs: int,
    threshold: float,
) -> IdentityResult:
    """One probe's verdict; every non-identical verdict carries replay evidence or a note
    saying why there is none."""
    try:
        replay = replayer_for(client, task, b, n_probs=n_probs)
    except ValueError:
        replay = None  # no baseline token ids (tool calls): nothing to replay
    error: str | None = None

    def classify(near_tie_threshold: float) -> IdentityResult:
        nonlocal error
        try:
            return classify_divergence(
                b, c, replay=replay, floor=floor, near_tie_threshold=near_tie_threshold
            )
        except TransportError as exc:
            error = str(exc)[:300]
            return classify_divergence(
                b, c, replay=None, floor=floor, near_tie_threshold=near_tie_threshold
            )

    result = classify(threshold)
    if result.verdict == Verdict.NEAR_TIE:
        # Same evidence as a mismatch gets: classify as if there were no near-tie allowance,
        # keep the near-tie verdict.
        result = replace(result, replay=classify(0.0).replay)
    if result.verdict != Verdict.IDENTICAL and result.replay is None:
        if result.verdict == Verdict.LENGTH_ONLY:
            note = "one output is a prefix of the other, cut by max_tokens: nothing to replay"
        elif replay is None:
            note = "no baseline token ids (text comparison): nothing to replay"
        else:
            note = "divergence located by text only: nothing to replay"
        result = replace(result, replay=_no_replay(floor, note))
    if error is not None and result.replay is not None:
        result = replace(result, replay={**result.replay, "replay_error": error})
    return result
