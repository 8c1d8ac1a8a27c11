"""Which release removed a flag? Read from the releases' sources, not from their builds.

A candidate's `--help` says that a flag is gone ("the argument has been removed"), never since
when; an upgrade that jumps 100 builds leaves the operator to find the release by hand.
Building every release in between to ask its `--help` would cost minutes each. The sdist
carries `common/arg.cpp`, where every flag is declared (`add_opt(common_arg({"--a", "-b"},
...`) and a removed one stays declared only to call `arg_removed(...)`. So the history is
read from the sources: a binary search over the releases between the two builds, one sdist
(cached) and one member read per step, no compiler.

The search assumes a flag that left does not come back between the two ends (llama.cpp
keeps removed flags declared as hard errors, it does not reuse their names); the answer names
the neighbouring release where the flag was still live, so a reader can check the pair.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal

from watchkeeper.upgrade.releases import tag

FlagState = Literal["live", "removed", "absent"]

_DECLARATION = re.compile(r"common_arg\(\s*\{((?:\s*\"[^\"]*\"\s*,?)+)\s*\}")
_NAME = re.compile(r"\"([^\"]*)\"")


def declared_flags(source: str) -> dict[str, FlagState]:
    """Every flag `arg.cpp` declares -> live, or removed (declared to say it was removed).

    A declaration's body runs to the next declaration; a body that calls `arg_removed` or
    says "has been removed" is a removed flag's."""
    found: dict[str, FlagState] = {}
    starts = list(_DECLARATION.finditer(source))
    for i, match in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else len(source)
        body = source[match.end() : end]
        state: FlagState = (
            "removed" if "arg_removed(" in body or "has been removed" in body else "live"
        )
        for name in _NAME.findall(match.group(1)):
            if name.startswith("-"):
                found[name] = state
    return found


@dataclass(frozen=True, slots=True)
class FlagChange:
    """Where a flag stopped being accepted, between two releases."""

    flag: str
    first_without: str
    """The first release (oldest first) that no longer accepts it."""
    state: FlagState
    """What that release's source says of it: 'removed' (a hard error) or 'absent'."""
    last_with: str
    """The release before it, which still accepted it."""
    releases_read: int
    """How many releases' sources the search read."""

    def line(self) -> str:
        how = "removed" if self.state == "removed" else "dropped"
        return (
            f"{self.flag} {how} in {self.first_without} ({tag(self.first_without)}); "
            f"{self.last_with} ({tag(self.last_with)}) still accepts it"
        )


def first_release_without(
    flag: str, releases: Sequence[str], state_of: Callable[[str], dict[str, FlagState]]
) -> FlagChange | None:
    """Binary search over `releases` (oldest first, the first one accepting `flag`) for the
    first release whose source no longer declares `flag` live. None when the last release
    still accepts it, or the first one does not (no change to place in the range)."""
    if len(releases) < 2:
        return None
    read: dict[str, FlagState] = {}

    def state(i: int) -> FlagState:
        version = releases[i]
        if version not in read:
            read[version] = state_of(version).get(flag, "absent")
        return read[version]

    if state(len(releases) - 1) == "live" or state(0) != "live":
        return None
    good, bad = 0, len(releases) - 1
    while bad - good > 1:
        mid = (good + bad) // 2
        if state(mid) == "live":
            good = mid
        else:
            bad = mid
    return FlagChange(flag, releases[bad], state(bad), releases[good], len(read))
