"""Does a speculative arm sample from the target's distribution? Pure functions, no server.

At temperature > 0 "identical output" means nothing: two correct servers with different seeds
write different text. What speculation must keep is the *distribution* of the next token: at
every position, the token the arm emits must be a draw from the target's own post-sampler
distribution (softmax(logits / T) after the request's top_k / top_p / min_p) given the
prefix. Bugs break exactly that: a drafter that silently decodes greedily, a verifier that
uses the target's probabilities without the request's temperature, a truncation applied twice.

The data: continuations sampled from the arm at fixed prefixes, and for each emitted token the
target's post-sampler probabilities at the same prefix (prompt + continuation so far), asked of
the baseline server one position at a time (`n_predict: 1` never drafts). The target reports
its top-N tokens; the rest is lumped into one tail bin of mass 1 - sum(top-N).

Two tests, Bonferroni over both:

- **Randomized PIT, chi-square omnibus.** Tokens are ranked by descending probability (ties by
  id), the bins are the top-N tokens then the tail. The emitted token in bin r gives
  u = F(r-) + V * p(r) with V ~ U(0, 1). Under H0 each u is exactly U(0, 1), and because each
  position's distribution is conditioned on everything before it, the u's of a continuation are
  i.i.d. (Rosenblatt 1952; Brockwell 2007 for the randomized discrete case). Binned into
  `PIT_BINS` equal bins, a chi-square goodness-of-fit sees any shape of distortion: greedy
  piles every u into the lowest bins, a truncated nucleus empties the highest.
- **Centred surprisal, z.** d = -log p(emitted bin) - H(bins) has conditional mean 0 and a
  known conditional variance under H0, so sum(d) / sqrt(sum var) is N(0, 1) by the martingale
  central limit theorem. It has a direction: a hotter sampler than asked gives d > 0, a colder
  one (or greedy, or a truncated tail) d < 0, and it is the most powerful of the simple tests
  against a temperature change.

The effect size is the mean excess surprisal in nats (mean d), with a 95% CI whose standard
error is clustered by continuation (tokens of one continuation are not independent under H1).
`same distribution` needs both tests quiet, enough tokens, and that CI inside +-`margin`;
otherwise a quiet test is `inconclusive`. `distorted` is any rejection at the family-wise
`alpha`. How often each verdict comes out on identical servers and on the positive controls is
measured in tests/bench/test_distribution_analysis.py and benchmarks/distribution_check.py.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass
from enum import StrEnum
from typing import Any

import numpy as np
from scipy import stats as scipy_stats

from watchkeeper.student import t_quantile

PIT_BINS = 10
ALPHA = 0.01
"""Family-wise false-alarm rate of one check (both tests together, Bonferroni)."""
MARGIN = 0.15
"""Mean excess surprisal (nats) whose CI must lie inside +-this for `same distribution`."""
MIN_TOKENS = 200
"""Fewer tested tokens than this give `inconclusive` however quiet the tests are."""
SURPRISAL_CAP = -math.log(1e-6)
"""A token the target gave (almost) no mass counts as this surprising, not as infinitely: one
token at a min_p edge flipped by batch numerics must not decide the check alone."""
IGNORED_ALPHA = 1e-3
"""`sampling ignored` when every seed reproduced the same output and the target's chance of
that is below this."""


class DistributionVerdict(StrEnum):
    SAME = "same distribution"
    DISTORTED = "distorted"
    INCONCLUSIVE = "inconclusive"


@dataclass(frozen=True, slots=True)
class Position:
    """One emitted token and the target's post-sampler distribution at its prefix."""

    token: int
    top: tuple[tuple[int, float], ...]
    """(token id, probability) of the target's top-N; any order (it is ranked here)."""
    sequence: int = 0
    """Which continuation the token belongs to (the cluster of the effect size's CI)."""


def ranked_bins(top: Sequence[tuple[int, float]]) -> tuple[list[int], list[float]]:
    """Token ids by descending probability (ties by id), and the bin masses with the tail last.

    Probabilities are clipped at 0 and, when they sum past 1 by rounding, scaled back."""
    ordered = sorted(top, key=lambda item: (-item[1], item[0]))
    ids = [int(t) for t, _ in ordered]
    masses = [max(0.0, float(p)) for _, p in ordered]
    total = sum(masses)
    if total > 1.0:
        masses = [m / total for m in masses]
        total = 1.0
    masses.append(max(0.0, 1.0 - total))
    return ids, masses


def binned(position: Position) -> tuple[int, list[float]]:
    """(the emitted token's bin, the bin masses): the tail bin is the last."""
    ids, masses = ranked_bins(position.top)
    try:
        return ids.index(position.token), masses
    except ValueError:
        return len(ids), masses


def randomized_pit(position: Position, v: float) -> float:
    """u = F(bin-) + v * p(bin) for the emitted token's bin: U(0, 1) under H0 when v is."""
    return _pit(binned(position), v)


def _pit(bins: tuple[int, list[float]], v: float) -> float:
    b, masses = bins
    return min(1.0, sum(masses[:b]) + v * masses[b])


def pit_values(positions: Sequence[Position], seed: int = 0) -> np.ndarray:
    """Every position's randomized PIT, the v's from a seeded generator (reproducible)."""
    return _pit_values([binned(p) for p in positions], seed)


def _pit_values(prepared: Sequence[tuple[int, list[float]]], seed: int) -> np.ndarray:
    v = np.random.default_rng(seed).random(len(prepared))
    return np.array([_pit(b, float(x)) for b, x in zip(prepared, v, strict=True)])


def pit_chi_square(u: np.ndarray, bins: int = PIT_BINS) -> tuple[float, float]:
    """Chi-square of the u's against U(0, 1) in `bins` equal bins: (statistic, p-value)."""
    if len(u) == 0:
        return 0.0, 1.0
    counts = np.bincount(np.minimum((u * bins).astype(int), bins - 1), minlength=bins)
    expected = len(u) / bins
    stat = float(((counts - expected) ** 2).sum() / expected)
    return stat, float(scipy_stats.chi2.sf(stat, bins - 1))


def surprisal_term(position: Position) -> tuple[float, float]:
    """(d, var): the emitted bin's surprisal minus the bins' entropy, and d's variance, both
    under H0. Surprisals are capped at `SURPRISAL_CAP`."""
    return _surprisal(binned(position))


def _surprisal(bins: tuple[int, list[float]]) -> tuple[float, float]:
    b, masses = bins
    surprisal = [min(SURPRISAL_CAP, -math.log(m)) if m > 0 else SURPRISAL_CAP for m in masses]
    entropy = sum(m * s for m, s in zip(masses, surprisal, strict=True))
    second = sum(m * s * s for m, s in zip(masses, surprisal, strict=True))
    return surprisal[b] - entropy, max(0.0, second - entropy * entropy)


@dataclass(frozen=True, slots=True)
class SurprisalTest:
    z: float
    p_value: float
    excess: float
    """Mean excess surprisal per token in nats (> 0: the arm is hotter than the target)."""
    ci: tuple[float, float]


def surprisal_test(
    positions: Sequence[Position],
    confidence: float = 0.95,
    prepared: Sequence[tuple[int, list[float]]] | None = None,
) -> SurprisalTest:
    """z of the summed centred surprisal; the mean's CI clustered by continuation."""
    if not positions:
        return SurprisalTest(0.0, 1.0, 0.0, (-math.inf, math.inf))
    bins = prepared if prepared is not None else [binned(p) for p in positions]
    terms = [_surprisal(b) for b in bins]
    d = np.array([t[0] for t in terms])
    var = float(sum(t[1] for t in terms))
    z = float(d.sum() / math.sqrt(var)) if var > 0 else (0.0 if d.sum() == 0 else math.inf)
    p_value = float(2 * scipy_stats.norm.sf(abs(z)))
    n = len(d)
    mean = float(d.mean())
    clusters: dict[int, list[float]] = {}
    for position, value in zip(positions, d, strict=True):
        clusters.setdefault(position.sequence, []).append(float(value))
    q = float(scipy_stats.norm.ppf(0.5 + confidence / 2))
    if len(clusters) >= 2:
        # Cluster-robust (sandwich) standard error of the mean, with the small-sample factor.
        g = len(clusters)
        resid = sum((sum(c) - mean * len(c)) ** 2 for c in clusters.values())
        se = math.sqrt(resid * g / (g - 1)) / n
        q = t_quantile(g - 1, confidence)
    else:
        se = math.sqrt(var) / n
    return SurprisalTest(z, p_value, mean, (mean - q * se, mean + q * se))


@dataclass(frozen=True, slots=True)
class DistributionCheck:
    """One arm's verdict and the evidence behind it."""

    verdict: DistributionVerdict
    tokens: int
    sequences: int
    pit_chi2: float
    pit_p: float
    surprisal_z: float
    surprisal_p: float
    excess_nats: float
    excess_ci: tuple[float, float]
    off_support: int
    """Emitted tokens outside the target's top-N whose tail had no mass."""
    pit_counts: tuple[int, ...]
    alpha: float = ALPHA
    margin: float = MARGIN
    reason: str = ""

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["verdict"] = str(self.verdict)
        return data


def judge(
    positions: Sequence[Position],
    *,
    alpha: float = ALPHA,
    margin: float = MARGIN,
    min_tokens: int = MIN_TOKENS,
    bins: int = PIT_BINS,
    seed: int = 0,
) -> DistributionCheck:
    """The verdict: `distorted` when either test rejects at alpha / 2, `same distribution` when
    neither does, there are at least `min_tokens` and the excess's CI is inside +-margin,
    `inconclusive` otherwise."""
    prepared = [binned(p) for p in positions]
    u = _pit_values(prepared, seed)
    chi2, pit_p = pit_chi_square(u, bins)
    surprisal = surprisal_test(positions, prepared=prepared)
    counts = (
        np.bincount(np.minimum((u * bins).astype(int), bins - 1), minlength=bins)
        if len(u)
        else np.zeros(bins, dtype=int)
    )
    off = sum(1 for b, masses in prepared if b == len(masses) - 1 and masses[-1] <= 0.0)
    low, high = surprisal.ci
    if min(pit_p, surprisal.p_value) < alpha / 2:
        verdict = DistributionVerdict.DISTORTED
        side = "hotter" if surprisal.excess > 0 else "colder"
        reason = (
            f"PIT p={pit_p:.2g}, surprisal z={surprisal.z:+.2f} (p={surprisal.p_value:.2g}) "
            f"against alpha {alpha:g} / 2: the arm samples {side} than the target, "
            f"{surprisal.excess:+.3f} nats/token [{low:+.3f}, {high:+.3f}]"
        )
    elif len(positions) < min_tokens:
        verdict = DistributionVerdict.INCONCLUSIVE
        reason = f"{len(positions)} tokens tested, {min_tokens} needed"
    elif -margin <= low and high <= margin:
        verdict = DistributionVerdict.SAME
        reason = (
            f"no test rejects; excess surprisal {surprisal.excess:+.3f} nats/token, CI "
            f"[{low:+.3f}, {high:+.3f}] inside +-{margin:g}"
        )
    else:
        verdict = DistributionVerdict.INCONCLUSIVE
        reason = (
            f"no test rejects, but the excess surprisal's CI [{low:+.3f}, {high:+.3f}] is "
            f"wider than +-{margin:g}: more continuations would settle it"
        )
    return DistributionCheck(
        verdict=verdict,
        tokens=len(positions),
        sequences=len({p.sequence for p in positions}),
        pit_chi2=chi2,
        pit_p=pit_p,
        surprisal_z=surprisal.z,
        surprisal_p=surprisal.p_value,
        excess_nats=surprisal.excess,
        excess_ci=surprisal.ci,
        off_support=off,
        pit_counts=tuple(int(c) for c in counts),
        alpha=alpha,
        margin=margin,
        reason=reason,
    )


def total_variation(p: Mapping[int, float], q: Mapping[int, float]) -> float:
    """TV distance between two next-token distributions given as top-N maps.

    Mass outside each map's tokens is treated as one shared tail bin, so the distance is a
    lower bound of the true one when both have tails (exact when neither has)."""
    keys = set(p) | set(q)
    head = sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in keys)
    tail_p = max(0.0, 1.0 - sum(p.values()))
    tail_q = max(0.0, 1.0 - sum(q.values()))
    return 0.5 * (head + abs(tail_p - tail_q))


def sampling_ignored(
    outputs: Mapping[Any, Sequence[Sequence[int]]],
    target_logprob: Mapping[Any, float],
    *,
    alpha: float = IGNORED_ALPHA,
) -> tuple[bool, float | None]:
    """Did sampling take effect? (ignored, log-probability of what was seen under the target).

    `outputs[prefix]` are the continuations of one prefix under different seeds;
    `target_logprob[prefix]` is the target's log-probability of the first of them (the sum of
    its tokens' post-sampler logprobs). When every prefix's seeds agree token for token, the
    chance that the other seeds reproduced the first by sampling is
    exp(sum over prefixes of (seeds - 1) * logprob); below `alpha` the arm is not sampling.
    When any seeds disagree it is sampling (the second value is then None)."""
    total = 0.0
    for key, group in outputs.items():
        if len(group) < 2:
            continue
        first = list(group[0])
        if any(list(other) != first for other in group[1:]):
            return False, None
        total += (len(group) - 1) * target_logprob.get(key, 0.0)
    return total < math.log(alpha), total
