"""Statistics for paired comparisons. Pure functions: numbers in, dataclasses out.

A speed-up (or a nightly current/reference ratio) is measured as paired ratios: candidate over
baseline for the same task in the same round, the two requests sent seconds apart. Ratios
multiply, so they are averaged in log space (a geometric mean): a 2x gain and a 2x loss cancel.

What is the replicate? Not the request, and not the task alone. Measured on this 2-core host
with two identical servers: the per-round geometric mean moved with an sd of 2.8-5.9%, and
one round read 0.871 across *all* tasks at once, because a disturbance of twenty seconds hit
one arm's half of that round. A bootstrap over tasks keeps every round of a task together and
so never sees that drift: it gave identical servers 0.97x [0.95, 0.98]. So the table of log
ratios (tasks x rounds) is resampled in both directions at once, tasks and rounds each with
replacement and independently (Owen 2007, "the pigeonhole bootstrap"); that is conservative
for both sources of variance. The point estimate is a trimmed mean over rounds (with five or
more rounds the best and the worst round are set aside) so one bad round cannot swing it; the
rounds set aside are reported.

A percentile bootstrap does not know how few its replicates are: resampling 3 rounds draws
from 10 multisets, and its CI is as narrow as if the rounds' spread were known exactly. On
simulated A/A tables (12 tasks, rounds drifting with an sd of 3-4.5%) its 95% CI excluded 1 in
11-15% of 3-round runs and 8% of 4-round ones, and a 3-round bench is the default. So the CI is
never narrower than a t interval over the per-round means (rounds as the replicates,
n - 1 degrees of freedom: t = 4.30 at 3 rounds, 2.20 at 12): that brought the same A/A tables
to 3-6% at every round count, and from 5 rounds on it almost never widens the bootstrap's.
The same holds across tasks: a category of 4 tasks gives 35 distinct task resamples, and a
task offset that lasts the night made A/A category CIs exclude 1 in 15% of simulated nights.
So the floor (analysis/floor.py) adds a task term to the round term, se^2 = s_round^2 / R +
s_task^2 / C with Satterthwaite degrees of freedom (4.8%), and is centred on the printed,
trimmed estimate (Yuen's trimmed t), not on the untrimmed mean.

Single cells have heavy tails too: on this shared host one request of one arm read 5.9x (log
ratio +1.78) when a neighbour's burst landed on it, enough to move its round by 15% and to
widen the night's CI to +-20%. Such a cell fits neither its task nor its round, so before any
estimate the table is fitted as task + round effects (Tukey's median polish) and residuals
beyond ``table_fit.OUTLIER_K`` robust sds (1.4826 x MAD) are pulled back to that bound (winsorized),
from ``table_fit.WINSORIZE_FROM`` rounds on (fewer rounds give the residuals no scale).
Task and round effects are never touched: a regression on some tasks is a task effect, a
disturbed round is a round effect (trimmed and resampled as above). The cells pulled back are
counted, listed and tested for balance between the arms (analysis/tails.py): a build that
stalls on a few requests makes exactly such cells, all on one side.

Empty cells (a failed request) are fitted around: the per-round values are round effects of
a task + round fit, so a slow task missing from a round does not make that round look fast.
The failures themselves are judged apart (analysis/failures.py).

A verdict needs significance *and* size: a CI that excludes 1 and an estimate beyond the
practical threshold. A CI inside the threshold band is "no change"; anything else is
"inconclusive", with the half-width reached and the rounds that would resolve it.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field, replace

import numpy as np

from watchkeeper.analysis.floor import (
    MAX_ROUNDS,
    Floor,
    Settle,
    settle,
    two_way_floor,
)
from watchkeeper.analysis.table_fit import fit_effects, round_stat, winsorize_cells
from watchkeeper.analysis.tails import ClippedCell, TailCheck, sign_test
from watchkeeper.student import t_half_width, t_quantile

DEFAULT_RESAMPLES = 2000
CONFIDENCE = 0.95
MIN_ROUNDS = 3
"""Fewer rounds than this give no CI: two rounds cannot show how the host drifts."""
MIN_TASKS = 3
"""Fewer tasks than this give no CI. A server instance can favour one task in every round:
in eight A/A benches on this host (one task per category, 4 rounds) an identical twin read
its task at 1.07-1.11x in all four rounds, and 9 of 48 category CIs called a winner between
identical servers. Rounds cannot replicate that; only other tasks can."""
TRIM_FROM = 5
"""From this many rounds on, the best and worst round are set aside in the point estimate."""
DEFAULT_THRESHOLD = 0.03
METHOD = (
    "paired ratios (same task, same round, arms back to back), geometric mean; cells that fit "
    "neither their task nor their round (residual > 5 robust sd) winsorized from 5 rounds on; "
    "95% CI from a two-way bootstrap resampling tasks and rounds independently (Owen 2007), "
    "never narrower than a t floor over rounds and tasks (Yuen's trimmed t + task term, "
    "Satterthwaite df); "
    "estimate trims the best and worst round from 5 rounds on"
)


@dataclass(frozen=True, slots=True)
class Pair:
    task_id: str
    round: int
    baseline: float
    candidate: float


@dataclass(frozen=True, slots=True)
class RatioCI:
    """A paired ratio with its CI and the verdict it supports.

    ``low``/``high`` equal ``estimate`` when there were too few replicates for a CI; then
    ``verdict`` is "insufficient replicates" and nothing may be concluded from it."""

    estimate: float
    low: float
    high: float
    n_pairs: int
    n_clusters: int
    """Tasks."""
    n_rounds: int = 0
    verdict: str = "insufficient replicates"
    threshold: float = DEFAULT_THRESHOLD
    rounds_needed: int | None = None
    """For an inconclusive verdict: rounds that would bring the CI half-width to the reach
    (`analysis.floor.settle`: the round term shrinks, the task term does not, the t quantile
    falls). None with ``settle.add_tasks``: no number of rounds would."""
    discounted_rounds: tuple[int, ...] = ()
    """Rounds set aside by the trimmed estimate (still resampled in the CI)."""
    method: str = METHOD
    round_ratios: tuple[float, ...] = field(default=())
    """Per-round geometric means, in round order: what a reader checks for one bad round."""
    rounds: tuple[int, ...] = ()
    """The round numbers of ``round_ratios``, so per-round values of several categories can be
    lined up round by round (analysis.workload_mix); empty in results made before it."""
    winsorized_cells: int = 0
    """Cells (task x round) pulled back to the outlier bound before estimating."""
    settle: Settle | None = None
    """For an inconclusive verdict: more rounds (``rounds_needed``) or, when the spread
    between tasks alone is too wide for any number of rounds, "add tasks"."""
    tail: TailCheck | None = None
    """Where cells were winsorized: their balance between the arms and the unclipped table's
    verdict (analysis.tails). ``tail.regression``: a build that stalls on a few requests."""
    nan_resamples: int = 0
    """Bootstrap resamples with no value (every resampled cell empty), left out of the CI's
    quantiles: counted so a table with many empty cells shows it."""
    resamples: int = 0
    task_share: float = 0.0
    """Share of the floor's variance that comes from the spread between tasks."""
    task_logs: tuple[float, ...] = ()
    """Each task's fitted log ratio (`table_fit.fit_effects`): the task term a workload mix
    of several categories carries (analysis.workload_mix)."""
    floor: tuple[float, float] | None = None
    """The analytic floor under the CI (analysis.floor: Yuen's trimmed t over rounds plus the
    task term), centred on ``estimate``; the CI is the wider of it and the bootstrap's."""
    over: str = ""
    """What the interval replicates over where the rounds were too few for this CI and the
    sweep planned one over its tasks ('36 tasks': analysis/task_pick.py); empty: the CI
    over rounds and tasks above."""

    @property
    def tail_regression(self) -> bool:
        return self.tail is not None and self.tail.regression

    @property
    def has_ci(self) -> bool:
        return self.verdict != "insufficient replicates"

    @property
    def excludes_one(self) -> bool:
        return self.has_ci and (self.low > 1.0 or self.high < 1.0)

    @property
    def half_width(self) -> float | None:
        """Relative half-width of the CI (0.03 = +-3%)."""
        if not self.has_ci or self.low <= 0:
            return None
        return math.sqrt(self.high / self.low) - 1.0


def _table(pairs: Sequence[Pair]) -> tuple[np.ndarray, list[str], list[int]]:
    cells: dict[tuple[str, int], list[float]] = defaultdict(list)
    for p in pairs:
        cells[(p.task_id, p.round)].append(math.log(p.candidate / p.baseline))
    tasks = sorted({t for t, _ in cells})
    rounds = sorted({r for _, r in cells})
    table = np.full((len(tasks), len(rounds)), np.nan)
    for (t, r), values in cells.items():
        table[tasks.index(t), rounds.index(r)] = float(np.mean(values))
    return table, tasks, rounds


def classify(estimate: float, low: float, high: float, threshold: float) -> str:
    """faster / slower / no change / within threshold / inconclusive, for a ratio CI."""
    band = math.log1p(threshold)
    lo, hi, est = math.log(low), math.log(high), math.log(estimate)
    excludes_one = lo > 0 or hi < 0
    if excludes_one and abs(est) >= band:
        return "faster" if est > 0 else "slower"
    if -band <= lo and hi <= band:
        return "no change"
    if excludes_one:
        return "within threshold"
    return "inconclusive"


SERIES_VERDICTS = {
    "slower": "regression",
    "faster": "improvement",
    "within threshold": "suspicious",
    "no change": "no change",
    "inconclusive": "inconclusive",
    "insufficient replicates": "insufficient data",
}
"""`classify`'s words as a series over time reads them (the nightly's ratio to its pinned
reference, the soak's): slower than the reference is a regression, a change inside the band is
suspicious. Beside `classify` so every judge that maps its words uses this one map."""


def rounds_to_settle(
    estimate: float, low: float, high: float, n_rounds: int, threshold: float
) -> int:
    """Rounds that would settle an inconclusive CI read as a t interval over ``n_rounds``
    rounds (n - 1 df), if the rounds' spread and the estimate stay where they are.

    The half-width must come down to the distance from the estimate to the nearest verdict:
    inside the +-threshold band (`no change`) or clear of 1 (`within threshold`, or `faster`/
    `slower` beyond the band). A review once read 1.010 (0.981-1.037) after 12 rounds with a
    2.8% half-width; comparing that with the 3% threshold alone said "~11 rounds would settle
    it", fewer than it had run, when the band's edge is 2% away. The t quantile falls as rounds
    are added (4.30 at 3 rounds, 2.20 at 12): from 3 rounds at 1.01 +- 6%, scaling the
    half-width by the square root of the rounds alone asked for 27 where 8 do. Tables with a
    task term use `analysis.floor.settle`, which can answer "add tasks"."""
    half = math.log(high / low) / 2.0
    n = max(n_rounds, 2)
    kept = n - 2 if n >= TRIM_FROM else n
    q = t_quantile(kept - 1) if kept > 1 else math.inf
    term = (half / q) ** 2 if math.isfinite(q) else 0.0
    floor = Floor(math.log(estimate), term, float(kept - 1), n_rounds=n)
    found = settle(floor, estimate, threshold)
    return found.rounds if found.rounds is not None else MAX_ROUNDS


def log_t_interval(logs: np.ndarray, confidence: float = CONFIDENCE) -> tuple[float, float]:
    """Student's t interval of the mean of log ratios, in log space: honest with few
    replicates, where a percentile bootstrap cannot see beyond the sample's own range. The
    soak's CI (cycles); `paired_speedup` uses `analysis.floor` (rounds and tasks).
    Fewer than 2 values: an empty interval (inf, -inf), which widens nothing."""
    n = logs.size
    if n < 2:
        return math.inf, -math.inf
    mean = float(logs.mean())
    half = t_half_width(logs, confidence)
    return mean - half, mean + half


@dataclass(frozen=True, slots=True)
class _Interval:
    estimate_log: float
    low: float
    high: float
    """Log bounds: the wider of the bootstrap's and the floor's."""
    nan_resamples: int
    floor: Floor


def _interval(table: np.ndarray, *, resamples: int, confidence: float, seed: int) -> _Interval:
    """Two-way bootstrap of the trimmed estimate, floored by `analysis.floor`."""
    n_tasks, n_rounds = table.shape
    rng = np.random.default_rng(seed)
    stats = np.empty(resamples)
    for i in range(resamples):
        rows = rng.integers(0, n_tasks, size=n_tasks)
        cols = rng.integers(0, n_rounds, size=n_rounds)
        stats[i] = round_stat(table[np.ix_(rows, cols)])
    nan = int(np.isnan(stats).sum())
    stats = stats[~np.isnan(stats)]
    alpha = (1.0 - confidence) / 2.0
    estimate = round_stat(table)
    # Centred on the estimate: a resample that draws a bad round twice trims only one copy,
    # so the resamples' median sits below the trimmed estimate when one round was bad (one
    # 0.871 round in 24 x 12: 0.988 against 0.997). The percentile interval keeps its shape
    # and moves by that bias.
    boot_low, boot_mid, boot_high = np.quantile(stats, [alpha, 0.5, 1.0 - alpha])
    shift = estimate - boot_mid
    per_round, per_task = fit_effects(table)
    floor = two_way_floor(per_round, per_task)
    f_low, f_high = floor.interval(confidence)
    return _Interval(
        estimate,
        float(min(boot_low + shift, f_low)),
        float(max(boot_high + shift, f_high)),
        nan,
        floor,
    )


def _tail_check(
    raw: np.ndarray,
    moved: np.ndarray,
    resid: np.ndarray,
    tasks: list[str],
    rounds: list[int],
    clipped_verdict: str,
    threshold: float,
    *,
    resamples: int,
    confidence: float,
    seed: int,
) -> TailCheck:
    cells = tuple(
        ClippedCell(tasks[i], rounds[j], float(resid[i, j]))
        for i, j in zip(*np.nonzero(moved), strict=True)
    )
    raw_ci = _interval(raw, resamples=resamples, confidence=confidence, seed=seed)
    est, low, high = (float(np.exp(v)) for v in (raw_ci.estimate_log, raw_ci.low, raw_ci.high))
    slow = sum(c.residual < 0 for c in cells)
    return TailCheck(
        cells,
        sign_test(slow, len(cells) - slow),
        est,
        low,
        high,
        classify(est, low, high, threshold),
        clipped_verdict,
    )


def paired_speedup(
    pairs: Sequence[Pair],
    *,
    resamples: int = DEFAULT_RESAMPLES,
    confidence: float = CONFIDENCE,
    seed: int = 0,
    threshold: float = DEFAULT_THRESHOLD,
    min_rounds: int = MIN_ROUNDS,
    min_tasks: int = MIN_TASKS,
) -> RatioCI | None:
    """Trimmed geometric-mean ratio with a two-way bootstrap CI (no narrower than the floor
    over rounds and tasks, `analysis.floor`); None when no valid pair.
    Fewer than ``min_rounds`` rounds or ``min_tasks`` tasks: the estimate without a CI
    ("insufficient replicates")."""
    valid = [p for p in pairs if p.baseline > 0 and p.candidate > 0]
    if not valid:
        return None
    raw, tasks, rounds = _table(valid)
    table, moved, resid = winsorize_cells(raw)
    winsorized = int(np.count_nonzero(moved))
    discounted, round_ratios, present = _round_ratios(table, rounds)
    estimate = float(np.exp(round_stat(table)))
    n_tasks, n_rounds = table.shape
    task_logs = tuple(float(v) for v in fit_effects(table)[1] if not np.isnan(v))
    base = RatioCI(
        estimate,
        estimate,
        estimate,
        len(valid),
        n_tasks,
        n_rounds,
        threshold=threshold,
        discounted_rounds=discounted,
        round_ratios=round_ratios,
        rounds=present,
        winsorized_cells=winsorized,
        task_logs=task_logs,
    )
    if n_rounds < min_rounds or n_tasks < min_tasks:
        return base
    ci = _interval(table, resamples=resamples, confidence=confidence, seed=seed)
    low, high = float(np.exp(ci.low)), float(np.exp(ci.high))
    verdict = classify(estimate, low, high, threshold)
    found = (
        settle(ci.floor, estimate, threshold, half_width=(ci.high - ci.low) / 2.0)
        if verdict == "inconclusive"
        else None
    )
    tail = (
        _tail_check(
            raw,
            moved,
            resid,
            tasks,
            rounds,
            verdict,
            threshold,
            resamples=resamples,
            confidence=confidence,
            seed=seed,
        )
        if winsorized
        else None
    )
    return replace(
        base,
        low=low,
        high=high,
        verdict=verdict,
        rounds_needed=found.rounds if found is not None else None,
        settle=found,
        tail=tail,
        nan_resamples=ci.nan_resamples,
        resamples=resamples,
        task_share=ci.floor.task_share,
        floor=tuple(float(np.exp(v)) for v in ci.floor.interval(confidence)),  # type: ignore[arg-type]
    )


def _round_ratios(
    table: np.ndarray, rounds: Sequence[int]
) -> tuple[tuple[int, ...], tuple[float, ...], tuple[int, ...]]:
    """The rounds the trimmed estimate discounts (its lowest and highest, from TRIM_FROM
    rounds on), every round's geometric mean in round order (what a reader checks for one
    bad round) and those rounds' numbers."""
    per_round, _ = fit_effects(table)
    present = [(float(v), r) for v, r in zip(per_round, rounds, strict=True) if not np.isnan(v)]
    discounted: tuple[int, ...] = ()
    if len(present) >= TRIM_FROM:
        ordered = sorted(present)
        discounted = (ordered[0][1], ordered[-1][1])
    ordered_rounds = sorted(present, key=lambda x: x[1])
    return (
        discounted,
        tuple(float(np.exp(v)) for v, _ in ordered_rounds),
        tuple(r for _, r in ordered_rounds),
    )


def median(values: Sequence[float | None]) -> float | None:
    present = [v for v in values if v is not None]
    return float(np.median(present)) if present else None


def quantile_ms(seconds: Sequence[float | None], q: float) -> float | None:
    """The q-quantile of latencies given in seconds, in milliseconds; None when there are none."""
    present = [v for v in seconds if v is not None]
    return float(np.quantile(present, q)) * 1000.0 if present else None


def coefficient_of_variation(values: Sequence[float]) -> float | None:
    if len(values) < 2:
        return None
    mean = float(np.mean(values))
    return float(np.std(values, ddof=1) / mean) if mean else None


def wilson(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """Wilson score interval of a proportion: honest at 0 of n, where the normal one is not."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)
