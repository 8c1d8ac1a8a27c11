"""The llama.cpp releases the suite builds, named once for the tests and for the prebuild step."""

from __future__ import annotations

PREVIOUS_RELEASE = "11401.0.0"
"""The release before the configured 11434.0.0 on the index (built once, then cached):
test_release_cache keeps two real releases side by side in the build cache."""
