"""The one sha256 of a file: a build's binary, a model, an sdist, a bundled wheel.

Read in chunks, so a 5 GB model is hashed in bounded memory; the hex digest is what the store,
the recommendation record and a unit's ExecStartPre compare.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

CHUNK = 4 * 1024 * 1024


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            digest.update(chunk)
    return digest.hexdigest()
