"""Configuration of the tracker ([tracker]) and reviewer PR comments ([review]).

Owned by the tracker stage; `watchkeeper.config.Config` embeds it. Tokens never live here:
only the names of the environment variable or file they come from.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class TrackerConfig(_Strict):
    """Where findings are filed (filled in by the tracker work)."""

    kind: str = ""
    """"github" or "gitea"; empty: no tracker configured."""


class ReviewConfig(_Strict):
    """Which PRs get a paired A/B comment (filled in by the tracker work)."""
