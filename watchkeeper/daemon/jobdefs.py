"""Job definitions: one `jobs/NAME.toml` per job, validated with pydantic.

```toml
kind = "soak"                 # soak | sweep | bench | nightly | digest | triage | review-pr
                              # | health | upgrade | bisect
cron = "30 1 * * *"           # 5 fields, or 6 with seconds first ("*/5 * * * * *")
timezone = "Europe/Berlin"
misfire_grace_s = 3600        # a start missed by less than this still runs (once: coalesced)
coalesce = true
enabled = true
# scope = "host" | "fleet"    # default from the kind (HOST_KINDS: host), the rest fleet
# resume = true               # soak only: a restarted daemon resumes an interrupted night

[args]                        # the kind's own arguments (the CLI's options: a long command's
                              # request, config/requests.py)
duration = "6h"
```

Errors name the file, the key and what was expected.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from apscheduler.triggers.cron import CronTrigger
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from watchkeeper.config.inputs import parse_toml_text, regular_file
from watchkeeper.config.requests import (
    BisectRequest,
    Concurrency,
    Count,
    Names,
    NightlyRequest,
    ReviewPrRequest,
    Rounds,
    SoakRequest,
    SweepRequest,
    UpgradeCheckRequest,
)
from watchkeeper.errors import ConfigError
from watchkeeper.redaction import remember_urls_in

Kind = Literal[
    "soak",
    "sweep",
    "bench",
    "nightly",
    "digest",
    "triage",
    "review-pr",
    "health",
    "upgrade",
    "bisect",
]
Scope = Literal["host", "fleet"]
HOST_KINDS = frozenset({"soak", "sweep", "bench", "nightly", "health", "upgrade", "bisect"})


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class BenchArgs(_Strict):
    profiles: Names | None = None
    rounds: Rounds | None = None
    taskset: str | None = None
    limit: Count | None = None
    per_category: Count | None = None
    concurrency: Concurrency | None = None


class DigestArgs(_Strict):
    commit: bool = False
    push: bool = False
    rerun: bool = False


class NoArgs(_Strict):
    pass


class HealthArgs(_Strict):
    url: str = ""
    """The watched llama-server; default: server.external_url. Empty: the database only."""
    timeout_s: Annotated[float, Field(gt=0, le=3600)] = 5.0


ARGS: dict[str, type[BaseModel]] = {
    "soak": SoakRequest,
    "sweep": SweepRequest,
    "bench": BenchArgs,
    "nightly": NightlyRequest,
    "digest": DigestArgs,
    "triage": NoArgs,
    "review-pr": ReviewPrRequest,
    "health": HealthArgs,
    "upgrade": UpgradeCheckRequest,
    "bisect": BisectRequest,
}
"""Each kind's `[args]`: the long commands' are their requests (config/requests.py), which
the CLI builds from its options too."""


class JobFile(_Strict):
    kind: Kind
    cron: str
    timezone: str = "UTC"
    misfire_grace_s: Annotated[int, Field(ge=1, le=366 * 86400)] = 3600
    coalesce: bool = True
    enabled: bool = True
    scope: Scope | None = None
    resume: bool = True
    description: str = ""
    args: dict[str, Any] = Field(default_factory=dict)

    @field_validator("cron")
    @classmethod
    def _cron_fields(cls, value: str) -> str:
        if len(value.split()) not in (5, 6):
            raise ValueError("a cron expression has 5 fields (6 with seconds first)")
        return value

    @field_validator("timezone")
    @classmethod
    def _known_zone(cls, value: str) -> str:
        try:
            ZoneInfo(value)
        except (ZoneInfoNotFoundError, ValueError):
            raise ValueError(f"unknown time zone {value!r} (an IANA name such as 'UTC')") from None
        return value


@dataclass(frozen=True, slots=True)
class JobDef:
    """A validated job: what the scheduler and the job functions receive."""

    name: str
    kind: str
    cron: str
    timezone: str
    misfire_grace_s: int
    coalesce: bool
    enabled: bool
    scope: str
    resume: bool
    args: Any
    source: str

    def cron_fields(self) -> dict[str, str]:
        return cron_fields(self.cron)

    def signature(self) -> str:
        """What decides when the job fires: a change reschedules it (a reload keeps the rest)."""
        return f"{self.cron}|{self.timezone}|{self.misfire_grace_s}|{self.coalesce}"


def _problems(exc: ValidationError, prefix: str = "") -> str:
    out = []
    for e in exc.errors():
        loc = ".".join(str(p) for p in (*(prefix.split(".") if prefix else []), *e["loc"]))
        if e["type"] == "extra_forbidden":
            out.append(f"{loc}: unknown key")
        elif e["type"] == "missing":
            out.append(f"{loc}: required key is missing")
        else:
            got = e.get("input")
            got_text = f" (got {got!r})" if not isinstance(got, dict | list) else ""
            out.append(f"{loc}: {e['msg']}{got_text}")
    return "; ".join(out)


def parse_job(name: str, data: dict[str, Any], *, source: str) -> JobDef:
    remember_urls_in(data)  # a health job's URL: its password is masked wherever it shows
    try:
        raw = JobFile.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_problems(exc)}", hint=_HINT) from None
    try:
        args = ARGS[raw.kind].model_validate(raw.args)
    except ValidationError as exc:
        raise ConfigError(f"{source}: {_problems(exc, 'args')}", hint=_HINT) from None
    try:
        _check_cron(raw)
    except ValueError as exc:
        raise ConfigError(f"{source}: cron: {exc} (got {raw.cron!r})", hint=_HINT) from None
    scope = raw.scope or ("host" if raw.kind in HOST_KINDS else "fleet")
    return JobDef(
        name=name,
        kind=raw.kind,
        cron=raw.cron,
        timezone=raw.timezone,
        misfire_grace_s=raw.misfire_grace_s,
        coalesce=raw.coalesce,
        enabled=raw.enabled,
        scope=scope,
        resume=raw.resume,
        args=args,
        source=source,
    )


_HINT = "see docs/operations.md (Job files) for the job file format"


WEEKDAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat", "sun")


def _weekday(token: str) -> str:
    """Crontab numbering (0 or 7 = Sunday) to names: APScheduler counts 0 as Monday."""
    if "/" in token:
        if any(ch.isdigit() for ch in token.split("/", maxsplit=1)[0]):
            raise ValueError("day of week: use names (mon-fri) with a step")
        return token
    if "-" in token:
        first, last = token.split("-", 1)
        if first == "0" and last.isdigit():
            return "sun" if last == "0" else f"mon-{_weekday(last)},sun"
        return f"{_weekday(first)}-{_weekday(last)}"
    if token.isdigit():
        if int(token) > 7:
            raise ValueError(f"day of week {token} is not 0-7")
        return WEEKDAYS[int(token)]
    return token


def cron_fields(cron: str) -> dict[str, str]:
    """Keyword arguments for APScheduler's CronTrigger (5 fields: the second is 0)."""
    parts = cron.split()
    if len(parts) == 5:
        parts = ["0", *parts]
    parts[5] = ",".join(_weekday(t) for t in parts[5].split(","))
    keys = ("second", "minute", "hour", "day", "month", "day_of_week")
    return dict(zip(keys, parts, strict=True))


_EPOCH = datetime(2000, 1, 1, tzinfo=UTC)
"""A fixed start for the "can it ever fire" test (never the wall clock: tests inject time)."""


def _check_cron(raw: JobFile) -> None:
    """The expression parses and fires at least once: `0 0 30 2 *` (30 February) parses but
    never fires, and a job that can never run is a mistake, not a disabled job."""
    trigger = CronTrigger(**cron_fields(raw.cron), timezone=ZoneInfo(raw.timezone))
    if trigger.get_next_fire_time(None, _EPOCH) is None:
        raise ValueError("no date matches it (e.g. 30 February, 31 April): it would never run")


def load_jobs(directory: Path) -> list[JobDef]:
    """Every `*.toml` in the directory (sorted by name); the file stem is the job's name."""
    if not directory.is_dir():
        raise ConfigError(
            f"jobs directory {directory} does not exist",
            hint="set [daemon] jobs_dir to the directory holding the job *.toml files",
        )
    jobs = []
    for path in sorted(directory.glob("*.toml")):
        regular_file(path, "job file", ConfigError)  # a FIFO named *.toml would hang the read
        try:
            data = parse_toml_text(path.read_text(encoding="utf-8"))
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}", hint=_HINT) from None
        except RecursionError:
            raise ConfigError(f"{path}: not valid TOML: nested too deeply", hint=_HINT) from None
        except UnicodeDecodeError as exc:
            raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start})", hint=_HINT) from None
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
        jobs.append(parse_job(path.stem, data, source=str(path)))
    return jobs
