"""The soak's per-series figures as typed values (soak/series_figures.py, soak/depth_figures.py):
JSON only at the edge, so what `to_json` writes `from_json` reads back to the same value, and the
estimator that judged a series is its field, not a key that happens to be present."""

from __future__ import annotations

import json
from dataclasses import replace

from support.dipseries import MODEL, dip, other, rows
from support.pairedsoak import paired_soak, steady

from watchkeeper.config import SoakConfig
from watchkeeper.simulation.soak_series import simulate_series
from watchkeeper.soak.depth import WARMUP_BLOCKS, series_drift
from watchkeeper.soak.depth_figures import DipEntry, HostBusy, OtherBlock, SlopeDrift
from watchkeeper.soak.figures import SoakFigures
from watchkeeper.soak.paired_figures import ReferenceRatio
from watchkeeper.soak.series_figures import SeriesTrend
from watchkeeper.soak.verdicts import judge
from watchkeeper.soak.views import SoakData


def _soak() -> SoakData:
    """Two arms, depth 1 and 4 each: an aggregate and an absolute series per arm."""
    one = simulate_series(replace(MODEL, concurrency=1), 120.0, 1, profile="a")
    four = simulate_series(MODEL, 120.0, 2, profile="b")
    params = {"profiles": ["a", "b"], "concurrency": [1, 4], "block_s": MODEL.block_s}
    return SoakData(1, params, "completed", (), tuple(one) + tuple(four), (), ())


def test_every_series_reads_back_from_its_json_as_the_same_value() -> None:
    figures = judge(_soak(), SoakConfig()).figures
    assert figures is not None
    judged = {e.judged for e in figures.series}
    assert judged == {"absolute", "aggregate"}, judged
    for entry in figures.series:
        text = json.dumps(entry.to_json())
        back = SeriesTrend.from_json(json.loads(text))
        assert back == entry
        assert json.dumps(back.to_json()) == text
        # The estimator is the field: only an aggregate series writes `depth_drift`.
        assert ("depth_drift" in entry.to_json()) == (entry.judged == "aggregate")


def test_a_drift_with_dips_of_either_explanation_reads_back_from_its_json() -> None:
    mine = dip(rows(MODEL, 0), [10, 20, 30], 0.8)
    theirs = dip(other(0), [10], 0.8)
    host = [0.02] * len(mine)
    host[WARMUP_BLOCKS + 20] = 0.6
    hosted = [replace(r, host_other_cpu=h) for r, h in zip(mine, host, strict=True)]
    drift = series_drift(hosted, threshold=0.10, floor=0.3, others=[theirs])
    assert drift is not None and drift.dips and drift.transients
    whys = {type(d.why) for d in (*drift.dips, *drift.transients)}
    assert OtherBlock in whys or HostBusy in whys, whys
    back = SlopeDrift.from_json(json.loads(json.dumps(drift.to_json())))
    assert back == drift
    assert DipEntry.from_json({"block": 3, "t_h": 0.5, "deviation": -0.2}).why is None


def test_every_ratio_to_the_reference_reads_back_from_its_json_as_the_same_value() -> None:
    """Judged, inconclusive (with its sizing) and too short to judge: each writes the keys the
    figures always held and reads back to the same value."""
    noisy = paired_soak(lambda _: 93.0, steady, cycles=8, seed=1, scatter=lambda _: 0.06)
    clear = paired_soak(lambda _: 50.0, steady)
    short = paired_soak(lambda _: 50.0, steady, cycles=3)
    ratios = [r for d in (noisy, clear, short) for r in _figures(d).reference]
    assert {r.verdict for r in ratios} >= {"inconclusive", "regression", "insufficient data"}
    for ratio in ratios:
        text = json.dumps(ratio.to_json())
        back = ReferenceRatio.from_json(json.loads(text))
        assert back == ratio
        assert json.dumps(back.to_json()) == text
        assert ("confirmed" in ratio.to_json()) == (ratio.interval is not None)


def _figures(data: SoakData) -> SoakFigures:
    figures = judge(data, SoakConfig()).figures
    assert figures is not None
    return figures
