"""[service]: where the recommended llama-server lives on the host that installs its unit.

The sweep measures with its own cache paths (/root/.cache/... on the box that ran it); a unit
that names them installs nowhere else. These keys are the installing host's: the unit is
rendered from the committed recommendation with them (`watchkeeper unit`), so one
recommendation gives a unit for every host, user and port.
"""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, field_validator

from watchkeeper.config.base import Strict


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
    """yes: the server needs /dev (GPU device nodes: PrivateDevices=no). auto: as measured
    (the sweep's host had a GPU)."""

    @field_validator("binary", "model_dir", "docs_dir")
    @classmethod
    def _absolute(cls, value: str) -> str:
        if not value.startswith("/"):
            raise ValueError("must be an absolute path (systemd runs the unit from /)")
        return value.rstrip("/") or "/"

    @property
    def resolved_group(self) -> str:
        return self.group or self.user
