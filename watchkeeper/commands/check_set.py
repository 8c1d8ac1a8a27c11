"""`watchkeeper check-set`: do a deliverable set's files agree (report, JSON, unit, soak,
each report's stability line with the soak it cites, jobs, README, docs)? One line per
disagreement, naming the file and the field; exit 1 when there is any. Run over every
committed set by `tests/publish/test_check_set.py`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from watchkeeper.errors import ConfigError
from watchkeeper.publish.deliverable import RECORD_NAME
from watchkeeper.publish.set_check import (
    DeliverableSet,
    Disagreement,
    check_jobs,
    check_latest,
    check_report,
    check_side_by_side,
    check_soak,
    check_unit,
    find_sets,
    load_set,
)
from watchkeeper.publish.set_identity import check_identity
from watchkeeper.publish.set_ladder import check_ladder
from watchkeeper.publish.set_prose import check_prose
from watchkeeper.publish.set_stability import check_stability


@dataclass(frozen=True, slots=True)
class CheckSetResult:
    sets: tuple[str, ...]
    disagreements: tuple[Disagreement, ...]

    @property
    def ok(self) -> bool:
        return not self.disagreements

    def lines(self) -> list[str]:
        out = [f"set {s}" for s in self.sets]
        out += [d.text for d in self.disagreements]
        n = len(self.disagreements)
        out.append(
            f"{len(self.sets)} set(s): " + ("all agree" if not n else f"{n} disagreement(s)")
        )
        return out

    def to_json(self) -> dict[str, Any]:
        return {
            "sets": list(self.sets),
            "ok": self.ok,
            "disagreements": [
                {
                    "file": d.file,
                    "field": d.field,
                    "found": d.found,
                    "expected": d.expected,
                    "source": d.source,
                }
                for d in self.disagreements
            ],
        }


def _folder(root: Path, given: Path) -> Path:
    path = given if given.is_absolute() else root / given
    if path.is_file() and path.name == RECORD_NAME:
        path = path.parent
    if not (path / RECORD_NAME).is_file():
        raise ConfigError(
            f"{given}: no {RECORD_NAME} there, so it is no deliverable set",
            hint="name a folder a sweep wrote (reports, reports/code-edit), or none for all",
        )
    try:
        return path.resolve().relative_to(root.resolve())
    except ValueError:
        raise ConfigError(
            f"{given} is outside {root}", hint="run it from the repository root or pass --root"
        ) from None


def check_set_command(root: Path, folders: Sequence[Path] = ()) -> CheckSetResult:
    """``folders``: the sets to check (default: every set under reports/). Units are checked
    side by side across every committed set, whichever are named."""
    every = [load_set(root, f) for f in find_sets(root)]
    named = [_folder(root, f) for f in folders] or [s.folder for s in every]
    chosen: list[DeliverableSet] = [s for s in every if s.folder in named]
    found: list[Disagreement] = []
    for s in chosen:
        for check in (
            check_unit,
            check_report,
            check_identity,
            check_ladder,
            check_latest,
            check_soak,
            check_stability,
        ):
            found += check(root, s)
    found += check_jobs(root, every, chosen)
    found += check_prose(root, chosen)
    found += [d for d in check_side_by_side(root, every) if any(d.file == s.unit for s in chosen)]
    return CheckSetResult(tuple(s.folder.as_posix() for s in chosen), tuple(found))
