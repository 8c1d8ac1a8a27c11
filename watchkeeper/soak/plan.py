"""A soak's schedule and what it hands back: the plan (which block runs which profile at which
concurrency, cycle by cycle, the pairs' order and planned restarts), where a resumed soak picks
up, the outcome, and each block's task order.

Split from `soak/loop.py`, which runs the blocks: the schedule is pure and decided before any
server starts (the command checks a resumed soak's plan signature against it), the loop is
threads, clients and servers.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Mapping
from dataclasses import dataclass, field

from watchkeeper.load.arrivals import ArrivalSpec
from watchkeeper.load.records import Task
from watchkeeper.load.sampling import SamplingSettings


@dataclass(frozen=True, slots=True)
class SoakPlan:
    duration_s: float
    block_s: float
    profiles: tuple[str, ...]
    concurrencies: tuple[int, ...]
    seed: int
    tasks: tuple[Task, ...]
    probe: Task
    sampling: SamplingSettings = field(default_factory=SamplingSettings)
    """The load requests' sampler (probes stay at temperature 0) ..."""
    arm_sampling: Mapping[str, SamplingSettings] = field(default_factory=dict)
    """... and, by arm, where a profile's own sampler keys override it."""
    pairs: tuple[tuple[str, str], ...] = ()
    """(current, reference arm): these two run back to back at each concurrency, their order
    alternating from cycle to cycle, so each cycle holds one paired ratio (soak.paired)."""
    restart_every: int = 0
    """Both servers of every pair restart every this many cycles (0: never), so the process
    pair, not the night, is the replicate; the first cycle after each start is warm-up."""
    arrival: ArrivalSpec | None = None
    """Open loop (`soak --rate`): every block sends at these arrivals, its concurrency the cap
    on requests in flight. None: the closed loop."""

    def sampler(self, profile: str) -> SamplingSettings:
        return self.arm_sampling.get(profile, self.sampling)

    @property
    def cycle_blocks(self) -> int:
        return len(self.profiles) * len(self.concurrencies)

    def combination(self, block: int) -> tuple[str, int]:
        combos = self.cycle(block // self.cycle_blocks)
        return combos[block % len(combos)]

    def current_first(self, index: int) -> bool:
        """Whether cycle `index` runs the current arm first. The order alternates over the
        *judged* cycles: with restarts every R cycles the first of each R is warm-up (it takes
        its successor's order), so a plain alternation would give every judged cycle of R = 2
        the same order."""
        every = self.restart_every
        if every < 2:
            return index % 2 == 0
        segment, position = divmod(index, every)
        return (segment * (every - 1) + max(position - 1, 0)) % 2 == 0

    def restarts_before(self, block: int) -> bool:
        """A planned restart of the pairs is due before this block: the first block of every
        `restart_every`-th cycle."""
        if self.restart_every < 2 or not self.pairs or block % self.cycle_blocks:
            return False
        return (block // self.cycle_blocks) % self.restart_every == 0

    def cycle(self, index: int) -> list[tuple[str, int]]:
        """The blocks of cycle `index`: every (profile, concurrency) once."""
        if not self.pairs:
            return [(p, c) for p in self.profiles for c in self.concurrencies]
        partner = dict(self.pairs)
        paired = set(partner.values())
        out: list[tuple[str, int]] = []
        for c in self.concurrencies:
            for p in self.profiles:
                if p in paired:
                    continue  # runs beside its current profile
                if p not in partner:
                    out.append((p, c))
                    continue
                first, second = (p, partner[p]) if self.current_first(index) else (partner[p], p)
                out += [(first, c), (second, c)]
        return out


@dataclass(frozen=True, slots=True)
class ResumePoint:
    next_block: int = 0
    elapsed_s: float = 0.0


@dataclass(frozen=True, slots=True)
class SoakOutcome:
    interrupted: bool
    blocks: int
    completed: int
    failed: int
    restarts: int
    stopped_profiles: tuple[str, ...]
    elapsed_s: float


REPLAYED_BLOCK = -1
"""The block key every depth > 1 block shuffles with: they all replay one order."""


class TaskCycle:
    """Endless, thread-safe task order for one block: a fresh shuffle for every pass.

    With `interleave`, each pass deals the categories round robin (each category's tasks in
    the shuffled order), so whatever stretch of it a block gets holds the task set's mix."""

    def __init__(
        self, tasks: tuple[Task, ...], *, seed: int, block: int, interleave: bool = False
    ) -> None:
        self._tasks, self._seed, self._block = tasks, seed, block
        self._interleave = interleave
        self._lock = threading.Lock()
        self._order: list[Task] = []
        self._cycle = -1

    def next(self) -> Task:
        with self._lock:
            if not self._order:
                self._cycle += 1
                order = list(self._tasks)
                random.Random(f"{self._seed}:{self._block}:{self._cycle}").shuffle(order)
                if self._interleave:
                    order = _dealt(order)
                self._order = order[::-1]
            return self._order.pop()


def _dealt(order: list[Task]) -> list[Task]:
    seen: dict[str, int] = {}
    ranked: list[tuple[int, int, Task]] = []
    for task in order:
        ranked.append((seen.get(task.category, 0), len(ranked), task))
        seen[task.category] = seen.get(task.category, 0) + 1
    return [task for *_, task in sorted(ranked, key=lambda r: (r[0], r[1]))]


def block_cycle(tasks: tuple[Task, ...], *, seed: int, block: int, concurrency: int) -> TaskCycle:
    """The task order of one block. At depth 1 every block reshuffles (seed, block, pass), so the
    night covers the task set and any stretch of it can be replayed. Deeper, every block replays the
    same order (dealt by category): what a block produces at depth 4 depends on which requests share
    the server's steps (a long prompt's prefill stalls every slot's decode), so blocks that drew
    different stretches of the task set scattered several times more than the same requests replayed
    (`benchmarks/depth4_host_wander.py`; docs/measurements.md#figures-behind-the-code). The same
    order in every block compares like with like; the depth-1 blocks and the probes still cover the
    whole set."""
    if concurrency > 1:
        return TaskCycle(tasks, seed=seed, block=REPLAYED_BLOCK, interleave=True)
    return TaskCycle(tasks, seed=seed, block=block)
