"""GGUF files with chosen metadata and tensor names but no tensor data: what the discovery
reads (the header's key/value section, the table's names), written byte for byte as the format
says
(https://github.com/ggml-org/ggml/blob/master/docs/gguf.md), so a test can give a model MTP
heads or a drafter's architecture without a multi-GB download."""

from __future__ import annotations

import struct
from pathlib import Path

_U32, _I32, _F32, _BOOL, _STRING, _ARRAY = 4, 5, 6, 7, 8, 9


def _string(text: str) -> bytes:
    data = text.encode()
    return struct.pack("<Q", len(data)) + data


def _value(value: object) -> bytes:
    if isinstance(value, bool):
        return struct.pack("<I?", _BOOL, value)
    if isinstance(value, int):
        return struct.pack("<Ii", _I32, value) if value < 0 else struct.pack("<II", _U32, value)
    if isinstance(value, float):
        return struct.pack("<If", _F32, value)
    if isinstance(value, str):
        return struct.pack("<I", _STRING) + _string(value)
    if isinstance(value, list):  # of strings, as a vocabulary is
        items = b"".join(_string(str(v)) for v in value)
        return struct.pack("<IIQ", _ARRAY, _STRING, len(value)) + items
    raise TypeError(f"no GGUF type for {value!r}")


def write_gguf(path: Path, metadata: dict[str, object], tensors: tuple[str, ...] = ()) -> Path:
    """A version-3 GGUF with these keys and, in its table, these tensor names (each one F32
    element, no data written: the discovery reads names only)."""
    body = b"".join(_string(k) + _value(v) for k, v in metadata.items())
    table = b"".join(_string(t) + struct.pack("<IQIQ", 1, 1, 0, 0) for t in tensors)
    header = struct.pack("<IQQ", 3, len(tensors), len(metadata))
    path.write_bytes(b"GGUF" + header + body + table)
    return path
