"""Does the daemon's memory level off from one night to the next?

The daemon runs for months, and what it keeps from one night to the next is what adds up.
This starts the real daemon (`python -m watchkeeper.cli daemon`, as the systemd unit runs it,
with the unit's MALLOC_ARENA_MAX=2) on the shipped jobs/nightly.toml, soak.toml and
digest.toml, unchanged except for their cron lines (and the soak's duration): a "night" every
`--period` minutes: the paired nightly, then the soak, then the digest, committed and pushed to
a local bare repository. Real SmolLM2 on a real llama-server, SQLite in a scratch folder.

It samples the daemon process (not its llama-servers) every `--every` seconds: RSS, USS, open
file descriptors and threads. Each night's *resting* level is the last sample before the next
night's nightly starts (after the digest, nothing running): if the daemon keeps something per
night, the resting level climbs night after night; if it levels off, the within-night peaks are
working memory handed back (or reused) the next night. It prints one row per night and the
Theil-Sen slope of the resting RSS over the nights after the first two (MB per night, 95% CI).
After every job the daemon runs a full collection and glibc's malloc_trim (its log's
`memory_released` lines): the resting level is what it keeps, not the highest peak so far.
The compressed nights all fall in one noon-to-noon digest window, so each digest here reads
every night so far (in production it reads one): its work grows night by night, a load the
real schedule does not have.

    .venv/bin/python benchmarks/daemon_memory.py [--nights 6] [--period 15] [--every 15]
        [--arena-max 2] [--csv samples.csv]

`--arena-max 0` leaves glibc's default arenas (to compare with the unit's cap). `--trace` runs
the daemon under tracemalloc and has it dump a snapshot (after a full collection) at each rest:
per rest, the traced Python memory, the live objects, the live SQLAlchemy engines and dialects,
and the fill of the caches that grow as statements and patterns come by (the engines' compiled
statements, the ORM mappers' INSERT/UPDATE statements, re's patterns); then what grew between
the third rest (or the first, with fewer nights) and the last, by allocating line, module and
object type. Tracing slows the daemon and adds to its RSS: its RSS figures are not comparable
with an untraced run's.
"""

from __future__ import annotations

import argparse
import collections
import itertools
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
from soak_memory import (  # benchmarks/ is the script's folder, first on sys.path
    print_grown,
    print_grown_types,
)

from watchkeeper.cli.app import unwind_on_sigterm
from watchkeeper.soak.verdicts import theil_sen

REPO = Path(__file__).resolve().parents[1]
HOST = "memory-bench"
# The daemon under tracemalloc: SIGUSR1 dumps a snapshot and the live object types (after gc).
TRACED_DAEMON = """
import collections, gc, json, signal, sys, tracemalloc
from pathlib import Path

out = Path(sys.argv[1])
tracemalloc.start(8)


def dump(_signum, _frame):
    gc.collect()
    n = len(list(out.glob("rest-*.snap"))) + 1
    tracemalloc.take_snapshot().dump(str(out / f"rest-{n}.snap"))
    types = collections.Counter(type(o).__qualname__ for o in gc.get_objects())
    (out / f"rest-{n}.types").write_text("".join(f"{k}\\t{v}\\n" for k, v in types.items()))
    # The bounded caches that fill as new statements and patterns come by: at capacity, they
    # stop growing; below it, part of a rest-to-rest rise is them.
    # The ORM's mappers keep their own caches of INSERT/UPDATE statements, keyed by dialect: a
    # dialect per job (an engine per job) fills them and keeps every dead dialect alive.
    import re, sqlalchemy
    from sqlalchemy.engine import Dialect
    from sqlalchemy.orm import Mapper
    live = gc.get_objects()
    engines = [o for o in live if isinstance(o, sqlalchemy.engine.Engine)]
    mappers = [o for o in live if isinstance(o, Mapper) and "_compiled_cache" in o.__dict__]
    caches = {
        "objects": sum(types.values()),
        "sqlalchemy_statements": sum(len(e._compiled_cache or ()) for e in engines),
        "sqlalchemy_capacity": sum(getattr(e._compiled_cache, "capacity", 0) for e in engines),
        "engines": len(engines),
        "dialects": sum(isinstance(o, Dialect) for o in live),
        "mapper_statements": sum(len(m._compiled_cache) for m in mappers),
        "re_patterns": len(re._cache),
        "re_capacity": re._MAXCACHE,
    }
    (out / f"rest-{n}.caches").write_text(json.dumps(caches))


signal.signal(signal.SIGUSR1, dump)
from watchkeeper.cli.app import main

sys.exit(main(["daemon", "--config", sys.argv[2]]))
"""
JOBS = ("nightly", "soak", "digest")


@dataclass(frozen=True, slots=True)
class Sample:
    t: float
    """Wall-clock seconds (epoch): the daemon's log stamps its job events in UTC ISO."""
    rss: float
    uss: float
    fds: int
    threads: int


@dataclass(frozen=True, slots=True)
class JobEvent:
    t: float
    job: str
    event: str
    outcome: str
    summary: str


def git(cwd: Path, *args: str) -> None:
    subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True)


def schedule(period_min: int, first_minute: int, soak_minutes: int) -> dict[str, str]:
    """Six-field crons (seconds first): the nightly at the top of each period, the soak three
    minutes later (the nightly of this benchmark takes about two), the digest a minute after
    the soak's end; `period_min` divides an hour, so the pattern repeats every hour."""

    def minutes(offset: int) -> str:
        return ",".join(str((first_minute + offset + k) % 60) for k in range(0, 60, period_min))

    return {
        "nightly": f"0 {minutes(0)} * * * *",
        "soak": f"0 {minutes(3)} * * * *",
        "digest": f"30 {minutes(4 + soak_minutes)} * * * *",
    }


def write_jobs(jobs: Path, crons: dict[str, str], soak_minutes: int) -> None:
    jobs.mkdir()
    for name in JOBS:
        text = (REPO / "jobs" / f"{name}.toml").read_text(encoding="utf-8")
        text, n = re.subn(r"(?m)^cron = .*$", f'cron = "{crons[name]}"', text)
        assert n == 1, f"jobs/{name}.toml has no single cron line"
        if name == "soak":
            text, n = re.subn(r'(?m)^duration = ".*"$', f'duration = "{soak_minutes}m"', text)
            assert n == 1, "jobs/soak.toml has no single duration line"
        (jobs / f"{name}.toml").write_text(text, encoding="utf-8")


def write_config(scratch: Path, jobs: Path, reports: Path) -> Path:
    path = scratch / "watchkeeper.toml"
    path.write_text(
        f'[database]\nurl = "sqlite:///{scratch / "wk.db"}"\n'
        f'[bench]\nreports_dir = "{scratch / "bench-reports"}"\n'
        # A short nightly (about two minutes): this measures what a night leaves behind, not power.
        '[nightly]\nprofiles = ["smollm2-ngram"]\nrounds = 3\nper_category = 1\n'
        "max_tokens = 32\n"
        '[soak]\nprofiles = ["smollm2-baseline", "smollm2-ngram"]\nconcurrency = [1, 2]\n'
        'block = "1m"\n'
        f'[digest]\nrepo = "{reports}"\n'
        f'[daemon]\nhost_id = "{HOST}"\njobs_dir = "{jobs}"\nmetrics_port = 0\n'
        'log_format = "json"\n',
        encoding="utf-8",
    )
    return path


def log_lines(log: Path) -> list[dict[str, Any]]:
    """The daemon's JSON log lines (a line cut off mid-write is skipped)."""
    out = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            out.append(json.loads(line))
        except ValueError:
            continue
    return out


def job_events(log: Path) -> list[JobEvent]:
    return [
        JobEvent(
            datetime.fromisoformat(e["timestamp"]).timestamp(),
            e["job"],
            e["event"],
            str(e.get("outcome", "")),
            str(e.get("summary") or e.get("error") or e.get("reason") or ""),
        )
        for e in log_lines(log)
        if e.get("event") in ("job_started", "job_finished", "job_skipped") and "job" in e
    ]


def trims(log: Path) -> list[tuple[float, float]]:
    """(when, MB handed back) for each job's `memory_released` line."""
    return [
        (datetime.fromisoformat(e["timestamp"]).timestamp(), float(e.get("released_mb", 0.0)))
        for e in log_lines(log)
        if e.get("event") == "memory_released"
    ]


def sample(proc: psutil.Process) -> Sample:
    with proc.oneshot():
        full = proc.memory_full_info()
        return Sample(time.time(), full.rss / 2**20, full.uss / 2**20, proc.num_fds(),
                      proc.num_threads())  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--nights", type=int, default=6)
    parser.add_argument("--period", type=int, default=15, help="minutes per night; divides 60")
    parser.add_argument("--every", type=float, default=15.0, help="seconds between samples")
    parser.add_argument("--arena-max", type=int, default=2, help="0: glibc's default arenas")
    parser.add_argument(
        "--trace", action="store_true", help="tracemalloc in the daemon, a snapshot per rest"
    )
    parser.add_argument(
        "--csv", type=Path, default=None, help="write every sample here as it is taken"
    )
    args = parser.parse_args()
    if 60 % args.period or args.period < 8:
        parser.error("--period must divide 60 and be at least 8 minutes")
    unwind_on_sigterm()
    soak_minutes = args.period - 6
    scratch = Path(tempfile.mkdtemp(prefix="wk-daemon-memory-"))
    remote, reports = scratch / "reports.git", scratch / "reports"
    git(scratch, "init", "--bare", "-b", "main", str(remote))
    git(scratch, "clone", str(remote), str(reports))
    git(reports, "checkout", "-B", "main")
    now = datetime.now()
    # The first night starts at the next full minute at least 40 s away (the daemon's start-up).
    first = (now.minute + (2 if now.second > 20 else 1)) % 60
    crons = schedule(args.period, first, soak_minutes)
    write_jobs(scratch / "jobs", crons, soak_minutes)
    config = write_config(scratch, scratch / "jobs", reports)
    env = dict(os.environ, WATCHKEEPER_DATA_DIR=str(scratch / "data"))
    env.pop("MALLOC_ARENA_MAX", None)
    if args.arena_max:
        env["MALLOC_ARENA_MAX"] = str(args.arena_max)
    log = scratch / "daemon.log"
    print(f"scratch {scratch}; crons {crons}", flush=True)
    with log.open("wb") as err:
        command = ["-m", "watchkeeper.cli", "daemon", "--config", str(config)]
        if args.trace:
            (scratch / "trace").mkdir()
            command = ["-c", TRACED_DAEMON, str(scratch / "trace"), str(config)]
        daemon = subprocess.Popen(
            [sys.executable, *command],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=env,
        )
    proc = psutil.Process(daemon.pid)
    samples: list[Sample] = []
    deadline = time.time() + (args.nights * args.period + 4) * 60
    seen = dumped = 0
    csv = args.csv.open("w", encoding="utf-8") if args.csv else None
    if csv:
        csv.write("t,rss_mb,uss_mb,fds,threads\n")
    try:
        while time.time() < deadline and daemon.poll() is None:
            samples.append(sample(proc))
            if csv:  # as it goes: an interrupted run keeps what it sampled
                s = samples[-1]
                csv.write(f"{s.t:.0f},{s.rss:.2f},{s.uss:.2f},{s.fds},{s.threads}\n")
                csv.flush()
            events = job_events(log)
            for e in events[seen:]:
                print(f"  {time.strftime('%H:%M:%S', time.localtime(e.t))} {e.job} "
                      f"{e.event.removeprefix('job_')} {e.outcome} {e.summary[:100]}",
                      flush=True)  # fmt: skip
            seen = len(events)
            digests = [e for e in events if e.job == "digest" and e.event == "job_finished"]
            if args.trace and len(digests) > dumped and time.time() - digests[-1].t > 40:
                daemon.send_signal(signal.SIGUSR1)  # at rest: the night's digest is done
                dumped += 1
            if len(digests) >= args.nights and time.time() - digests[-1].t > 60:
                break  # a minute of rest after the last night's digest
            time.sleep(args.every)
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: stop the daemon, report what was sampled
        print("interrupted: reporting the nights sampled so far", flush=True)
    finally:
        if csv:
            csv.close()
        if daemon.poll() is None:
            daemon.send_signal(signal.SIGTERM)
            try:
                daemon.wait(timeout=180)
            except subprocess.TimeoutExpired:
                daemon.kill()
    if daemon.returncode not in (0, -signal.SIGTERM):
        print(f"daemon exited {daemon.returncode}; its log: {log}")
    report(samples, job_events(log), trims(log), args)
    if args.trace:
        report_trace(scratch / "trace")


def report(
    samples: list[Sample],
    events: list[JobEvent],
    trimmed: list[tuple[float, float]],
    args: argparse.Namespace,
) -> None:
    starts = [e.t for e in events if e.job == "nightly" and e.event == "job_started"]
    if not samples or not starts:
        print("no night started; nothing to report")
        return
    t0 = samples[0].t
    print()
    print(f"MALLOC_ARENA_MAX={args.arena_max or '(glibc default)'}; {len(samples)} samples "
          f"every {args.every:.0f} s; resting = the last sample before the next night; trimmed = MB the "
          f"daemon's malloc_trim handed back after the night's jobs")  # fmt: skip
    print(f"{'night':>5} {'start min':>9} {'rest RSS':>8} {'peak RSS':>8} {'rest USS':>8} "
          f"{'trimmed':>7} {'fds':>4} {'thr':>4}  outcomes")  # fmt: skip
    rests: list[tuple[float, float]] = []
    bounds = [*starts, samples[-1].t + 1]
    for night, (start, end) in enumerate(itertools.pairwise(bounds), 1):
        inside = [s for s in samples if start <= s.t < end]
        if not inside:
            continue
        rest = inside[-1]
        outcomes = " ".join(
            f"{e.job}={e.outcome or e.event.removeprefix('job_')}"
            for e in events
            if start <= e.t < end and e.event != "job_started"
        )
        rests.append((night, rest.rss))
        handed_back = sum(mb for t, mb in trimmed if start <= t < end)
        print(f"{night:5d} {(start - t0) / 60:9.1f} {rest.rss:8.1f} "
              f"{max(s.rss for s in inside):8.1f} {rest.uss:8.1f} {handed_back:7.1f} "
              f"{rest.fds:4d} {rest.threads:4d}  {outcomes}")  # fmt: skip
    before = [s for s in samples if s.t < starts[0]]
    if before:
        print(f"before the first night: RSS {before[-1].rss:.1f} MB, USS {before[-1].uss:.1f} MB")
    later = rests[2:]
    if len(later) >= 3:
        trend = theil_sen([tuple(zip(*later, strict=True))])  # type: ignore[list-item]
        if trend is not None:
            print(f"resting RSS from night 3 on: {trend.slope:+.2f} MB/night "
                  f"(95% CI {trend.low:+.2f}..{trend.high:+.2f}, {len(later)} nights)")  # fmt: skip
    else:
        print("fewer than 3 nights after the first two: no slope")


def report_trace(folder: Path) -> None:
    snaps = sorted(folder.glob("rest-*.snap"), key=lambda p: int(p.stem.split("-")[1]))
    if len(snaps) < 2:
        print(f"tracing: {len(snaps)} snapshot(s), nothing to compare")
        return
    print()
    print("at each rest (after a full collection): traced Python memory, live objects, and the "
          "entries of the bounded caches (SQLAlchemy's compiled statements, re's patterns)")  # fmt: skip
    print(f"{'rest':>4} {'traced MB':>9} {'objects':>8} {'engines':>7} {'dialects':>8} "
          f"{'engine stmts':>12} {'ORM stmts':>9} {'re pats':>8}")  # fmt: skip
    for snap in snaps:
        loaded = tracemalloc.Snapshot.load(str(snap))
        mb = sum(s.size for s in loaded.statistics("filename")) / 2**20
        caches_file = snap.with_suffix(".caches")
        c = json.loads(caches_file.read_text()) if caches_file.exists() else {}
        print(f"{snap.stem.split('-')[1]:>4} {mb:9.2f} {c.get('objects', 0):8d} "
              f"{c.get('engines', 0):7d} {c.get('dialects', 0):8d} "
              f"{c.get('sqlalchemy_statements', 0):7d}/{c.get('sqlalchemy_capacity', 0):<4d} "
              f"{c.get('mapper_statements', 0):9d} "
              f"{c.get('re_patterns', 0):3d}/{c.get('re_capacity', 0):<4d}")  # fmt: skip
    first, last = (snaps[2] if len(snaps) > 3 else snaps[0]), snaps[-1]
    old, new = tracemalloc.Snapshot.load(str(first)), tracemalloc.Snapshot.load(str(last))
    traced = sum(s.size for s in new.statistics("filename")) / 2**20
    print()
    print(f"traced Python memory at {last.stem}: {traced:.1f} MB; grown since {first.stem}:")
    print_grown(new, old, "allocating lines:", "modules:", lines=12)

    def types(path: Path) -> collections.Counter[str]:
        lines = path.with_suffix(".types").read_text(encoding="utf-8").splitlines()
        return collections.Counter({k: int(v) for k, v in (line.split("\t") for line in lines)})

    print_grown_types(types(last), types(first), "object types whose live count grew most:")


if __name__ == "__main__":
    main()
