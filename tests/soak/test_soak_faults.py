"""The soak under real faults: kill -9 of the real llama-server, a database cut through a TCP
relay (the machine's Postgres keeps running), and a server restarted on a busy core.
Every soak here is short (25-40 s) and stops everything it started."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import psutil
import pytest
from sqlalchemy import select
from support.realnight import throttled
from support.soakkit import live_llama_servers, soak_settings, write_taskset

from watchkeeper.commands.soak import SoakCommandResult, soak_command, spool_dir
from watchkeeper.config import Config, DatabaseConfig, ProfileConfig, ServerConfig
from watchkeeper.config.requests import SoakRequest
from watchkeeper.load.records import RequestSample, RunPurpose
from watchkeeper.server.install import ServerBinary
from watchkeeper.server.launch import prepare, serve
from watchkeeper.server.models import ModelFile
from watchkeeper.server.profiles import SMOLLM2
from watchkeeper.simulation.faults import TcpRelay
from watchkeeper.soak.loop import OnSample
from watchkeeper.soak.records import RunKey
from watchkeeper.store.db import Database
from watchkeeper.store.schema import Incident, RequestSampleRow, Run

Completed = list[tuple[RunKey, RequestSample]]


def make_config(db_url: str, *, threads: int = 1, external_url: str = "", **soak: object) -> Config:
    return Config(
        database=DatabaseConfig(url=db_url),
        server=ServerConfig(startup_timeout_s=120, external_url=external_url),
        profiles={"s": ProfileConfig(model=SMOLLM2, ctx_size=1024, threads=threads)},
        soak=soak_settings(**soak),
    )


def stored_once(db_url: str, campaign_id: int, completed: Completed) -> None:
    """Every request the load completed is in the database exactly once, and nothing else."""
    db = Database(db_url)
    try:
        with db.session() as s:
            runs = {r.id: r for r in s.scalars(select(Run).filter_by(campaign_id=campaign_id))}
            rows = s.scalars(
                select(RequestSampleRow).where(RequestSampleRow.run_id.in_(list(runs)))
            ).all()
            stored = Counter(
                (
                    runs[r.run_id].arm,
                    runs[r.run_id].purpose,
                    runs[r.run_id].round,
                    runs[r.run_id].concurrency,
                    r.seq,
                )
                for r in rows
            )
            texts = {
                (runs[r.run_id].arm, runs[r.run_id].purpose, runs[r.run_id].round, r.seq): (
                    r.output_text
                )
                for r in rows
            }
    finally:
        db.close()
    expected = Counter((k.arm, str(k.purpose), k.block, k.concurrency, s.seq) for k, s in completed)
    assert stored == expected, f"missing {expected - stored}, extra {stored - expected}"
    assert max(stored.values()) == 1
    for key, sample in completed:
        assert texts[(key.arm, str(key.purpose), key.block, sample.seq)] == sample.output_text


def incidents(db_url: str, campaign_id: int) -> list[Incident]:
    db = Database(db_url)
    try:
        with db.session() as s:
            return list(
                s.scalars(select(Incident).filter_by(campaign_id=campaign_id).order_by(Incident.id))
            )
    finally:
        db.close()


def kill_llama_servers() -> list[int]:
    killed = []
    for server in live_llama_servers():
        with contextlib.suppress(ProcessLookupError):
            os.kill(server.pid, signal.SIGKILL)
            killed.append(server.pid)
    return killed


def test_a_killed_server_is_restarted_recorded_and_no_completed_request_is_lost(
    real_server: tuple[ServerBinary, ModelFile], sqlite_url: str, tmp_path: Path
) -> None:
    config = make_config(sqlite_url)
    completed: Completed = []
    killed: list[tuple[int, list[int]]] = []  # (samples completed before the kill, pids)

    def on_sample(key: RunKey, sample: RequestSample) -> None:
        completed.append((key, sample))
        if not killed and sum(1 for _, s in completed if s.ok) == 3:
            killed.append((len(completed), kill_llama_servers()))

    result = soak_command(
        config,
        SoakRequest(
            duration="25s", block="25s", profiles=["s"], taskset=write_taskset(tmp_path), seed=1
        ),
        on_sample=on_sample,
    )
    assert killed and killed[0][1], "the test did not find llama-server to kill"
    done_before_kill, pids = killed[0]
    assert result.status == "completed"
    found = incidents(sqlite_url, result.campaign_id)
    crash = next(i for i in found if i.kind == "server_crash")
    assert crash.evidence["exit_code"] == -9 and crash.evidence["pid"] in pids
    assert "llama-server" in crash.evidence["log_tail"] or crash.evidence["log_tail"]
    restart = next(i for i in found if i.kind == "server_restart")
    assert restart.evidence["pid"] not in pids
    after = [s for _, s in completed[done_before_kill:] if s.ok]
    assert len(after) >= 3, "the soak did not carry on after the restart"
    stored_once(sqlite_url, result.campaign_id, completed)
    assert not result.verdict.stable
    assert any("crashed 1x" in r for r in result.verdict.reasons)
    assert result.verdict.figures.restarts == 1


def run_in_thread(
    config: Config,
    request: SoakRequest,
    *,
    stop: threading.Event,
    on_sample: OnSample | None = None,
) -> tuple[threading.Thread, list[SoakCommandResult | BaseException]]:
    box: list[SoakCommandResult | BaseException] = []

    def target() -> None:
        try:
            box.append(soak_command(config, request, stop=stop, on_sample=on_sample))
        except BaseException as exc:
            box.append(exc)

    thread = threading.Thread(target=target, name="soak-under-test", daemon=True)
    thread.start()
    return thread, box


def test_a_database_cut_mid_soak_is_spooled_and_replayed_exactly_once(
    real_server: tuple[ServerBinary, ModelFile], pg_url: str, tmp_path: Path
) -> None:
    base, name = pg_url.rsplit("/", 1)
    with TcpRelay(5432) as relay:
        url = f"{base.rsplit(':', 1)[0]}:{relay.port}/{name}"
        config = make_config(url)
        completed: Completed = []
        stop = threading.Event()
        thread, box = run_in_thread(
            config,
            SoakRequest(
                duration="35s", block="35s", profiles=["s"], taskset=write_taskset(tmp_path), seed=2
            ),
            stop=stop,
            on_sample=lambda k, s: completed.append((k, s)),
        )
        try:
            deadline = time.monotonic() + 120
            while sum(1 for _, s in completed if s.ok) < 3 and time.monotonic() < deadline:
                time.sleep(0.2)
            relay.cut()
            during_cut = len(completed)
            time.sleep(12)
            made_during_cut = len(completed) - during_cut
            relay.restore()
            thread.join(timeout=180)
        finally:
            stop.set()
            relay.restore()
            thread.join(timeout=60)
    assert not thread.is_alive()
    (result,) = box
    assert isinstance(result, SoakCommandResult), result
    assert made_during_cut >= 3, "the load stopped while the database was cut"
    assert result.status == "completed"
    stored_once(pg_url, result.campaign_id, completed)
    outage = [i for i in incidents(pg_url, result.campaign_id) if i.kind == "db_outage"]
    assert len(outage) == 1 and outage[0].evidence["outage_s"] >= 8
    assert not spool_dir(result.campaign_id).exists()


def test_sigterm_marks_the_soak_interrupted_and_the_same_command_resumes_it(
    real_server: tuple[ServerBinary, ModelFile],
    sqlite_url: str,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from watchkeeper.cli.app import main

    toml = tmp_path / "wk.toml"
    toml.write_text(
        f'[database]\nurl = "{sqlite_url}"\n'
        f'[profiles.s]\nmodel = "{SMOLLM2}"\nctx_size = 1024\nthreads = 1\n'
        '[soak]\nslice = "5s"\nsample_interval_s = 1.0\nprobe_interval_s = 4.0\n'
        "flush_interval_s = 1.0\nramp_s = 0.5\n"
    )
    argv = ["soak", "--config", str(toml), "--duration", "30s", "--block", "10s",
            "--profiles", "s", "--taskset", str(write_taskset(tmp_path)), "--json"]  # fmt: skip
    proc = subprocess.Popen(
        [sys.executable, "-m", "watchkeeper.cli", *argv],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    servers: list[psutil.Process] = []
    try:
        deadline = time.monotonic() + 120
        rows = 0
        while rows < 3 and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.5)
            if Path(sqlite_url.removeprefix("sqlite:///")).exists():
                db = Database(sqlite_url)
                with db.session() as s:
                    rows = len(s.scalars(select(RequestSampleRow.id)).all())
                db.close()
        servers = [
            c for c in psutil.Process(proc.pid).children(recursive=True) if "llama" in c.name()
        ]
        assert servers, "no llama-server under the soak process"
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=90)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
    assert proc.returncode == 130, err
    first = json.loads(out)
    assert first["status"] == "interrupted" and not first["resumed"]
    assert all(not s.is_running() for s in servers)
    db = Database(sqlite_url)
    with db.session() as s:
        (run,) = s.scalars(select(Run).where(Run.purpose != RunPurpose.PROBE)).all()
        assert run.status == "interrupted" and run.finished_at is not None
    db.close()

    assert main(argv) in (0, 1)  # stable or not, the resume is the point
    second = json.loads(capsys.readouterr().out)
    assert second["resumed"] and second["campaign_id"] == first["campaign_id"]
    assert second["status"] == "completed"
    db = Database(sqlite_url)
    with db.session() as s:
        runs = s.scalars(
            select(Run).where(Run.purpose != RunPurpose.PROBE).order_by(Run.round)
        ).all()
        keys = s.execute(select(RequestSampleRow.run_id, RequestSampleRow.seq)).all()
    db.close()
    assert [r.round for r in runs][:2] == [0, 1] and runs[0].status == "interrupted"
    assert runs[-1].status == "completed"
    assert len(keys) == len(set(keys)) == second["figures"]["requests"]
    worked = sum((r.finished_at - r.started_at).total_seconds() for r in runs)
    assert 25 <= worked <= 45


def test_a_server_restarted_as_a_slower_build_halfway_shows_as_throughput_drift(
    real_server: tuple[ServerBinary, ModelFile], sqlite_url: str, tmp_path: Path
) -> None:
    """Halfway through, the server is replaced by one stopped half of the wall clock
    (support/realnight.throttled, 20 ms in every 40): a drift big enough (~-50%) that the test
    fails only when drift detection is broken. The slowness is the wrapper's, not the
    scheduler's: a server moved to a core shared with a busy loop read only -8% beside a
    neighbour (the fast server before the switch was slowed too), against the -20% asked here
    (2026-11-27). Both run one decode thread: two collapse when a neighbour takes a core
    (tests/conftest.py). 60 s: the request in flight at the switch hangs ~10 s (the old server
    finishes its shutdown first), and the second half must still fill a third of the blocks.
    Beside a one-core neighbour (`scripts/neighbour.sh`, benchmarks/controls_beside_neighbour.py):
    10 of 10 passed, 1.1 min a run (2026-11-29)."""
    fast_cfg = make_config(sqlite_url, threads=1)
    slow_cfg = make_config(sqlite_url, threads=1)
    slow_binary = throttled(tmp_path, "slow-build", real_server[0].path)
    slow_cfg = slow_cfg.model_copy(
        update={"server": slow_cfg.server.model_copy(update={"binary": str(slow_binary)})}
    )
    with (
        serve(fast_cfg, prepare(fast_cfg, "s"), log_path=tmp_path / "fast.log") as fast,
        TcpRelay(int(fast.base_url.rsplit(":", 1)[1])) as relay,
    ):
        config = make_config(
            sqlite_url,
            external_url=f"http://127.0.0.1:{relay.port}",
            slice="3s",
            drift_threshold=0.05,
        )
        stop = threading.Event()
        thread, box = run_in_thread(
            config,
            SoakRequest(
                duration="60s",
                block="5s",  # twelve blocks: the block is the replicate of drift, not the request
                profiles=["s"],
                taskset=write_taskset(tmp_path, max_tokens=24),
                seed=4,
            ),
            stop=stop,
        )
        try:
            time.sleep(25)
            with serve(slow_cfg, prepare(slow_cfg, "s"), log_path=tmp_path / "slow.log") as slow:
                assert fast.managed is not None
                relay.retarget(int(slow.base_url.rsplit(":", 1)[1]))
                fast.managed.stop()
                thread.join(timeout=120)
        finally:
            stop.set()
            thread.join(timeout=60)
    (result,) = box
    assert isinstance(result, SoakCommandResult), result
    (series,) = result.verdict.figures.series
    shift = series.throughput_shift
    figures = json.dumps(result.to_json(), indent=1)
    assert shift is not None, figures
    assert shift.change < -0.2 and shift.high < 0, figures
    assert any("throughput drifted" in r for r in result.verdict.reasons)
    assert not result.verdict.stable


def test_a_hung_server_times_out_requests_and_is_restarted_as_unresponsive(
    real_server: tuple[ServerBinary, ModelFile], sqlite_url: str, tmp_path: Path
) -> None:
    """SIGSTOP freezes llama-server: requests time out (recorded, the loop goes on), /health
    stops answering, and the supervisor kills and restarts it."""
    config = make_config(sqlite_url, request_timeout_s=3.0, unresponsive_after=2)
    completed: Completed = []
    frozen: list[int] = []

    def on_sample(key: RunKey, sample: RequestSample) -> None:
        completed.append((key, sample))
        if not frozen and sum(1 for _, s in completed if s.ok) == 2:
            for child in psutil.Process().children(recursive=True):
                if "llama-server" in child.name():
                    child.suspend()
                    frozen.append(child.pid)

    try:
        result = soak_command(
            config,
            SoakRequest(
                duration="30s", block="30s", profiles=["s"], taskset=write_taskset(tmp_path), seed=5
            ),
            on_sample=on_sample,
        )
    finally:
        for pid in frozen:
            if psutil.pid_exists(pid):
                psutil.Process(pid).kill()
    assert frozen
    kinds = Counter(i.kind for i in incidents(sqlite_url, result.campaign_id))
    assert kinds["request_timeout"] >= 1
    assert kinds["server_unresponsive"] == 1 and kinds["server_restart"] == 1, (kinds, completed)
    timed_out = [s for _, s in completed if s.error and s.error.startswith("timeout")]
    assert timed_out and all(3.0 <= (s.latency_s or 0) < 10 for s in timed_out)
    assert sum(1 for _, s in completed[len(completed) // 2 :] if s.ok) >= 2
    stored_once(sqlite_url, result.campaign_id, completed)
    assert result.verdict.figures.timeouts == len(timed_out)
