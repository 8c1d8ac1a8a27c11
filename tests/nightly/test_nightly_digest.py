"""The digest's nightly section: tonight's ratio per series with its CI, threshold and
reference, the live A/A false-alarm rate, and a ratio plot with CI bands. Pure store data,
fixed clock: no server and no wall clock."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from support.references import pin_reference

from watchkeeper.analysis.stats import wilson
from watchkeeper.host.info import HostInfo
from watchkeeper.nightly.digest import gather
from watchkeeper.nightly.ratios import false_alarms
from watchkeeper.publish.digest import digest_files
from watchkeeper.store.db import Database
from watchkeeper.store.history import History
from watchkeeper.store.references import RatioRecord, ReferenceStore
from watchkeeper.store.repository import Repository

DAY = date(2026, 11, 22)
NIGHT = datetime(2026, 11, 21, 23, 40, tzinfo=UTC)
HOST = HostInfo("f" * 16, "box", "cpu", 2, 1 << 34, None, "Linux")


def ratio(
    campaign: int, ref: int, estimate: float, ci: tuple[float, float], **kw: object
) -> RatioRecord:
    values: dict[str, object] = {
        "campaign_id": campaign,
        "reference_id": ref,
        "series": f"{'f' * 12}|s|all|decode_tps",
        "host_fingerprint": "f" * 16,
        "profile": "s",
        "category": "all",
        "metric": "decode_tps",
        "estimate": estimate,
        "low": ci[0],
        "high": ci[1],
        "n_pairs": 60,
        "n_tasks": 6,
        "n_rounds": 10,
        "threshold": 0.03,
        "verdict": "no change",
        "aa": False,
        **kw,
    }
    return RatioRecord(**values)  # type: ignore[arg-type]


def test_the_digest_shows_tonights_ratio_its_reference_and_the_aa_false_alarm_rate(
    tmp_path: Path,
) -> None:
    db = Database(f"sqlite:///{tmp_path / 'wk.db'}")
    try:
        repo = Repository(db)
        host_id = repo.ensure_host(HOST)
        campaigns = [
            repo.create_campaign(kind="nightly", host_id=host_id, build_id=None, params={})
            for _ in range(3)
        ]
        store = ReferenceStore(db)
        ref = pin_reference(
            db,
            release_line="llama.cpp 11434.0.0 (cpu, gcc 12.2.0)",
            pinned_by="maintainer",
            pinned_at=NIGHT - timedelta(days=3),
            config={"model": "smollm2-135m-instruct-q4_1"},
        )
        store.add_ratios(
            [
                ratio(
                    campaigns[0],
                    ref.id,
                    1.004,
                    (0.981, 1.027),
                    aa=True,
                    created_at=NIGHT - timedelta(days=2),
                ),
                ratio(
                    campaigns[1],
                    ref.id,
                    0.972,
                    (0.955, 0.991),
                    aa=True,
                    verdict="suspicious",
                    created_at=NIGHT - timedelta(days=1),
                ),
                ratio(
                    campaigns[2],
                    ref.id,
                    0.884,
                    (0.861, 0.905),
                    verdict="regression",
                    confirmed=True,
                    created_at=NIGHT,
                ),
            ]
        )
        digest = gather(History(db), day=DAY, params=None, now=NIGHT + timedelta(hours=8))
    finally:
        db.close()
    (row,) = digest.nightly
    assert row.ratio.verdict == "regression" and row.reference is not None
    files = digest_files(digest)
    text = files[f"{DAY}.md"].decode()
    assert "## Nightly: current against the pinned reference" in text
    assert "| s · all | 0.884 | 0.861-0.905 | 3% | regression (confirmed) | 6 x 10 |" in text
    assert (
        "by maintainer: llama.cpp 11434.0.0 (cpu, gcc 12.2.0), binary bbbbbbbbbbbb, model "
        "mmmmmmmmmmmm" in text
    )
    # Two A/A series-nights, neither flagged (suspicious is not a flag): 0%, Wilson 0-65.8%.
    assert "0 flag(s) in 2 A/A series-nights (0.0%, 95% Wilson CI 0.0%-65.8%); 0 confirmed" in text
    (plot,) = [name for name in files if name.startswith(f"{DAY}/ratio-")]
    assert files[plot].startswith(b"\x89PNG") and f"({plot})" in text
    # A night with nothing flagged says what its verdicts were, not "no change" for all.
    quiet = replace(
        digest,
        campaigns=({"id": 1, "kind": "nightly"}, {"id": 2, "kind": "soak"}),
        regressions=(),
        nightly=tuple(
            replace(row, ratio=replace(row.ratio, verdict=v))
            for v in ("inconclusive", "no change", "inconclusive")
        ),
    )
    assert quiet.headline == (
        "Nothing flagged: 3 nightly ratio(s) (2 inconclusive, 1 no change), "
        "0 absolute series in 2 campaign(s)"
    )


def test_the_false_alarm_rate_counts_only_flags_on_aa_nights() -> None:
    rows = [
        ratio(1, 1, 1.0, (0.98, 1.02), aa=True),
        ratio(2, 1, 0.95, (0.93, 0.97), aa=True, verdict="regression"),
        ratio(3, 1, 0.90, (0.88, 0.92), verdict="regression"),
    ]
    fa = false_alarms(rows)
    assert (fa.series_nights, fa.flagged) == (2, 1)
    assert (fa.low, fa.high) == wilson(1, 2)


def test_an_issue_filed_from_a_nightly_regression_states_ratio_ci_reference_and_report() -> None:
    from watchkeeper.store.findings import StoredFinding
    from watchkeeper.tracker.bodies import IssueContext, issue_body

    finding = StoredFinding(
        7, 3, None, "nightly:x", "regression", "regression", "active", "high",
        "s · all: decode tok/s -11.6% against the reference", {
            "series_name": "ffffffffffff|s|all|decode_tps", "ratio": 0.884,
            "ci95": [0.861, 0.905], "delta": -0.116, "delta_ci": [-0.139, -0.095],
            "n_pairs": 60, "n_tasks": 6, "n_rounds": 10, "threshold": 0.03,
            "rerun_campaign_id": 4, "report": "reports/2026-11-21-nightly-c3/report.md",
            "reference": {"id": 1, "pinned_at": "2026-11-18T23:40:00+00:00",
                          "pinned_by": "watchkeeper nightly", "binary_sha256": "b" * 64,
                          "model_sha256": "m" * 64, "config_hash": "c" * 16},
        }, None, None, NIGHT, NIGHT, 1, None, NIGHT, NIGHT,
    )  # fmt: skip
    body = issue_body(finding, IssueContext("wk", "k", "", "watchkeeper/", 3, 1500))
    assert "| current / reference | 0.884 |" in body
    assert "| 95% CI | 0.861 to 0.905 |" in body
    assert "-11.6% (95% CI -13.9% to -9.5%)" in body
    assert "60 pairs: 6 tasks x 10 rounds (rerun campaign 4)" in body
    # "#1" is defused (a forge would link it as issue 1); the rest reads as written.
    assert "pinned 2026-11-18T23:40:00+00:00 by watchkeeper nightly; binary bbbbbbbbbbbb" in body
    assert "reports/2026-11-21-nightly-c3/report.md" in body
