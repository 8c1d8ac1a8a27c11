"""Identity verdicts for a bench's probe pass: the A/A control, a replay per probe, every
candidate token scored, and the positive controls.

`compare_samples` alone calls any divergence at temperature 0 a difference; batched
verification can flip a near-tied token without anything being wrong. This step asks the
reference server itself (`classify_divergence` with a replay) and judges in one of two modes:

- **exact**: the probes ran on servers started with `--ubatch-size 1` (baseline and
  candidate), so every token is evaluated alone with the same kernels as a decode step. The
  A/A replay must then reproduce the reference's decode at every position; where it does,
  any divergence is a `mismatch`, with no floor.
- **batched**: the probes ran in the user's configuration (or the exact mode's A/A failed);
  the replay and the noise floor (`checks.gap_floor`, `underpowered` below its minimum)
  decide, and what neither explains without a floor is `unverified`.

It talks to the reference servers, so it runs while they are up; `analyze` then takes its
verdicts as overrides and stays pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from watchkeeper.checks.gap_floor import (
    FloorKey,
    GapFloor,
    gap_floor,
    positions_per_probe,
    replayed_position,
)
from watchkeeper.checks.identity import IdentityResult, Verdict, classify_divergence
from watchkeeper.checks.power import LiveControl, live_control, offline_control
from watchkeeper.checks.replay import aa_pairs, replayer_for
from watchkeeper.checks.token_scores import ArmScore, arm_score, score_sample
from watchkeeper.load.probe_client import probe_chat
from watchkeeper.load.records import RequestSample, RunResult, Task
from watchkeeper.server.endpoints import ServerClient, TransportError, make_http_client

Progress = Callable[[str], None]
EXACT = "exact"
BATCHED = "batched"


@dataclass(frozen=True, slots=True)
class Reference:
    """The server a group of candidates is judged against: the baseline, or a
    non-speculative twin with a candidate's own settings."""

    name: str
    base_url: str
    arms: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class IdentityVerdicts:
    """The baseline's A/A floor (None: nothing judged) and the verdict of every (arm, task_id)
    judged, for `analyze`'s `identity_overrides`, plus what `extras` carries: which mode
    judged each arm and why, every arm's token scores, and the positive controls."""

    floor: GapFloor | None = None
    overrides: dict[tuple[str, str], IdentityResult] = field(default_factory=dict)
    modes: dict[str, dict[str, Any]] = field(default_factory=dict)
    scores: dict[str, dict[str, Any]] = field(default_factory=dict)
    power: dict[str, Any] = field(default_factory=dict)
    references: dict[str, dict[str, Any]] = field(default_factory=dict)
    """Twin references' own floors, by reference name."""

    def floor_json(self) -> dict[str, Any] | None:
        return self.floor.to_json() if self.floor is not None else None

    def extras(self) -> dict[str, Any]:
        return {
            "identity_modes": self.modes,
            "token_scores": self.scores,
            "identity_power": self.power,
            "identity_references": self.references,
        }


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
    exact: bool = False,
    mode_reason: str = "",
    key: FloorKey | None = None,
    live: bool = False,
    twins: Sequence[Reference] = (),
) -> IdentityVerdicts:
    """A/A floor, replay verdicts, token scores and positive controls on the reference
    servers (the baseline at `base_url`; `twins` for candidates with other settings).

    `exact`: the probes ran with `--ubatch-size 1` on every server; the A/A then decides
    whether the exact mode holds. `mode_reason` says why it was not asked for otherwise.
    A replay that fails leaves the floor to decide (the error is kept in the evidence)."""
    if probe_runs.get(baseline) is None or not speculative:
        return IdentityVerdicts()
    twinned = {a for t in twins for a in t.arms}
    groups = [Reference(baseline, base_url, tuple(a for a in speculative if a not in twinned))]
    groups += list(twins)
    result = IdentityVerdicts()
    for group in groups:
        if group.name not in probe_runs or not group.arms:
            continue
        judged = _judge_group(
            group,
            tasks,
            probe_runs,
            top_k=top_k,
            near_tie_threshold=near_tie_threshold,
            request_timeout_s=request_timeout_s,
            progress=progress,
            exact=exact,
            mode_reason=mode_reason,
            key=key,
            live=live and group.name == baseline,
        )
        result.overrides.update(judged.overrides)
        result.modes.update(judged.modes)
        result.scores.update(judged.scores)
        if group.name == baseline:
            result = replace(result, floor=judged.floor, power=judged.power)
        elif judged.floor is not None:
            result.references[group.name] = {
                "arms": list(group.arms),
                "floor": judged.floor.to_json(),
                "power": judged.power,
            }
    return result


def _judge_group(
    group: Reference,
    tasks: Sequence[Task],
    probe_runs: Mapping[str, RunResult],
    *,
    top_k: int,
    near_tie_threshold: float,
    request_timeout_s: float,
    progress: Progress,
    exact: bool,
    mode_reason: str,
    key: FloorKey | None,
    live: bool,
) -> IdentityVerdicts:
    """One reference's A/A floor, the verdicts and token scores of the arms judged against
    it, and its positive controls, all on one client to the reference server."""
    ref_run = probe_runs[group.name]
    ref = {s.task_id: s for s in ref_run.samples}
    decoded = _decoded(ref_run)
    per_probe = positions_per_probe(len(decoded))
    overrides: dict[tuple[str, str], IdentityResult] = {}
    modes: dict[str, dict[str, Any]] = {}
    scores: dict[str, dict[str, Any]] = {}
    client = make_http_client(group.base_url, request_timeout_s=request_timeout_s)
    try:
        floor = _aa_floor(
            client,
            group.name,
            tasks,
            decoded,
            top_k=top_k,
            per_probe=per_probe,
            exact=exact,
            key=key,
            progress=progress,
        )
        holds = exact and floor.exact
        mode = _judging_mode(floor, exact=exact, holds=holds, mode_reason=mode_reason)
        mode["reference"] = group.name
        progress(
            f"identity on {group.name}: {mode['mode']} mode ({mode['reason']}); " + floor.describe()
        )
        judge = _ArmJudge(
            client,
            by_task={t.id: t for t in tasks},
            ref=ref,
            top_k=top_k,
            threshold=near_tie_threshold,
            floor=None if holds else floor.floor,
            exact=holds,
            per_probe=per_probe,
            progress=progress,
        )
        for arm in group.arms:
            run = probe_runs.get(arm)
            if run is None:
                continue
            modes[arm] = dict(mode)
            arm_overrides, score = judge.arm(arm, run, floor)
            overrides.update(arm_overrides)
            scores[arm] = score.to_json()
        power = judge.positive_controls(tasks, decoded, live=live)
    finally:
        client.close()
    return IdentityVerdicts(floor, overrides, modes, scores, power)


def _decoded(run: RunResult) -> list[RequestSample]:
    """The reference's probes that decoded with token ids: only these can be replayed, so
    they size the A/A plan and feed the offline control."""
    return [
        s
        for s in run.samples
        if s.ok and s.tokens and all(t.token_id is not None for t in s.tokens)
    ]


def _aa_floor(
    client: ServerClient,
    reference: str,
    tasks: Sequence[Task],
    decoded: Sequence[RequestSample],
    *,
    top_k: int,
    per_probe: int,
    exact: bool,
    key: FloorKey | None,
    progress: Progress,
) -> GapFloor:
    """The A/A control: the reference replays its own decode. A replay that fails leaves an
    empty floor, so the replay of each candidate alone decides."""
    plan = f"{len(decoded)} probes x up to {per_probe} positions"
    progress(
        f"A/A control on {reference}: replaying {plan}"
        + (" (ubatch 1, cached prefixes)" if exact else " as one batched prompt each")
    )
    try:
        pairs = aa_pairs(
            client,
            tasks,
            decoded,
            n_probs=top_k,
            positions_per_task=per_probe,
            cache_prompt=exact,
        )
    except TransportError as exc:
        progress(f"A/A control failed ({exc}); the replay alone decides")
        pairs = []
    positions = [p for d, r in pairs if (p := replayed_position(d, r)) is not None]
    return gap_floor(positions, key=key, plan=plan)


def _judging_mode(floor: GapFloor, *, exact: bool, holds: bool, mode_reason: str) -> dict[str, Any]:
    """Which mode judges the group, and why: exact only where ubatch 1 was asked for AND
    the A/A replay reproduced the decode at every position (`holds`)."""
    if holds:
        return {
            "mode": EXACT,
            "reason": f"ubatch 1 on both servers; the A/A replay reproduced the decode at "
            f"all {floor.replayed} positions",
        }
    if exact:
        return {
            "mode": BATCHED,
            "reason": f"ubatch 1 did not make the replay reproduce the decode "
            f"({floor.replayed - floor.exact_positions} of {floor.replayed} A/A positions "
            "differ): judged by replay and noise floor",
        }
    return {"mode": BATCHED, "reason": mode_reason or "exact mode not asked for"}


@dataclass(frozen=True, slots=True)
class _ArmJudge:
    """What every arm of one group is judged with: the reference server's client and
    samples, the floor (None in the exact mode, where there is no allowance) and the mode."""

    client: ServerClient
    by_task: Mapping[str, Task]
    ref: Mapping[str, RequestSample]
    top_k: int
    threshold: float
    floor: float | None
    exact: bool
    per_probe: int
    progress: Progress

    def arm(
        self, arm: str, run: RunResult, aa: GapFloor
    ) -> tuple[dict[tuple[str, str], IdentityResult], ArmScore]:
        """Every probe of one arm that both servers answered: its verdict, then its tokens
        scored (a failed scoring is reported and skipped: the verdict stands without it)."""
        verdicts: dict[tuple[str, str], IdentityResult] = {}
        arm_scores = []
        for c in run.samples:
            b = self.ref.get(c.task_id)
            task = self.by_task.get(c.task_id)
            if b is None or task is None or not b.ok or not c.ok:
                continue
            verdict = verdicts[(arm, c.task_id)] = classify_one(
                self.client,
                task,
                b,
                c,
                floor=self.floor,
                n_probs=self.top_k,
                threshold=self.threshold,
                exact=self.exact,
            )
            try:
                arm_scores += score_sample(
                    self.client,
                    task,
                    c,
                    n_probs=self.top_k,
                    positions=None if self.exact else max(1, self.per_probe // 2),
                    cache_prompt=self.exact,
                    agree=_agree(verdict, c),
                )
            except TransportError as exc:
                self.progress(f"token scores of {arm}/{c.task_id} not measured ({exc})")
        score = arm_score(arm_scores, aa_positions=aa.replayed, aa_flips=aa.flips, exact=self.exact)
        counts: dict[str, int] = {}
        for r in verdicts.values():
            counts[r.verdict] = counts.get(r.verdict, 0) + 1
        self.progress(
            f"identity {arm}: "
            + ", ".join(f"{v} {n}" for v, n in sorted(counts.items()))
            + f"; {score.describe()}"
        )
        return verdicts, score

    def positive_controls(
        self, tasks: Sequence[Task], decoded: Sequence[RequestSample], *, live: bool
    ) -> dict[str, Any]:
        """The checks that the judge can see a difference at all: forged divergences offline
        always, and live probes on the server where asked (the baseline only)."""
        offline = offline_control(
            decoded,
            positions_per_probe=self.per_probe,
            floor=self.floor,
            exact=self.exact,
            near_tie_threshold=self.threshold,
        )
        power: dict[str, Any] = {"offline": offline.to_json()}
        self.progress(offline.describe())
        if live:
            control = self.live_control(tasks)
            power["live"] = control.to_json()
            self.progress(control.describe())
        return power

    def live_control(self, tasks: Sequence[Task]) -> LiveControl:
        """The live positive control on the reference server: one probe per category."""
        picked: dict[str, Task] = {}
        for t in tasks:
            if t.id in self.ref:
                picked.setdefault(t.category, t)

        def probe(task: Task, extra: dict[str, Any]) -> RequestSample:
            return probe_chat(self.client, task, seq=0, top_logprobs=self.top_k, extra=extra)

        def judge(task: Task, b: RequestSample, c: RequestSample) -> IdentityResult:
            return classify_one(
                self.client,
                task,
                b,
                c,
                floor=self.floor,
                n_probs=self.top_k,
                threshold=self.threshold,
                exact=self.exact,
            )

        return live_control(list(picked.values()), dict(self.ref), probe=probe, judge=judge)


def _agree(result: IdentityResult, c: RequestSample) -> int:
    """Leading candidate tokens that are the reference's own decoded tokens."""
    if result.basis != "tokens":
        return 0
    if result.verdict == Verdict.IDENTICAL:
        return len(c.tokens or ())
    return result.first_divergence or 0


def _no_replay(floor: float | None, note: str) -> dict[str, Any]:
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
    floor: float | None,
    n_probs: int,
    threshold: float,
    exact: bool = False,
) -> IdentityResult:
    """One probe's verdict; every non-identical verdict carries replay evidence or a note
    saying why there is none. In the exact mode there is no near-tie allowance."""
    try:
        replay = replayer_for(client, task, b, n_probs=n_probs, cache_prompt=exact)
    except ValueError:
        replay = None  # no baseline token ids: nothing to replay
    error: str | None = None

    def classify(near_tie_threshold: float) -> IdentityResult:
        nonlocal error
        try:
            return classify_divergence(
                b,
                c,
                replay=replay,
                floor=floor,
                near_tie_threshold=near_tie_threshold,
                exact=exact,
            )
        except TransportError as exc:
            error = str(exc)[:300]
            return classify_divergence(
                b, c, replay=None, floor=floor, near_tie_threshold=near_tie_threshold, exact=exact
            )

    result = classify(0.0 if exact else threshold)
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
