"""One arm of the sweep as any host can run it: its profile and its server flags with no path
of the machine that measured it (GGUF files by name, no host or port). Apart from the record
(publish/deliverable.py) so the per-category picks (publish/workload_record.py) carry the
same recipe without importing the record that holds them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

DROPPED_FLAGS = ("--host", "--port")
"""Flags the installing host sets itself ([service] host, port)."""


@dataclass(frozen=True, slots=True)
class ArmRecipe:
    """One arm as a host can run it: its profile and its server flags without host paths."""

    name: str
    profile: dict[str, Any]
    flags: tuple[str, ...]
    """The measured argv after the binary, GGUF paths cut to their file names, no host/port."""
    speculative: bool
    speedup: str = ""
    identity: str = ""

    @property
    def models(self) -> tuple[str, ...]:
        return tuple(f for f in self.flags if f.endswith(".gguf"))

    @property
    def spec_flags(self) -> tuple[str, ...]:
        """The flags that configure speculation (what a baseline unit would add to try it)."""
        out: list[str] = []
        flags = list(self.flags)
        for i, f in enumerate(flags):
            if f.startswith(("--spec", "--draft", "--model-draft", "-md")):
                out.append(f)
                if i + 1 < len(flags) and not flags[i + 1].startswith("-"):
                    out.append(flags[i + 1])
        return tuple(out)


def arm_recipe(d: Mapping[str, Any] | None) -> ArmRecipe | None:
    """An arm as the record's JSON holds it; None for a missing one."""
    if d is None:
        return None
    return ArmRecipe(
        d["name"],
        dict(d["profile"]),
        tuple(d["flags"]),
        bool(d["speculative"]),
        d.get("speedup", ""),
        d.get("identity", ""),
    )


def portable_flags(argv: Sequence[str]) -> tuple[str, ...]:
    """The argv after the binary, with GGUF paths cut to file names and host/port dropped."""
    out: list[str] = []
    args = list(argv[1:])
    i = 0
    while i < len(args):
        a = args[i]
        if a in DROPPED_FLAGS:
            i += 2
            continue
        out.append(Path(a).name if a.endswith(".gguf") else a)
        i += 1
    return tuple(out)
