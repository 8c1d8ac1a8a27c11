"""[service]: where the recommended llama-server lives on the host that installs its unit.

The sweep measures with its own cache paths (/root/.cache/... on the box that ran it); a unit
that names them installs nowhere else. These keys are the installing host's: the unit is
rendered from the committed recommendation with them (`watchkeeper unit`), so one
recommendation gives a unit for every host, user and port.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Annotated, Literal
from urllib.parse import urlsplit

from pydantic import Field, ValidationInfo, field_validator

from watchkeeper.config.base import Strict

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_.-]{0,31}|[0-9]{1,10}")
"""A user or group name as systemd's relaxed check and useradd agree on (or a numeric id):
no whitespace, '=', quotes, '%' or control characters that could end the line or the value."""
_LABEL = re.compile(r"[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?")


def _printable(value: str) -> str:
    """Refuse what no unit line can carry: control characters (a newline starts a new
    directive) and text that is not UTF-8 (a unit file is)."""
    if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
        raise ValueError("must not contain a newline or other control character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ValueError("must be valid UTF-8") from None
    return value


class ServiceConfig(Strict):
    binary: str = "/opt/llama.cpp/bin/llama-server"
    """The llama-server executable on the installing host (same release as the sweep's)."""
    model_dir: str = "/srv/models"
    """Directory holding the GGUF files the recommendation names (target, and draft if any)."""
    user: str = "llama"
    group: str = ""
    """Empty: the same as `user`."""
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = 8080
    reports_url: str = ""
    """Base URL of the reports repository as a browser sees it (e.g.
    https://git.example.com/team/reports/src/branch/main); Documentation= is this plus the
    report's path in it. Empty: `docs_dir` on the installing host."""
    docs_dir: str = "/usr/share/doc/llama-server-speculative"
    """Where the report is copied on the installing host when `reports_url` is empty."""
    gpu: Literal["auto", "yes", "no"] = "auto"
    """yes: the server runs on a GPU: it sees /dev (PrivateDevices=no) and offloads
    (-ngl/-ngld all unless the profile names its layers). auto: yes when the sweep's host had
    a GPU or this host has one (publish/served.py:wants_gpu)."""
    slots: Annotated[int, Field(ge=1, le=256)] | None = None
    """Requests the server serves at once (--parallel), each slot with the profile's context.
    None: the slots the sweep measured at. `soak --recommendation` runs the same slots and
    refuses a deeper concurrency (publish/served.py)."""
    cache_ram_mib: Annotated[int, Field(ge=-1, le=1 << 20)] | None = 0
    """--cache-ram of the unit and of `soak --recommendation`'s servers: the host prompt cache
    bound in MiB, 0 off (the soak's memory verdict is judged on the server as shipped).
    None: the build's default (8192 MiB in the 11434 build)."""

    @field_validator("binary", "model_dir", "docs_dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        _printable(value)
        if not value.startswith("/"):
            raise ValueError("must be an absolute path (systemd runs the unit from /)")
        if any(part in (".", "..") for part in value.split("/")):
            raise ValueError("must be a normalised path (no '.' or '..': systemd refuses them)")
        return value.rstrip("/") or "/"

    @field_validator("binary")
    @classmethod
    def _executable_name(cls, value: str) -> str:
        """systemd refuses an executable whose name holds a quote or a backslash ("special
        characters"), and reads its path without expanding '$$': no spelling names it."""
        if any(c in value for c in "$\"'\\"):
            raise ValueError(
                "must not contain '$', quotes or backslashes (systemd cannot start an "
                "executable named so)"
            )
        return value

    @field_validator("user", "group")
    @classmethod
    def _account(cls, value: str, info: ValidationInfo) -> str:
        _printable(value)
        if (value or info.field_name == "user") and not _NAME.fullmatch(value):
            raise ValueError(
                "must be a user or group name (letters, digits, '_', '.', '-'; up to 32, not "
                "starting with a digit or '-') or a numeric id"
            )
        return value

    @field_validator("host")
    @classmethod
    def _address(cls, value: str) -> str:
        _printable(value)
        try:
            ipaddress.ip_address(value)
            return value
        except ValueError:
            pass
        labels = value.rstrip(".").split(".")
        if len(value) > 253 or not all(_LABEL.fullmatch(label) for label in labels):
            raise ValueError("must be an IP address or a host name (letters, digits, '-', '.')")
        return value

    @field_validator("reports_url")
    @classmethod
    def _url(cls, value: str) -> str:
        _printable(value)
        if not value:
            return value
        parts = urlsplit(value)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError("must be an http(s) URL with a host")
        if parts.username or parts.password:
            raise ValueError("must not carry credentials (the unit file is world-readable)")
        if any(c in value for c in " \"'\\"):
            raise ValueError("must not contain spaces, quotes or backslashes (percent-encode)")
        return value

    @property
    def resolved_group(self) -> str:
        return self.group or self.user
