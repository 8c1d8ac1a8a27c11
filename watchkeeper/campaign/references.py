"""The pinned reference as a runnable arm: the nightly's and the soak's second server.

The reference is a snapshot by content hash (`nightly/reference.py`); running it beside the
current system needs the snapshot's files to still be there and the installed build's `--help`
for its argv. Both the nightly and the soak pair against it, so it lives here, not in either
command.
"""

from __future__ import annotations

from pathlib import Path

from watchkeeper.config import Config, ProfileConfig
from watchkeeper.errors import ConfigError
from watchkeeper.nightly.reference import reference_arm
from watchkeeper.server.flags import read_help
from watchkeeper.server.launch import PreparedProfile
from watchkeeper.store.references import ReferenceRecord


def reference_profile(
    config: Config, current: PreparedProfile, ref: ReferenceRecord
) -> PreparedProfile:
    """The pinned reference as a runnable arm beside `current` (nightly and soak)."""
    for path in (ref.binary_path, ref.model_path, ref.draft_path):
        if path and not Path(path).is_file():
            raise ConfigError(
                f"reference #{ref.id} of {ref.profile}: snapshot file {path} is missing",
                hint=f"re-pin with `watchkeeper reference pin --profile {ref.profile}`",
            )
    arm = reference_arm(
        current,
        binary_path=Path(ref.binary_path),
        binary_version=ref.binary_version,
        binary_sha256=ref.binary_sha256,
        model_path=Path(ref.model_path),
        model_sha256=ref.model_sha256,
        draft_path=Path(ref.draft_path) if ref.draft_path else None,
        draft_sha256=ref.draft_sha256,
        config=ProfileConfig.model_validate(ref.config),
    )
    assert arm.binary is not None
    help_info = read_help(arm.binary, config.server.resolved_cache_dir())
    return PreparedProfile(arm.name, arm.profile, arm.binary, arm.model, arm.draft, help_info)
