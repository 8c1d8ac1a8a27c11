"""A deliverable set's making, kept in its own folder: which stage finished, in how long, with
what budget, and what it left as "not yet" (`deliver_set.json`), and the page a reader opens
to see how the set was made (`deliver_set.md`).

`watchkeeper deliver-set` runs for an hour or a night; a host that reboots half-way must not
cost the sweep again. Each stage's outcome is written the moment it ends, so a rerun of the
same command continues from the first stage not finished. A rerun with another plan (other
budget, other sweep options) is refused in one line: its stages would not be the ones this
folder's files came from.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from watchkeeper.errors import ConfigError

STATE_NAME = "deliver_set.json"
MANIFEST_NAME = "deliver_set.md"
FINISHED = ("done", "skipped")
"""A stage in either state is not run again; "failed" and "pending" are."""


@dataclass(frozen=True, slots=True)
class StageState:
    name: str
    budget_s: float
    status: str = "pending"
    """pending, done, skipped (it could not fit, or has nothing to do: `detail` says which),
    failed (a rerun tries it again)."""
    wall_s: float = 0.0
    detail: str = ""
    facts: dict[str, Any] = field(default_factory=dict)
    """What later stages and the manifest read: campaign ids, the record's path, the pace."""


@dataclass(frozen=True, slots=True)
class SetState:
    command: str
    signature: str
    budget_min: float
    stages: tuple[StageState, ...]

    def stage(self, name: str) -> StageState:
        return next(s for s in self.stages if s.name == name)

    def with_stage(self, done: StageState) -> SetState:
        return replace(self, stages=tuple(done if s.name == done.name else s for s in self.stages))

    @property
    def spent_s(self) -> float:
        return sum(s.wall_s for s in self.stages)

    def to_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "signature": self.signature,
            "budget_min": self.budget_min,
            "stages": [asdict(s) for s in self.stages],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> SetState:
        return cls(
            command=str(data["command"]),
            signature=str(data["signature"]),
            budget_min=float(data["budget_min"]),
            stages=tuple(StageState(**s) for s in data["stages"]),
        )


def plan_signature(plan: Mapping[str, Any]) -> str:
    """What makes two runs the same set: every option that changes what a stage measures."""
    text = json.dumps(plan, sort_keys=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_or_start(
    folder: Path,
    command: str,
    signature: str,
    budget_min: float,
    budgets: Sequence[tuple[str, float]],
) -> SetState:
    """The folder's state when it was made by the same plan, else a fresh one (a folder
    with another plan's state is refused)."""
    path = folder / STATE_NAME
    fresh = SetState(command, signature, budget_min, tuple(StageState(n, b) for n, b in budgets))
    if not path.is_file():
        return fresh
    try:
        state = SetState.from_json(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise ConfigError(
            f"{path}: not a deliver-set state file ({exc})",
            hint="move it away to start the set afresh",
        ) from None
    if state.signature != signature:
        raise ConfigError(
            f"{folder} was started by another plan ({state.command})",
            hint="rerun that command to continue it, or pass another --out for this plan",
        )
    return state


def save(folder: Path, state: SetState) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / STATE_NAME
    tmp = path.with_suffix(".json.tmp")
    tmp.write_text(json.dumps(state.to_json(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)
    return path


def _minutes(seconds: float) -> str:
    return f"{seconds / 60:.1f} min"


def manifest(state: SetState) -> str:
    """The set's own page: the command, each stage's budget, wall time and outcome."""
    rows = [
        f"| {s.name} | {_minutes(s.budget_s)} | {_minutes(s.wall_s)} | {s.status} | "
        f"{s.detail.replace('|', '/')} |"
        for s in state.stages
    ]
    not_yet = [s for s in state.stages if s.status != "done"]
    lines = [
        "# How this set was made",
        "",
        f"`{state.command}`",
        "",
        f"Budget {state.budget_min:g} min; spent {_minutes(state.spent_s)}. Each stage's "
        "budget is its share of the whole plus what earlier stages left unspent; a stage that "
        "could not fit was skipped and says so, and the claims it would have supported stay "
        '"not yet" in the report and the unit.',
        "",
        "| stage | budget | wall time | status | detail |",
        "|---|---|---|---|---|",
        *rows,
        "",
    ]
    if not_yet:
        lines += [
            "Not done: " + "; ".join(f"{s.name} ({s.status}: {s.detail})" for s in not_yet) + ".",
            "",
        ]
    return "\n".join(lines)


def write_manifest(folder: Path, state: SetState) -> Path:
    path = folder / MANIFEST_NAME
    path.write_text(manifest(state), encoding="utf-8")
    return path
