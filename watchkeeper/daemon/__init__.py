"""The daemon: APScheduler runs the jobs in `jobs/*.toml` through the same functions as the CLI.

jobdefs    job definitions (pydantic, `file: key: problem` errors)
jobs       one plain function per job kind, wrapping the stage commands
fleet      one host at a time for fleet jobs: Postgres advisory lock / fcntl file lock
execute    one job execution: claim, lock, run, record, metrics
scheduler  APScheduler 3 wiring (SQLAlchemy job store per host, max one instance)
service    the daemon's lifecycle: single steps, signal flags, reload, stop
metrics    prometheus-client registry and the /metrics + /healthz server on loopback
logs       structlog: JSON lines off a TTY, console on one, ids bound per job
"""
