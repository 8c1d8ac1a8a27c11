"""Command group for the daemon stage: `daemon`, `status`, `job run NAME`."""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

from rich.markup import escape

from watchkeeper.cli.common import add_common, out, plain
from watchkeeper.config import Config


def cmd_daemon(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.daemon import logs
    from watchkeeper.daemon.service import Daemon

    logs.configure(config.daemon.log_format, config.daemon.log_level)
    code = Daemon(config, config_path=args.config).run()
    if code != 0:
        # A job ignored the stop past daemon.stop_timeout_s: its threads would keep the
        # interpreter alive; systemd's stop timeout would come next anyway.
        sys.stderr.flush()
        os._exit(code)
    return code


def cmd_status(args: argparse.Namespace, config: Config) -> int:
    from watchkeeper.daemon.status import gather_status

    status = gather_status(config)
    if args.json:
        out.print_json(json.dumps(status.to_json()))
        return 0
    daemon = status.daemon
    state = (
        f"running (pid {daemon['pid']}, metrics {daemon.get('metrics_url') or 'off'})"
        if daemon
        else "not running"
    )
    out.print(f"[bold]host {plain(status.host_id)}[/bold]: daemon {plain(state)}")
    out.print(f"{'job':<16} {'kind':<10} {'scope':<6} {'next run':<26} last run")
    for j in status.jobs:
        nxt = j.next_run.isoformat(timespec="seconds") if j.next_run else "disabled"
        last = "never"
        if j.last:
            when = j.last.started_at.isoformat(timespec="seconds")
            took = f", {j.last.duration_s:.0f}s" if j.last.duration_s is not None else ""
            last = f"{j.last.outcome} at {when} on {j.last.host_id}{took}"
            if j.last.error:
                last += f": {j.last.error[:100]}"
        out.print(plain(f"{j.name:<16} {j.kind:<10} {j.scope:<6} {nxt:<26} {last}"))
    findings = ", ".join(f"{k} {v}" for k, v in sorted(status.open_findings.items())) or "none"
    out.print(f"open findings: {plain(findings)}")
    out.print(f"spool depth: {plain(status.spool_depth)}")
    return 0


def cmd_job_run(args: argparse.Namespace, config: Config) -> int:
    import threading

    from watchkeeper.daemon import logs
    from watchkeeper.daemon.service import run_once
    from watchkeeper.soak.signals import stop_on_signals

    logs.configure(config.daemon.log_format, config.daemon.log_level)
    stop = threading.Event()
    with stop_on_signals(stop):
        outcome = run_once(config, args.name, stop=stop)
    if args.json:
        out.print_json(json.dumps(outcome.to_json()))
    else:
        detail = outcome.error or outcome.reason or outcome.details.get("summary", "")
        out.print(f"job {outcome.job}: {outcome.outcome} {escape(str(detail))}")
    return {"ok": 0, "skipped": 0, "interrupted": 130}.get(outcome.outcome, 1)


def register(sub: Any) -> None:
    """Add this stage's subcommands to the main parser."""
    p = sub.add_parser(
        "daemon",
        help="run the jobs in jobs/*.toml on their schedules (APScheduler), until SIGTERM",
        description="Schedules every job of [daemon] jobs_dir; host jobs (soak, bench, health) "
        "run on every host, fleet jobs (digest, triage, review-pr) on one host at a time (a "
        "Postgres advisory lock; a file lock on SQLite). SIGTERM/SIGINT: stop after the "
        "current step and exit 0; SIGHUP: reload the config and the job files. Serves "
        "/metrics and /healthz on 127.0.0.1 ([daemon] metrics_port).",
    )
    add_common(p)
    p.set_defaults(handler=cmd_daemon)

    p = sub.add_parser(
        "status", help="next runs, last runs with their outcome, open findings, spool depth"
    )
    add_common(p)
    p.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_status)

    p = sub.add_parser("job", help="run one daemon job now, the way the daemon would")
    jobsub = p.add_subparsers(dest="job_command", required=True, metavar="ACTION")
    run = jobsub.add_parser("run", help="run the job NAME (jobs/NAME.toml) once, now")
    add_common(run)
    run.add_argument("name", metavar="NAME")
    run.add_argument("--json", action="store_true")
    p.set_defaults(handler=cmd_job_run)
