"""Figures quoted in docs/ that also live in committed reports are checked against the reports'
JSON here, so a regenerated report cannot leave a page behind: the drift CIs, RSS slope,
requests and probes of the 27 Nov soak the depth-4 argument rests on
(`reports/2026-11-27-soak-c1/speculative_soak.json`, the soak of the sweep it replaced), the
draft's cost per target step, the closest arm's speed-up and the host
(`reports/speculative_recommendation.json`),
the soak's thresholds (the config's defaults), the code-edit unit's figure in README, and the
committed reports against each other."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from watchkeeper.config import SoakConfig
from watchkeeper.publish.soak_report import render, splice
from watchkeeper.publish.soak_summary import SoakSummary

ROOT = Path(__file__).resolve().parents[1]
REPORTS = ROOT / "reports"
SOAK_1127 = REPORTS / "2026-11-27-soak-c1"
"""The soak of 27 Nov (of sweep campaign 3 of that day): docs/soak.md's measurements."""
SHUFFLED = REPORTS / "2026-11-28-soak-c4-shuffled"
"""The 130-minute depth-4 soak whose blocks each drew their own stretch of the task set."""
REPLAYED_90M = REPORTS / "2026-11-28-soak-c1-90m"
"""The 90-minute depth-4 soak whose blocks replayed one task order (the first of that design)."""
SOAK_140M = REPORTS / "2026-11-29-soak-c1-140m"
"""The 140-minute depth-4 soak committed with the default set until 7 Dec 2026, when
deliver-set remade the set; README and docs/soak.md quote it as that."""


def doc(name: str) -> str:
    """A page with its line breaks and runs of spaces folded, as a reader sees the prose."""
    return " ".join((ROOT / "docs" / name).read_text(encoding="utf-8").split())


def soak() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((SOAK_1127 / "speculative_soak.json").read_text())
    return data


def record() -> dict[str, Any]:
    data: dict[str, Any] = json.loads((REPORTS / "speculative_recommendation.json").read_text())
    return data


def ci(entry: dict[str, Any]) -> str:
    low, high = entry["ci95"]
    return f"{low:+.0%}..{high:+.0%}".replace("+0%", "0%").lstrip("+")


def drift(profile: str, concurrency: int) -> dict[str, Any]:
    return next(
        d for d in soak()["drift"] if d["profile"] == profile and d["concurrency"] == concurrency
    )


def test_the_soak_pages_drift_cis_and_leak_figures_are_the_committed_soaks() -> None:
    s, page = soak(), doc("soak.md")
    base, subject = s["baseline"], s["subject"]
    for level in (1, 4):
        quoted = f"{ci(drift(base, level))} and {ci(drift(subject, level))}"
        assert quoted in page, quoted
    rss = s["rss"][base]
    low, high = rss["ci95"]
    leak = f"({rss['slope_mb_per_h']:.1f} MB/h, CI {low:.1f}-{high:.1f})"
    assert leak in page, leak
    minutes = int(s["duration"].removesuffix("m"))
    assert f"(campaign {s['campaign_id']}, 27 Nov 2026, {minutes} min," in page
    threshold = f"`soak.drift_threshold` ({s['drift_threshold']:.0%})"
    assert threshold in page and s["drift_threshold"] == SoakConfig().drift_threshold


def test_the_measurements_pages_soak_summary_is_the_committed_soaks() -> None:
    s, page = soak(), doc("measurements.md")
    rss = [s["rss"][s["baseline"]], s["rss"][s["subject"]]]
    probes = s["probe_totals"]
    quoted = (
        f"stable, {s['requests']} requests, {s['errors']} errors, {s['restarts']} restarts, "
        f"RSS {rss[0]['slope_mb_per_h']:.1f} and {rss[1]['slope_mb_per_h']:.1f} MB/h, "
        f"{probes['compared']} probes compared, {probes['mismatch']} mismatches"
    )
    assert s["verdict"] == "stable" and quoted in page, quoted
    assert f"soak campaign {s['campaign_id']} of 2026-11-27" in page


def test_which_arms_the_soaks_identity_probes_ran_on_is_said_as_the_json_says() -> None:
    """The identical probes were all the baseline against itself; the n-gram arm matched it
    token for token in none of its probes (near ties), which the page says in those words."""
    s, page = soak(), doc("measurements.md")
    identical = [e for e in s["identity"] if e["identical"]]
    assert all(e["profile"] == e["reference_profile"] == s["baseline"] for e in identical)
    same = sum(e["identical"] for e in identical)
    subject = [e for e in s["identity"] if e["profile"] == s["subject"]]
    compared = sum(e["compared"] for e in subject)
    near = sum(e["near_tie"] for e in subject)
    mismatches = sum(e["mismatch"] for e in subject)
    matched = sum(e["identical"] for e in subject)
    assert f"the {same} identical probes are all the baseline against itself" in page
    quoted = (
        f"matched the baseline token for token in {matched} of its {compared} probes "
        f"({near} near ties, {mismatches} mismatches)"
    )
    assert quoted in page, quoted


def test_the_draft_cost_speedup_and_host_quoted_are_the_committed_sweeps() -> None:
    """docs/sweep.md and docs/measurements.md quote the committed sweep: the draft's cost per
    target step, the closest setting's figure for the mix, and the host's CPU."""
    r, sweep, measurements = record(), doc("sweep.md"), doc("measurements.md")
    cost = re.search(r"costs (\d\.\d\d) of a target step", r["meaning"])
    assert cost is not None
    assert f"a draft step of the 0.5B Qwen costs {cost[1]} of a 1.5B step" in sweep
    assert f"put the draft at {cost[1]} of a target step" in sweep
    assert f"(a draft step costs {cost[1]} of a target step)" in measurements
    closest = r["closest"]["speedup"].split(" for the workload mix")[0]
    name = r["closest"]["name"].removeprefix("qwen-sweep-")
    assert f"{name} at {closest} for the mix" in measurements, closest
    assert f"{name} {closest} for the task set's mix" in sweep, closest
    assert f"campaign {r['campaign_id']} of 2026-12-07" in measurements
    assert f"(campaign c{r['campaign_id']}, committed)" in sweep
    cpu = re.search(r"\((.+)\)", r["hardware"])  # greedy: "Intel(R) Xeon(R) Processor"
    assert cpu is not None and f"(an {cpu[1]} VM" in measurements
    assert "Xeon VM" not in measurements


def test_the_soaks_thresholds_are_named_with_their_keys_and_the_configs_values() -> None:
    cfg, page = SoakConfig(), doc("measurements.md")
    assert f"it is now {cfg.min_effect:.0%} (`soak.min_effect`)" in page
    assert f"`soak.drift_threshold` ({cfg.drift_threshold:.0%})" in page
    assert "That is why the soak's threshold is 10%" not in page


def test_the_committed_reports_agree_with_each_other_and_the_renderer() -> None:
    """latest.md is the sweep's report (the same stability line), and the soak's page is what
    today's renderer makes of its JSON (no "**stable**: stable:")."""
    sweep = (REPORTS / "speculative_benchmark.md").read_text(encoding="utf-8")
    latest = (REPORTS / "latest.md").read_text(encoding="utf-8")
    assert splice(latest, "") == splice(sweep, "") and latest == sweep
    # The stability line is filled in exactly when the sweep's own soak is committed.
    assert ("not yet measured" in latest) == (not (REPORTS / "speculative_soak.json").exists())
    for folder in (
        SOAK_1127,
        REPORTS / "2026-11-28-soak-c5",
        SHUFFLED,
        REPLAYED_90M,
        REPORTS,
        REPORTS / "code-edit",
    ):
        if not (folder / "speculative_soak.json").exists():
            continue
        data = json.loads((folder / "speculative_soak.json").read_text())
        page = (folder / "speculative_soak.md").read_text(encoding="utf-8")
        assert page == render(SoakSummary.from_json(data)), folder
        assert f"**{data['verdict']}**: {data['verdict']}:" not in page


def test_no_page_names_a_top_level_file_the_repository_does_not_have() -> None:
    names = {
        m
        for page in [*(ROOT / "docs").glob("*.md"), ROOT / "README.md", ROOT / "CONTRIBUTING.md"]
        for m in re.findall(r"\b([A-Z][A-Z_]{2,}\.md)\b", page.read_text(encoding="utf-8"))
        if m != "DATE.md"  # reports/digests/DATE.md: a placeholder for a night's digest
    }
    missing = sorted(n for n in names if not (ROOT / n).exists())
    assert not missing, missing


def test_the_readmes_code_edit_figure_is_the_committed_code_edit_records() -> None:
    """README quotes the code-edit unit's speed-up: the figure its record holds."""
    data = json.loads((REPORTS / "code-edit" / "speculative_recommendation.json").read_text())
    # "1.63x (95% CI 1.40-1.91 weighted by the mix, faster) for code_edit tasks alone ...":
    # the estimate and its interval, as README quotes them.
    found = re.match(r"(\d+\.\d+x) \(95% CI (\d+\.\d+-\d+\.\d+)", data["chosen"]["speedup"])
    assert found is not None, data["chosen"]["speedup"]
    figure = f"{found[1]} (95% CI {found[2]})"
    spec = data["chosen"]["profile"]["spec_type"]
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    assert f"(`--spec-type {spec}`), {figure} on code edits" in readme, figure


def test_the_real_depth4_soaks_figures_in_soak_md_are_the_committed_soaks() -> None:
    """docs/soak.md quotes the real 130-minute depth-4 soak's verdicts as that soak judged them
    (its figures are stored; today's estimator reads its rows no more)."""
    data = json.loads((SHUFFLED / "speculative_soak.json").read_text())
    page = " ".join(doc("soak.md").split())
    assert data["duration"] == "130m"
    for got in data["drift"]:
        low, high = got["ci95"]
        assert got["verdict"] == "inconclusive"
        quoted = f"{got['change']:+.1%} (95% CI {low * 100:+.1f}..{high:+.1%})"
        assert quoted in page, quoted


def _depth4_rows(data: dict[str, Any]) -> list[tuple[str, str]]:
    """(table row head, README figure) of each depth-4 series of a soak's JSON."""
    out = []
    for got in data["drift"]:
        low, high = got["ci95"]
        arm = "baseline" if got["profile"] == data["baseline"] else "ngram-mod"
        figures = f"{got['change']:+.1%} ({low * 100:+.1f}..{high:+.1%})"
        row = f"| {arm} c{got['concurrency']} | {got['verdict']} | {figures} | {got['blocks']} |"
        out.append((row, f"{arm} {got['verdict']}, {figures}"))
    return out


def test_the_replayed_90_minute_soaks_depth4_figures_in_soak_md_are_its_jsons() -> None:
    """The first soak whose depth-4 blocks replayed one order: docs/soak.md's table quotes the
    verdicts, changes and CIs its JSON holds."""
    data = json.loads((REPLAYED_90M / "speculative_soak.json").read_text())
    page = doc("soak.md")
    assert data["duration"] == "90m"
    for row, _ in _depth4_rows(data):
        assert row in page, row


def test_the_140_minute_soaks_depth4_figures_in_soak_md_and_the_readme_are_its_jsons() -> None:
    """The 140-minute soak of the set before 7 Dec 2026 (kept in its own folder): docs/soak.md's
    table and the README quote the verdicts, changes and CIs its JSON holds, and the README
    its length."""
    data = json.loads((SOAK_140M / "speculative_soak.json").read_text())
    page = doc("soak.md")
    readme = " ".join((ROOT / "README.md").read_text(encoding="utf-8").split())
    minutes = int(data["duration"].removesuffix("m"))
    assert f"ran the unit's own flags for {minutes} minutes at depth 4" in readme
    for row, figure in _depth4_rows(data):
        assert row in page, row
        assert figure in readme, figure
