"""Does watchkeeper's own memory level off through a soak?

The daemon soaks every night for months, so anything the soak keeps per request is a leak.
This runs a real soak in-process (SmolLM2, SQLite in a scratch folder), samples the process's
RSS, tracemalloc's traced Python memory, glibc malloc's bytes in use and free (mallinfo2), its
arena count and SQLite's own memory every `--every` seconds, and prints the series, their
Theil-Sen slopes after a warm-up, and the allocation sites that grew most between the end
of the warm-up and the last half-minute of the loop. RSS growing while traced memory stays flat points at the
allocator (fragmentation, per-thread arenas), not at Python objects kept alive. The slopes use
the samples between the two snapshots: holding one costs ~10-15 MB of untraced RSS (a step
inside the window read as +20 MB/h), and after the loop the verdict loads the whole campaign
once, a one-off peak that is not growth.

    .venv/bin/python benchmarks/soak_memory.py [--duration 20m] [--block 1m]
        [--profiles smollm2-baseline] [--concurrency 1,2] [--every 30]

glibc reads MALLOC_ARENA_MAX at start-up: run it once with `MALLOC_ARENA_MAX=2` in the
environment beside a run without to see what per-thread arenas cost.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import ctypes
import gc
import os
import re
import tempfile
import threading
import time
import tracemalloc
from dataclasses import dataclass
from pathlib import Path

import psutil

from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.commands.soak import soak_command
from watchkeeper.config import Config, DatabaseConfig, SoakConfig
from watchkeeper.config.durations import parse_duration
from watchkeeper.config.requests import SoakRequest
from watchkeeper.server.profiles import get_profile
from watchkeeper.soak.verdicts import theil_sen

FRAMES = 8
BLOCK_END = re.compile(r"block \d+ (completed|interrupted|stopped):")


class _MallInfo2(ctypes.Structure):
    _fields_ = [
        (name, ctypes.c_size_t)
        for name in (
            "arena", "ordblks", "smblks", "hblks", "hblkhd",
            "usmblks", "fsmblks", "uordblks", "fordblks", "keepcost",
        )
    ]  # fmt: skip


@dataclass(frozen=True, slots=True)
class Point:
    t: float
    rss: float
    traced: float
    malloc_used: float
    """MB glibc malloc hands out (Python's small objects live in pymalloc's own mmaps)."""
    malloc_free: float
    """MB free inside malloc's heaps, kept from the OS (fragmentation, idle arenas)."""
    arenas: int
    sqlite: float
    """MB SQLite holds (page caches, statements)."""
    requests: int


class NativeMemory:
    """glibc's mallinfo2/malloc_info and SQLite's own counter; zeros where unavailable."""

    def __init__(self) -> None:
        self._libc = self._sqlite = None
        with contextlib.suppress(OSError, AttributeError):
            libc = ctypes.CDLL(None)
            libc.mallinfo2.restype = _MallInfo2
            libc.fopen.restype = ctypes.c_void_p
            libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
            libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
            libc.fclose.argtypes = [ctypes.c_void_p]
            self._libc = libc
        with contextlib.suppress(OSError, AttributeError):
            sqlite = ctypes.CDLL("libsqlite3.so.0")
            sqlite.sqlite3_memory_used.restype = ctypes.c_int64
            self._sqlite = sqlite
        self._info = Path(tempfile.mkdtemp(prefix="wk-malloc-info-")) / "info.xml"

    def malloc(self) -> tuple[float, float, int]:
        if self._libc is None:
            return 0.0, 0.0, 0
        info = self._libc.mallinfo2()
        stream = self._libc.fopen(str(self._info).encode(), b"w")
        arenas = 0
        if stream:
            self._libc.malloc_info(0, stream)
            self._libc.fclose(stream)
            arenas = self._info.read_text().count("<heap nr=")
        return (info.uordblks + info.hblkhd) / 2**20, info.fordblks / 2**20, arenas

    def sqlite(self) -> float:
        return self._sqlite.sqlite3_memory_used() / 2**20 if self._sqlite is not None else 0.0


def sampler(
    stop: threading.Event,
    every_s: float,
    points: list[Point],
    counter: list[int],
    t0: float,
    collect: bool,
) -> None:
    """One `Point` every `every_s` until stopped (t in seconds since t0)."""
    me, native = psutil.Process(), NativeMemory()
    while True:
        if collect:
            gc.collect()
        traced, _ = tracemalloc.get_traced_memory()
        used, free, arenas = native.malloc()
        points.append(
            Point(
                time.monotonic() - t0,
                me.memory_info().rss / 2**20,
                traced / 2**20,
                used,
                free,
                arenas,
                native.sqlite(),
                counter[0],
            )
        )
        if stop.wait(every_s):
            return


def print_grown(
    late: tracemalloc.Snapshot,
    early: tracemalloc.Snapshot,
    by_line: str,
    by_module: str,
    lines: int,
) -> None:
    """What grew from `early` to `late`: `lines` allocating lines (all call paths together),
    then 8 modules, each under its title."""  # fmt: skip
    for title, key, rows in ((by_line, "lineno", lines), (by_module, "filename", 8)):
        print(title)
        for stat in late.compare_to(early, key)[:rows]:
            frame = stat.traceback[0]
            where = f"{Path(frame.filename).parent.name}/{Path(frame.filename).name}"
            where += f":{frame.lineno}" if key == "lineno" else ""
            print(f"  {stat.size_diff / 1024:+9.1f} KB {stat.count_diff:+7d} blocks  {where}")


def print_grown_types(
    late: collections.Counter[str], early: collections.Counter[str], title: str
) -> None:
    """The 8 object types whose live count grew most from `early` to `late`."""
    live = late.copy()
    live.subtract(early)
    print(title)
    for name, count in live.most_common(8):
        print(f"  {count:+8d}  {name}")


def slope(points: list[tuple[float, float]]) -> str:
    if len(points) < 3:
        return "not enough samples"
    trend = theil_sen([tuple(zip(*points, strict=True))])  # type: ignore[list-item]
    if trend is None:
        return "not enough samples"
    return f"{trend.slope:+.1f} MB/h (95% CI {trend.low:+.1f}..{trend.high:+.1f})"


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", default="20m")
    parser.add_argument("--block", default="1m")
    parser.add_argument("--profiles", default="smollm2-baseline")
    parser.add_argument("--concurrency", default="1,2")
    parser.add_argument("--every", type=float, default=30.0)
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="llama-server threads (default: the profile's); 1 lets two runs share 2 cores",
    )
    parser.add_argument("--warmup", type=float, default=0.25, help="share of the soak ignored")
    parser.add_argument(
        "--collect",
        action="store_true",
        help="run a full garbage collection before every sample: what is left growing is "
        "memory still reachable or held by the allocator, not cycles awaiting collection",
    )
    args = parser.parse_args()
    unwind_on_sigterm()
    duration_s = parse_duration(args.duration)
    scratch = Path(tempfile.mkdtemp(prefix="wk-soak-memory-"))
    os.environ.setdefault("WATCHKEEPER_DATA_DIR", str(scratch / "data"))
    config = Config(
        database=DatabaseConfig(url=f"sqlite:///{scratch / 'wk.db'}"),
        soak=SoakConfig(sample_interval_s=10.0, probe_interval_s=30.0, flush_interval_s=5.0),
    )
    if args.threads is not None:
        for name in args.profiles.split(","):
            profile = get_profile(config, name)
            config.profiles[name] = profile.model_copy(update={"threads": args.threads})
    tracemalloc.start(FRAMES)
    stop, counter = threading.Event(), [0]
    points: list[Point] = []
    snapshots: dict[str, tracemalloc.Snapshot] = {}
    type_counts: dict[str, collections.Counter[str]] = {}
    # Seconds since t0. Holding a snapshot costs ~15 MB of RSS (untraced): the slopes use the
    # samples after the warm-up one is held and before the late one (near the loop's end) starts.
    marks = {"warm": float("inf"), "late": float("inf"), "loop_end": float("inf")}
    timers: list[threading.Timer] = []

    def on_sample(_key: object, _sample: object) -> None:
        counter[0] += 1  # a count, not the samples: the benchmark must not be the leak

    def take_snapshot(name: str) -> None:
        started = time.monotonic() - t0
        gc.collect()
        type_counts[name] = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
        snapshots[name] = tracemalloc.take_snapshot()
        marks[name] = time.monotonic() - t0 if name == "warm" else started

    t0 = time.monotonic()

    def progress(message: str) -> None:
        if BLOCK_END.match(message):
            marks["loop_end"] = time.monotonic() - t0
        elif not timers and message.startswith("block "):  # the first block starts
            lead = max(30.0, 2 * args.every)
            for delay, name in ((duration_s * args.warmup, "warm"), (duration_s - lead, "late")):
                timers.append(threading.Timer(delay, take_snapshot, (name,)))
                timers[-1].start()
        print(f"  · {message}", flush=True)

    watcher = threading.Thread(
        target=sampler,
        args=(stop, args.every, points, counter, t0, args.collect),
        daemon=True,
    )
    watcher.start()
    result = soak_command(
        config,
        SoakRequest(
            duration=args.duration,
            block=args.block,
            profiles=args.profiles.split(","),
            concurrency=[int(c) for c in args.concurrency.split(",")],
            per_category=1,
            seed=3,
            fresh=True,
        ),
        on_sample=on_sample,
        progress=progress,
    )
    wall = time.monotonic() - t0
    for timer in timers:
        timer.cancel()
    stop.set()
    watcher.join()
    print()
    print(f"soak {args.duration} (wall {wall:.0f} s), {counter[0]} requests, {result.status}")
    print(f"MALLOC_ARENA_MAX={os.environ.get('MALLOC_ARENA_MAX', '(unset: glibc default)')}")
    if args.collect:
        print("a full garbage collection before every sample")
    print(
        f"{'t (s)':>6} {'RSS MB':>7} {'traced MB':>9} {'malloc MB':>9} {'free MB':>7} "
        f"{'arenas':>6} {'sqlite MB':>9} {'requests':>8}"
    )
    for p in points:
        print(
            f"{p.t:6.0f} {p.rss:7.1f} {p.traced:9.2f} {p.malloc_used:9.2f} {p.malloc_free:7.2f} "
            f"{p.arenas:6d} {p.sqlite:9.2f} {p.requests:8d}"
        )
    until = min(marks["late"], marks["loop_end"] + 1)
    warm = [p for p in points if marks["warm"] < p.t < until]
    print()
    print(
        f"from the warm-up snapshot ({args.warmup:.0%} of the soak in, held at "
        f"{marks['warm']:.0f} s) to the late one ({until:.0f} s), {len(warm)} samples:"
    )
    for label, field in (
        ("RSS", "rss"),
        ("traced", "traced"),
        ("malloc used", "malloc_used"),
        ("malloc free", "malloc_free"),
        ("sqlite", "sqlite"),
    ):
        print(f"  {label + ' slope':<18} {slope([(p.t / 3600, getattr(p, field)) for p in warm])}")
    if warm and warm[-1].requests > warm[0].requests:
        grown = (warm[-1].rss - warm[0].rss) * 2**10 / (warm[-1].requests - warm[0].requests)
        print(f"  RSS per request after warm-up  {grown:+.2f} KB")
    if "warm" in snapshots and "late" in snapshots:
        late, warm_snap = snapshots["late"], snapshots["warm"]
        print()
        print("allocation sites that grew most between the two snapshots (tracemalloc):")
        for stat in late.compare_to(warm_snap, "traceback")[:10]:
            where = " <- ".join(
                f"{Path(f.filename).name}:{f.lineno}" for f in list(stat.traceback)[::-1][:4]
            )  # the allocating line first, then its callers
            print(f"  {stat.size_diff / 1024:+9.1f} KB {stat.count_diff:+7d} blocks  {where}")
        # One line can allocate through many call paths, each too small to show above.
        print_grown(late, warm_snap, "allocating lines that grew most, all call paths together:",
                    "modules whose allocations grew most:", lines=10)  # fmt: skip
    if "warm" in type_counts and "late" in type_counts:
        print_grown_types(
            type_counts["late"],
            type_counts["warm"],
            "object types whose live count grew most (gc-tracked objects):",
        )


if __name__ == "__main__":
    main()
