"""A pinned nightly reference for tests that need one in the store but no real build behind
it: every field the table requires, filled with recognisable placeholders, and the few a test
asserts on (profile, host, release line, who pinned it and when) as arguments."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from watchkeeper.store.db import Database
from watchkeeper.store.references import ReferenceRecord, ReferenceStore


def pin_reference(
    db: Database,
    *,
    profile: str = "s",
    host: str = "f" * 16,
    release_line: str = "v",
    identity: str = "i" * 64,
    pinned_by: str = "watchkeeper nightly",
    reason: str = "first nightly run",
    pinned_at: datetime | None = None,
    config: dict[str, Any] | None = None,
) -> ReferenceRecord:
    when = {} if pinned_at is None else {"pinned_at": pinned_at}
    return ReferenceStore(db).pin(
        host_fingerprint=host,
        profile=profile,
        identity=identity,
        binary_sha256="b" * 64,
        binary_version=release_line,
        model_sha256="m" * 64,
        draft_sha256=None,
        config_hash="c" * 16,
        config=config if config is not None else {},
        binary_path="/x",
        model_path="/y",
        draft_path=None,
        pinned_by=pinned_by,
        reason=reason,
        **when,
    )
