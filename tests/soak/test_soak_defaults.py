"""No profiles configured: the nightly and the soak never measure a test model silently. The
soak takes the sweep's committed recommendation (its arm beside the baseline) and writes its
report beside the sweep's, whose stability criterion then reads it; the nightly refuses with
a hint naming the key and the recommended profile."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from support.soak_summaries import ROW, figures_of, summary_of

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.identity_gate import withheld
from watchkeeper.analysis.recommend import recommend
from watchkeeper.campaign.defaults import soak_profiles
from watchkeeper.commands.nightly import nightly_command
from watchkeeper.commands.soak import soak_command
from watchkeeper.config import BenchConfig, Config, DatabaseConfig, ProfileConfig
from watchkeeper.config.requests import NightlyRequest, SoakRequest
from watchkeeper.errors import ConfigError
from watchkeeper.publish.deliverable import RECORD_NAME, build_record, write_record
from watchkeeper.publish.soak_report import (
    BEGIN,
    END,
    render,
    series_rows,
    splice,
    stability_line,
    summary,
)
from watchkeeper.soak.figures import RssEntry
from watchkeeper.soak.judgement import OutputRates, ProbeTotals
from watchkeeper.soak.probes import ProbeGroup, totals
from watchkeeper.soak.series_figures import SeriesTrend
from watchkeeper.soak.trends import RelativeTrend, Trend
from watchkeeper.soak.verdicts import SoakVerdict
from watchkeeper.soak.views import SoakSampleView


def config_in(tmp_path: Path) -> Config:
    return Config(bench=BenchConfig(reports_dir=str(tmp_path / "reports")))


def commit_record(config: Config, result: BenchResult) -> None:
    rec = recommend(result, withheld=withheld(result))
    record = build_record(
        result,
        rec,
        chosen=rec.overall.profile or result.baseline.name,
        profiles={
            "baseline": ProfileConfig(model="target"),
            "draft4": ProfileConfig(
                model="target", draft_model="draft", spec_type="draft-simple", draft_n_max=4
            ),
        },
        report="speculative_benchmark.md",
        campaign_report="x/report.md",
    )
    write_record(config.bench.resolved_reports_dir() / RECORD_NAME, record)


def test_an_empty_nightly_refuses_and_names_the_key(tmp_path: Path) -> None:
    config = config_in(tmp_path)
    assert config.nightly.profiles == [] and config.soak.profiles == []
    with pytest.raises(ConfigError) as err:
        nightly_command(config, NightlyRequest(), progress=lambda _m: None)
    assert "[nightly] profiles is empty" in err.value.message
    assert err.value.hint is not None and "[nightly] profiles = [" in err.value.hint
    with pytest.raises(ConfigError) as soak_err:
        soak_command(
            config,
            SoakRequest(),
            progress=lambda _m: None,
        )
    assert "[soak] profiles is empty" in soak_err.value.message


def test_with_a_committed_recommendation_the_soak_takes_it_and_the_nightly_names_it(
    tmp_path: Path, result: BenchResult
) -> None:
    config = config_in(tmp_path)
    commit_record(config, result)
    with pytest.raises(ConfigError) as err:
        nightly_command(config, NightlyRequest(), progress=lambda _m: None)
    assert err.value.hint is not None and "the sweep recommends draft4" in err.value.hint
    seen: list[str] = []
    soaked, names, record = soak_profiles(config, None, None, progress=seen.append)
    assert names == ["draft4", "baseline"] and record is not None
    assert soaked.profiles["draft4"].draft_n_max == 4
    assert "draft4 beside baseline" in seen[0]
    # Profiles given on the command line win over the recommendation.
    assert soak_profiles(config, ["mine"], None, progress=seen.append)[1] == ["mine"]


def _sample(profile: str, conc: int, tps: float, error: str | None = None) -> SoakSampleView:
    t = datetime(2026, 11, 27, tzinfo=UTC)
    return SoakSampleView(profile, conc, False, "t1", t, 1.0, 64, tps, None, None, error, "x")


def test_the_soak_report_and_the_sweep_reports_stability_line() -> None:
    samples = [
        _sample("draft4", 1, 30.0),
        _sample("draft4", 1, 32.0),
        _sample("draft4", 4, 50.0, error="timeout"),
        _sample("baseline", 1, 25.0),
        _sample("baseline", 4, 40.0),
    ]
    rows = series_rows(samples)
    assert [(r.profile, r.concurrency, r.requests, r.errors) for r in rows] == [
        ("baseline", 1, 1, 0),
        ("baseline", 4, 1, 0),
        ("draft4", 1, 2, 0),
        ("draft4", 4, 1, 1),
    ]
    probed = ProbeGroup(
        "draft4", 4, "t1", "other arm", "baseline", 5, ProbeTotals(4, 3, 1, 0, 0, 0), 0.75
    )
    verdict = SoakVerdict(
        12,
        True,
        (),
        ("5 requests over 0.03h, 1 errors",),
        figures_of(
            requests=5,
            errors=1,
            rss=(RssEntry("draft4", 3600.0, 1, Trend(3.2, -1.0, 7.5, 40), judged=True),),
            rates=OutputRates(0.75, 1.0),
            probe_totals=totals([probed]),
            identical_output=(probed,),
        ),
    )
    s = summary(
        verdict, rows, subject="draft4", baseline="baseline", duration="2m",
        sweep_campaign=7, command="watchkeeper soak --recommendation r.json", cache_ram_mib=0,
    )  # fmt: skip
    # A summary in the old layout (identical_output_rate then held the consistent rate) is
    # read as it meant, and a summary writes the new one.
    old = {"identical_output_rate": 1.0, "strictly_identical_rate": 0.75}
    assert OutputRates.from_json(old) == s.rates == OutputRates(0.75, 1.0)
    assert "strictly_identical_rate" not in s.to_json()
    text = render(s)
    assert "| draft4 | 4 | baseline | 4 | 3 | 1 | 0 | 0 | 0 |" in text
    assert "consistent with their reference 100% of the time (75% token for token)" in text
    assert "The servers ran with `--cache-ram 0`" in text
    assert (
        "| draft4 | 1 | 2 | 0 | 31.0 |" in text
        and "| draft4 | 4 | 1 | 1 | — |" in text
        and "| baseline (baseline) | 1 |" in text
    )
    assert "3.2 MB/h" in text and "soak campaign 12, for sweep campaign 7" in text
    line = stability_line(s, fallback="unused")
    # Two minutes: no series has the blocks a drift figure needs, so nothing says "met".
    assert line.startswith("3. **Stable under sustained load: not resolved.**")
    assert "throughput drift not judged for baseline at concurrency 1" in line
    assert "concurrency 1, 4: 5 load requests, 1 errors, 0 restarts" in line
    assert "RSS slope (prompt cache off) draft4 3.2 MB/h" in line
    assert "probes consistent 100% (3 of 4 identical, 0 mismatches)" in line
    report = f"head\n{BEGIN}\n3. not yet measured\n{END}\ntail\n"
    assert splice(report, line) == f"head\n{BEGIN}\n{line}\n{END}\ntail\n"
    assert stability_line(None, fallback="3. not yet") == "3. not yet"


def test_the_soak_cli_refuses_without_profiles_and_its_help_names_the_soak_section(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from watchkeeper.cli.app import main

    config = tmp_path / "wk.toml"
    config.write_text(f'[bench]\nreports_dir = "{tmp_path / "reports"}"\n')
    assert main(["soak", "--config", str(config), "--duration", "1m"]) == 2
    assert "[soak] profiles is empty" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["soak", "--help"])
    assert "the config's [soak] keys" in capsys.readouterr().out


def test_a_stable_soak_whose_drift_ci_reaches_past_the_threshold_says_it_is_not_resolved() -> None:
    """The 27 Nov soak: concurrency 1 resolved the 10% threshold in 100 min, concurrency 4 did
    not (its CI reached -16%): `stable` must not read as 'met' for it."""
    flat = Trend(0.0, 0.0, 0.0, 10)
    series = [
        SeriesTrend("b", 1, "absolute", throughput_drift=RelativeTrend(flat, 30.0, -0.021, -0.09, 0.05)),
        SeriesTrend("b", 4, "absolute", throughput_drift=RelativeTrend(flat, 8.0, 0.044, -0.16, 0.26)),
    ]  # fmt: skip
    verdict = SoakVerdict(1, True, (), (), figures_of(series=tuple(series)))
    rows = series_rows([_sample("b", 1, 30.0), _sample("b", 4, 8.0)])
    s = summary(
        verdict, rows, subject="s", baseline="b", duration="100m", sweep_campaign=3,
        command="c", drift_threshold=0.10,
    )  # fmt: skip
    line = stability_line(s, fallback="")
    # Judged in part and far short of the 8 hours a side: neither "met" nor "met where resolved".
    assert line.startswith("3. **Stable under sustained load: not yet:")
    # ... and how many times its blocks its noise needs ((0.21 / 0.10)^2), not "a longer soak".
    assert (
        "not resolved in 100m: b at concurrency 4 +4% (95% CI -16%..+26%; at its noise, about "
        "4.4x the blocks if it does not drift)" in line
    )
    assert "longer soak" not in line
    assert "at concurrency 1" not in line.split("not resolved")[1]
    assert "\nThroughput drift not resolved in 100m: b at concurrency 4" in render(s)
    resolved = summary(
        replace(verdict, figures=figures_of(series=tuple(series[:1]))), [r for r in rows if r.concurrency == 1],
        subject="s", baseline="b", duration="100m", sweep_campaign=3, command="c",
    )  # fmt: skip
    # Drift resolved, but the summary says nothing of each arm's hours under load: not "met".
    assert stability_line(resolved, fallback="").startswith(
        "3. **Stable under sustained load: not yet: each arm's time under load unknown"
    )


class _Measured(Exception):
    """Raised by the stand-in night once it has seen what it would measure."""


def test_the_nightly_of_a_recommendation_guards_its_unit_on_its_own_categories(
    tmp_path: Path, result: BenchResult, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`nightly --recommendation F --category code_edit` (jobs/nightly-code-edit.toml): the
    night judges the record's chosen arm, its profile from the record as the unit ships it
    (not from watchkeeper.toml, which has no block for it), on code edits only. The night
    itself is the real one elsewhere (tests/daemon/test_daemon_nights.py); here only what
    it is handed."""
    import watchkeeper.commands.nightly as nightly_module

    config = config_in(tmp_path).model_copy(
        update={"database": DatabaseConfig(url=f"sqlite:///{tmp_path / 'wk.db'}")}
    )
    commit_record(config, result)
    seen: dict[str, Config] = {}
    measured: dict[str, list[str]] = {}

    def night(
        cfg: Config,
        _db: object,
        name: str,
        *,
        categories: list[str],
        progress: object,
        sampling: object = None,
    ) -> object:
        seen[name], measured[name] = cfg, list(categories)
        raise _Measured

    monkeypatch.setattr(nightly_module, "run_night", night)
    said: list[str] = []
    record = config.bench.resolved_reports_dir() / RECORD_NAME
    with pytest.raises(_Measured):
        nightly_command(
            config,
            NightlyRequest(recommendation=record, categories=["code_edit"]),
            progress=said.append,
        )
    assert list(seen) == ["draft4"]
    guarded = seen["draft4"]
    assert guarded.profiles["draft4"].draft_n_max == 4 and "draft4" not in config.profiles
    assert measured["draft4"] == ["code_edit"]
    assert "guarding the sweep's recommendation" in said[0] and "draft4" in said[0]
    with pytest.raises(ConfigError, match="--profile or --recommendation, not both"):
        nightly_command(
            config, NightlyRequest(profiles=["x"], recommendation=record), progress=said.append
        )
    # With no --category and no [nightly] categories, the categories its sweep measured: the
    # committed code-edit unit is guarded on code edits, as `soak --recommendation` soaks it.
    measured.clear()
    code_edit = Path(__file__).parents[2] / "reports" / "code-edit" / RECORD_NAME
    with pytest.raises(_Measured):
        nightly_command(config, NightlyRequest(recommendation=code_edit), progress=said.append)
    assert list(measured.values()) == [["code_edit"]]
    measured.clear()
    with pytest.raises(_Measured):
        nightly_command(config, NightlyRequest(recommendation=record), progress=said.append)
    assert list(measured.values()) == [["chat", "code"]]  # the categories this bench measured


def test_a_workloads_unit_is_soaked_on_that_workloads_tasks() -> None:
    """The committed code-edit recommendation (sweep --category code_edit) soaks code edits
    only; what the user names wins; a record without per-workload picks soaks every category."""
    from watchkeeper.campaign.defaults import measured_categories
    from watchkeeper.cli.app import build_parser
    from watchkeeper.publish.deliverable import read_record

    code_edit = read_record(
        Path(__file__).parents[2] / "reports" / "code-edit" / "speculative_recommendation.json"
    )
    assert measured_categories(code_edit, None) == ["code_edit"]
    assert measured_categories(code_edit, ["prose"]) == ["prose"]
    assert measured_categories(None, None) is None
    args = build_parser().parse_args(["soak", "--category", "code_edit", "--category", "qa"])
    assert args.category == ["code_edit", "qa"]
    with pytest.raises(SystemExit):
        build_parser().parse_args(["soak", "--category", "Code Edit"])


def test_a_soak_too_short_to_judge_drift_or_memory_never_reads_met() -> None:
    """The 36-minute code-edit soak (campaign 2 of 2026-11-28): four series of three blocks,
    none with a drift figure, one server with 28 min of RSS history. "No error, no restart"
    is all it shows; before, the sweep report read "Stable under sustained load: met"."""
    from watchkeeper.publish.soak_report import headline_text

    s: dict[str, Any] = {
        "campaign_id": 2, "subject": "ngram", "baseline": "base", "duration": "36m",
        "verdict": "stable", "headline": "stable: 336 requests over 0.60h, 0 errors",
        "restarts": 0, "drift": [],
        "series": [{"profile": p, "concurrency": c, "requests": 60, "errors": 0,
                    "median_tps": 30.0} for p in ("base", "ngram") for c in (1, 4)],
        "rss": {"base": {"slope_mb_per_h": 0.5, "judged": False},
                "ngram": {"slope_mb_per_h": 0.4, "judged": True}},
    }  # fmt: skip
    line = stability_line(summary_of(**s), fallback="")
    assert "Stable under sustained load: not resolved" in line
    assert "throughput drift not judged for base at concurrency 1" in line
    assert "memory growth not judged for base" in line
    assert "met" not in line.split("**")[1].replace("not resolved", "")
    assert headline_text(summary_of(**s)).startswith("**no error, no restart; drift not judged**")
    judged = {**s, "drift": [{"profile": p, "concurrency": c, "change": 0.0,
                              "ci95": [-0.02, 0.02]} for p in ("base", "ngram") for c in (1, 4)],
              "rss": {"base": {"slope_mb_per_h": 0.5, "judged": True}}}  # fmt: skip
    # Every drift and leak judged, but 36 minutes is not the request's overnight per arm.
    assert "Stable under sustained load: not yet" in stability_line(
        summary_of(**judged), fallback=""
    )
    overnight = {**judged, "block_s": 3600.0, "blocks": [
        {"profile": p, "concurrency": c, "rows": [ROW] * 8}
        for p in ("base", "ngram") for c in (1, 4)]}  # fmt: skip
    assert "Stable under sustained load: met." in stability_line(
        summary_of(**overnight), fallback=""
    )
    assert headline_text(summary_of(**judged)).startswith("**stable**")
