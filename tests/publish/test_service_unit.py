"""The recommended unit installs on any host: rendered from the committed recommendation with
the installing host's paths, `systemd-analyze verify` clean, speculating with the winning arm's
flags, or, keeping the baseline, saying what came closest and what would change the answer."""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import replace
from pathlib import Path

import pytest

from watchkeeper.analysis.benchmark import BenchResult
from watchkeeper.analysis.identity_gate import identity_status, withheld
from watchkeeper.analysis.recommend import recommend
from watchkeeper.analysis.stats import RatioCI
from watchkeeper.campaign.load_shape import load_text
from watchkeeper.cli.app import main
from watchkeeper.config import ProfileConfig, load_config
from watchkeeper.config.service import ServiceConfig
from watchkeeper.load.arrivals import ArrivalSpec
from watchkeeper.publish.deliverable import (
    RecommendationRecord,
    build_record,
    read_record,
    write_record,
)
from watchkeeper.publish.systemd import render_unit


def analyze() -> str:
    path = shutil.which("systemd-analyze") or (
        "/usr/bin/systemd-analyze" if Path("/usr/bin/systemd-analyze").exists() else None
    )
    if path is None:
        pytest.fail("systemd-analyze is required: install Debian's `systemd` package")
    return path


def verify(unit: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [analyze(), "verify", str(unit)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=unit.parent,
    )


def executable(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("#!/bin/sh\nexit 0\n")
    path.chmod(0o755)
    return path


def keys(text: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", "[")) and "=" in line:
            k, v = line.split("=", 1)
            out.setdefault(k, []).append(v)
    return out


PROFILES = {
    "baseline": ProfileConfig(model="qwen-target"),
    "draft4": ProfileConfig(
        model="qwen-target", draft_model="qwen-draft", spec_type="draft-simple", draft_n_max=4
    ),
    "ngram": ProfileConfig(model="qwen-target", spec_type="ngram-simple"),
}


def record_of(result: BenchResult) -> RecommendationRecord:
    rec = recommend(result, withheld=withheld(result))
    return build_record(
        result,
        rec,
        chosen=rec.overall.profile or result.baseline.name,
        profiles=PROFILES,
        report="speculative_benchmark.md",
        campaign_report="2025-03-14-bench-c7/report.md",
    )


def kept_baseline(result: BenchResult) -> BenchResult:
    """The same campaign on a CPU host where draft4 is inconclusive: nothing qualifies."""
    inconclusive = RatioCI(1.04, 0.93, 1.17, 48, 12, 4, verdict="inconclusive")
    stats = tuple(
        replace(s, overall=replace(s.overall, speedup=inconclusive)) if s.arm == "draft4" else s
        for s in result.arm_stats
    )
    host = replace(result.host, gpu=None, cpu_count=2, cpu_model="AMD EPYC")
    return replace(result, arm_stats=stats, host=host)


def test_a_speculating_recommendation_renders_the_winning_flags_for_two_hosts(
    result: BenchResult, tmp_path: Path
) -> None:
    record = record_of(result)
    assert record.speculates and record.chosen.name == "draft4"
    first = ServiceConfig(
        binary=str(executable(tmp_path / "a" / "llama-server")), model_dir="/srv/models"
    )
    second = ServiceConfig(
        binary=str(executable(tmp_path / "opt b" / "bin" / "llama-server")),
        model_dir="/data/gguf",
        user="inference",
        group="ml",
        port=9090,
        host="0.0.0.0",
        reports_url="https://git.example.com/team/reports/src/branch/main/",
    )
    units = {}
    for name, service in (("a", first), ("b", second)):
        text = render_unit(record, service)
        unit = tmp_path / "units" / name / "llama-server-speculative.service"
        unit.parent.mkdir(parents=True)
        unit.write_text(text)
        done = verify(unit)
        assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stderr
        units[name] = keys(text)
        # Nothing of the machine that ran the sweep: its model paths, its port.
        assert " /models/" not in text and "My Drafts" not in text and "8081" not in text
        assert "--spec-type draft-simple" in text and "--spec-draft-n-max 4" in text
    a, b = units["a"], units["b"]
    assert a["User"] == ["llama"] and a["Group"] == ["llama"]
    assert b["User"] == ["inference"] and b["Group"] == ["ml"]
    assert "/srv/models/Qwen2.5-1.5B-Instruct-Q4_K_M.gguf" in a["ExecStart"][0]
    assert "--spec-draft-model /data/gguf/Qwen2.5-0.5B-Instruct-Q8_0.gguf" in b["ExecStart"][0]
    assert "--host 0.0.0.0 --port 9090" in b["ExecStart"][0]
    assert "--port 8080" in a["ExecStart"][0]
    assert b["Documentation"] == [
        "https://git.example.com/team/reports/src/branch/main/speculative_benchmark.md"
    ]
    assert a["Documentation"] == [
        "file:///usr/share/doc/llama-server-speculative/speculative_benchmark.md"
    ]
    assert a["PrivateDevices"] == ["no"]  # measured on a GPU host
    assert b["ReadOnlyPaths"] == [f'"{tmp_path}/opt b/bin" /data/gguf']


def test_keeping_the_baseline_names_the_closest_setting_and_what_would_change_it(
    result: BenchResult, tmp_path: Path
) -> None:
    record = record_of(kept_baseline(result))
    assert not record.speculates and record.closest is not None
    assert record.closest.name == "draft4"  # ngram's mismatch makes it unresolved
    text = render_unit(
        record, ServiceConfig(binary=str(executable(tmp_path / "bin" / "llama-server")))
    )
    unit = tmp_path / "llama-server-speculative.service"
    unit.write_text(text)
    done = verify(unit)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stderr
    exec_start = keys(text)["ExecStart"][0]
    assert "--spec" not in exec_start  # the baseline runs
    flat = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
    assert "Closest speculative setting: draft4, 1.04x (95% CI 0.93-1.17, inconclusive)" in flat
    assert "--spec-type draft-simple" in flat and "--spec-draft-n-max 4" in flat
    assert "costs 0.18 of a target step" in flat and "What would change the answer:" in flat
    assert "2 CPU cores (AMD EPYC), no GPU" in flat
    assert "here off (--cache-ram 0) ([service] cache_ram_mib)" in flat
    assert keys(text)["PrivateDevices"] == ["yes"]


def test_a_draft_measured_once_is_not_said_unable_to_win(result: BenchResult) -> None:
    """One round gives no CI (low = high = the estimate): 0.54x then says the draft did not
    win, not that no draft length can; the same estimate with a CI below 1 says it can't."""
    once = RatioCI(0.54, 0.54, 0.54, 18, 1, 1)
    slower = RatioCI(0.54, 0.45, 0.65, 36, 2, 2, verdict="slower")
    seen = {}
    for name, ci in (("once", once), ("slower", slower)):
        base = kept_baseline(result)
        stats = tuple(
            replace(s, overall=replace(s.overall, speedup=ci)) if s.arm == "draft4" else s
            for s in base.arm_stats
        )
        seen[name] = record_of(replace(base, arm_stats=stats)).meaning
    assert "no draft length won here" in seen["once"], seen["once"]
    assert "can win" not in seen["once"].split(";")[0]
    assert "no draft length can win here" in seen["slower"], seen["slower"]


def test_what_the_racer_says_would_change_the_answer_is_listed_last(result: BenchResult) -> None:
    rec = recommend(kept_baseline(result))
    hint = "a larger budget: ... `--budget 45` would reach them at this pace"
    plain = build_record(
        kept_baseline(result), rec, chosen="baseline", profiles=PROFILES, report="r.md",
        campaign_report="c/report.md",
    )  # fmt: skip
    told = build_record(
        kept_baseline(result), rec, chosen="baseline", profiles=PROFILES, report="r.md",
        campaign_report="c/report.md", also_change=(hint,),
    )  # fmt: skip
    assert told.would_change == (*plain.would_change, hint)
    assert hint in render_unit(told, ServiceConfig())


def test_an_arm_whose_identity_is_unresolved_is_never_recommended(result: BenchResult) -> None:
    # draft4 is faster with confidence, but none of its probes were compared.
    stats = tuple(
        replace(s, overall=replace(s.overall, verdicts={})) if s.arm == "draft4" else s
        for s in result.arm_stats
    )
    unprobed = replace(result, arm_stats=stats)
    assert identity_status(unprobed, "draft4").text.startswith("unresolved")
    rec = recommend(unprobed, withheld=withheld(unprobed))
    assert rec.overall.profile is None
    assert "draft4" in rec.headline and "excluded by its identity (unresolved" in rec.headline
    # With its probes it is recommended: the gate is what withheld it.
    assert recommend(result, withheld=withheld(result)).overall.profile == "draft4"


def test_at_temperature_above_0_the_distribution_check_must_agree(result: BenchResult) -> None:
    warm = replace(result, method=replace(result.method, temperature=0.7))
    assert not identity_status(warm, "draft4").resolved  # no distribution check ran
    checked = replace(
        warm,
        extras={**warm.extras, "distribution": [{"arm": "draft4", "verdict": "same distribution"}]},
    )
    assert identity_status(checked, "draft4").resolved


def test_the_record_round_trips_and_the_unit_command_renders_it(
    result: BenchResult, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record = record_of(result)
    path = write_record(tmp_path / "speculative_recommendation.json", record)
    assert read_record(path) == record
    assert "/models/" not in path.read_text()  # file names only: no path of the sweeping host
    binary = executable(tmp_path / "bin" / "llama-server")
    config = tmp_path / "wk.toml"
    config.write_text(f'[service]\nbinary = "{binary}"\nuser = "svc"\n')
    out = tmp_path / "out" / "llama-server-speculative.service"
    code = main(
        ["unit", "--config", str(config), "--recommendation", str(path), "--port", "8111",
         "--model-dir", "/mnt/models", "--output", str(out)]
    )  # fmt: skip
    assert code == 0
    unit = keys(out.read_text())
    assert unit["User"] == ["svc"] and unit["ExecStart"][0].startswith(str(binary))
    assert "--port 8111" in unit["ExecStart"][0] and "/mnt/models/" in unit["ExecStart"][0]
    capsys.readouterr()
    assert main(["unit", "--config", str(config), "--recommendation", str(path), "--json"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed["profile"] == "draft4" and printed["speculates"] is True
    assert main(["unit", "--recommendation", str(tmp_path / "missing.json")]) == 2


def test_the_record_and_the_unit_name_the_load_the_recommendation_holds_for(
    result: BenchResult, tmp_path: Path
) -> None:
    """A speed-up holds for the load it was measured at (docs/load.md): a sweep at 4
    concurrent requests says so in its record and its unit; an older record without the
    field still reads, and its unit claims no load."""
    record = replace(record_of(result), load=load_text(4, None))
    path = write_record(tmp_path / "rec.json", record)
    assert read_record(path).load == "4 concurrent requests (closed loop)"
    header = " ".join(line[2:] for line in render_unit(record, ServiceConfig()).splitlines())
    assert "Holds for the load it was measured under: 4 concurrent requests" in header
    spec = ArrivalSpec(rate=0.5, max_concurrency=4)
    assert load_text(1, spec) == "0.5 req/s poisson (open loop, at most 4 in flight)"
    older = json.loads(path.read_text())
    del older["load"]
    path.write_text(json.dumps(older))
    assert read_record(path).load == ""
    assert "Holds for" not in render_unit(read_record(path), ServiceConfig())


def test_the_committed_unit_installs_anywhere_and_matches_the_committed_recommendation(
    tmp_path: Path,
) -> None:
    root = Path(__file__).resolve().parents[2]
    committed = (root / "systemd" / "llama-server-speculative.service").read_text()
    record = read_record(root / "reports" / "speculative_recommendation.json")
    # Rendered from the committed recommendation with [service]'s defaults and the committed
    # deliverables' config (examples/speculative-service.toml: 4 slots), nothing else.
    service = load_config(root / "examples" / "speculative-service.toml").service
    assert service.model_dump(exclude={"slots"}) == ServiceConfig().model_dump(exclude={"slots"})
    assert committed == render_unit(record, service)
    assert "/root" not in committed and "/work" not in committed and "User=root" not in committed
    binary = executable(tmp_path / "bin" / "llama-server")
    unit = tmp_path / "llama-server-speculative.service"
    unit.write_text(committed.replace(ServiceConfig().binary, str(binary)))
    done = verify(unit)
    assert done.returncode == 0 and not (done.stdout + done.stderr).strip(), done.stderr
