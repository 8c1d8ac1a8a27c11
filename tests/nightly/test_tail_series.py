"""The nightly's tail and service-level series (issue 44): p90 TTFT and the good fraction per
run, from stored rows, and the detector reading them like every other series."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.latency import LATENCY_KEY, Estimate, LatencyStats, Slo, meets_slo
from watchkeeper.nightly.detector import Label, RunPoint, detect_series
from watchkeeper.nightly.ratios import false_alarms, tail_records
from watchkeeper.nightly.series import ALL_CATEGORIES, MIN_P90, run_points
from watchkeeper.store.history import RunRecord, SampleFacts
from watchkeeper.store.references import RatioRecord

SLO = Slo(ttft_ms=500.0, itl_ms=50.0, e2e_ms=None)


def sample(ttft_ms: float, latency_ms: float, tokens: int = 33, ok: bool = True) -> SampleFacts:
    return SampleFacts("prose", ok, 30.0, ttft_ms, tokens, None, None, latency_ms)


def run(samples: list[SampleFacts], slo: Slo | None = SLO, label: str = "b1") -> RunRecord:
    return RunRecord(
        run_id=1,
        campaign_id=1,
        campaign_kind="nightly",
        started_at=datetime(2026, 3, 29, 23, 58, tzinfo=UTC),
        arm="current",
        profile_name="p",
        profile_hash="h" * 16,
        model_key="m",
        host="host",
        build_label=label,
        build_flavour="cpu",
        concurrency=1,
        error=None,
        peak_rss_bytes=None,
        samples=tuple(samples),
        checks=(),
        slo=slo,
    )


def points(r: RunRecord) -> dict[str, RunPoint]:
    return {k.metric: p for k, p in run_points(r).items() if k.category == ALL_CATEGORIES}


def test_p90_ttft_is_the_type_8_quantile_of_the_runs_successful_requests() -> None:
    ttfts = [100.0 + 10 * i for i in range(20)]
    failed = sample(9999.0, 9999.0, ok=False)
    got = points(run([sample(t, t + 1000) for t in ttfts] + [failed]))
    want = float(np.quantile(ttfts, 0.9, method="median_unbiased"))
    assert got["ttft_p90_ms"].trials == (want,)
    # Too few requests for a p90 that means the same every night: no point at all.
    few = points(run([sample(t, t + 1000) for t in ttfts[: MIN_P90 - 1]]))
    assert "ttft_p90_ms" not in few


def test_a_request_is_good_when_it_meets_ttft_tpot_and_e2e() -> None:
    assert meets_slo(True, 400.0, 400.0 + 32 * 40.0, 33, SLO)  # TPOT 40 ms
    assert not meets_slo(True, 600.0, 600.0 + 32 * 40.0, 33, SLO)  # TTFT over
    assert not meets_slo(True, 400.0, 400.0 + 32 * 60.0, 33, SLO)  # TPOT 60 ms over
    assert not meets_slo(False, 400.0, 500.0, 33, SLO)  # failed
    assert meets_slo(True, 400.0, 400.0, 1, SLO)  # one token: no TPOT to judge
    assert not meets_slo(True, 400.0, 3000.0, 33, Slo(None, None, 2000.0))


def test_the_good_fraction_counts_requests_meeting_the_campaigns_slo() -> None:
    good = [sample(300.0, 300.0 + 32 * 30.0) for _ in range(7)]
    slow = [sample(300.0, 300.0 + 32 * 80.0) for _ in range(2)]
    got = points(run([*good, *slow, sample(300.0, 400.0, ok=False)]))
    p = got["good_fraction"]
    assert (p.successes, p.attempts) == (7, 10)
    # A campaign from before the SLO was recorded has no good-fraction point.
    assert "good_fraction" not in points(run(good, slo=None))


def test_the_detector_flags_a_drop_in_the_good_fraction_and_not_a_steady_one() -> None:
    """Ten nights at ~95% good, then a build where a third of the requests miss the TTFT
    level: a regression. The same night at 95% again: nothing."""
    rng = np.random.default_rng(7)

    def night(label: str, share_slow: float) -> RunRecord:
        slow = rng.random(60) < share_slow
        return run(
            [sample(t, t + 32 * 30.0) for t in np.where(slow, 900.0, 300.0)],
            label=label,
        )

    def key_and_point(r: RunRecord) -> tuple[object, RunPoint]:
        found = {k: p for k, p in run_points(r).items() if k.metric == "good_fraction"}
        ((key, point),) = found.items()
        return key, point

    history = [key_and_point(night(f"b{i}", 0.05))[1] for i in range(10)]
    key, bad = key_and_point(night("b10", 0.35))
    finding = detect_series(key, history, bad)  # type: ignore[arg-type]
    assert finding.label is Label.REGRESSION and finding.flagged
    _, same = key_and_point(night("b11", 0.05))
    assert detect_series(key, history, same).label is not Label.REGRESSION  # type: ignore[arg-type]


def stats(arm: str, p90_by_round: list[float], goodput: list[float]) -> LatencyStats:
    p90 = Estimate(float(np.mean(p90_by_round)), 0.0, 0.0, len(p90_by_round), tuple(p90_by_round))
    return LatencyStats(
        arm=arm,
        load="c1",
        requests=60,
        errors=0,
        expired=0,
        rounds=len(goodput),
        quantiles={"ttft_ms": {"p90": p90}},
        goodput_rps=None,
        output_tps=None,
        good_fraction=None,
        slo=SLO.label,
        goodput_by_round=dict(enumerate(goodput)),
    )


def tails(result: BenchResult, cur: LatencyStats, ref: LatencyStats) -> dict[str, RatioRecord]:
    night = replace(result, extras={LATENCY_KEY: (cur, ref)})
    records = tail_records(
        night,
        current_arm="cur",
        reference_arm="ref",
        profile="p",
        reference_id=1,
        host_fingerprint="0123456789abcdef",
        aa=False,
        threshold=0.03,
    )
    return {r.metric: r for r in records}


def test_the_nightly_judges_p90_ttft_and_goodput_paired_by_round(result: BenchResult) -> None:
    """Series read higher = better: p90 TTFT as reference over current. A build whose first
    token comes 30% later at p90 and whose goodput fell by a fifth is a regression in both; the
    same numbers for both arms are no change; neither is ever confirmed (watched, not filed)."""
    ref = stats("ref", [400.0, 420.0, 410.0, 405.0, 415.0], [0.80, 0.82, 0.79, 0.81, 0.80])
    slow = stats("cur", [520.0, 546.0, 533.0, 527.0, 540.0], [0.64, 0.66, 0.63, 0.65, 0.64])
    got = tails(result, slow, ref)
    assert got["ttft_p90"].estimate < 0.8 and got["ttft_p90"].verdict == "regression"
    assert got["goodput"].estimate < 0.85 and got["goodput"].verdict == "regression"
    assert got["ttft_p90"].series.endswith("|p|all|ttft_p90")
    twin = stats("cur", [400.0, 420.0, 410.0, 405.0, 415.0], [0.80, 0.82, 0.79, 0.81, 0.80])
    same = tails(result, twin, ref)
    assert {r.verdict for r in same.values()} == {"no change"}
    assert not any(r.confirmed for r in (*got.values(), *same.values()))
    # Rounds the arms do not share cannot be paired: no p90 record rather than a wrong one.
    short = stats("cur", [520.0, 546.0], [0.64, 0.66, 0.63, 0.65, 0.64])
    assert set(tails(result, short, ref)) == {"goodput"}


def test_the_tail_series_stay_out_of_the_false_alarm_rates(result: BenchResult) -> None:
    ref = stats("ref", [400.0, 420.0, 410.0, 405.0, 415.0], [0.80, 0.82, 0.79, 0.81, 0.80])
    slow = stats("cur", [520.0, 546.0, 533.0, 527.0, 540.0], [0.64, 0.66, 0.63, 0.65, 0.64])
    flagged_aa = [replace(r, aa=True) for r in tails(result, slow, ref).values()]
    assert false_alarms(flagged_aa).series_nights == 0
