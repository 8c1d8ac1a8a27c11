"""The distribution check's statistics on synthetic targets: its false-alarm rate when the arm
samples the target's own distribution, and its power against the three positive controls the
real-server probe is measured with (greedy at T > 0, a hotter temperature, a truncated nucleus).

Targets are random next-token distributions over a 200-token vocabulary (softmax of N(0, 2)
logits at T = 0.7), reported as a top-20 with a tail, in continuations of 20 tokens: the shape
the server probe produces. Every generator is seeded, so the counts below are exact and the
thresholds are binomial bounds, not hopes.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable

import numpy as np
import pytest

from watchkeeper.checks.distribution_stats import (
    DistributionVerdict,
    Position,
    judge,
    pit_chi_square,
    pit_values,
    randomized_pit,
    ranked_bins,
    sampling_ignored,
    surprisal_term,
    total_variation,
)

VOCAB, TOP_N, T = 200, 20, 0.7
Distort = Callable[[np.ndarray, np.ndarray], np.ndarray]


def _softmax(x: np.ndarray) -> np.ndarray:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _same(logits: np.ndarray, p: np.ndarray) -> np.ndarray:
    return p


def _greedy(logits: np.ndarray, p: np.ndarray) -> np.ndarray:
    q = np.zeros_like(p)
    q[np.arange(len(p)), p.argmax(axis=1)] = 1.0
    return q


def _hotter(logits: np.ndarray, p: np.ndarray) -> np.ndarray:
    return _softmax(logits / (T + 0.1))


def _top_p(logits: np.ndarray, p: np.ndarray) -> np.ndarray:
    """Smallest set of top tokens reaching 0.9, renormalized (llama.cpp's top_p)."""
    order = np.argsort(-p, axis=1)
    sorted_p = np.take_along_axis(p, order, axis=1)
    before = np.cumsum(sorted_p, axis=1) - sorted_p
    keep_sorted = before < 0.9
    keep = np.zeros_like(p, dtype=bool)
    np.put_along_axis(keep, order, keep_sorted, axis=1)
    q = np.where(keep, p, 0.0)
    return q / q.sum(axis=1, keepdims=True)


def _sample(
    rng: np.random.Generator, distort: Distort, sequences: int = 30, length: int = 20
) -> tuple[list[Position], float]:
    """Positions whose token is drawn from distort(p) while the target reports p; mean TV."""
    n = sequences * length
    logits = rng.standard_normal((n, VOCAB)) * 2.0
    p = _softmax(logits / T)
    q = distort(logits, p)
    cdf = np.cumsum(q, axis=1)
    tokens = np.minimum((cdf < rng.random((n, 1)) * cdf[:, -1:]).sum(axis=1), VOCAB - 1)
    top = np.argsort(-p, axis=1)[:, :TOP_N]
    positions = [
        Position(int(tokens[i]), tuple((int(t), float(p[i, t])) for t in top[i]), i // length)
        for i in range(n)
    ]
    return positions, float(0.5 * np.abs(p - q).sum(axis=1).mean())


def _verdicts(distort: Distort, reps: int, seed: int) -> Counter[DistributionVerdict]:
    rng = np.random.default_rng(seed)
    return Counter(judge(_sample(rng, distort)[0], seed=i).verdict for i in range(reps))


def test_pit_is_uniform_under_h0_including_the_tail_bin() -> None:
    """The randomized PIT of a token drawn from the reported distribution is U(0, 1), also
    when most draws land in the lumped tail (top-3 of a flat 200-token vocabulary)."""
    rng = np.random.default_rng(7)
    positions = []
    for _ in range(4000):
        p = _softmax(rng.standard_normal(VOCAB) * 0.5)
        token = int(rng.choice(VOCAB, p=p))
        top = np.argsort(-p)[:3]
        positions.append(Position(token, tuple((int(i), float(p[i])) for i in top)))
    u = pit_values(positions, seed=1)
    assert sum(1 for p in positions if ranked_bins(p.top)[0].count(p.token) == 0) > 3000
    _, p_value = pit_chi_square(u)
    assert p_value > 0.01
    assert abs(float(u.mean()) - 0.5) < 0.02


def test_pit_and_surprisal_of_one_position() -> None:
    position = Position(5, ((5, 0.25), (9, 0.5)))
    assert ranked_bins(position.top) == ([9, 5], [0.5, 0.25, 0.25])
    assert randomized_pit(position, 0.0) == pytest.approx(0.5)
    assert randomized_pit(position, 1.0) == pytest.approx(0.75)
    d, var = surprisal_term(position)
    entropy = 0.5 * math.log(2) + 2 * 0.25 * math.log(4)
    assert d == pytest.approx(math.log(4) - entropy)
    assert var == pytest.approx(0.5 * math.log(2) ** 2 + 0.5 * math.log(4) ** 2 - entropy**2)


def test_false_alarm_rate_on_the_targets_own_samples() -> None:
    """200 checks of 600 tokens, arm = target: alpha is 0.01, so 2 alarms are expected and
    P(>= 8) = 0.001. At this sample size about 70% say `same distribution` (the excess's CI
    is about +-0.1 nats against the 0.15 margin), the rest `inconclusive`."""
    verdicts = _verdicts(_same, reps=200, seed=11)
    assert verdicts[DistributionVerdict.DISTORTED] <= 7
    assert verdicts[DistributionVerdict.SAME] >= 120


@pytest.mark.parametrize(
    ("distort", "min_power", "tv_range"),
    [
        (_greedy, 1.0, (0.5, 0.8)),
        (_hotter, 0.9, (0.05, 0.15)),
        (_top_p, 0.9, (0.05, 0.15)),
    ],
    ids=["greedy at T>0", "T 0.8 for 0.7", "top_p 0.9 for 1.0"],
)
def test_power_against_the_positive_controls(
    distort: Distort, min_power: float, tv_range: tuple[float, float]
) -> None:
    rng = np.random.default_rng(3)
    _, tv = _sample(rng, distort)
    assert tv_range[0] < tv < tv_range[1]
    verdicts = _verdicts(distort, reps=40, seed=5)
    assert verdicts[DistributionVerdict.DISTORTED] / 40 >= min_power
    assert verdicts[DistributionVerdict.SAME] == 0


def test_direction_of_the_excess() -> None:
    rng = np.random.default_rng(9)
    hot = judge(_sample(rng, _hotter)[0])
    cold = judge(_sample(rng, _greedy)[0])
    assert hot.excess_nats > 0 and hot.excess_ci[0] > 0
    assert cold.excess_nats < 0 and cold.excess_ci[1] < 0
    assert "hotter" in hot.reason and "colder" in cold.reason


def test_too_few_tokens_is_inconclusive_and_off_support_is_counted() -> None:
    rng = np.random.default_rng(2)
    few = judge(_sample(rng, _same, sequences=3, length=20)[0])
    assert few.verdict == DistributionVerdict.INCONCLUSIVE
    assert few.tokens == 60 and few.sequences == 3
    off = judge([Position(7, ((1, 0.6), (2, 0.4)))])
    assert off.off_support == 1


def test_total_variation() -> None:
    assert total_variation({1: 0.5, 2: 0.5}, {1: 0.5, 2: 0.5}) == 0.0
    assert total_variation({1: 1.0}, {2: 1.0}) == 1.0
    assert total_variation({1: 0.6, 2: 0.3}, {1: 0.5}) == pytest.approx(0.5 * (0.1 + 0.3 + 0.4))


def test_sampling_ignored() -> None:
    same = {"a": [[1, 2, 3]] * 4, "b": [[4, 5]] * 4}
    ignored, logp = sampling_ignored(same, {"a": -3.0, "b": -2.0})
    assert ignored and logp == pytest.approx(-15.0)
    # A near-deterministic target reproduces itself legitimately: not flagged.
    assert sampling_ignored(same, {"a": -0.01, "b": -0.01}) == (False, pytest.approx(-0.06))
    varied = {"a": [[1, 2, 3], [1, 2, 4]], "b": [[4, 5]] * 2}
    assert sampling_ignored(varied, {"a": -3.0}) == (False, None)
