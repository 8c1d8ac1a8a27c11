"""Progress of the one-time llama-server build, shown on the real terminal while pytest runs.

`ensure_binary` reports messages (`progress`) and cmake's `[ NN%]` lines (`percent`); this
turns them into one line per build stage: configure, every 10% of the compile, link, done with
seconds. `say` writes a line past pytest's output capture (even under `-q`), so a first
`make test` on a fresh machine is visibly building instead of silent for minutes.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable

import pytest

PREFIX = "[watchkeeper tests]"


def say(config: pytest.Config | None, message: str) -> None:
    """One line on the terminal pytest writes to, with capture suspended for the write."""
    line = f"{PREFIX} {message}"
    if config is None:
        _to_stderr(line)
        return
    capman = config.pluginmanager.getplugin("capturemanager")
    reporter = config.pluginmanager.getplugin("terminalreporter")
    if capman is None or reporter is None:
        _to_stderr(line)
        return
    with capman.global_and_fixture_disabled():
        reporter.ensure_newline()
        reporter.write_line(line)
        reporter.flush()


def _to_stderr(line: str) -> None:
    stream = sys.__stderr__
    if stream is not None:
        stream.write(f"{line}\n")
        stream.flush()


class BuildProgress:
    """Feed `message` as ensure_binary's `progress` and `percent` as its `percent`."""

    def __init__(
        self, write: Callable[[str], None], clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._write = write
        self._clock = clock
        self._started: float | None = None
        self._compile_started: float | None = None
        self._decile = -1
        self._linking = False

    def _elapsed(self) -> str:
        return f"{self._clock() - (self._started or self._clock()):.0f} s"

    def message(self, text: str) -> None:
        if text.startswith("building llama-server"):
            self._started = self._clock()
            self._write(text)
            self._write("configure: cmake is configuring the build")
        elif text.startswith("built "):
            self._write(f"done: {text} (link included; {self._elapsed()} since configure)")
        else:
            self._write(text)

    def percent(self, value: int) -> None:
        if self._started is None:  # a percent without the build message: start the clock now
            self._started = self._clock()
        if self._compile_started is None:
            self._compile_started = self._clock()
            self._write(f"configure done after {self._elapsed()}; compiling")
        decile = min(value, 100) // 10
        if value < 100 and decile > self._decile:
            self._decile = decile
            self._write(f"compile: {value}% ({self._elapsed()})")
        if value >= 100 and not self._linking:
            self._linking = True
            self._write(f"compile: 100%; link: linking llama-server ({self._elapsed()})")
