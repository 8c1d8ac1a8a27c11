"""Does a profile still start on a candidate release? Its argv in the old build's dialect and
in the candidate's, compared flag by flag, before anything is measured.

The argv builder (`server.flags.build_argv`) already adapts to renamed flags (it picks the
first spelling a build's `--help` lists) and refuses what a build cannot do; here both builds'
argv are built and compared, so an operator learns what changed: a flag the profile used that
the candidate's `--help` lists as removed (newer llama.cpp makes that a hard error: "the
argument has been removed"), a flag it no longer knows at all, a field now spelt differently.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from watchkeeper.config import ProfileConfig
from watchkeeper.errors import FlagError
from watchkeeper.server.flags import HelpInfo, build_argv
from watchkeeper.upgrade.flaghistory import FlagChange

_PLACEHOLDERS = {"binary": Path("llama-server"), "model": Path("model.gguf")}


@dataclass(frozen=True, slots=True)
class FlagCheck:
    breaks: str | None
    """Why the candidate cannot run the profile (None: it can)."""
    removed: tuple[tuple[str, str], ...] = ()
    """(flag, what the candidate's --help says to use instead) for flags the profile used."""
    unknown: tuple[str, ...] = ()
    """Flags the profile used that the candidate does not list at all."""
    renamed: tuple[tuple[str, str], ...] = field(default=())
    """(old spelling, new spelling): handled by the argv builder, reported for the record."""
    history: tuple[FlagChange, ...] = ()
    """Where each of those flags stopped being accepted, read from the releases' sources
    (`upgrade.flaghistory`); empty when not looked up."""

    @property
    def changed(self) -> tuple[str, ...]:
        """The flags the profile used that the candidate refuses, lacks or spells otherwise."""
        flags = [f for f, _ in self.removed] + list(self.unknown) + [a for a, _ in self.renamed]
        return tuple(dict.fromkeys(flags))

    @property
    def ok(self) -> bool:
        return self.breaks is None

    def lines(self) -> list[str]:
        out = [f"breaks: {self.breaks}"] if self.breaks else []
        out += [f"removed: {f} ({advice or 'no advice'})" for f, advice in self.removed]
        out += [f"unknown: {f}" for f in self.unknown]
        out += [f"renamed: {a} -> {b}" for a, b in self.renamed]
        out += [f"history: {change.line()}" for change in self.history]
        return out


def _argv(profile: ProfileConfig, info: HelpInfo, *, cuda: bool) -> tuple[str, ...]:
    return build_argv(
        profile,
        info=info,
        binary=_PLACEHOLDERS["binary"],
        model_path=_PLACEHOLDERS["model"],
        draft_path=Path("draft.gguf") if profile.draft_model else None,
        port=8080,
        cuda=cuda,
    ).argv


def _flags(argv: tuple[str, ...]) -> list[str]:
    out = []
    for arg in argv[1:]:
        if arg.startswith("-") and not arg.lstrip("-").replace(".", "", 1).isdigit():
            out.append(arg.split("=", 1)[0])
    return out


def check_flags(
    profile: ProfileConfig, *, current: HelpInfo, candidate: HelpInfo, cuda: bool = False
) -> FlagCheck:
    try:
        old = _flags(_argv(profile, current, cuda=cuda))
    except FlagError:
        old = []  # the profile does not run on the current build either: judge the candidate
    removed = tuple((f, candidate.removed[f]) for f in old if f in candidate.removed)
    unknown = tuple(f for f in old if f not in candidate.flags and f not in candidate.removed)
    try:
        new = _flags(_argv(profile, candidate, cuda=cuda))
    except FlagError as exc:
        return FlagCheck(exc.message, removed, unknown)
    # The candidate's argv built: every old flag it lacks was respelt by the builder.
    gone = [f for f in old if f not in new]
    came = [f for f in new if f not in old]
    renamed = tuple(zip(gone, came, strict=False))
    respelt = {a for a, _ in renamed}
    return FlagCheck(
        None,
        tuple(r for r in removed if r[0] not in respelt),
        tuple(u for u in unknown if u not in respelt),
        renamed,
    )
