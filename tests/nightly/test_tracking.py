"""Regression tracking over the real store (SQLite and Postgres): candidates, confirmation,
spikes that expire, storms, change points naming the first bad build, and the lifecycle."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from support.nights import Nights

from watchkeeper.errors import ConfigError
from watchkeeper.nightly.detector import DetectorParams
from watchkeeper.nightly.findings import TrackingParams, judge_campaign, judge_pending, set_status
from watchkeeper.store.db import Database
from watchkeeper.store.history import History

PARAMS = TrackingParams(DetectorParams(resamples=200))


@pytest.fixture
def db(db_url: str) -> Iterator[Database]:
    database = Database(db_url)
    yield database
    database.close()


def good_nights(nights: Nights, n: int = 10) -> None:
    for _ in range(n):
        nights.add("b1")


def detector_findings(history: History) -> list:  # type: ignore[type-arg]
    return history.findings(kinds=("regression", "improvement"))


def test_fewer_than_ten_good_nights_is_insufficient_data_and_files_nothing(db: Database) -> None:
    nights, history = Nights(db), History(db)
    good_nights(nights, 5)
    campaign = nights.add("b2", tps=60.0)
    judgements = judge_pending(history, PARAMS)
    assert [j.campaign_id for j in judgements][-1] == campaign
    assert set(judgements[-1].counts()) == {"insufficient data"}
    assert detector_findings(history) == []
    assert judge_pending(history, PARAMS) == []  # judged once, never twice


def test_a_slow_night_is_a_candidate_and_the_next_slow_night_confirms_it(db: Database) -> None:
    nights, history = Nights(db), History(db)
    good_nights(nights)
    judge_pending(history, PARAMS)
    first = judge_campaign(history, nights.add("b2", slow_category="code"), PARAMS)
    assert len(first.candidates) == 1
    (candidate,) = detector_findings(history)
    assert candidate.kind == "regression"
    assert candidate.confirmed_at is None
    assert candidate.series_key is not None and candidate.series_key["category"] == "code"
    assert candidate.series_key["metric"] == "decode_tps"
    evidence = candidate.evidence
    assert evidence["delta"] < -0.15
    assert evidence["delta_ci"][0] < evidence["delta"] < evidence["delta_ci"][1]
    assert evidence["p_adjusted"] < 0.01
    assert evidence["baseline_runs"] == 10
    assert evidence["test"].startswith("one-sided t prediction test on run medians")
    assert "code" in candidate.title and "-" in candidate.title

    second = judge_campaign(history, nights.add("b2", slow_category="code"), PARAMS)
    assert second.confirmed == (candidate.id,)
    (confirmed,) = detector_findings(history)
    assert confirmed.confirmed_at is not None
    assert confirmed.occurrences == 2


def test_a_one_night_spike_expires_and_is_never_confirmed(db: Database) -> None:
    nights, history = Nights(db), History(db)
    good_nights(nights)
    judge_pending(history, PARAMS)
    judge_campaign(history, nights.add("b1", slow_category="prose"), PARAMS)
    after = judge_campaign(history, nights.add("b1"), PARAMS)
    (spike,) = detector_findings(history)
    assert after.expired == (spike.id,)
    assert spike.status == "expired"
    assert spike.confirmed_at is None
    assert "one-night spike" in (spike.status_note or "")


def test_a_night_where_everything_moves_one_way_is_one_environment_noise_finding(
    db: Database,
) -> None:
    nights, history = Nights(db), History(db)
    good_nights(nights)
    judge_pending(history, PARAMS)
    judgement = judge_campaign(history, nights.add("b1", tps=70.0, rss=900e6), PARAMS)
    assert judgement.night.environment_noise is not None
    assert detector_findings(history) == []
    (noise,) = history.findings(kinds=("environment_noise",))
    assert noise.label == "environment noise"
    assert noise.evidence["regressions"] >= 2


def test_runs_with_errors_are_excluded_from_baselines_with_the_reason_stored(
    db: Database,
) -> None:
    nights, history = Nights(db), History(db)
    good_nights(nights, 9)
    broken = nights.add("b1", errors=3)
    judgement = judge_campaign(history, broken, PARAMS)
    (reason,) = judgement.excluded_runs.values()
    assert reason == "3 of 16 requests failed"
    # Nine good nights plus an excluded one: still not enough for a baseline.
    judgement = judge_campaign(history, nights.add("b2", slow_category="code"), PARAMS)
    assert set(judgement.counts()) == {"insufficient data"}


def test_the_change_point_pass_names_the_first_bad_build_and_restarts_the_baseline(
    db: Database,
) -> None:
    nights, history = Nights(db), History(db)
    good_nights(nights, 12)
    judge_pending(history, PARAMS)
    for _ in range(3):
        judged = judge_campaign(history, nights.add("b7-slow", slow_category="code"), PARAMS)
    (change,) = judged.change_points
    assert "b7-slow" in change.change.label
    assert change.change.relative_change is not None and change.change.relative_change < -0.15
    # The detector already tracks the drop: the change point names its build on that finding.
    (finding,) = history.findings(fingerprint=history.findings()[0].fingerprint)
    assert finding.id == change.finding_id
    assert finding.evidence["change_point"]["first_bad_build"] == change.change.label
    assert finding.evidence["change_point"]["first_bad_run"] == change.first_bad_run
    assert "first bad build b7-slow" in finding.title
    assert history.findings(kinds=("change_point",)) == []
    # The baseline now starts at the first bad run: the old level is gone from the detector.
    later = judge_campaign(history, nights.add("b7-slow", slow_category="code"), PARAMS)
    assert "regression" not in later.counts()


def test_acknowledging_accepts_the_new_level_and_dismissing_counts_a_false_positive(
    db: Database,
) -> None:
    nights, history = Nights(db), History(db)
    good_nights(nights)
    judge_pending(history, PARAMS)
    judge_campaign(history, nights.add("b2", slow_category="code"), PARAMS)
    (candidate,) = detector_findings(history)
    acked = set_status(history, candidate.id, "ack", "new tokenizer, expected")
    assert acked.status == "acknowledged"
    assert acked.status_note == "new tokenizer, expected"
    assert history.resets()[candidate.fingerprint] == candidate.run_id
    # The slow level is the baseline now: too few runs since, so no new flag.
    judgement = judge_campaign(history, nights.add("b2", slow_category="code"), PARAMS)
    assert "regression" not in judgement.counts()
    assert set_status(history, candidate.id, "dismiss").status == "dismissed"
    with pytest.raises(ConfigError, match="unknown action 'explode'"):
        set_status(history, candidate.id, "explode")
    with pytest.raises(ConfigError, match="no finding with id 999"):
        set_status(history, 999, "ack")


def test_a_silenced_series_keeps_counting_but_files_nothing_new(db: Database) -> None:
    nights, history = Nights(db), History(db)
    good_nights(nights)
    judge_pending(history, PARAMS)
    judge_campaign(history, nights.add("b2", slow_category="code"), PARAMS)
    (candidate,) = detector_findings(history)
    set_status(history, candidate.id, "silence")
    judgement = judge_campaign(history, nights.add("b2", slow_category="code"), PARAMS)
    assert judgement.candidates == ()
    assert judgement.silenced == (candidate.id,)
    (same,) = detector_findings(history)
    assert same.status == "silenced"
    assert same.occurrences == 2


def test_a_slow_drift_the_nightly_test_misses_becomes_a_change_point_finding(
    db: Database,
) -> None:
    nights, history = Nights(db), History(db)
    good_nights(nights, 12)
    judge_pending(history, PARAMS)
    params = TrackingParams(DetectorParams(resamples=200, min_good_runs=50, window=50))
    for _ in range(3):  # too little history for the nightly test: only the pass can see it
        judged = judge_campaign(history, nights.add("b8", slow_category="prose"), params)
    (change,) = judged.change_points
    (finding,) = history.findings(kinds=("change_point",))
    assert finding.id == change.finding_id
    assert finding.series_key is not None and finding.series_key["category"] == "prose"
    assert "first bad build b8" in finding.title
    assert history.resets()[finding.fingerprint] == change.first_bad_run


def test_a_new_build_that_slows_everything_is_filed_not_waved_off_as_noise(
    db: Database,
) -> None:
    nights, history = Nights(db), History(db)
    good_nights(nights)
    judge_pending(history, PARAMS)
    judgement = judge_campaign(history, nights.add("b9-slow", tps=70.0), PARAMS)
    assert judgement.night.environment_noise is None
    assert history.findings(kinds=("environment_noise",)) == []
    filed = {f.series_key["category"] for f in detector_findings(history) if f.series_key}
    assert filed == {"code", "prose"}
