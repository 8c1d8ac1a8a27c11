"""How many bytes of a GGUF model full GPU offload must put in VRAM: read from the file's own
tensor table, not guessed from its size.

The offload check (`server/offload.py`) compares the VRAM the server's processes hold with the
weights full offload places on the GPU. llama.cpp keeps the input embedding (`token_embd`) in
host memory whatever `-ngl` says (its input layer is never offloaded), so the GPU share is the
tensor data less that one tensor: 21% less for SmolLM2-135M, ~5% for a 14B model. A model
with tied embeddings also puts a duplicate of `token_embd` on the GPU as its output layer; that
is not added here, so the figure is a lower bound and a full offload always clears it.

Only the header and the tensor table are read (a few MB for a vocabulary's strings), never the
weights. The format: https://github.com/ggml-org/ggml/blob/master/docs/gguf.md
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

_MAGIC = b"GGUF"
_INPUT_EMBEDDING = "token_embd.weight"
# Value types of the key/value section: fixed sizes, string (8), array (9).
_FIXED = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}
_STRING, _ARRAY = 8, 9


class GgufError(ValueError):
    """The file is not a GGUF this reader understands."""


@dataclass(frozen=True, slots=True)
class GgufWeights:
    """Sizes from one GGUF file's tensor table, in bytes."""

    tensor_bytes: int
    """All tensor data (from the first tensor's offset to the end of the file)."""
    input_embedding_bytes: int
    """`token_embd.weight`, which stays in host memory under any offload (0 when absent)."""
    tensors: int

    @property
    def gpu_bytes(self) -> int:
        """What full offload puts on the GPU at the least: everything but the input embedding."""
        return self.tensor_bytes - self.input_embedding_bytes


def _read(stream: BinaryIO, size: int) -> bytes:
    data = stream.read(size)
    if len(data) != size:
        raise GgufError("file ends inside the header")
    return data


def _u32(stream: BinaryIO) -> int:
    return int(struct.unpack("<I", _read(stream, 4))[0])


def _u64(stream: BinaryIO) -> int:
    return int(struct.unpack("<Q", _read(stream, 8))[0])


def _string(stream: BinaryIO) -> str:
    return _read(stream, _u64(stream)).decode("utf-8", errors="replace")


def _skip_value(stream: BinaryIO, kind: int) -> None:
    if kind in _FIXED:
        _read(stream, _FIXED[kind])
    elif kind == _STRING:
        stream.seek(_u64(stream), 1)
    elif kind == _ARRAY:
        item, count = _u32(stream), _u64(stream)
        if item in _FIXED:
            stream.seek(_FIXED[item] * count, 1)
        else:
            for _ in range(count):
                _skip_value(stream, item)
    else:
        raise GgufError(f"unknown value type {kind}")


_UINTS = {4: "<I", 5: "<i", 10: "<Q", 11: "<q"}


def _key_values(stream: BinaryIO, path: Path) -> int:
    """Past the header (magic, version 2+, tensor count): the number of key/value pairs."""
    if _read(stream, 4) != _MAGIC:
        raise GgufError(f"{path} is not a GGUF file")
    if _u32(stream) < 2:
        raise GgufError(f"{path}: GGUF version too old")
    _u64(stream)
    return _u64(stream)


def read_context_length(path: Path) -> int | None:
    """The context the model was trained for (`<architecture>.context_length`; SmolLM2: 8192):
    llama-server caps a slot's context at it whatever `--ctx-size` asks, so a fit check past
    it measures the model, not the memory. None when the file does not say."""
    with path.open("rb") as stream:
        for _ in range(_key_values(stream, path)):
            key = _string(stream)
            kind = _u32(stream)
            parts = key.split(".")
            if len(parts) == 2 and parts[1] == "context_length" and kind in _UINTS:
                fmt = _UINTS[kind]
                return int(struct.unpack(fmt, _read(stream, struct.calcsize(fmt)))[0])
            _skip_value(stream, kind)
    return None


_SCALARS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q",
    12: "<d",
}  # fmt: skip
Scalar = int | float | bool | str


def read_metadata(path: Path, *, max_string: int = 4096) -> dict[str, Scalar]:
    """The key/value section's scalars and short strings (`general.architecture`,
    `<arch>.nextn_predict_layers`, `<arch>.block_count`, ...): what the sweep's discovery reads
    to know which speculation methods a model can run. Arrays (the vocabulary) are skipped,
    as are strings longer than `max_string` (a chat template)."""
    out: dict[str, Scalar] = {}
    with path.open("rb") as stream:
        for _ in range(_key_values(stream, path)):
            key = _string(stream)
            kind = _u32(stream)
            if kind in _SCALARS:
                fmt = _SCALARS[kind]
                value = struct.unpack(fmt, _read(stream, struct.calcsize(fmt)))[0]
                out[key] = bool(value) if kind == 7 else value
            elif kind == _STRING:
                size = _u64(stream)
                if size <= max_string:
                    out[key] = _read(stream, size).decode("utf-8", errors="replace")
                else:
                    stream.seek(size, 1)
            else:
                _skip_value(stream, kind)
    return out


def read_tensor_names(path: Path) -> frozenset[str]:
    """The names of the file's tensors (its table only, no data): what tells a drafter's
    heads apart where its metadata is silent (a DSpark drafter's `markov_w1.weight`, its
    confidence head `conf_proj.weight`: llama.cpp 11434 detects them the same way)."""
    with path.open("rb") as stream:
        if _read(stream, 4) != _MAGIC:
            raise GgufError(f"{path} is not a GGUF file")
        if _u32(stream) < 2:
            raise GgufError(f"{path}: GGUF version too old")
        n_tensors, n_kv = _u64(stream), _u64(stream)
        for _ in range(n_kv):
            _string(stream)
            _skip_value(stream, _u32(stream))
        names = set()
        for _ in range(n_tensors):
            names.add(_string(stream))
            stream.seek(8 * _u32(stream) + 4 + 8, 1)  # dims, type, offset
    return frozenset(names)


def read_weights(path: Path) -> GgufWeights:
    """The tensor table of a GGUF (v2 or v3) file: where each tensor's data starts."""
    size = path.stat().st_size
    with path.open("rb") as stream:
        if _read(stream, 4) != _MAGIC:
            raise GgufError(f"{path} is not a GGUF file")
        version = _u32(stream)
        if version < 2:
            raise GgufError(f"{path}: GGUF version {version} is not supported")
        n_tensors, n_kv = _u64(stream), _u64(stream)
        alignment = 32
        for _ in range(n_kv):
            key = _string(stream)
            kind = _u32(stream)
            if key == "general.alignment" and kind == 4:
                alignment = _u32(stream)
            else:
                _skip_value(stream, kind)
        offsets: dict[str, int] = {}
        for _ in range(n_tensors):
            name = _string(stream)
            n_dims = _u32(stream)
            stream.seek(8 * n_dims + 4, 1)  # dims, then the type
            offsets[name] = _u64(stream)
        table_end = stream.tell()
    data_start = -(-table_end // alignment) * alignment
    starts = sorted(set(offsets.values()))
    embedding = 0
    if _INPUT_EMBEDDING in offsets:
        begin = offsets[_INPUT_EMBEDDING]
        later = [s for s in starts if s > begin]
        end = later[0] if later else size - data_start
        embedding = end - begin
    return GgufWeights(size - data_start, embedding, n_tensors)
