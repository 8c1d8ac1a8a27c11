"""No test reads the wall clock: a test that passes at 14:00 and fails at 23:58 is broken.

Time comes from a fixed `now` passed in, or from a fake server's own clock (the fake forge
stamps what it stores as a real forge would; a test asks `forge.clock()`). Durations measured
with `time.monotonic` are not the wall clock and stay allowed."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent

WALL_CLOCK_CALLS = {
    ("datetime", "now"),
    ("datetime", "utcnow"),
    ("datetime", "today"),
    ("date", "today"),
    ("time", "time"),
    ("time", "time_ns"),
}
FAKE_SERVERS = {
    "support/fakeforge.py": "the fake forge's own clock (`FakeForge.now`) and rate-limit headers",
}


def wall_clock_reads(source: str) -> list[int]:
    """Line numbers of calls like `datetime.now(...)` or `time.time()`."""
    lines = []
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        owner = node.func.value
        name = owner.id if isinstance(owner, ast.Name) else getattr(owner, "attr", None)
        if (name, node.func.attr) in WALL_CLOCK_CALLS:
            lines.append(node.lineno)
    return lines


def test_the_check_sees_a_clock_read() -> None:
    source = "import time, datetime as dt\nx = time.time()\ny = dt.datetime.now(UTC)\n"
    assert wall_clock_reads(source) == [2, 3]
    assert wall_clock_reads("t = time.monotonic()\nnow = NOW\n") == []


def test_no_test_reads_the_wall_clock() -> None:
    found = {
        f"{path.relative_to(TESTS)}:{line}"
        for path in sorted(TESTS.rglob("*.py"))
        if str(path.relative_to(TESTS)) not in FAKE_SERVERS
        for line in wall_clock_reads(path.read_text(encoding="utf-8"))
    }
    assert found == set(), (
        "tests read the wall clock; pass a fixed `now` (or ask the fake server's clock): "
        f"{sorted(found)}"
    )
