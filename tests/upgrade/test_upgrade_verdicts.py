"""The upgrade check's flag comparison and verdicts, on `--help` texts in llama.cpp's format
(an older build's dialect and the current one's, where `--draft-max` has been removed)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from watchkeeper.analysis.stats import RatioCI
from watchkeeper.commands.upgrade_check import commit_report, report_relpath
from watchkeeper.config import Config, DigestConfig, ProfileConfig
from watchkeeper.server.flags import parse_help
from watchkeeper.upgrade.flagcheck import FlagCheck, check_flags
from watchkeeper.upgrade.verdict import judge, markdown

COMMON = (
    "-m,    --model FNAME     model\n--port PORT  port\n--host HOST  host\n"
    "-c,    --ctx-size N   ctx\n-np,   --parallel N  slots\n--metrics  metrics\n"
    "--spec-type {none,draft-simple}  t\n"
)
OLD = parse_help(COMMON + "-md,   --model-draft FNAME  draft\n--draft-max N  max\n")
NEW = parse_help(
    COMMON
    + "--spec-draft-model FNAME  draft\n--spec-draft-n-max N  max\n"
    + "--draft-max N    the argument has been removed. use --spec-draft-n-max\n"
)
DRAFT = ProfileConfig(model="m", draft_model="d", spec_type="draft-simple", draft_n_max=3)


def test_renamed_flags_are_reported_and_the_profile_still_runs() -> None:
    check = check_flags(DRAFT, current=OLD, candidate=NEW)
    assert check.ok
    assert ("--draft-max", "--spec-draft-n-max") in check.renamed
    assert ("--model-draft", "--spec-draft-model") in check.renamed
    assert check.removed == () and check.unknown == ()


def test_a_removed_flag_in_extra_args_breaks_the_config_before_any_measurement() -> None:
    profile = ProfileConfig(model="m", extra_args=["--draft-max", "8"])
    check = check_flags(profile, current=OLD, candidate=NEW)
    assert not check.ok and "was removed" in (check.breaks or "")
    assert check.removed == (("--draft-max", "use --spec-draft-n-max"),)
    verdict = judge("p", check, None, ())
    assert verdict.verdict == "breaks config"
    assert "removed: --draft-max (use --spec-draft-n-max)" in markdown(
        "11434.0.0", "old", [verdict]
    )


def _ratio(estimate: float, low: float, high: float, verdict: str) -> RatioCI:
    return RatioCI(estimate, low, high, 36, 4, 9, verdict=verdict)


def test_the_verdict_follows_the_ratio_unless_the_outputs_differ() -> None:
    ok = FlagCheck(None)
    assert judge("p", ok, _ratio(0.8, 0.77, 0.83, "slower"), ()).verdict == "regression"
    assert judge("p", ok, _ratio(1.2, 1.15, 1.25, "faster"), ()).verdict == "improvement"
    assert judge("p", ok, _ratio(1.0, 0.99, 1.01, "no change"), ()).verdict == "safe"
    assert judge("p", ok, _ratio(1.0, 0.9, 1.1, "inconclusive"), ()).verdict == "inconclusive"
    assert judge("p", ok, RatioCI(1.0, 1.0, 1.0, 2, 2, 1), ()).verdict == "inconclusive"
    same = _ratio(1.0, 0.99, 1.01, "no change")
    assert judge("p", ok, same, ("identical", "near_tie")).verdict == "safe"
    differs = judge("p", ok, same, ("identical", "mismatch"))
    assert differs.verdict == "regression" and "1 of 2 outputs differ" in differs.reason


def test_the_upgrade_report_is_committed_and_pushed_beside_the_digests(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real repository with a real (local, bare) remote, as the digest publishes."""
    empty = tmp_path / "empty.gitconfig"
    empty.write_text("")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(empty))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")

    def git(cwd: Path, *args: str) -> str:
        done = subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True)
        return done.stdout.strip()

    remote, work = tmp_path / "remote.git", tmp_path / "work"
    git(tmp_path, "init", "--quiet", "--bare", "--initial-branch=main", str(remote))
    git(tmp_path, "init", "--quiet", "--initial-branch=main", str(work))
    git(work, "remote", "add", "origin", str(remote))
    config = Config(digest=DigestConfig(repo=str(work), subdir="reports/digests"))
    report = tmp_path / "upgrade-11434.0.0-2026-11-28.md"
    report.write_text("# Upgrade check\n", encoding="utf-8")
    verdict = judge("smollm2-ngram", FlagCheck(None), _ratio(1.0, 0.99, 1.01, "no change"), ())
    said: list[str] = []
    published = commit_report(
        config, report, candidate="11434.0.0", verdicts=[verdict], push=True, progress=said.append
    )
    assert published.committed and published.pushed
    assert report_relpath(config, report) == "reports/upgrades/upgrade-11434.0.0-2026-11-28.md"
    shown = git(remote, "show", "main:reports/upgrades/upgrade-11434.0.0-2026-11-28.md")
    assert shown == "# Upgrade check"
    message = git(remote, "log", "-1", "--format=%s", "main")
    assert message == "upgrade check: llama.cpp 11434.0.0 (b11434): smollm2-ngram safe"
    assert git(remote, "log", "-1", "--format=%an", "main") == "watchkeeper"
    # The same report again is no new commit (a rerun of the job writes nothing twice).
    again = commit_report(
        config, report, candidate="11434.0.0", verdicts=[verdict], push=True, progress=said.append
    )
    assert not again.committed and git(remote, "rev-list", "--count", "main") == "1"
