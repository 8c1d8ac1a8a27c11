"""Issue 28: ten places where a nightly verdict could mislead, one test (or more) per item.

Seeded synthetic tables of the nightly's shape (24 tasks x 12 rounds, cell sd 2%, six
categories of four tasks); the numbers in each docstring are what the old code gave. New
names are imported inside the tests so that each test fails on the old code for its own
reason."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from support.references import pin_reference

from watchkeeper.analysis.benchmark import (
    ALL,
    ArmSpec,
    BenchMethod,
    BenchResult,
    analyze,
)
from watchkeeper.analysis.stats import Pair, paired_speedup
from watchkeeper.host.info import HostInfo
from watchkeeper.load.records import RequestSample, RunResult
from watchkeeper.nightly.ratios import night_noise, night_ratios, with_night_noise
from watchkeeper.store.references import RatioRecord

TASKS, ROUNDS, CELL_SD = 24, 12, 0.02
CATEGORIES = ("chat", "code", "math", "prose", "rag", "tools")
RESAMPLES = 400


def nightly_table(
    *,
    seed: int,
    tasks: int = TASKS,
    rounds: int = ROUNDS,
    ratio: float = 1.0,
    cell_sd: float = CELL_SD,
    round_sd: float = 0.0,
    task_sd: float = 0.0,
) -> np.ndarray:
    """Log ratios current/reference: grand + task offset + round drift + cell noise."""
    rng = np.random.default_rng(seed)
    return (
        math.log(ratio)
        + rng.normal(0, task_sd, size=(tasks, 1))
        + rng.normal(0, round_sd, size=(1, rounds))
        + rng.normal(0, cell_sd, size=(tasks, rounds))
    )


def as_pairs(table: np.ndarray) -> list[Pair]:
    return [
        Pair(f"t{i:02d}", r, 20.0, 20.0 * math.exp(table[i, r]))
        for i in range(table.shape[0])
        for r in range(table.shape[1])
        if not np.isnan(table[i, r])
    ]


def stall(table: np.ndarray, *, share: float, slower: float, seed: int) -> np.ndarray:
    """A build that is `slower` (0.3 = 30% slower) on a random `share` of its requests."""
    rng = np.random.default_rng(seed + 1000)
    hit = rng.random(table.shape) < share
    return table + np.where(hit, math.log1p(-slower), 0.0)


HOST = HostInfo("h" * 64, "nightbox", "Test CPU", 2, 8 << 30, None, "Linux")
T0 = datetime(2026, 11, 20, 2, 0, tzinfo=UTC)
REF, CUR = "p@reference", "p"


def bench_result(
    table: np.ndarray,
    *,
    failed: dict[str, set[tuple[int, int]]] | None = None,
    rounds: int | None = None,
    no_speed: bool = False,
    paused: dict[str, dict[tuple[int, int], float]] | None = None,
) -> BenchResult:
    """A current-vs-reference bench through the real `analyze`: the reference at 20 tok/s,
    the current at 20 x exp(cell); task i is in category CATEGORIES[i // 4]. `failed` maps an
    arm to the (task, round) requests that failed (no speed); `paused` to the requests a pause
    of that many seconds lengthened outside the decode (the prompt phase: speed untouched)."""
    failed = failed or {}
    paused = paused or {}
    n_tasks, n_rounds = table.shape
    runs = []
    for arm in (REF, CUR):
        for r in range(rounds or n_rounds):
            samples = []
            for i in range(n_tasks):
                bad = (i, r) in failed.get(arm, set())
                speed = 20.0 if arm == REF else 20.0 * math.exp(table[i, r])
                samples.append(
                    RequestSample(
                        task_id=f"t{i:02d}",
                        category=CATEGORIES[i // 4 % len(CATEGORIES)],
                        seq=i,
                        started_at=T0,
                        completion_tokens=None if bad else 64,
                        decode_tps_server=None if bad else speed,
                        latency_s=None if bad else 64 / speed + paused.get(arm, {}).get((i, r), 0),
                        output_text="" if bad else "ok",
                        error="timed out after 120 s" if bad and not no_speed else None,
                    )
                )
            runs.append(RunResult(arm, arm, r, False, 1, T0, T0, tuple(samples), ("llama-server",)))
    arms = [
        ArmSpec(REF, "baseline", None, None, "m", "a" * 64, None, None, ("llama-server",)),
        ArmSpec(
            CUR, "candidate", None, None, "m", "a" * 64, None, None, ("llama-server",),
            speculative=False,
        ),
    ]  # fmt: skip
    method = BenchMethod(
        rounds=n_rounds, warmup_rounds=0, warmup_tasks=0, concurrency=1, tasks=n_tasks,
        categories=CATEGORIES, temperature=0.0, seed=0, near_tie_threshold=0.1,
        resamples=RESAMPLES,
    )  # fmt: skip
    return analyze(
        campaign_id=7, kind="nightly", host=HOST, build_version="b", build_variant="cpu",
        started_at=T0, finished_at=T0, arms=arms, runs=runs, method=method,
        degenerate_threshold=0.5, length_tolerance=0.5,
    )  # fmt: skip


def nightly_records(result: BenchResult, *, aa: bool = False) -> dict[str, RatioRecord]:
    from watchkeeper.nightly.ratios import judge_night

    records = night_ratios(
        result, current_arm=CUR, profile="p", reference_id=1, host_fingerprint=HOST.fingerprint,
        aa=aa, threshold=0.03,
    )  # fmt: skip
    return {r.category: r for r in judge_night(result, records, current_arm=CUR)}


# --- item 1 -------------------------------------------------------------------------------


@pytest.mark.parametrize(("share", "slower"), [(0.10, 0.30), (0.03, 0.60)])
def test_item1_winsorizing_does_not_hide_one_sided_stalls(share: float, slower: float) -> None:
    """10% of cells 30% slower (true ratio 0.964): the clipped table read 0.989 and `no change`
    in 20 of 20 runs; 3% of cells 60% slower (0.971) read 0.997. The clipped cells are all on
    the current arm's slow side: the sign test and the unclipped table both see it."""
    for seed in range(6):
        table = stall(nightly_table(seed=seed), share=share, slower=slower, seed=seed)
        ci = paired_speedup(as_pairs(table), resamples=RESAMPLES, seed=seed)
        assert ci is not None
        assert ci.tail is not None and ci.tail_regression, (seed, ci.verdict, ci.estimate)
        assert ci.tail.slow > ci.tail.fast
        assert ci.tail.raw_estimate < ci.estimate


def test_item1_aa_nights_with_a_burst_on_either_arm_are_not_tail_regressions() -> None:
    """On A/A the clipped cells are host bursts that hit either request of a pair."""
    flagged = 0
    for seed in range(30):
        table = nightly_table(seed=seed, round_sd=0.01)
        rng = np.random.default_rng(seed)
        for _ in range(2):  # two bursts a night, each on a random arm
            i, r = rng.integers(0, TASKS), rng.integers(0, ROUNDS)
            table[i, r] += rng.choice([-1.0, 1.0]) * 0.6
        ci = paired_speedup(as_pairs(table), resamples=RESAMPLES, seed=seed)
        assert ci is not None
        flagged += ci.tail_regression
    assert flagged <= 1


def test_item1_the_night_says_suspicious_tail_regression_and_lists_the_clipped_cells() -> None:
    table = stall(nightly_table(seed=3), share=0.10, slower=0.30, seed=3)
    records = nightly_records(bench_result(table))
    overall = records[ALL]
    assert overall.verdict == "suspicious: tail regression"
    from watchkeeper.nightly.night_checks import series_checks

    check = series_checks(bench_result(table), current_arm=CUR)[ALL]
    assert check.tail is not None
    note = check.describe()
    assert "round" in note and "clipped cells slow" in note
    # The p95/p99 latency per arm beside the ratio: the stalls are in the current arm's tail.
    assert check.latency_ms is not None
    (_, cur99), (_, ref99) = check.latency_ms["current"], check.latency_ms["reference"]
    assert cur99 is not None and ref99 is not None and cur99 > 1.3 * ref99


def test_item1_stalls_in_the_prompt_phase_are_named_by_the_paired_latencies() -> None:
    """Measured on 2026-11-25 (tests/nightly/test_stall_real.py, quiet host): a pause that lands
    in the prompt phase leaves the decode speed alone; the night read 0.997 [0.938, 1.069] and
    winsorized 2 cells, while 6 of 36 current requests took 2.0-3.3x the reference's latency and
    none the other way. Here: decode speeds of an A/A night, 2 s pauses (a request takes 3.2 s)
    on 10 of the current arm's 288 requests."""
    table = nightly_table(seed=6)
    hits = {(i, r): 2.0 for i, r in ((1, 0), (3, 2), (5, 4), (7, 6), (9, 8), (11, 10),
                                     (13, 1), (15, 3), (17, 5), (19, 7))}  # fmt: skip
    result = bench_result(table, paused={CUR: hits})
    records = nightly_records(result)
    assert records[ALL].verdict == "suspicious: tail regression"
    from watchkeeper.nightly.night_checks import series_checks

    check = series_checks(result, current_arm=CUR)[ALL]
    assert check.losses is not None and len(check.losses.slow) == 10 and check.losses.fast == 0
    assert "stalls: 10 of 288 requests took 1.5x" in check.describe()
    assert check.to_json()["latency_losses"]["regression"] is True


def test_item1_pauses_on_both_arms_alike_are_no_tail_regression() -> None:
    """A neighbour's bursts lengthen requests of either arm: the big losses split."""
    table = nightly_table(seed=7)
    cur = {(i, 3): 2.0 for i in range(0, 10, 2)}
    ref = {(i, 5): 2.0 for i in range(1, 11, 2)}
    records = nightly_records(bench_result(table, paused={CUR: cur, REF: ref}))
    assert records[ALL].verdict == "no change"


def test_item1_big_latency_losses_split_by_chance_rarely_flag() -> None:
    """The sign test's own false-alarm rate: big losses that fall on either arm by a coin flip
    (0-20 of them a night) flag at most its alpha (5%) of the time."""
    from watchkeeper.analysis.tails import LatencyPair, latency_losses

    rng = np.random.default_rng(11)
    flagged = 0
    for _ in range(400):
        pairs = [LatencyPair(f"t{k}", 0, 1.0, 1.0) for k in range(200)]
        for k in range(int(rng.integers(0, 21))):
            pairs[k] = (
                LatencyPair(f"t{k}", 0, 1.0, 2.0)
                if rng.random() < 0.5
                else LatencyPair(f"t{k}", 0, 2.0, 1.0)
            )
        losses = latency_losses(pairs)
        assert losses is not None
        flagged += losses.regression
    assert flagged / 400 <= 0.05


# --- item 2 -------------------------------------------------------------------------------


def test_item2_failed_requests_on_the_current_arm_are_a_regression_whatever_the_ratio() -> None:
    """The current build times out on the heaviest tasks (12 of 288 requests); the pairs that
    remain read 1.00x, `no change`, and the failures vanished from the verdict."""
    table = nightly_table(seed=4)
    timeouts = {(i, r) for i in (0, 5) for r in range(0, 12, 2)}
    result = bench_result(table, failed={CUR: timeouts})
    records = nightly_records(result)
    assert records[ALL].verdict == "regression"
    from watchkeeper.nightly.night_checks import series_checks

    check = series_checks(result, current_arm=CUR)[ALL].failures
    assert check is not None and check.regression
    assert (check.current_failed, check.reference_failed) == (12, 0)


def test_item2_requests_that_return_no_speed_count_as_failed() -> None:
    table = nightly_table(seed=4)
    silent = {(i, r) for i in (0, 5) for r in range(0, 12, 2)}
    result = bench_result(table, failed={CUR: silent}, no_speed=True)
    assert nightly_records(result)[ALL].verdict == "regression"


def test_item2_a_failure_or_two_on_either_arm_is_no_verdict() -> None:
    from watchkeeper.analysis.failures import failure_check

    assert not failure_check(1, 288, 0, 288).regression
    assert not failure_check(2, 288, 1, 288).regression
    assert failure_check(6, 288, 0, 288).regression
    # Fisher's exact test, one-sided: scipy's own figure.
    assert failure_check(6, 288, 0, 288).p_value == pytest.approx(0.01535, abs=2e-4)


def test_item2_missing_cells_do_not_mix_task_effects_into_round_effects() -> None:
    """A task 20% slower than the rest (a task effect) missing from every other round: the
    per-round means jumped between 0.99 and 1.0 with its presence, and the rounds' t floor
    read that as round-to-round drift."""
    table = nightly_table(seed=5, cell_sd=0.002)
    table[0, :] += math.log(0.8)
    table[0, ::2] = np.nan
    ci = paired_speedup(as_pairs(table), resamples=RESAMPLES)
    assert ci is not None
    spread = max(ci.round_ratios) / min(ci.round_ratios)
    assert spread < 1.003, ci.round_ratios


# --- items 5, 7, 8 ------------------------------------------------------------------------


def test_item5_category_cis_from_four_tasks_are_floored_across_tasks() -> None:
    """A/A categories of 4 tasks, each task offset by sd 2% for the whole night: the CI
    excluded 1 in 15.5% of 600 runs (35 distinct task resamples); with the task term 4.8%
    (and 3.3% with 24 tasks)."""
    runs, excluded = 300, 0
    for seed in range(runs):
        table = nightly_table(seed=seed, tasks=4, task_sd=0.02, round_sd=0.005)
        ci = paired_speedup(as_pairs(table), resamples=200, seed=seed)
        assert ci is not None
        excluded += ci.excludes_one
    assert excluded / runs <= 0.075


def test_item7_rounds_to_settle_uses_the_t_quantile() -> None:
    """From 3 rounds at 1.01 +- 6% the square-root rule asked for 27 rounds."""
    from watchkeeper.analysis.stats import rounds_to_settle

    assert rounds_to_settle(1.01, 1.01 / 1.06, 1.01 * 1.06, 3, 0.03) <= 12


def test_item7_genuinely_different_tasks_ask_for_tasks_not_rounds() -> None:
    """12 tasks whose speed-ups differ (sd 5%): at 12 rounds it asked for 14 more, at 48 for
    49, forever; the task term does not shrink with rounds."""
    for rounds in (12, 48):
        table = nightly_table(seed=2, tasks=12, rounds=rounds, task_sd=0.05, ratio=1.01)
        ci = paired_speedup(as_pairs(table), resamples=RESAMPLES)
        assert ci is not None and ci.verdict == "inconclusive"
        assert ci.rounds_needed is None
        assert ci.settle is not None and ci.settle.add_tasks
        assert "tasks" in ci.settle.describe() and "reach" not in ci.settle.describe()


def test_item7_rounds_suffice_where_the_tasks_agree() -> None:
    table = nightly_table(seed=2, tasks=12, rounds=4, round_sd=0.05, ratio=1.01)
    ci = paired_speedup(as_pairs(table), resamples=RESAMPLES)
    assert ci is not None and ci.verdict == "inconclusive"
    assert ci.rounds_needed is not None and ci.rounds_needed > 4


def test_item8_the_floor_is_centred_on_the_printed_estimate() -> None:
    """One 0.871 round in 24 x 12: estimate 0.997, CI [0.964, 1.012], centred on 0.988 (the
    untrimmed mean): the CI's upper end came from that floor. Yuen's trimmed t is centred on
    the trimmed estimate; the bootstrap keeps its own (longer) lower tail."""
    table = nightly_table(seed=8, round_sd=0.01)
    table[:, 5] += math.log(0.871)
    ci = paired_speedup(as_pairs(table), resamples=RESAMPLES)
    assert ci is not None and ci.floor is not None
    low, high = ci.floor
    assert math.sqrt(low * high) == pytest.approx(ci.estimate, rel=1e-9)
    assert ci.low <= low and ci.high >= high
    # The untrimmed mean the old floor was centred on lies 0.6% below the estimate.
    assert ci.estimate / math.exp(float(np.mean(table))) > 1.005


# --- item 6 -------------------------------------------------------------------------------


def _aa_night(estimate: float, n: int) -> RatioRecord:
    return RatioRecord(
        campaign_id=n, reference_id=1, series="h|p|all|decode_tps", host_fingerprint="h",
        profile="p", category="all", metric="decode_tps", estimate=estimate, low=estimate * 0.99,
        high=estimate * 1.01, n_pairs=288, n_tasks=24, n_rounds=12, threshold=0.03,
        verdict="no change", aa=True,
    )  # fmt: skip


def test_item6_the_aa_floor_uses_the_t_quantile_of_its_nights() -> None:
    """8 A/A nights: t with 7 df is 2.365, not 1.96 (21% wider)."""
    logs = np.array([-0.01, 0.008, 0.002, -0.004, 0.012, -0.006, 0.0, 0.003])
    nights = [_aa_night(math.exp(v), i) for i, v in enumerate(logs)]
    noise = night_noise(nights, prior_sd=0.0)
    tonight = _aa_night(1.0, 99)
    judged = with_night_noise(tonight, noise)
    assert judged.high is not None
    sd = float(np.std(logs, ddof=1))
    assert math.log(judged.high) == pytest.approx(2.364624 * sd, rel=1e-3)


def test_item6_the_night_has_a_prior_whatever_restart_every_is() -> None:
    """With the default `restart_every = 1` the prior was 0: nothing widened the night's CI
    until 8 A/A nights existed, which never happens once current and reference differ."""
    from watchkeeper.config.model import NightlyConfig
    from watchkeeper.nightly.ratios import prior_night_sd

    for restart_every in (0, 1, 4):
        config = NightlyConfig(restart_every=restart_every)
        assert prior_night_sd(config) > 0
    assert prior_night_sd(NightlyConfig(restart_every=0)) >= prior_night_sd(NightlyConfig())


# --- item 10 ------------------------------------------------------------------------------


def test_item10_nan_resamples_are_counted_not_dropped_silently() -> None:
    """A sparse table (most cells empty) gives resamples with no cell at all."""
    table = nightly_table(seed=1, tasks=4, rounds=5)
    rng = np.random.default_rng(1)
    table[rng.random(table.shape) < 0.7] = np.nan
    for i in range(4):  # every task and round keeps one cell
        table[i, i] = 0.0
    table[0, 4] = 0.0
    ci = paired_speedup(as_pairs(table), resamples=RESAMPLES)
    assert ci is not None and ci.has_ci
    assert ci.nan_resamples > 0
    assert ci.resamples == RESAMPLES


def test_item10_per_category_below_three_is_refused_with_a_reason() -> None:
    """`nightly.per_category = 2` was accepted, and every category then said `insufficient
    data` forever without a word why."""
    from watchkeeper.commands.nightly import check_per_category
    from watchkeeper.config.model import NightlyConfig
    from watchkeeper.errors import ConfigError

    with pytest.raises(ConfigError, match="3 tasks"):
        check_per_category(NightlyConfig(per_category=2))
    check_per_category(NightlyConfig(per_category=3))


def test_item10_a_flag_from_weeks_ago_does_not_confirm_tonights(tmp_path: object) -> None:
    from watchkeeper.store.db import Database
    from watchkeeper.store.references import ReferenceStore
    from watchkeeper.store.repository import Repository

    db = Database(f"sqlite:///{tmp_path}/wk.sqlite")
    try:
        store = ReferenceStore(db)
        repo = Repository(db)
        host = repo.ensure_host(HOST)
        first, second = (
            repo.create_campaign(kind="nightly", host_id=host, build_id=None, params={})
            for _ in range(2)
        )
        ref = pin_reference(db, profile="p", host="h", pinned_by="t", reason="r")
        old = _aa_night(0.9, first)
        store.add_ratios([
            RatioRecord(**{**_fields(old), "reference_id": ref.id, "verdict": "regression",
                           "aa": False, "created_at": T0 - timedelta(days=21)}),
        ])  # fmt: skip
        tonight = T0
        window = timedelta(days=3)
        assert store.previous(old.series, ref.id, second) is not None
        assert store.previous(old.series, ref.id, second, since=tonight - window) is None
    finally:
        db.close()


def _fields(r: RatioRecord) -> dict[str, object]:
    return {name: getattr(r, name) for name in RatioRecord.__dataclass_fields__}


# --- item 4 -------------------------------------------------------------------------------


def _night(campaign: int, category: str, verdict: str, *, confirmed: bool = False) -> RatioRecord:
    return RatioRecord(
        campaign_id=campaign, reference_id=1, series=f"h|p|{category}|decode_tps",
        host_fingerprint="h", profile="p", category=category, metric="decode_tps",
        estimate=0.95 if verdict == "regression" else 1.0, low=0.93, high=0.97, n_pairs=48,
        n_tasks=4, n_rounds=12, threshold=0.03, verdict=verdict, aa=True, confirmed=confirmed,
    )  # fmt: skip


def test_item4_the_family_rate_counts_aa_nights_with_any_confirmed_flag_reruns_left_out() -> None:
    """Per series-night, 2 confirmed flags in 40 A/A series-nights read 5%; the question a
    maintainer asks is how many *nights* filed a false alarm: here 2 of 5 profile-nights. The
    rerun campaign (id 99) is not a night of its own."""
    from watchkeeper.nightly.ratios import false_alarms

    nights = [
        _night(c, cat, "no change")
        for c in range(1, 6)
        for cat in ("all", "chat", "code", "math", "prose", "rag", "tools")
    ]
    nights[1] = _night(1, "chat", "regression", confirmed=True)
    nights[7 * 3 + 2] = _night(4, "code", "regression", confirmed=True)
    rerun = [_night(99, cat, "no change") for cat in ("all", "chat")]
    fa = false_alarms(nights + rerun, reruns={99})
    assert fa.series_nights == 35
    assert (fa.nights, fa.family_flagged) == (5, 2)
    assert fa.family_rate == pytest.approx(0.4)
    assert fa.to_json()["family_target"] == 0.01
    assert fa.family_within_target is False


def test_item4_a_category_needs_a_later_night_not_only_the_immediate_rerun() -> None:
    """With the rerun alone, a category flag of one evening confirmed itself: ~3% of A/A
    nights filed a false alarm somewhere in the family when the rerun shares the host state."""
    from watchkeeper.nightly.ratios import confirmed_series

    alone = [_night(5, "code", "regression")]
    assert confirmed_series(alone, lambda r: None, {"h|p|code|decode_tps"}) == set()
    last_night = {"h|p|code|decode_tps": _night(4, "code", "regression")}
    assert confirmed_series(alone, lambda r: last_night.get(r.series)) == {"h|p|code|decode_tps"}
    # Beside a confirmed overall series a category rides in its evidence (one finding).
    both = [_night(5, "all", "regression"), *alone]
    reran = {r.series for r in both}
    assert confirmed_series(both, lambda r: None, reran) == reran
    assert confirmed_series(both, lambda r: None, {"h|p|code|decode_tps"}) == set()


def test_item4_nightly_json_reports_the_family_rate_per_profile() -> None:
    from watchkeeper.commands.nightly import NightlyOutcome
    from watchkeeper.nightly.ratios import false_alarms

    fa = false_alarms([_night(1, "all", "no change"), _night(1, "code", "no change")])
    data = NightlyOutcome((), (("p", fa),)).to_json()
    assert data["false_alarms"]["p"]["aa_nights"] == 1
    assert data["false_alarms"]["p"]["family_rate"] == 0.0


# --- item 9 -------------------------------------------------------------------------------


def test_item9_an_efficiency_above_1_is_replaced_by_which_input_is_off() -> None:
    """A bench over ten chat tasks written outside the project printed efficiency 1.06: the
    estimate beat the bound while its CI still reached down to it."""
    from watchkeeper.analysis.speculation import judge_efficiency, measured_bound

    bound = measured_bound(
        mean_accepted=1.2, draft_length=4.0, cost_ratio=0.1, verify_tokens=5, verify_cost=1.6,
        acceptance=0.3, decoded_tokens=6000.0, drafts=1000.0,
    )  # fmt: skip
    estimate = bound.predicted_speedup * 1.06
    efficiency, note = judge_efficiency(
        bound, estimate, bound.predicted_speedup * 0.97, measured_verify=(5, 1.6)
    )
    assert efficiency is None
    assert note is not None and "beats the bound" in note and "verify cost" in note
    # Within the bound: the plain ratio, no note.
    efficiency, note = judge_efficiency(bound, bound.predicted_speedup * 0.9, 0.8)
    assert efficiency == pytest.approx(0.9) and note is None
