"""What the tiny-model scripts share (tiny_mtp_gguf.py, tiny_eagle3_gguf.py, tiny_draft_gguf.py,
misfit_drafter_gguf.py): their command line (`options`: OUT, the model read, `--gguf-py`), the
llama.cpp sdist's own `gguf-py` found under the cached build, and a target's tokenizer copied
key by key, so a drafter written here shares its vocabulary.

Offline: nothing is fetched. The `gguf` package on the registry would do as well
(`--gguf-py` names any directory holding a `gguf` package)."""

from __future__ import annotations

import argparse
import sys
import types
from pathlib import Path
from typing import Any

CACHE = Path.home() / ".cache" / "watchkeeper"
GGUF_PY = CACHE / "llama.cpp" / "11434.0.0" / "src" / "llama.cpp" / "gguf-py"
SMOLLM2 = CACHE / "models" / "smollm2-135m-instruct-q4_1" / "SmolLM2-135M-Instruct.Q4_1.gguf"


def options(
    doc: str | None, source: str, source_help: str | None = None
) -> tuple[argparse.Namespace, Any]:
    """The scripts' one preamble: OUT, the GGUF read (`source`, the script's own flag name:
    `--tokenizer-from`, `--target`, `--source`; default SmolLM2) and `--gguf-py`, parsed
    from the command line, with the `gguf` module loaded. The description is `doc`'s first
    paragraph."""
    parser = argparse.ArgumentParser(description=(doc or "").split("\n\n")[0])
    parser.add_argument("out")
    parser.add_argument(source, default=str(SMOLLM2), help=source_help)
    parser.add_argument("--gguf-py", default=str(GGUF_PY))
    args = parser.parse_args()
    return args, load_gguf(args.gguf_py)


def load_gguf(gguf_py: str) -> Any:
    """The `gguf` module of the sdist at `gguf_py` (a directory holding the package)."""
    sys.modules.setdefault("yaml", types.ModuleType("yaml"))  # gguf.metadata imports it; unused
    sys.path.insert(0, gguf_py)
    import gguf  # noqa: PLC0415  (the sdist's copy, found only at run time)

    return gguf


def copy_tokenizer(gguf: Any, reader: Any, writer: Any) -> int:
    """Every `tokenizer.*` key of `reader`'s file into `writer`; the vocabulary's size."""
    n_vocab = 0
    for name, field in reader.fields.items():
        if not name.startswith("tokenizer."):
            continue
        kind = field.types[0]
        if kind == gguf.GGUFValueType.ARRAY:
            values = field.contents()
            n_vocab = len(values) if name == "tokenizer.ggml.tokens" else n_vocab
            writer.add_key_value(name, values, kind, sub_type=field.types[1])
        else:
            writer.add_key_value(name, field.contents(), kind)
    return n_vocab
