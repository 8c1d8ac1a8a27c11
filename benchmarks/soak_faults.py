"""Does a soak lose anything when the server is killed and the database disappears?

Runs a real soak on SmolLM2 against Postgres reached through a TCP relay, kills llama-server
with SIGKILL `--kills` times (evenly spread) and cuts the relay for `--db-cut` (Postgres itself
keeps running), then compares what the load completed with what the database holds.

    .venv/bin/python benchmarks/soak_faults.py [--duration 10m] [--kills 3] [--db-cut 60s]
        [--database-url URL] [--profile smollm2-selfdraft]

Without --database-url a throw-away database is created on postgresql://postgres@127.0.0.1:5432
and dropped afterwards.
"""

from __future__ import annotations

import argparse
import os
import signal
import tempfile
import threading
import time
import uuid
from collections import Counter

import psutil
import psycopg
from psycopg import sql
from sqlalchemy import select
from sqlalchemy.engine import make_url

from watchkeeper.commands.soak import soak_command, spool_dir
from watchkeeper.config import Config, DatabaseConfig, SoakConfig
from watchkeeper.config.durations import parse_duration
from watchkeeper.config.requests import SoakRequest
from watchkeeper.load.records import RequestSample
from watchkeeper.simulation.faults import TcpRelay
from watchkeeper.soak.records import RunKey
from watchkeeper.soak.verdicts import theil_sen
from watchkeeper.store.db import Database
from watchkeeper.store.schema import Incident, RequestSampleRow, ResourceSample, Run

ADMIN_URL = "postgresql://postgres@127.0.0.1:5432/postgres"


def kill_servers() -> list[int]:
    pids = []
    for child in psutil.Process().children(recursive=True):
        if "llama-server" in child.name():
            os.kill(child.pid, signal.SIGKILL)
            pids.append(child.pid)
    return pids


def inject(
    duration_s: float,
    kills: int,
    cut_s: float,
    relay: TcpRelay,
    stop: threading.Event,
    log: list[str],
) -> None:
    t0 = time.monotonic()
    events: list[tuple[float, str]] = [
        ((i + 1) / (kills + 1) * duration_s, "kill") for i in range(kills)
    ]
    if cut_s > 0:
        events.append((0.35 * duration_s, "cut"))
    for at, what in sorted(events):
        if stop.wait(max(0.0, at - (time.monotonic() - t0))):
            return
        if what == "kill":
            log.append(f"{time.monotonic() - t0:6.1f}s kill -9 {kill_servers()}")
        else:
            relay.cut()
            log.append(f"{time.monotonic() - t0:6.1f}s database cut for {cut_s:.0f}s")
            threading.Timer(cut_s, relay.restore).start()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--duration", default="10m")
    parser.add_argument("--kills", type=int, default=3)
    parser.add_argument("--db-cut", default="60s")
    parser.add_argument("--database-url", default="")
    parser.add_argument("--profile", default="smollm2-selfdraft")
    parser.add_argument("--per-category", type=int, default=1)
    args = parser.parse_args()
    duration_s = parse_duration(args.duration)
    cut_s = parse_duration(args.db_cut) if args.db_cut not in ("0", "0s") else 0.0
    created = ""
    url = args.database_url
    if not url:
        created = f"wk_bench_{uuid.uuid4().hex[:8]}"
        with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
            admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(created)))
        url = ADMIN_URL.rsplit("/", 1)[0] + f"/{created}"
    target = make_url(url)
    os.environ.setdefault("WATCHKEEPER_DATA_DIR", tempfile.mkdtemp(prefix="wk-soak-bench-"))
    try:
        with TcpRelay(target.port or 5432, target_host=target.host or "127.0.0.1") as relay:
            relayed = target.set(host="127.0.0.1", port=relay.port).render_as_string(
                hide_password=False
            )
            soak = SoakConfig(
                slice=f"{max(5.0, duration_s / 10):.0f}s",
                sample_interval_s=2.0,
                probe_interval_s=max(5.0, duration_s / 20),
                flush_interval_s=2.0,
                restart_backoff_s=1.0,
                restart_backoff_cap_s=4.0,
                max_crashes=args.kills + 2,
                rss_warmup_s=20.0,
                leak_min_span_s=min(300.0, duration_s / 2),
            )
            config = Config(database=DatabaseConfig(url=relayed), soak=soak)
            completed: list[tuple[RunKey, RequestSample]] = []
            lock = threading.Lock()

            def on_sample(key: RunKey, sample: RequestSample) -> None:
                with lock:
                    completed.append((key, sample))

            stop, log = threading.Event(), []
            injector = threading.Thread(
                target=inject, args=(duration_s, args.kills, cut_s, relay, stop, log), daemon=True
            )
            own_start = psutil.Process().memory_info().rss
            injector.start()
            t0 = time.monotonic()
            result = soak_command(
                config,
                SoakRequest(
                    duration=args.duration,
                    block=args.duration,
                    profiles=[args.profile],
                    per_category=args.per_category,
                    seed=11,
                    fresh=True,
                ),
                on_sample=on_sample,
                progress=lambda m: print(f"  · {m}", flush=True),
            )
            wall = time.monotonic() - t0
            stop.set()
            own_end = psutil.Process().memory_info().rss
            relay.restore()
        db = Database(url)
        try:
            with db.session() as s:
                runs = {
                    r.id: r
                    for r in s.scalars(select(Run).filter_by(campaign_id=result.campaign_id))
                }
                rows = s.execute(
                    select(RequestSampleRow.run_id, RequestSampleRow.seq).where(
                        RequestSampleRow.run_id.in_(list(runs))
                    )
                ).all()
                kinds = Counter(
                    s.scalars(select(Incident.kind).filter_by(campaign_id=result.campaign_id))
                )
                own = [
                    (r.taken_at, (r.metrics or {}).get("watchkeeper_rss_bytes"))
                    for r in s.scalars(
                        select(ResourceSample)
                        .filter_by(campaign_id=result.campaign_id)
                        .order_by(ResourceSample.taken_at)
                    )
                ]
        finally:
            db.close()
    finally:
        if created:
            with psycopg.connect(ADMIN_URL, autocommit=True) as admin:
                admin.execute(
                    sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                        sql.Identifier(created)
                    )
                )
    stored = Counter((runs[r].arm, runs[r].round, runs[r].concurrency, seq) for r, seq in rows)
    done = Counter((k.arm, k.block, k.concurrency, smp.seq) for k, smp in completed)
    ok = sum(1 for _, smp in completed if smp.ok)
    lost = sum((done - stored).values())
    duplicates = sum(n - 1 for n in stored.values() if n > 1) + sum(
        n - 1 for n in done.values() if n > 1
    )
    points = [(t, b) for t, b in own if b]
    trend = None
    if len(points) >= 3:
        xs = [(t - points[0][0]).total_seconds() / 3600 for t, _ in points]
        trend = theil_sen([(xs, [b / 2**20 for _, b in points])])
    print()
    for line in log:
        print(f"  fault {line}")
    print(
        f"duration (wall)                 {wall:.0f} s  (soak {args.duration}, campaign {result.campaign_id}, {result.status})"
    )
    print(
        f"requests completed              {len(completed)}  ({ok} ok, {len(completed) - ok} failed around faults)"
    )
    print(f"requests stored                 {sum(stored.values())}")
    print(f"lost                            {lost}")
    print(f"duplicates                      {duplicates}")
    print(
        f"kills injected / restarts       {sum(1 for m in log if 'kill' in m)} / {kinds['server_restart']}"
    )
    print(
        f"crash incidents                 {kinds['server_crash']}  (unresponsive {kinds['server_unresponsive']})"
    )
    print(
        f"database outages recorded       {kinds['db_outage']}  (spool left on disk: {spool_dir(result.campaign_id).exists()})"
    )
    print(
        f"watchkeeper RSS                 {own_start / 2**20:.1f} -> {own_end / 2**20:.1f} MB (+{(own_end - own_start) / 2**20:.1f} MB)"
    )
    if trend is not None:
        print(
            f"watchkeeper RSS slope           {trend.slope:.1f} MB/h (95% CI {trend.low:.1f}..{trend.high:.1f}, {trend.points} samples)"
        )
    print(f"verdict                         {result.verdict.headline}")


if __name__ == "__main__":
    main()
