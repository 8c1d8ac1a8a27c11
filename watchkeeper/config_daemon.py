"""Configuration of the daemon ([daemon]): scheduling, fleet identity, observability.

Owned by the daemon stage; `watchkeeper.config.Config` embeds it.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class DaemonConfig(_Strict):
    """Daemon settings (filled in by the daemon work)."""
