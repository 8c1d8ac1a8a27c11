"""The whole issue lifecycle over a scripted month (benchmarks/tracker_month.py), both forges:
filing, recurrences, recovery and reopen, maintainers' labels and `/watchkeeper` comments,
closing and reopening, and a database wiped halfway. Every issue ends where its last decision
puts it, none is filed twice, and watchkeeper says exactly one thing per event."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "benchmarks" / "tracker_month.py"


def _benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("tracker_month", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("tracker_month", module)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("dialect", ["github", "gitea"])
def test_a_month_of_triage_ends_every_issue_where_its_last_decision_puts_it(
    dialect: str, capsys: pytest.CaptureFixture[str]
) -> None:
    summary = _benchmark().main(["--forge", dialect, "--json"])
    capsys.readouterr()
    assert summary["ok"], "\n".join(summary["problems"])
    issues = {i["series"]: i for i in summary["issues"]}
    assert len(issues) == 7 and all(len(i["numbers"]) == 1 for i in issues.values())
    assert len(summary["events"]) == 20
    adopted = [e for e in summary["events"] if e["triage"].get("adopted")]
    assert [e["day"] for e in adopted] == [15]  # the wipe: adopted by marker, never re-filed
    assert sum(len(e["triage"].get("filed", [])) for e in summary["events"]) == 7
