"""A tiny native stand-in for a llama.cpp build: a `llama-server` that links a `libggml-base`
beside it through RUNPATH=$ORIGIN (as the real build does) and answers `--version`, compiled
with the C compiler the llama.cpp build needs anyway. For snapshot tests without a real build."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

LIBRARY = 'const char *ggml_version(void) { return "%s"; }\n'
SERVER = """#include <stdio.h>
#include <string.h>
const char *ggml_version(void);
int main(int argc, char **argv) {
    if (argc > 1 && strcmp(argv[1], "--version") == 0) {
        printf("version: %s (fake)\\n", ggml_version());
        return 0;
    }
    return 2;
}
"""


def fake_build(folder: Path, version: str = "1") -> Path:
    """`folder/llama-server` and `folder/libggml-base.so.0` (soname, symlinked from
    `libggml-base.so`); returns the server."""
    cc = shutil.which("cc") or shutil.which("gcc")
    if cc is None:
        pytest.fail("a C compiler is required (the llama.cpp build needs one too)")
    folder.mkdir(parents=True, exist_ok=True)
    source = folder.parent / f".{folder.name}-src"
    source.mkdir(exist_ok=True)
    (source / "lib.c").write_text(LIBRARY % version)
    (source / "main.c").write_text(SERVER)
    run = [cc, "-shared", "-fPIC", "-Wl,-soname,libggml-base.so.0"]
    subprocess.run(
        [*run, "-o", str(folder / "libggml-base.so.0"), str(source / "lib.c")], check=True
    )
    (folder / "libggml-base.so").symlink_to("libggml-base.so.0")
    subprocess.run(
        [cc, "-o", str(folder / "llama-server"), str(source / "main.c"), f"-L{folder}",
         "-lggml-base", "-Wl,--enable-new-dtags,-rpath,$ORIGIN"],
        check=True,
    )  # fmt: skip
    shutil.rmtree(source)
    return folder / "llama-server"
