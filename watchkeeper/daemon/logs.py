"""structlog for the daemon: JSON lines for the journal, a readable console on a TTY.

Context (host, job, job run, campaign) is bound with contextvars, so every line a job's
thread writes carries its ids; the standard library's loggers (APScheduler's) go through the
same renderer.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

from watchkeeper.redaction import redact_json

LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "warning": logging.WARNING}


def use_json(log_format: str, stream: TextIO) -> bool:
    if log_format == "json":
        return True
    if log_format == "console":
        return False
    return not stream.isatty()


def redact_event(_logger: Any, _method: str, event: dict[str, Any]) -> dict[str, Any]:
    """Every string of a log line through the one redactor: a job logs URLs (a server's, the
    database's, a git remote) and the journal is read by more people than the config file."""
    return {k: redact_json(v) for k, v in event.items()}


def configure(log_format: str = "auto", level: str = "info", stream: TextIO | None = None) -> None:
    """Route structlog and stdlib logging to `stream` (stderr) in one format."""
    stream = stream or sys.stderr
    shared: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        # A traceback is text like any other field: rendered first, so the redactor sees it
        # (a driver's exception quotes the URL it failed on).
        structlog.processors.format_exc_info,
        redact_event,
    ]
    final: list[Any] = (
        [structlog.processors.JSONRenderer()]
        if use_json(log_format, stream)
        else [structlog.dev.ConsoleRenderer(colors=stream.isatty())]
    )
    structlog.configure(
        processors=[
            *shared,
            structlog.stdlib.ProcessorFormatter.wrap_for_formatter,
        ],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    formatter = structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=shared,
        processors=[
            structlog.stdlib.ProcessorFormatter.remove_processors_meta,
            *final,
        ],
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(formatter)
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(LEVELS.get(level, logging.ERROR))
    # APScheduler narrates every start and finish (the daemon logs those itself, with ids),
    # Alembic every schema check, httpx every request (a line per soak request and metrics
    # scrape: thousands a night, burying the job's own lines): warnings only, unless debugging.
    for chatty in ("apscheduler", "alembic", "httpx", "httpcore"):
        logging.getLogger(chatty).setLevel(
            logging.DEBUG if level == "debug" and chatty.startswith("http") else logging.WARNING
        )


def get_logger(name: str = "watchkeeper.daemon") -> Any:
    return structlog.stdlib.get_logger(name)
