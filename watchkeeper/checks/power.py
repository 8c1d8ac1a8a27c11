"""What the identity check can still catch: positive controls with a known answer.

"No mismatch" means something only beside what a mismatch would have looked like. Two
controls measure it:

- **Offline** (no requests): at the A/A positions of the baseline's own probes, forge a
  candidate that took the baseline's rank-2 token, and judge it with the real verdict
  function (`classify_divergence`, no replay). It must be a `mismatch` exactly when the
  margin exceeds the floor (and the near-tie threshold); the share of positions where it is
  not is the check's *blind fraction*: a wrong token there would pass as noise.
- **Live** (`live_control`): the baseline server itself, with `logit_bias` +b on a frequent
  token, as a candidate arm, judged like any other; the smallest b that yields a mismatch is
  the smallest systematic distortion this host's check detects.

Where neither detects anything, the report says "the identity check has no power on this
host", never "no mismatch".
"""

from __future__ import annotations

import itertools
import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from watchkeeper.checks.gap_floor import MARGIN_BANDS
from watchkeeper.checks.identity import IdentityResult, Verdict, classify_divergence
from watchkeeper.checks.replay import sample_positions
from watchkeeper.load.records import RequestSample, Task, TokenLogprob

NO_POWER = "the identity check has no power on this host"
LIVE_BIASES = (0.5, 1.0, 2.0, 4.0, 8.0)
"""Logit biases (nats) the live control tries, smallest first; it stops at the first found."""
_SPECIAL = {"", "<|im_end|>", "<|endoftext|>", "</s>", "<end_of_turn>", "<|eot_id|>"}


@dataclass(frozen=True, slots=True)
class ForgedPosition:
    margin: float
    verdict: str
    expected: bool
    """Whether a mismatch is what the floor says it must be: margin beyond floor and near-tie
    (any margin in the exact mode)."""


@dataclass(frozen=True, slots=True)
class OfflineControl:
    positions: tuple[ForgedPosition, ...]
    floor: float | None
    exact: bool

    @property
    def detected(self) -> int:
        return sum(p.verdict == Verdict.MISMATCH for p in self.positions)

    @property
    def blind_fraction(self) -> float | None:
        n = len(self.positions)
        return 1.0 - self.detected / n if n else None

    @property
    def consistent(self) -> bool:
        """Every forged token was a mismatch exactly where the floor says it must be."""
        return all((p.verdict == Verdict.MISMATCH) == p.expected for p in self.positions)

    def bands(self) -> list[dict[str, Any]]:
        rows = []
        for low, high in itertools.pairwise(MARGIN_BANDS):
            inside = [p for p in self.positions if low <= p.margin < high]
            hits = sum(p.verdict == Verdict.MISMATCH for p in inside)
            rows.append(
                {
                    "low": low,
                    "high": None if math.isinf(high) else high,
                    "positions": len(inside),
                    "detected": hits,
                }
            )
        return rows

    def describe(self) -> str:
        n = len(self.positions)
        if not n:
            return "offline positive control: no position to forge"
        blind = self.blind_fraction or 0.0
        head = (
            f"offline positive control: the rank-2 token forged at {n} positions is a mismatch "
            f"at {self.detected} ({1 - blind:.0%}); blind fraction {blind:.0%}"
        )
        if not self.detected:
            return f"{head}: {NO_POWER}"
        return head + ("" if self.consistent else "; NOT where the floor says (a bug here)")

    def to_json(self) -> dict[str, Any]:
        return {
            "positions": len(self.positions),
            "detected": self.detected,
            "blind_fraction": self.blind_fraction,
            "consistent": self.consistent,
            "floor": self.floor,
            "exact": self.exact,
            "bands": self.bands(),
            "summary": self.describe(),
        }


def _forge(sample: RequestSample, index: int) -> RequestSample | None:
    """The sample up to `index`, then its rank-2 token there (None without one)."""
    tokens = sample.tokens
    if tokens is None or len(tokens[index].top) < 2:
        return None
    alt = tokens[index].top[1]
    if alt.token_id is None or alt.token_id == tokens[index].token_id:
        return None
    forged = (*tokens[:index], TokenLogprob(alt.token_id, alt.text, alt.logprob, ()))
    return replace(
        sample,
        tokens=forged,
        output_text="".join(t.text for t in forged),
        completion_tokens=len(forged),
        finish_reason="length",
    )


def offline_control(
    decoded: Sequence[RequestSample],
    *,
    positions_per_probe: int,
    floor: float | None,
    exact: bool,
    near_tie_threshold: float,
) -> OfflineControl:
    """Forge rank-2 tokens in the baseline's probes and judge them (no server)."""
    threshold = 0.0 if exact else near_tie_threshold
    out: list[ForgedPosition] = []
    for sample in decoded:
        tokens = sample.tokens
        if not sample.ok or not tokens:
            continue
        for i in sample_positions(len(tokens), positions_per_probe):
            forged = _forge(sample, i)
            if forged is None:
                continue
            top = tokens[i].top
            margin = top[0].logprob - top[1].logprob
            r = classify_divergence(
                sample,
                forged,
                replay=None,
                floor=floor,
                near_tie_threshold=threshold,
                exact=exact,
            )
            expected = exact or (
                floor is not None and margin > floor and margin >= near_tie_threshold
            )
            out.append(ForgedPosition(margin, str(r.verdict), expected))
    return OfflineControl(tuple(out), floor, exact)


# --- the live control -------------------------------------------------------------------------


def frequent_token(samples: Sequence[RequestSample]) -> tuple[int, str] | None:
    """The most frequent ordinary token of the baseline's probe outputs."""
    counts: Counter[tuple[int, str]] = Counter()
    for s in samples:
        for t in s.tokens or ():
            if t.token_id is not None and t.text.strip() and t.text not in _SPECIAL:
                counts[(t.token_id, t.text)] += 1
    return counts.most_common(1)[0][0] if counts else None


@dataclass(frozen=True, slots=True)
class LiveStep:
    bias: float
    changed: int
    verdicts: dict[str, int]

    @property
    def detected(self) -> bool:
        return self.verdicts.get(Verdict.MISMATCH, 0) > 0


@dataclass(frozen=True, slots=True)
class LiveControl:
    token: tuple[int, str] | None
    steps: tuple[LiveStep, ...]
    tasks: int

    @property
    def smallest_detected(self) -> float | None:
        return next((s.bias for s in self.steps if s.detected), None)

    def describe(self) -> str:
        if self.token is None:
            return "live positive control: no frequent token to bias"
        tried = ", ".join(
            f"+{s.bias:g} ({s.changed} of {self.tasks} outputs changed, "
            + ", ".join(f"{v} {n}" for v, n in sorted(s.verdicts.items()))
            + ")"
            for s in self.steps
        )
        found = self.smallest_detected
        head = f"live positive control (logit_bias on {self.token[1]!r}, id {self.token[0]})"
        if found is None:
            return f"{head}: no bias tried was detected: {NO_POWER} ({tried})"
        return f"{head}: smallest bias detected +{found:g} nats ({tried})"

    def to_json(self) -> dict[str, Any]:
        return {
            "token": list(self.token) if self.token else None,
            "tasks": self.tasks,
            "steps": [
                {"bias": s.bias, "changed": s.changed, "verdicts": s.verdicts} for s in self.steps
            ],
            "smallest_detected": self.smallest_detected,
            "summary": self.describe(),
        }


Prober = Callable[[Task, dict[str, Any]], RequestSample]
"""Sends one probe of a task with extra request fields (the bias) to the baseline server."""
Judge = Callable[[Task, RequestSample, RequestSample], IdentityResult]
"""Judges a candidate probe against the baseline's, as the bench judges its arms."""


def live_control(
    tasks: Sequence[Task],
    base_probes: dict[str, RequestSample],
    *,
    probe: Prober,
    judge: Judge,
    biases: Sequence[float] = LIVE_BIASES,
) -> LiveControl:
    """Bias a frequent token by +b on the baseline server and judge the outputs; stop at the
    first b with a mismatch."""
    token = frequent_token(list(base_probes.values()))
    if token is None:
        return LiveControl(None, (), len(tasks))
    steps: list[LiveStep] = []
    for b in biases:
        verdicts: Counter[str] = Counter()
        changed = 0
        for task in tasks:
            base = base_probes.get(task.id)
            if base is None or not base.ok:
                continue
            cand = probe(task, {"logit_bias": [[token[0], b]]})
            if not cand.ok:
                verdicts["error"] += 1
                continue
            changed += cand.output_text != base.output_text
            verdicts[str(judge(task, base, cand).verdict)] += 1
        step = LiveStep(b, changed, dict(verdicts))
        steps.append(step)
        if step.detected:
            break
    return LiveControl(token, tuple(steps), len(tasks))
