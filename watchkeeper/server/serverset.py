"""Several servers that live and die together: every arm of a paired comparison.

A paired bench keeps all its arms up for the whole campaign, so the load can move between them
request by request; `restart` replaces all of them at once, so no arm ever runs a process of
another age than its partner's. Each server is started by `launch.serve` (port retry, offload
check), and leaving the `with` block stops every one of them, also when a start fails halfway.

An arm whose server somebody else runs (a url profile, `server.external_url`) is in the set
but not in its hands: it is checked that it answers at the start and at every restart, and is
never started, stopped or restarted; a restart says that it left it alone.

A restart may name the arms to bring back: a sweep's race stops measuring the arms it dropped,
and starting their processes again every round would cost their model loads and their memory
for nothing. A retired arm keeps its command line for the report.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from contextlib import ExitStack
from pathlib import Path
from types import TracebackType

from watchkeeper.config import Config
from watchkeeper.server.launch import PreparedProfile, RunningServer, attach, serve

Progress = Callable[[str], None]


def _quiet(_: str) -> None:
    return None


class ServerSet(Mapping[str, RunningServer]):
    """Arm name -> its running server; a live view: after `restart` it maps to the new ones.

    Logs go to `log_dir/<arm>.log`, the arm's n-th restarted process's to `<arm>-p<n>.log`, so
    a crash of any process can be read afterwards."""

    def __init__(
        self,
        config: Config,
        prepared: Sequence[PreparedProfile],
        log_dir: Path,
        progress: Progress = _quiet,
    ) -> None:
        self._config, self._prepared, self._log_dir = config, list(prepared), log_dir
        self._progress = progress
        self._stacks: dict[str, ExitStack] = {}
        """Per arm, what stops its process: an arm can be renewed alone."""
        self._servers: dict[str, RunningServer] = {}
        self._argvs: dict[str, tuple[str, ...]] = {}
        self._lives: dict[str, int] = {}
        """Per arm, processes started after its first (names its log: `<arm>-p<n>.log`)."""
        self._offloads: dict[str, dict[str, str]] = {}
        """Per arm, how the offload check saw its first start (managed arms that asked)."""

    def __enter__(self) -> ServerSet:
        try:
            self.start()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def __getitem__(self, name: str) -> RunningServer:
        return self._servers[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._servers)

    def __len__(self) -> int:
        return len(self._servers)

    def start(self, arms: Collection[str] | None = None) -> None:
        """Start the servers of `arms` (default: every arm), in the order given (the first
        start is announced); an arm left out is retired: no process, its argv kept."""
        for p in self._prepared:
            if arms is not None and p.name not in arms:
                continue
            self._start_one(p)

    def _start_one(self, p: PreparedProfile) -> None:
        lives = self._lives.get(p.name)
        self._lives[p.name] = 0 if lives is None else lives + 1
        if p.external_url:
            self._progress(
                f"restart: {p.name} is external ({p.external_url}): left alone"
                if lives is not None
                else f"using {p.name} at {p.external_url} (not started by watchkeeper)"
            )
            self._servers[p.name] = attach(p)
        else:
            if lives is None:
                self._progress(f"starting {p.name}")
            suffix = f"-p{self._lives[p.name]}" if self._lives[p.name] else ""
            stack = self._stacks.setdefault(p.name, ExitStack())
            self._servers[p.name] = stack.enter_context(
                serve(self._config, p, log_path=self._log_dir / f"{p.name}{suffix}.log")
            )
            verdict = self._servers[p.name].offload_verdict
            if lives is None and verdict is not None and verdict.seen != "none asked":
                self._progress(f"{p.name}: {verdict.line()}")
                self._offloads[p.name] = {"seen": verdict.seen, "detail": verdict.detail}
        self._argvs[p.name] = self._servers[p.name].argv

    def restart(self, arms: Collection[str] | None = None) -> None:
        """Stop every server we started, then start fresh processes for `arms` (default: all
        of them; an external one is only checked again). Arms left out stay stopped."""
        self.close()
        self._servers.clear()
        self.start(arms)

    def renew(self, arms: Collection[str]) -> None:
        """Fresh processes for `arms` only; every other arm keeps its process (and whatever
        it cached). An external arm is only checked again."""
        for p in self._prepared:
            if p.name not in arms:
                continue
            stack = self._stacks.pop(p.name, None)
            if stack is not None:
                stack.close()
            self._servers.pop(p.name, None)
            self._start_one(p)

    def close(self) -> None:
        """Stop every process we started (in reverse order of their starts)."""
        stacks = list(self._stacks.values())
        self._stacks.clear()
        with ExitStack() as all_of_them:
            for stack in stacks:
                all_of_them.push(stack.__exit__)

    def offloads(self) -> dict[str, dict[str, str]]:
        """Each arm's offload verdict ({seen, detail}) where one was asked for: the result's
        `extras["offload"]`, so the report and `gpu-check` say how each arm's offload was
        verified, not only the progress stream."""
        return dict(self._offloads)

    def argvs(self) -> dict[str, tuple[str, ...]]:
        """Each arm's command line (empty for an external server), as the report shows it."""
        return {p.name: self._argvs.get(p.name, ()) for p in self._prepared}
