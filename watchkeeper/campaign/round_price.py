"""What a sweep's round and its exact identity pass will cost, priced task by task before
round 1, so the racer's plan fits the budget (`campaign/racer.py`).

Why not the warm-up's mean request: the warm-up runs the set's first two tasks, short prose,
and on the baseline their prompts were restored from the prompt cache (the cost calibration had
just sent them). Priced that way, a 14-task sample of the standard set came to 24.6 min and
took 31.4, and the sweep passed its 40 minutes (docs/measurements.md#the-sweeps-defaults).
A task's cost is its prompt and its answer, and the set's prompts differ tenfold:

    request = prompt tokens x prefill s/token + answer tokens x decode s/token + overhead

- **Prompt tokens**: the task's characters (its messages and tool schemas as JSON, so each
  message's role and framing count too) times the tokens per character the warm-up's
  requests show.
- **Answer tokens**: the task's cap times the share of the cap the warm-up's answers reached.
- **Prefill, uncached**: from the cost calibration's verification batches (a prefix cached,
  then a batch of k fresh tokens, timed in target decode steps: `calibration.VerifyCost`):
  the marginal cost of a token between the two largest batches, times the target's decode
  step. A warm-up prompt's own rate is not trusted: the baseline's were cached (71 ms for 82
  tokens) and another arm's first request pays its process's cold start (12.3 ms a token
  against the 10.0 of round 1). On campaign 1 the calibration (49 tokens 8.62 steps, 17
  tokens 4.03) gives 0.143 steps a token, 10.4 ms at the 72.7 ms step. An arm with a draft
  model prefills the prompt on it too: times (1 + the draft step's cost in target steps).
  Without a calibration: the arm's slowest warm-up rate, floored at the median arm's (a
  rate below it read a cached prompt).
- **Decode** per answer token: the arm's own warm-up (decode is never cached).
- **Overhead**: the arm's warm-up latency beyond its prompt and decode.

An arm whose warm-up has no timings is priced as before: its mean warm-up request.

**Rounds after the first** (`later_round_s`): the sweep keeps one process per arm for the
whole race and lets its requests reuse the prompt cache (`BenchPlan.reuse_prompts`,
`restart_every = 0`; llama-server keeps seen prompts in host memory, `--cache-ram`, 8 GiB by
default, far more than a sweep's prompts: about 1 GiB for 48 tasks of ~700 tokens at the 28
KiB a token of Qwen2.5-1.5B's KV), so from round 2 on a kept arm's prompts are restored, not
prefilled (54-96 ms against 3.3-4.9 s on two CPU cores, docs/sweep.md), and its request is
priced without the prefill. An arm renewed each round (`BenchPlan.renew_each_round`: spec
types that learn across requests, `sweep_plan.renewed_arms`) or whose profile turns the
cache off (`--cache-ram 0`) prefills every round afresh: priced as in round 1. Pricing every
round like round 1 cost the code-edit sweep of 7 Dec 2026 (9 arms, 8 tasks, 64-token
answers, 36 min) its CI by the plan: it priced a round at 13.5 min and said "1 round(s) fit
[...] no CI within this budget"; round 1 took 8.7 min and rounds 2 and 3, the six kept arms'
prompts restored, 5.5 and 5.3, and the race decided after round 3 all the same
(reports/code-edit/2026-12-07-sweep-c3/report.md). The racer's plan now counts round 1 at
its price and every later round at this one (`analysis/racing_tasks.plan`), and its check
after round 1 prices round 2 at each arm's measured round 1 times its later share
(`later_shares`, `race_runs.next_round_seconds`).

The exact identity pass (`bench.identity_mode = exact`) runs every probe on a server at
`--ubatch-size 1`: each prompt token is a pass of its own (`EXACT_PREFILL_STEPS` decode
steps, times the arm's prefill against the baseline's where a draft model prefills too), and
a speculative arm verifies each drafted token in a step of its own, so a rejected draft token
costs a whole step. Then the baseline replays up to `positions_per_probe` positions of each
probe on its cached prefix (the A/A floor), a step each, and each speculative arm's
divergences (`DIVERGENCE_REPLAYS` a probe, priced as if every probe diverged). Server starts
are not priced: no run records them. The nightly's pass, two servers of one setting, is priced
the same way a probe from the sweep's round 1 (`pair_probe_s`, for `deliver-set`).

Pure: runs and tasks in, seconds out.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass

from watchkeeper.campaign.calibration import Calibration
from watchkeeper.campaign.served_cost import DIVERGENCE_REPLAYS
from watchkeeper.checks.gap_floor import positions_per_probe
from watchkeeper.load.records import RequestSample, RunResult, Task

EXACT_PREFILL_STEPS = 0.8
"""A prompt token at ubatch 1, in target decode steps: the same pass over the weights as a
decode step without the output layer (for Qwen2.5-1.5B its 151,936 x 1,536 projection is
about 15% of a step's matrix work) or the sampling. Campaign 1's exact probes (2026-12-07):
0.72 to 0.83 on its four target-only arms (the baseline 58.2 ms a prompt token against a
72.7 ms step). A larger model's output layer weighs less, so there this errs short by up to
a fifth of the prompts' share; the answers and the floor are priced at whole steps."""


def task_chars(task: Task) -> int:
    """What a task sends: its messages and tool schemas as JSON."""
    chars = len(json.dumps(list(task.messages)))
    return chars + (len(json.dumps(list(task.tools))) if task.tools else 0)


@dataclass(frozen=True, slots=True)
class ArmRate:
    """One arm's costs a token and a request; ``prefill_s`` None: priced at ``fallback_s``."""

    prefill_s: float | None
    decode_s: float
    overhead_s: float
    fallback_s: float
    """The arm's mean warm-up request: the price before this module."""
    draft_ratio: float = 0.0
    """A draft step in target steps (0: no draft model)."""
    drafted: float = 0.0
    """Draft tokens a decoded token in the warm-up."""
    rejected: float = 0.0
    """Rejected draft tokens a decoded token in the warm-up."""


@dataclass(frozen=True, slots=True)
class RoundPrice:
    """Each task's cost on each arm, from its size; `step_s` is the target's decode step."""

    tokens_per_char: float
    answer_share: float
    step_s: float
    rates: Mapping[str, ArmRate]
    baseline: str
    how: str
    """Where the prefill rate came from, for the plan's progress line."""

    def prompt_tokens(self, task: Task) -> float:
        return task_chars(task) * self.tokens_per_char

    def answer_tokens(self, task: Task) -> float:
        return task.max_tokens * self.answer_share

    def request_s(self, task: Task, arm: str) -> float:
        """One request of `task` on `arm` as the rounds send it (0: the arm is not priced)."""
        rate = self.rates.get(arm)
        if rate is None:
            return 0.0
        if rate.prefill_s is None:
            return rate.fallback_s
        return (
            self.prompt_tokens(task) * rate.prefill_s
            + self.answer_tokens(task) * rate.decode_s
            + rate.overhead_s
        )

    def round_s(self, tasks: Sequence[Task], arms: Sequence[str]) -> float:
        return sum(self.request_s(t, a) for t in tasks for a in arms)

    def later_request_s(self, task: Task, arm: str) -> float:
        """One request of `task` on `arm` in a round after the first on a kept process: its
        prompt restored from the prompt cache, so priced without its prefill (an arm priced
        at its mean warm-up request keeps that price: its prefill is not known apart)."""
        rate = self.rates.get(arm)
        if rate is None or rate.prefill_s is None:
            return self.request_s(task, arm)
        return self.request_s(task, arm) - self.prompt_tokens(task) * rate.prefill_s

    def later_round_s(
        self, tasks: Sequence[Task], arms: Sequence[str], kept: Collection[str]
    ) -> float:
        """A round after the first: each arm of `kept` (one process for the whole race, its
        prompt cache holding every task) without its prefill, every other arm (a fresh
        process each round) as in round 1."""
        return sum(
            self.later_request_s(t, a) if a in kept else self.request_s(t, a)
            for t in tasks
            for a in arms
        )

    def later_shares(
        self, tasks: Sequence[Task], arms: Sequence[str], kept: Collection[str]
    ) -> dict[str, float]:
        """Each priced arm's later round over its round 1 (1: a renewed arm's)."""
        return {
            a: self.later_round_s(tasks, [a], kept) / first
            for a in arms
            if (first := self.round_s(tasks, [a])) > 0
        }

    def exact_probe_s(
        self, arm: str, prompt: float, answer: float, sample: RequestSample | None = None
    ) -> float:
        """One probe at ubatch 1 of a `prompt`-token task answering `answer` tokens; `sample`:
        the arm's measured request of the task, whose drafts price its verification."""
        rate = self.rates.get(arm)
        if rate is None:
            return 0.0
        prefill = prompt * EXACT_PREFILL_STEPS * self.step_s * self._prefill_factor(rate)
        return prefill + answer * self.exact_decode_s(arm, sample) + rate.overhead_s

    def _prefill_factor(self, rate: ArmRate) -> float:
        """The arm's prefill against the baseline's (a draft model prefills too)."""
        base = self.rates[self.baseline].prefill_s
        if rate.prefill_s is None or not base:
            return 1.0 + rate.draft_ratio
        return max(1.0, rate.prefill_s / base)

    def exact_decode_s(self, arm: str, sample: RequestSample | None = None) -> float:
        """An answer token at ubatch 1: a target step, a step per rejected draft token and the
        draft's own steps; never below the arm's batched decode (`sample`'s, else the
        warm-up's)."""
        rate = self.rates.get(arm)
        if rate is None:
            return self.step_s
        batched, drafted, rejected = rate.decode_s, rate.drafted, rate.rejected
        if sample is not None and sample.completion_tokens:
            out = float(sample.completion_tokens)
            drafted = (sample.draft_n or 0) / out
            rejected = max(0, (sample.draft_n or 0) - (sample.draft_n_accepted or 0)) / out
            if sample.predicted_ms:
                batched = sample.predicted_ms / 1000.0 / out
        steps = 1.0 + rejected + rate.draft_ratio * drafted
        return max(batched, steps * self.step_s)

    def floor_s(self, probes: int, answer: float) -> float:
        """The baseline's A/A floor over `probes` probes of about `answer` tokens: a step for
        each position replayed on its cached prefix."""
        return probes * min(positions_per_probe(probes), max(1, round(answer))) * self.step_s

    def probes_s(
        self,
        probes: Sequence[tuple[str, float, float]],
        arms: Sequence[str],
        measured: Mapping[tuple[str, str], RequestSample] | None = None,
    ) -> float:
        """The exact probes alone: `probes` (task id, prompt tokens, answer tokens) on `arms`.
        ``measured``: (arm, task id) -> its round-1 request, whose own prompt, answer and
        drafts replace the estimates."""
        found = measured or {}
        total = 0.0
        for arm in arms:
            for task_id, prompt, answer in probes:
                s = found.get((arm, task_id))
                p = float(s.prompt_tokens) if s is not None and s.prompt_tokens else prompt
                a = float(s.completion_tokens) if s is not None and s.completion_tokens else answer
                total += self.exact_probe_s(arm, p, a, s)
        return total

    def exact_pass_s(
        self,
        probes: Sequence[tuple[str, float, float]],
        arms: Sequence[str],
        measured: Mapping[tuple[str, str], RequestSample] | None = None,
    ) -> float:
        """The exact pass: the probes (`probes_s`), the baseline's floor where it is among
        `arms` (over its measured answers, where given), each other arm's divergence
        replays."""
        n = len(probes)
        total = self.probes_s(probes, arms, measured)
        if n and self.baseline in arms:
            found = measured or {}
            answers = [
                float(s.completion_tokens)
                if (s := found.get((self.baseline, i))) is not None and s.completion_tokens
                else a
                for i, _, a in probes
            ]
            total += self.floor_s(n, sum(answers) / n)
        spec = sum(1 for a in arms if a != self.baseline and a in self.rates)
        return total + spec * n * DIVERGENCE_REPLAYS * self.step_s

    def category_probes(
        self, tasks: Sequence[Task], categories: Sequence[str]
    ) -> list[tuple[str, float, float]]:
        """One stand-in probe per entry of `categories`: the category's mean prompt and answer
        over `tasks` (before the sample is drawn, which task of a category is probed is not
        known yet)."""
        out = []
        for c in categories:
            of = [t for t in tasks if t.category == c] or list(tasks)
            prompt = sum(self.prompt_tokens(t) for t in of) / len(of)
            answer = sum(self.answer_tokens(t) for t in of) / len(of)
            out.append((f"{c}:mean", prompt, answer))
        return out


def planned_pass_s(
    price: RoundPrice,
    tasks: Sequence[Task],
    probes: Sequence[Task],
    count: float,
    arms: Sequence[str],
) -> tuple[float, float]:
    """The exact pass over `count` probes before the sample is drawn, on the baseline alone
    and on every arm of `arms`: each probe at its category's mean over `tasks` (the probes'
    categories: `probes`'; none given: the set's mean)."""
    stand = price.category_probes(tasks, [t.category for t in probes] or [""])
    scale = count / len(stand)
    return (
        scale * price.exact_pass_s(stand, [price.baseline]),
        scale * price.exact_pass_s(stand, arms),
    )


def measured_pass_s(
    price: RoundPrice, runs: Sequence[RunResult], probes: Sequence[Task], arms: Sequence[str]
) -> float:
    """The exact pass over `probes` on `arms` after round 1: each probe from the arm's own
    round-1 request of the task (its prompt, answer and drafts), else from the task's size."""
    measured = {
        (r.arm, s.task_id): s
        for r in runs
        if r.round == 1 and not r.is_warmup
        for s in r.samples
        if s.ok
    }
    stand = [(t.id, price.prompt_tokens(t), price.answer_tokens(t)) for t in probes]
    return price.exact_pass_s(stand, arms, measured)


def pair_probe_s(price: RoundPrice, runs: Sequence[RunResult], arm: str) -> float | None:
    """One probe of an exact pass on two servers of `arm`'s settings, as the nightly runs it
    (campaign/night.py: its reference and tonight's system; identity_pass.exact_pass probes
    every measured task on both at ubatch 1): the probe on each (`probes_s`, from `arm`'s
    round-1 requests: their prompts, answers and drafts), the reference's A/A floor over
    them (`floor_s`) and tonight's divergence replays where `arm` speculates, over the
    requests; None where round 1 has no clean request of `arm` with its prompt tokens."""
    measured = {
        (arm, s.task_id): s
        for r in runs
        if r.arm == arm and r.round == 1 and not r.is_warmup
        for s in r.samples
        if s.ok and s.prompt_tokens
    }
    if not measured or arm not in price.rates:
        return None
    stand = [
        (t, float(s.prompt_tokens or 0), float(s.completion_tokens or 0))
        for (_, t), s in measured.items()
    ]
    n = len(stand)
    total = 2 * price.probes_s(stand, [arm], measured)
    total += price.floor_s(n, sum(a for _, _, a in stand) / n)
    if arm != price.baseline:
        total += n * DIVERGENCE_REPLAYS * price.step_s
    return total / n


def round_price(
    runs: Sequence[RunResult],
    tasks: Sequence[Task],
    arms: Sequence[str],
    baseline: str,
    costs: Calibration | None = None,
) -> RoundPrice | None:
    """The price of `tasks` on `arms` from their warm-up `runs` (and the calibration's
    verification batches, where measured); None where the warm-up gives no prompt or decode
    timings for the baseline or no warm-up task is in `tasks`: the racer then prices as before."""
    by_id = {t.id: t for t in tasks}
    warm = [r for r in runs if r.is_warmup and r.arm in arms]
    clean = [(r.arm, s) for r in warm for s in r.samples if s.ok and s.task_id in by_id]
    prompts = {s.task_id: s.prompt_tokens for _, s in clean if s.prompt_tokens}
    capped = [(s.completion_tokens, by_id[s.task_id].max_tokens) for _, s in clean]
    answered = [(c, m) for c, m in capped if c and m > 0]
    if not prompts or not answered:
        return None
    chars = sum(task_chars(by_id[i]) for i in prompts)
    per_char = sum(prompts.values()) / max(1, chars)
    share = min(1.0, sum(c for c, _ in answered) / sum(m for _, m in answered))
    samples: dict[str, list[RequestSample]] = {}
    for arm, s in clean:
        samples.setdefault(arm, []).append(s)
    base = samples.get(baseline, [])
    step = _decode_s(base)
    if step is None:
        return None
    steps, how = _calibrated_steps(costs)
    slowest = {a: r for a, ss in samples.items() if (r := _slowest_prefill(ss)) is not None}
    floor = statistics.median(slowest.values()) if slowest else None
    rates: dict[str, ArmRate] = {}
    for arm in arms:
        ratio = _draft_ratio(costs, arm)
        if steps is not None:
            prefill: float | None = steps * step * (1.0 + ratio)
        else:
            prefill = max(slowest.get(arm, 0.0), floor) if floor is not None else None
        rates[arm] = _arm_rate(samples.get(arm, []), prefill, ratio, step)
    if steps is None:
        how = "prefill at each arm's slowest warm-up prompt, floored at the median arm's"
    else:
        how += f", {steps * step * 1000:.1f} ms at the baseline's {step * 1000:.1f} ms step"
    return RoundPrice(per_char, share, step, rates, baseline, how)


def _arm_rate(
    samples: Sequence[RequestSample], prefill: float | None, ratio: float, step: float
) -> ArmRate:
    lat = [s.latency_s for s in samples if s.latency_s is not None]
    fallback = sum(lat) / len(lat) if lat else 0.0
    decode = _decode_s(samples)
    if decode is None or prefill is None:
        return ArmRate(None, step, 0.0, fallback, ratio)
    spent = [
        (s.latency_s or 0.0) - ((s.prompt_ms or 0.0) + (s.predicted_ms or 0.0)) / 1000.0
        for s in samples
        if s.latency_s is not None
    ]
    out = sum(s.completion_tokens or 0 for s in samples)
    drafted = sum(s.draft_n or 0 for s in samples)
    accepted = sum(s.draft_n_accepted or 0 for s in samples)
    return ArmRate(
        prefill,
        decode,
        max(0.0, sum(spent) / len(spent)) if spent else 0.0,
        fallback,
        ratio,
        drafted / out if out else 0.0,
        max(0, drafted - accepted) / out if out else 0.0,
    )


def _decode_s(samples: Sequence[RequestSample]) -> float | None:
    """Seconds a decoded token over `samples` (None: no decode timings)."""
    ms = sum(s.predicted_ms or 0.0 for s in samples if s.completion_tokens)
    out = sum(s.completion_tokens or 0 for s in samples if s.predicted_ms)
    return ms / 1000.0 / out if ms > 0 and out > 0 else None


def _slowest_prefill(samples: Sequence[RequestSample]) -> float | None:
    rates = [
        s.prompt_ms / 1000.0 / s.prompt_tokens
        for s in samples
        if s.prompt_ms and s.prompt_tokens and s.prompt_ms > 0
    ]
    return max(rates) if rates else None


def _draft_ratio(costs: Calibration | None, arm: str) -> float:
    ratio = costs.draft_cost(arm).ratio if costs is not None else None
    return ratio if ratio is not None and ratio > 0 else 0.0


def _calibrated_steps(costs: Calibration | None) -> tuple[float | None, str]:
    """Target decode steps a prompt token, from the verification batches: the marginal cost
    between the two largest batches (a fixed cost a batch, the weights' pass, drops out),
    else the largest batch's mean; None where none was measured."""
    found = sorted(
        {
            (v.tokens, v.cost)
            for v in (costs.verify.values() if costs is not None else ())
            if v.tokens and v.cost
        }
    )
    if not found:
        return None, ""
    (t_hi, c_hi) = found[-1]
    if len(found) >= 2:
        t_lo, c_lo = found[-2]
        if t_hi > t_lo and c_hi > c_lo:
            steps = (c_hi - c_lo) / (t_hi - t_lo)
            return steps, (
                f"prefill {steps:.3f} decode steps a token (verification batches of {t_lo} and "
                f"{t_hi} tokens: {c_lo:.2f} and {c_hi:.2f} steps)"
            )
    steps = c_hi / t_hi
    return steps, f"prefill {steps:.3f} decode steps a token ({t_hi} tokens: {c_hi:.2f} steps)"
